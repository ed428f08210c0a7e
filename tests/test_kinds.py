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


def test_every_finder_named_is_a_function_and_a_kind_without_one_says_who_makes_it():
    from halucheck.claims import Finding

    for k in KINDS.values():
        if k.finder:
            assert callable(import_path(k.finder)) and k.reads in ("prose", "answer")
            assert import_path(k.finder)("", Finding()) == []
        else:
            assert "no finder" in k.found and "claims." in k.found


def tally(text: str, finding) -> list[tuple[str, int, int]]:
    """A finder for a kind a test adds: every tally mark (``||||``) in the text."""
    import re

    return [(m.group(), m.start(), m.end()) for m in re.finditer(r"\|{2,}", text)]


def test_a_kind_added_to_the_table_is_found_with_nothing_else_touched(monkeypatch):
    from halucheck.claims import claims_of_answers
    from halucheck.engines.fake import FakeEngine
    from halucheck.kinds import ClaimKind

    kinds = {**KINDS, "tally": ClaimKind("tally", "tally marks (tally)", "none", finder=f"{__name__}:tally")}
    monkeypatch.setattr("halucheck.claims.KINDS", kinds)
    answer = "I counted ||||. Then 2 + 2 = 4 and `|` is no mark."
    out, _ = claims_of_answers([(None, answer, None)], FakeEngine(), FakeEngine(), subjective_filter="off")
    found = [(c.kind, c.text, answer[c.start:c.end]) for c in out[0].claims if c.kind != "knowledge"]
    assert found == [("tally", "||||", "||||"), ("calculation", "2 + 2 = 4", "2 + 2 = 4")]
