"""The table of claim kinds (halucheck/kinds): every kind once, read by routing, the evidence stage and the report."""

import ast
import pathlib

import halucheck
from halucheck.config import VerifierOptions
from halucheck.kinds import KINDS, TOOL_CHECKS, kind_of
from halucheck.records import Claim, Evidence, Case, Verdict
from halucheck.registry import import_path
from halucheck.reports import basis_of
from halucheck.verifiers import VERIFIERS, routed


def kinds_named_in_the_package() -> set[str]:
    """The kind names the package's code writes out: a ``Claim(text, question, "kind", ...)`` or ``Claim(...,
    kind="kind")`` it makes, and a ``.kind == "kind"`` it tests."""
    names = set()
    for path in pathlib.Path(halucheck.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("Claim"):
                args = node.args[2:3] + [k.value for k in node.keywords if k.arg == "kind"]
                names |= {a.value for a in args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
            elif isinstance(node, ast.Compare) and ast.unparse(node.left).endswith(".kind"):
                names |= {a.value for a in node.comparators if isinstance(a, ast.Constant)}
    return names


def test_the_table_names_every_kind_of_claim_once():
    assert all(name == k.name for name, k in KINDS.items())
    assert kinds_named_in_the_package() <= set(KINDS)
    assert "knowledge" in kinds_named_in_the_package()  # the scan finds them


def test_what_settles_a_claim_without_a_call_comes_from_the_table():
    r = routed("selfcheck")
    assert r.settlers == {k.name: import_path(k.settled_by) for k in KINDS.values() if k.settled_by}
    premise = Case(Claim("Each box holds 125 items.", None, "premise"),
                   (Evidence("A box holds 125 items. How many in 3 boxes?", source="question"),))
    assert r.settlers["premise"](premise).verifier == "question"


def test_every_checker_is_a_registered_verifier():
    assert set(TOOL_CHECKS) <= set(VERIFIERS.names())


def test_routing_reads_the_table():
    r = routed("selfcheck")
    assert set(r.checkers) | set(r.unavailable) == {k.name for k in KINDS.values() if k.checker and not k.needs}
    assert all(v.name == KINDS[kind].checker for kind, v in r.checkers.items())
    assert all(KINDS[kind].optional for kind in r.unavailable)
    assert "citation" not in r.checkers  # no bibliography: citations go to the --verifier


def test_evidence_of_a_kind_whose_checker_needs_an_option():
    citation = KINDS["citation"]
    assert citation.evidence_given(VerifierOptions()) == "search"
    assert citation.evidence_given(VerifierOptions(bibliography="refs.bib")) == "none"
    assert KINDS["calculation"].evidence_given(VerifierOptions()) == "none"
    assert KINDS["premise"].evidence_given(VerifierOptions()) == "question"


def test_the_report_basis_comes_from_the_kind():
    judged = Verdict(True, None, 0.9, verifier="selfcheck")
    assert basis_of("premise", ["q"], judged) == "question"
    assert basis_of("knowledge", ["p"], judged) == "evidence"
    assert basis_of("knowledge", [], judged) == "closed-book"
    assert basis_of("calculation", [], Verdict(True, 0, 0.98, verifier="arith")) == "tool"
    assert kind_of("an old row") is KINDS["knowledge"]
