"""Where a claim's evidence comes from, and how several searches become one ranked list.

A claim whose sentence names a corpus document as its source (``(source: products.md)``) is searched in
that document only; any other claim in the corpus index and in its answer's own context (the input's
``context`` field). Each search runs every query the claim was given; the hits of all of them are merged
by reciprocal rank fusion (:func:`fuse`). A claim of kind ``source`` (the name of a document) gets the
opening of that document as evidence, or none when the corpus has no such document.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from halucheck import heap
from halucheck.config import QUERY_COVERAGE, index_path
from halucheck.records import Evidence
from halucheck.store.rows import ClaimRow

if TYPE_CHECKING:
    from halucheck.store.runstore import RunStore


class EvidenceSources:
    """The corpus index (built or refreshed on first use), the names of its documents, and searchable
    passages of one cited document and of one item's context at a time (claims come in answer order)."""

    def __init__(self, corpus: Path | None, index: Path | None, top_k: int, use_context: bool = True,
                 log: Callable[[str], None] = print, built: bool = False, exclude_dirs: tuple[Path, ...] = ()) -> None:
        """``built``: ``index`` is up to date (made for this run elsewhere): it is opened as it is, and the
        corpus folder is only named, not read (a worker of a distributed run may not see it).
        ``exclude_dirs``: folders of the corpus never read as corpus (the run's own ``--out``)."""
        self.corpus_dir, self.index_flag, self.top_k, self.use_context, self.log = corpus, index, top_k, use_context, log
        self.built = built
        self.exclude_dirs = exclude_dirs
        self.index_report = None  # what the last build of the corpus index did (retrieval.IndexReport)
        self._corpus = None
        self._names = None
        self._document: tuple[str, object] | None = None
        self._context: tuple[int, object] | None = None
        self._searched: dict[str, list[Evidence]] = {}  # query -> corpus hits, within one batch of claims
        # a claim with a context gets every passage of it, in order, not its top k (a verifier that reads all of its
        # evidence in chunks, in RAG mode)
        self.whole_context = False

    def corpus(self):
        """The corpus index, or None without a corpus."""
        if self.corpus_dir is None:
            return None
        if self._corpus is None:
            from halucheck import retrieval

            db = index_path(self.corpus_dir, self.index_flag)
            if self.built:
                self._corpus = retrieval.Index.open(db)
                return self._corpus
            report = retrieval.build_index(self.corpus_dir, db, warn=lambda m: self.log(f"warning: {m}"),
                                           exclude_dirs=self.exclude_dirs)
            self.index_report = report
            if not report.chunks:
                self.log(f"note: the corpus {self.corpus_dir} has no indexable text ({len(report.skipped)} file(s) "
                         "skipped): claims get evidence only from the items' context, if any")
            self._corpus = retrieval.Index.open(db)
        return self._corpus

    def files(self) -> dict[str, str | None] | None:
        """The corpus's indexed files and their content hashes (the index brought up to date first); None
        without a corpus."""
        corpus = self.corpus()
        return corpus.files() if corpus is not None else None

    def source_names(self):
        """Which corpus document each name refers to (``halucheck.verifiers.tools.sources``); None without a corpus."""
        if self._names is None and self.corpus() is not None:
            from halucheck.verifiers.tools.sources import SourceNames

            self._names = SourceNames.of_index(self.corpus(), root=self.corpus_dir.resolve())
            heap.keep()  # a few objects per document, kept for the run
        return self._names

    def of_source(self, name: str) -> list[Evidence]:
        """A ``source`` claim's evidence: the opening of the document ``name`` resolves to, none if no document."""
        names = self.source_names()
        source = names.resolve(name) if names is not None else None
        if not source:
            return []
        first = (self.corpus().document_text(source) or "")[:300]
        return [Evidence(first, source=source, start=0, end=len(first))]

    def cited_documents(self, claims: Sequence[ClaimRow], answers: dict[int, str]) -> dict[str, str]:
        """claim_id -> the corpus document its sentence names as its source (the first, if several), for
        ``claims`` of ``answers`` (by item)."""
        names = self.source_names()
        if names is None:
            return {}
        from halucheck.verifiers.tools.sources import backing_sources, find_sources

        out, refs = {}, {}
        for row in claims:
            cid, idx, start, end = row.claim_id, row.item_idx, row.claim.start, row.claim.end
            answer = answers.get(idx)
            if answer is None or start is None or end is None:
                continue
            if idx not in refs:
                refs[idx] = [(r, names.resolve(r.name)) for r in find_sources(answer, names)]
            resolved = {r: s for r, s in refs[idx] if s}
            for r in backing_sources(answer, start, end, list(resolved)):
                out[cid] = resolved[r]
                break
        return out

    def needs_queries(self, statements: Sequence[str], rule: str, coverage: float = QUERY_COVERAGE) -> list[bool]:
        """Whether each claim gets search queries written by the model (``run --queries``, :data:`halucheck.config.
        QUERY_RULES`): never without a corpus (its words search its own context); with ``auto``, only a claim whose
        own words find, among their top k in the corpus, no passage holding ``coverage`` of its content words."""
        corpus = self.corpus()
        if corpus is None or rule == "claim" or not statements:
            return [False] * len(statements)
        if rule == "model":
            return [True] * len(statements)
        from halucheck.coverage import content_words

        def words(text: str) -> set[str]:
            return {w.norm for w in content_words(text)}

        out = []
        for statement, hits in zip(statements, self._search(corpus, list(statements))):
            want = words(statement)
            best = max((len(want & words(h.text)) / len(want) for h in hits), default=0.0) if want else 1.0
            out.append(best < coverage)
        return out

    def _search(self, corpus, queries: list[str]) -> list[list[Evidence]]:
        """The corpus's top k for each query; a query searched before in this batch of claims is not searched again
        (:meth:`needs_queries` searches each claim's own words, which :meth:`find` searches too)."""
        todo = [q for q in queries if q not in self._searched]  # in order, repeats kept: one embedding batch as before
        found = dict(zip(todo, corpus.search_many(todo, k=self.top_k))) if todo else {}
        self._searched.update(found)
        return [self._searched[q] for q in queries]

    def find(self, claims: Sequence[ClaimRow], queries: dict[str, list[str]], answers: dict[int, str],
             contexts: dict[int, str | None]) -> dict[str, list[Evidence]]:
        """Each claim's top-k evidence for its queries (claim_id -> passages), searched where it belongs:
        its cited document, else the corpus and its item's context. Claims without queries are left out."""
        cited = self.cited_documents([c for c in claims if c.claim_id in queries], answers)
        found: dict[str, list[list[Evidence]]] = {c.claim_id: [] for c in claims if c.claim_id in queries}
        for cid, source in cited.items():
            found[cid] += self.document(source).search_many(queries[cid], k=self.top_k)
        searched = [(c.claim_id, c.item_idx) for c in claims if c.claim_id in found and c.claim_id not in cited]
        corpus = self.corpus()
        if corpus is not None and searched:
            flat = [q for cid, _ in searched for q in queries[cid]]
            hits = self._search(corpus, flat)
            pos = 0
            for cid, _ in searched:
                found[cid] += hits[pos:pos + len(queries[cid])]
                pos += len(queries[cid])
        whole = {}
        if self.use_context:
            for cid, idx in searched:
                if contexts.get(idx) and self.whole_context and corpus is None:
                    whole[cid] = list(self.context(idx, contexts[idx]).passages)
                elif contexts.get(idx):
                    found[cid] += self.context(idx, contexts[idx]).search_many(queries[cid], k=self.top_k)
        self._searched = {}  # the next batch's claims start afresh (bounded memory)
        return {cid: whole.get(cid) or fuse(ranked, self.top_k) for cid, ranked in found.items()}

    def refresh(self, store: "RunStore", out: Path, log: Callable[[str], None]) -> dict | None:
        """Bring the corpus index up to date with the folder (only changed files are read again) and send
        back to the evidence stage every claim with a passage of a file changed or deleted since the last
        run of this folder: its evidence and verdict are made again from the corpus as it is now."""
        files = self.files()
        if files is None:
            return None
        before = store.get_meta("corpus_files")
        changes = None
        if before:
            old = json.loads(before)
            gone = sorted(p for p, sha in old.items() if files.get(p) != sha)
            claims = store.claims_with_evidence_from(gone)
            store.recheck(claims)
            if gone:
                changes = {"files": gone, "claims_rechecked": len(claims)}
                log(f"note: {len(gone)} corpus file(s) changed or deleted since the last run of {out}; "
                         f"{len(claims)} claim(s) with evidence from them are checked again")
        store.set_meta("corpus_files", json.dumps(files, sort_keys=True))
        return changes

    def close(self) -> None:
        """Let go of the corpus index (another process may then rebuild it)."""
        if self._corpus is not None:
            self._corpus.close()
            self._corpus, self._names, self._document = None, None, None

    def document(self, source: str):
        """Passages of one corpus document, searchable (kept for the claims that cite it)."""
        from halucheck import retrieval

        if self._document is None or self._document[0] != source:
            text = self.corpus().document_text(source) or ""
            self._document = (source, retrieval.PassageIndex.from_text(text, source=source))
        return self._document[1]

    def context(self, idx: int, context: str):
        """Passages of item ``idx``'s context, searchable."""
        from halucheck import retrieval

        if self._context is None or self._context[0] != idx:
            self._context = (idx, retrieval.PassageIndex.from_text(context, source=f"context:{idx}"))
        return self._context[1]


QUESTION_SOURCE = "question"  # the source of the one passage a premise claim is checked against


def corpus_skipped(report) -> dict[str, int]:
    """Why files of the corpus were not read, counted: ``halucheck's own`` (a run folder, an index cache:
    never corpus) and ``unreadable`` (unreadable, empty, or no file: a FIFO, a dangling link, a link loop; the
    warnings name each); {} when none or no corpus."""
    if report is None:
        return {}
    out = {"halucheck's own output": sum(report.left_out.values()), "unreadable or empty": len(report.skipped)}
    return {why: n for why, n in out.items() if n}


def question_evidence(question: str | None) -> list[Evidence]:
    """A premise claim's evidence: the question it restates, as one passage (none without a question)."""
    return [Evidence(question.strip(), QUESTION_SOURCE, 0, len(question.strip()))] if question and question.strip() else []


def fuse(ranked_lists: list[list[Evidence]], k: int) -> list[Evidence]:
    """Merge the ranked hits of several queries: dedupe by location, order by reciprocal rank fusion."""
    from halucheck.retrieval.fuse import rrf

    best: dict[tuple, Evidence] = {}
    keyed = []
    for hits in ranked_lists:
        keys = []
        for h in hits:
            key = (h.source, h.start, h.end, h.text if not h.source else "")
            best.setdefault(key, h)
            keys.append(key)
        keyed.append(keys)
    return [Evidence(best[key].text, best[key].source, best[key].start, best[key].end, round(score, 6))
            for key, score in rrf(keyed, limit=k)]


__all__ = ["QUESTION_SOURCE", "EvidenceSources", "fuse", "question_evidence"]
