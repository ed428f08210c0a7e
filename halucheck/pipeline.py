"""`halucheck run`: answers -> claims -> queries -> evidence -> verify (the profile's verifier) -> reports.

Stages run over all pending work at once (batch-first), and results are written to the run database
batch by batch. Started again with the same arguments, a run skips what is finished (items with claims,
claims with evidence, claims with a clean verdict), replays LLM replies from the cache and asks again
only what failed: failed work is never stored as done.
"""

from __future__ import annotations

import json
import time
from typing import Callable

from halucheck import claims as claim_stages, outputs
from halucheck.config import RunOptions, Settings, VerifierOptions
from halucheck.engines.cache import CachingEngine
from halucheck.engines.pool import EnginePool
from halucheck.evidence import EvidenceSources, corpus_skipped, question_evidence
from halucheck.errors import InputError
from halucheck.inputs import Item, load_run_input, truncation_point
from halucheck.kinds import KINDS
from halucheck.progress import Progress, VerifyProgress, null_progress
from halucheck.records import Case, Verdict, unique_cases
from halucheck.store.rows import ClaimRow, ErrorRow, FoundEvidence, Pending
from halucheck.store.runstore import RunStore
from halucheck.verifiers import calibration, routed

# How a model reply that never matched its schema is reported (engines/base.py, debate/agents.py)
MODEL_REPLY_FAILURES = ("reply is not valid JSON", "reply violates the schema", "reply rejected")

# Verdicts are written in batches: this many, or the ones handed on before a pause of this many seconds
VERDICT_BATCH, VERDICT_FLUSH_S = 512, 2.0


class Pipeline:
    """One run: owns the run database, its engine pool (every engine behind the run's reply cache), the
    verifier and the evidence sources."""

    def __init__(self, opts: RunOptions, settings: Settings, progress: Progress | None = None,
                 log: Callable[[str], None] = print, restart: bool = False, engines: dict | None = None,
                 evidence: EvidenceSources | None = None) -> None:
        """``engines`` and ``evidence`` are for a shard of a distributed run (:mod:`halucheck.cluster`): kept
        by the worker across its shards (not closed with the run), its loaded engines and its opened corpus
        index (made for the whole run by the driver)."""
        self.opts, self.settings, self.log = opts, settings, log
        self.progress = progress or null_progress
        if opts.out.exists() and not opts.out.is_dir():
            raise InputError(f"--out {opts.out} is a file; pass a folder for the run (it is created if missing)")
        options = VerifierOptions(debate=opts.debate, band=opts.band, nli_model=opts.nli_model,
                                  bibliography=str(opts.bibliography) if opts.bibliography else None, head=opts.head)
        # calculations (and citations, given a bibliography) go to their tool checks, the rest to --verifier
        self.verifier = routed(opts.verifier, options)
        for kind, why in self.verifier.unavailable.items():
            log(f"note: {kind} claims go to {opts.verifier}: {why}")
        self.verifier.preflight()  # before anything is opened or written (and on the judging profile's engine)
        if self.verifier.uses_llm:
            self.verifier.preflight_engine(settings.profile_for("initial").engine)
        # a calibrator for another model, or a name not stored, is refused before anything is written too
        self.calibration = calibration.for_run(self.verifier, settings, opts.calibration)
        outputs.check_paths(opts)
        self.store = RunStore(opts.out / outputs.RUN_DB, restart=restart)  # makes the folder (or says why not)
        outputs.mark_run_folder(opts.out)
        self.engines = EnginePool(settings, wrappers=(lambda engine: CachingEngine(engine, self.store),),
                                  kept=engines)
        self._own_evidence = evidence is None
        self.evidence = evidence or EvidenceSources(opts.corpus, opts.index, opts.top_k, opts.use_context, log,
                                                    exclude_dirs=(opts.out,))
        calibration.keep_with_run(self.store, *self.calibration)  # its reports (rebuilt later too) use it

    # -- the run ---------------------------------------------------------------------------------
    def run(self, process: Callable[[Pipeline, list[tuple[int, Item]]], None] | None = None) -> dict:
        """The input and the corpus index brought into the run database, the pending work done
        (``process(self, items)``; by default :meth:`process`, in this process), then the reports."""
        t0 = time.perf_counter()
        started = self.store.now()
        items = load_run_input(self.store, self.opts, self.settings, self.log)
        changes = self.evidence.refresh(self.store, self.opts.out, self.log)
        (process or Pipeline.process)(self, items)
        from halucheck import reports

        results = reports.build_results(self.store)
        reports.write_results(self.opts.out, results)
        reports.write_html(self.opts.out, results, self.store)
        summary = reports.summarize(results, self.store, since=started)
        skipped = corpus_skipped(self.evidence.index_report)
        summary.update({k: v for k, v in (("corpus_changes", changes), ("corpus_skipped", skipped)) if v})
        summary["wall_s"] = round(time.perf_counter() - t0, 1)
        self.store.set_meta("last_summary", json.dumps(summary))
        return summary

    def process(self, items: list[tuple[int, Item]]) -> None:
        """All stages over all pending work of ``items``; then, while engine calls failed, passes over what
        failed (bounded, with growing waits: a server down for a few seconds is retried in the same run)."""
        for attempt in range(self.opts.retries + 1):
            if attempt:
                pending = self.pending()
                if not pending or not self.engine_failed():
                    break  # a reply that never matched the schema was already asked again by the engine
                delay = self.opts.retry_backoff_s * 2 ** (attempt - 1)
                self.log(f"retrying failed work in {delay:g}s ({pending}; pass {attempt + 1} of "
                         f"{self.opts.retries + 1})")
                time.sleep(delay)
            self.extract_claims(items)
            self.gather_evidence(items)
            self.verify()

    def engine_failed(self) -> bool:
        """Whether a standing failure is the engine's (a server down, a timeout), which a later pass
        may not meet, rather than a model reply that never matched the schema after the engine's own
        retries (asked again in the same way, it would most likely fail the same way)."""
        return any(not any(mark in m for mark in MODEL_REPLY_FAILURES) for m in self.store.standing_failures())

    def pending(self) -> Pending:
        return self.store.pending()

    def close(self) -> None:
        self.store.close()
        self.engines.close()
        if self._own_evidence:
            self.evidence.close()

    # -- stage 1: claims -------------------------------------------------------------------------
    def extract_claims(self, items: list[tuple[int, Item]]) -> None:
        done = self.store.items_with_claims()
        todo = [(i, it) for i, it in items if i not in done]
        if not todo:
            return
        # items with errors of an earlier attempt: those are replaced by this attempt's outcome
        had_errors = self.store.items_with_errors(("filter", "extract", "claims-warning"))
        bar = self.progress(total=len(todo), desc="claims   ", unit="answer")
        for start in range(0, len(todo), self.opts.batch_items):
            chunk = todo[start:start + self.opts.batch_items]
            t0 = time.perf_counter()
            made, outs = claim_stages.claims_of_answers(
                [(it.question, it.answer, truncation_point(it.answer)) for _, it in chunk],
                self.engines.engine_for("filter"), self.engines.engine_for("extractor"),
                self.opts.subjective_filter, self.opts.max_claims,
                self.settings.sampling("filter", claim_stages.FILTER_SAMPLING),
                self.settings.sampling("extractor", claim_stages.EXTRACT_SAMPLING),
                cite=self.opts.bibliography is not None,
                sources=self.evidence.source_names() if self.opts.corpus is not None else False,
                grounded=[self.opts.corpus is not None or bool(self.opts.use_context and it.context)
                          for _, it in chunk])
            saved, errors = {}, []
            for (i, it), a in zip(chunk, made):
                if a.error:  # the item stays not done and is tried again later
                    errors.append(ErrorRow(*a.error, item_idx=i, line=it.line))
                    continue
                if a.warning:
                    self.log(f"warning: {self.opts.input}:{it.line}: answer {it.id!r}: {a.warning}")
                    errors.append(ErrorRow("claims-warning", a.warning, i, it.line))
                saved[i] = [ClaimRow(f"{i}:{k}", i, k, claim) for k, claim in enumerate(a.claims)]
            cost = claim_stages.cost_of(outs, time.perf_counter() - t0, sum(bool(o.error) for o in outs))
            self.store.save_claims_batch(saved, errors, [i for i, _ in chunk if i in had_errors], {"claims": cost})
            bar.update(len(chunk))
        bar.close()

    # -- stage 2: queries and evidence ------------------------------------------------------------
    def evidence_of_kinds(self, by_idx: dict[int, Item]) -> None:
        """Each kind's claims get the evidence its entry names (:data:`halucheck.kinds.KINDS`): none (a tool
        decides), the question a premise restates, the opening of the document a source claim names."""
        for kind in KINDS.values():
            given = kind.evidence_given(self.verifier.options)
            if given == "none":
                self.store.mark_evidence_done(kind=kind.name)
            elif given in ("named document", "question") and (
                    rows := self.store.claims_without_evidence(kind=kind.name)):
                self.store.save_evidence_batch([
                    FoundEvidence(r.claim_id, [], self.evidence.of_source(r.claim.text) if given == "named document"
                                  else question_evidence(by_idx[r.item_idx].question))
                    for r in rows if given == "named document" or r.item_idx in by_idx], [], [])

    def gather_evidence(self, items: list[tuple[int, Item]]) -> None:
        """The claims of a kind that is searched for get their queries and passages (the rest: as their kind says)."""
        by_idx = dict(items)
        self.evidence_of_kinds(by_idx)
        rows = self.store.claims_without_evidence()
        if not rows:
            return
        answers = {i: it.answer for i, it in items}
        contexts = {i: it.context for i, it in items}
        # without a corpus a claim is searched for in its own answer's context only, with its own words: a short
        # context needs no model-written queries (RAG mode); a verifier that reads all of its evidence gets all of it
        rag = self.evidence.corpus() is None
        self.evidence.whole_context = rag and getattr(self.verifier.main, "whole_evidence", False)
        if rag and not any(contexts.get(r.item_idx) for r in rows):
            self.log("note: no --corpus and no context in the input: claims are judged without evidence")
        had_errors = self.store.claims_with_errors()
        bar = self.progress(total=len(rows), desc="evidence ", unit="claim")
        for start in range(0, len(rows), self.opts.batch_items * 4):
            chunk = rows[start:start + self.opts.batch_items * 4]
            t0 = time.perf_counter()
            statements = [r.claim.statement for r in chunk]
            outs = claim_stages.queries_where(  # the query engine is made (loaded) only when a query is written
                self.evidence.needs_queries(statements, self.opts.queries), statements,
                lambda: self.engines.engine_for("query"), self.settings.sampling("query", claim_stages.QUERY_SAMPLING))
            # a claim whose queries failed is not searched with a fallback: it stays without evidence and
            # is tried again, so a rerun gives the same evidence a clean run would have
            queries = {row.claim_id: o.value for row, o in zip(chunk, outs) if not o.error}
            found = self.evidence.find(chunk, queries, answers, contexts)
            done = [FoundEvidence(r.claim_id, queries[r.claim_id], found[r.claim_id]) for r in chunk
                    if r.claim_id in queries]
            errors = [ErrorRow("queries", f"query generation failed: {o.error}", r.item_idx,
                               by_idx[r.item_idx].line if r.item_idx in by_idx else None, r.claim_id)
                      for r, o in zip(chunk, outs) if o.error]
            cost = claim_stages.cost_of(outs, time.perf_counter() - t0, len(errors))
            self.store.save_evidence_batch(done, errors, [r.claim_id for r in chunk if r.claim_id in had_errors],
                                           {"queries": cost})
            bar.update(len(chunk))
        bar.close()

    # -- stage 3: verify ---------------------------------------------------------------------------
    def verify(self) -> None:
        """Every claim without a clean verdict verified; identical claims (same statement and evidence) once,
        each claim id getting the verdict. Verdicts are written in batches as they are decided."""
        rows = self.store.claims_to_verify()
        if not rows:
            return
        evidence = self.store.evidence_for_many([r.claim_id for r in rows])
        unique = unique_cases([Case(r.claim, tuple(evidence.get(r.claim_id, ()))) for r in rows])
        claim_ids = [[rows[j].claim_id for j in same] for same in unique.of]
        replace = {r.claim_id for r in rows if r.verified}
        bar = VerifyProgress(self.progress, self.verifier, self.engines, unique.cases, len(rows))
        buffer: dict[str, Verdict] = {}  # claim id -> its verdict, not written yet
        last = [time.perf_counter()]

        def flush(costs=None) -> None:
            if buffer or costs:
                self.store.save_verdicts(buffer, costs, replace=replace)
            bar.stored(len(buffer))
            buffer.clear()
            last[0] = time.perf_counter()

        def on_verdict(i, verdict):
            bar.on_verdict(unique.cases[i], verdict)
            if time.perf_counter() - last[0] > VERDICT_FLUSH_S:  # before this one: a group handed on together
                flush()
            buffer.update((cid, verdict) for cid in claim_ids[i])  # its twins share it rather than copy it
            if len(buffer) >= VERDICT_BATCH:
                flush()

        # the replies kept before a stop stay counted (a resumed run asks them no more); the costs replace them
        self.store.count_cached_replies(self.verifier.name)
        with bar:
            self.verifier.verify(unique.cases, self.engines, on_verdict=on_verdict, on_call=bar.on_call)
        flush(dict(self.verifier.costs))
        self.store.count_cached_replies(None)
        bar.close()
