"""The table of claim kinds (halucheck/kinds): every kind once, read by routing, the evidence stage and the report."""

from typing import get_args

from halucheck.config import VerifierOptions
from halucheck.kinds import KINDS, TOOL_CHECKS, kind_of
from halucheck.records import Kind, Verdict
from halucheck.reports import basis_of
from halucheck.verifiers import VERIFIERS, routed


def test_the_table_names_every_kind_of_claim_once():
    assert list(KINDS) == list(get_args(Kind))
    assert all(name == k.name for name, k in KINDS.items())


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
