"""The ``citation`` verifier: each cited work of a claim looked up in the bibliography the user supplies."""

from __future__ import annotations

import time
from typing import Sequence

from halucheck.errors import ConfigError, InputError
from halucheck.records import Case, Turn, Verdict
from halucheck.verifiers.base import Cost, Verifier, failed_verdict
from halucheck.verifiers.tools.citations.bibliography import Bibliography, load_bibliography
from halucheck.verifiers.tools.citations.finder import find_citations
from halucheck.verifiers.tools.citations.match import (SEVERITY_NOT_FOUND, SEVERITY_WRONG_FIELD, TITLE_THRESHOLD,
                                                       WORD_SIMILARITY, match)
from halucheck.verifiers.tools.citations.records import Citation

P_MATCHED = 0.02  # p_hallucinated of a citation found with its year and authors (a deterministic check)
P_WRONG = 0.98  # ... of one that is not found, or found with a wrong year or author


class CitationVerifier(Verifier):
    """``citation``: each cited work of a claim is looked up in the bibliography of
    ``VerifierOptions.bibliography`` (:func:`match`); no model.

    The citations are ``check.meta["title"]`` / ``["authors"]`` / ``["year"]`` when the claim carries them
    (a labelled citation), ``check.meta["citations"]`` (a list of such dicts: every citation of a response),
    else every citation :func:`find_citations` finds in the claim's text (one, in a claim of kind
    ``citation``; a one-line text is read as :func:`parse_citation` reads it, so an unquoted ``Title
    (Authors, Year)`` counts there). Verdicts: all found with their year and authors -> factual, severity 0,
    ``p_hallucinated`` :data:`P_MATCHED`; a work that is not in the bibliography -> not factual, severity
    :data:`SEVERITY_NOT_FOUND` (4: the reference is invented); a real work cited with a wrong year or an
    author it does not have -> not factual, severity :data:`SEVERITY_WRONG_FIELD` (2: the work exists, a
    detail is wrong); ``p_hallucinated`` :data:`P_WRONG` for both (a deterministic check has no graded
    belief; 0.02/0.98 keep it a probability). Several citations: the worst one decides. No citation found
    -> a failed verdict saying so. The trace is one turn saying what was looked up and what was found.
    """

    name = "citation"
    reads_prose = False
    uses_llm = False

    def bibliography(self) -> Bibliography:
        path = getattr(self.options, "bibliography", None)
        if not path:
            raise ConfigError("the citation check needs a bibliography: pass --bibliography FILE (BibTeX .bib, "
                              "CSL-JSON .json or CSV .csv with title, authors, year)")
        return load_bibliography(path)

    def preflight(self) -> None:
        self.bibliography()

    def describe(self) -> dict:
        out: dict = {"citation": {"title_threshold": TITLE_THRESHOLD, "word_similarity": WORD_SIMILARITY,
                                  "p_hallucinated": [P_MATCHED, P_WRONG],
                                  "severity": {"not_found": SEVERITY_NOT_FOUND,
                                               "wrong_year_or_author": SEVERITY_WRONG_FIELD}}}
        path = getattr(self.options, "bibliography", None)
        if path:
            try:
                bib = load_bibliography(path)
                out["citation"].update(bibliography=str(path), works=len(bib), bibliography_warnings=len(bib.warnings))
            except InputError:
                out["citation"]["bibliography"] = str(path)
        return out

    def verify(self, checks: Sequence[Case], engines=None, on_verdict=None, on_call=None) -> list[Verdict]:
        t0 = time.perf_counter()
        bib = self.bibliography()
        out = []
        for i, c in enumerate(checks):
            v = self.verdict(c, bib)
            out.append(v)
            if on_verdict is not None:
                on_verdict(i, v)
        self.costs = {self.name: Cost(claims=len(checks), wall_s=time.perf_counter() - t0)}
        return out

    @staticmethod
    def citations_of(c: Case) -> list[Citation]:
        meta = c.meta or {}
        if meta.get("title"):
            return [Citation.of(meta["title"], meta.get("authors"), meta.get("year"))]
        if isinstance(meta.get("citations"), list):
            return [Citation.of(x["title"], x.get("authors"), x.get("year"))
                    for x in meta["citations"] if isinstance(x, dict) and x.get("title")]
        text = c.claim.text.strip()
        return [cit for cit, _ in find_citations(text, whole="\n" not in text)]  # one line: read as parse_citation

    def verdict(self, c: Case, bib: Bibliography) -> Verdict:
        cits = self.citations_of(c)
        if not cits:
            return failed_verdict(self.name, "no citation found in the claim: give its title (quoted, or as "
                                  "'Authors (Year). Title.'), authors and year")
        results = [match(cit, bib) for cit in cits]
        lines = [f"cited {r.citation.describe()}: {r.reason}" for r in results]
        opinion = lines[0] if len(lines) == 1 else " ".join(f"[{k}] {line}" for k, line in enumerate(lines, 1))
        severity = max(r.severity for r in results)
        factual = severity == 0
        p = P_MATCHED if factual else P_WRONG
        turn = Turn(state="S0", role="initial", opinion=opinion, factuality=factual, error_severity=severity,
                    p_factual=1.0 - p, verifier=self.name)
        return Verdict(factuality=factual, error_severity=severity, confidence=1.0 - P_MATCHED, chain=[turn],
                       p_hallucinated=p, verifier=self.name)
