"""`halucheck run`: answers -> claims -> queries -> evidence -> verify (selfcheck by default) -> reports.

Stages run over all pending work at once (batch-first), and results are written to the run database
batch by batch. Started again with the same arguments, a run skips what is finished (items with claims,
claims with evidence, claims with a clean verdict), replays LLM replies from the cache and asks again
only what failed: failed work is never stored as done.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from halucheck import claims as claim_stages, outputs
from halucheck.config import RunOptions, Settings, VerifierOptions
from halucheck.engines.cache import CachingEngine
from halucheck.engines.pool import EnginePool
from halucheck.evidence import EvidenceSources, question_evidence
from halucheck.errors import InputError
from halucheck.inputs import Item, read_input_bytes, read_items, truncation_point
from halucheck.records import Case, Claim
from halucheck.store.runstore import RunStore
from halucheck.verifiers import routed


Progress = Callable[..., object]  # tqdm-like factory: progress(total=, desc=) -> bar with total, n, update(),
#                                   refresh(), set_postfix_str() and close()

# How a model reply that never matched its schema is reported (engines/base.py, debate/agents.py)
MODEL_REPLY_FAILURES = ("reply is not valid JSON", "reply violates the schema", "reply rejected")

# Debate verdicts are written in batches: this many, or after this many seconds, whichever comes first
VERDICT_BATCH = 512
VERDICT_FLUSH_S = 2.0
TICK_S = 2.0  # how often the verify bar's note is refreshed while no reply has come back


class _Ticker:
    """Calls ``tick`` every :data:`TICK_S` seconds on a daemon thread while the ``with`` block runs."""

    def __init__(self, tick: Callable[[], object]) -> None:
        self.tick, self._stop = tick, threading.Event()
        self._thread = threading.Thread(target=self._run, name="halucheck-progress", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(TICK_S):
            self.tick()

    def __enter__(self) -> "_Ticker":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def _null_progress(**_):
    class _Bar:
        total = n = 0

        def update(self, n=1): ...
        def refresh(self): ...
        def close(self): ...
        def set_postfix_str(self, s): ...
    return _Bar()


@dataclass
class Pending:
    """Work not done yet: items without claims, claims without evidence, claims without a clean verdict."""

    items: int = 0
    evidence: int = 0
    debates: int = 0

    def __bool__(self) -> bool:
        return bool(self.items or self.evidence or self.debates)

    def __str__(self) -> str:
        parts = [(self.items, "answer(s) without claims"), (self.evidence, "claim(s) without evidence"),
                 (self.debates, "claim(s) without a clean verdict")]
        return ", ".join(f"{n} {what}" for n, what in parts if n)


def check_paths(opts: RunOptions) -> None:
    """Refuse a run that would read what it writes: an --out that is the corpus folder or holds it (its
    reports would be read as evidence), an input that is one of the files the run writes."""
    out = opts.out.expanduser().resolve()
    if opts.corpus is not None:
        corpus = Path(opts.corpus).expanduser().resolve()
        if corpus == out or corpus.is_relative_to(out):
            raise InputError(
                f"--out {opts.out} {'is' if corpus == out else 'holds'} the corpus folder {corpus}: the run's reports "
                "would be read as evidence; choose an --out outside it (a folder inside the corpus is fine: it is "
                "never read as corpus)")
    for path in outputs.run_files(out):
        if outputs.same_file(opts.input, path):
            raise InputError(
                f"--input {opts.input} is the file {path.name} that this run writes in --out {opts.out}; it would "
                "be overwritten: choose another --out, or keep the answers under another name")


def mark_run_folder(out: Path) -> None:
    """Put halucheck's marker in the run folder (:mod:`halucheck.outputs`): no corpus ever reads it. A folder
    that cannot be written is left as it is: writing the reports there says so in one line."""
    try:
        outputs.mark(out)
    except OSError:
        pass


def corpus_skipped(report) -> dict[str, int]:
    """Why files of the corpus were not read, counted: ``halucheck's own`` (a run folder, an index cache:
    never corpus) and ``unreadable`` (unreadable, empty, or no file: a FIFO, a dangling link, a link loop; the
    warnings name each); {} when none or no corpus."""
    if report is None:
        return {}
    out = {"halucheck's own output": sum(report.left_out.values()), "unreadable or empty": len(report.skipped)}
    return {why: n for why, n in out.items() if n}


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
        self.progress = progress or _null_progress
        if opts.out.exists() and not opts.out.is_dir():
            raise InputError(f"--out {opts.out} is a file; pass a folder for the run (it is created if missing)")
        options = VerifierOptions(debate=opts.debate, band=opts.band, nli_model=opts.nli_model,
                                  bibliography=str(opts.bibliography) if opts.bibliography else None, head=opts.head)
        # calculations (and citations, given a bibliography) go to their tool checks, the rest to --verifier
        self.verifier = routed(opts.verifier, options)
        for kind, why in self.verifier.unavailable.items():
            log(f"note: {kind} claims go to {opts.verifier}: {why}")
        self.verifier.preflight()  # before anything is opened or written
        self._calibration = self.find_calibrator()  # so is a calibrator for another model, or a name not stored
        check_paths(opts)
        self.store = RunStore(opts.out / outputs.RUN_DB, restart=restart)  # makes the folder (or says why not)
        mark_run_folder(opts.out)
        self.engines = EnginePool(settings, wrappers=(lambda engine: CachingEngine(engine, self.store),),
                                  kept=engines)
        self._own_evidence = evidence is None
        self.evidence = evidence or EvidenceSources(opts.corpus, opts.index, opts.top_k, opts.use_context, log,
                                                    exclude_dirs=(opts.out,))
        self.calibrate()

    def find_calibrator(self):
        """The calibrator fitted for this verifier and profile (`halucheck calibrate`; the one
        ``--calibration`` names) and where it was read: ``(None, None)`` when there is none."""
        from halucheck.verifiers import calibration

        prof = self.settings.profile_for("initial") if self.verifier.uses_llm else None
        return calibration.resolve(self.verifier.name, prof.name if prof else None, prof.model if prof else None,
                                   self.opts.calibration)

    def calibrate(self) -> None:
        """Keep the calibrator with the run, so its reports (rebuilt later too) give calibrated
        P(hallucinated); none found: they say uncalibrated."""
        cal, path = self._calibration
        diagram = path.with_suffix(".svg") if cal and path else None
        self.store.set_meta("calibrator", cal.to_json() if cal else "")
        self.store.set_meta("calibration_svg", diagram.read_text(encoding="utf-8") if diagram and diagram.is_file() else "")

    # -- the run ---------------------------------------------------------------------------------
    def run(self, process: Callable[[Pipeline, list[tuple[int, Item]]], None] | None = None) -> dict:
        """The input and the corpus index brought into the run database, the pending work done
        (``process(self, items)``; by default :meth:`process`, in this process), then the reports."""
        t0 = time.perf_counter()
        started = self.store.now()
        items = self.load_items()
        changes = self.check_corpus()
        (process or Pipeline.process)(self, items)
        from halucheck import reports

        results = reports.build_results(self.store)
        reports.write_results(self.opts.out, results)
        reports.write_html(self.opts.out, results, self.store)
        summary = reports.summarize(results, self.store, since=started)
        if changes:
            summary["corpus_changes"] = changes
        skipped = corpus_skipped(self.evidence.index_report)
        if skipped:
            summary["corpus_skipped"] = skipped
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
        items, evidence = self.store.pending_counts()
        return Pending(items, evidence, len(self.store.claims_to_verify()))

    def close(self) -> None:
        self.store.close()
        self.engines.close()
        if self._own_evidence:
            self.evidence.close()

    # -- stage 0: input ----------------------------------------------------------------------------
    def load_items(self) -> list[tuple[int, Item]]:
        raw = read_input_bytes(self.opts.input)  # read once: a pipe has no second read
        items, problems = read_items(self.opts.input, raw)
        fp = self.opts.fingerprint(self.settings, raw)
        old = self.store.get_meta("fingerprint")
        if old and old != fp:
            raise InputError(
                f"{self.opts.out} holds a run made with other inputs or settings; use a new --out DIR, "
                "or --restart to discard it"
            )
        self.store.set_meta("fingerprint", fp)
        self.store.set_meta("input", str(self.opts.input))
        if self.opts.corpus:  # the report shows evidence paths relative to it
            self.store.set_meta("corpus", str(Path(self.opts.corpus).resolve()))
        for p in problems:
            self.log(f"{'warning' if not p.fatal else 'skipped'}: {self.opts.input}:{p.line}: {p.message}")
        if not items:
            raise InputError(f"{self.opts.input}: no usable line ({len(problems)} problem(s) above); "
                             "each line needs an \"answer\"")
        indexed = list(enumerate(items))
        by_line = {it.line: i for i, it in indexed}
        self.store.add_items([(i, it.id, it.line, it.question, it.answer, it.context,
                               truncation_point(it.answer)) for i, it in indexed])
        # warnings (not UTF-8, truncated) belong to their item's result; unusable lines get a result of their own
        self.store.set_input_problems([
            (None, p.line, "input", p.message, p.id) if p.fatal else
            (by_line.get(p.line), p.line, "input-warning", p.message, None) for p in problems])
        return indexed

    def check_corpus(self) -> dict | None:
        """Bring the corpus index up to date with the folder (only changed files are read again) and send
        back to the evidence stage every claim with a passage of a file changed or deleted since the last
        run of this folder: its evidence and verdict are made again from the corpus as it is now."""
        files = self.evidence.files()
        if files is None:
            return None
        before = self.store.get_meta("corpus_files")
        changes = None
        if before:
            old = json.loads(before)
            gone = sorted(p for p, sha in old.items() if files.get(p) != sha)
            claims = self.store.claims_with_evidence_from(gone)
            self.store.recheck(claims)
            if gone:
                changes = {"files": gone, "claims_rechecked": len(claims)}
                self.log(f"note: {len(gone)} corpus file(s) changed or deleted since the last run of {self.opts.out}; "
                         f"{len(claims)} claim(s) with evidence from them are checked again")
        self.store.set_meta("corpus_files", json.dumps(files, sort_keys=True))
        return changes

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
                    errors.append((i, it.line, *a.error))
                    continue
                if a.warning:
                    self.log(f"warning: {self.opts.input}:{it.line}: answer {it.id!r}: {a.warning}")
                    errors.append((i, it.line, "claims-warning", a.warning))
                saved[i] = [(f"{i}:{k}", k, *claim) for k, claim in enumerate(a.claims)]
            self.store.save_claims_batch(
                saved, errors, [i for i, _ in chunk if i in had_errors],
                ("claims", sum(o.calls for o in outs), sum(o.prompt_tokens for o in outs),
                 sum(o.completion_tokens for o in outs), 0, time.perf_counter() - t0, sum(bool(o.error) for o in outs)))
            bar.update(len(chunk))
        bar.close()

    # -- stage 2: queries and evidence ------------------------------------------------------------
    def gather_evidence(self, items: list[tuple[int, Item]]) -> None:
        # a calculation is checked by evaluating it, a math answer's result by programs, code by running it against
        # solutions written for the question: no queries, no passages (a corpus passage shown under a code claim
        # would read as the evidence that decided it)
        for kind in ("calculation", "result", "code"):
            self.store.mark_evidence_done(kind=kind)
        if self.opts.bibliography is not None:  # looked up in the bibliography, not searched for
            self.store.mark_evidence_done(kind="citation")
        by_idx = dict(items)
        sources = self.store.claims_without_evidence(kind="source")  # a document the answer names
        if sources:
            self.store.save_evidence_batch([(cid, [], self.evidence.of_source(text)) for cid, _, text, *_ in sources],
                                           [], [])
        premises = self.store.claims_without_evidence(kind="premise")  # a math answer restating its question
        if premises:
            self.store.save_evidence_batch([(cid, [], question_evidence(by_idx[idx].question))
                                            for cid, idx, *_ in premises if idx in by_idx], [], [])
        rows = self.store.claims_without_evidence()
        if not rows:
            return
        answers = {i: it.answer for i, it in items}
        contexts = {i: it.context for i, it in items}
        # without a corpus a claim is searched for in its own answer's context only, with its own words: a short
        # context needs no model-written queries (RAG mode); a verifier that reads all of its evidence gets all of it
        rag = self.evidence.corpus() is None
        self.evidence.whole_context = rag and getattr(self.verifier.main, "whole_evidence", False)
        if rag and not any(contexts.get(r[1]) for r in rows):
            self.log("note: no --corpus and no context in the input: claims are judged without evidence")
        engine_q = None if rag else self.engines.engine_for("query")  # not made (loaded) when no query is written
        had_errors = self.store.claims_with_errors()
        bar = self.progress(total=len(rows), desc="evidence ", unit="claim")
        for start in range(0, len(rows), self.opts.batch_items * 4):
            chunk = rows[start:start + self.opts.batch_items * 4]
            t0 = time.perf_counter()
            statements = [f"{q} {t}" if q else t for _, _, t, q, _, _ in chunk]
            outs = [claim_stages.StageOutput(value=[s]) for s in statements] if rag else claim_stages.make_queries(
                engine_q, statements, self.settings.sampling("query", claim_stages.QUERY_SAMPLING))
            # a claim whose queries failed is not searched with a fallback: it stays without evidence and
            # is tried again, so a rerun gives the same evidence a clean run would have
            queries = {row[0]: o.value for row, o in zip(chunk, outs) if not o.error}
            found = self.evidence.find(chunk, queries, answers, contexts)
            done = [(cid, queries[cid], found[cid]) for cid, *_ in chunk if cid in queries]
            errors = [(idx, by_idx[idx].line if idx in by_idx else None, cid,
                       f"query generation failed: {o.error}")
                      for (cid, idx, *_), o in zip(chunk, outs) if o.error]
            self.store.save_evidence_batch(
                done, errors, [r[0] for r in chunk if r[0] in had_errors],
                ("queries", sum(o.calls for o in outs), sum(o.prompt_tokens for o in outs),
                 sum(o.completion_tokens for o in outs), 0, time.perf_counter() - t0, len(errors)))
            bar.update(len(chunk))
        bar.close()

    # -- stage 3: verify ---------------------------------------------------------------------------
    def _verify_status(self, bar, done: int, total: int, started: int | None) -> None:
        """The verify bar's note: claims decided, and the prompts the engines have begun to read."""
        now, base = self.engines.prompts_started(), started or 0  # no engine made yet: it counts from 0
        begun = f", {now - base} prompts begun" if now is not None and now > base else ""
        bar.set_postfix_str(f"{done}/{total} claims{begun}")

    def verify(self) -> None:
        rows = self.store.claims_to_verify()
        if not rows:
            return
        evidence = self.store.evidence_for_many([r[0] for r in rows])
        # identical claims (same statement and evidence) are verified once; every claim id gets the verdict
        checks: list[Case] = []
        claim_ids: list[list[str]] = []
        first: dict[str, int] = {}
        verified_before = {r[0] for r in rows if r[4]}
        for cid, text, question, kind, _ in rows:
            check = Case(Claim(text, question, kind), tuple(evidence.get(cid, ())))
            k = check.key()
            if k in first:
                claim_ids[first[k]].append(cid)
            else:
                first[k] = len(checks)
                checks.append(check)
                claim_ids.append([cid])
        # one step per LLM call: the first minutes of a run are calls, not finished claims. The total is
        # the calls every claim needs at least, raised as claims (debates) go on past their minimum, and once
        # claims finish, for each claim still to come the calls the finished claims of its kind took on average
        # (so the bar's ETA counts the debates' extra turns before they happen, and a run that mixes a
        # calculation, which costs no call, with code, which costs several, projects each by its own); at the
        # end, the calls made.
        least = self.verifier.least_calls()
        floor = [self.verifier.expected_calls(checks)]
        bar = self.progress(total=floor[0], desc=f"{self.verifier.name[:9]:<9}", unit="call")
        claims_done = [0]
        # per claim kind: the calls one such claim costs at least, the claims still to finish, and the claims
        # finished with the calls they took (a tool check's trace is one turn for several calls: its minimum at least)
        least_of = {k: self.verifier.expected_calls([c]) for k, c in {c.claim.kind: c for c in checks}.items()}
        waiting = Counter(c.claim.kind for c in checks)
        finished: dict[str, list[int]] = {k: [0, 0] for k in least_of}

        def set_total() -> None:
            spent = sum(calls for _, calls in finished.values())
            ahead = sum(waiting[k] * max(least_of[k], finished[k][1] / finished[k][0] if finished[k][0] else 0)
                        for k in least_of)
            bar.total = max(floor[0], round(spent + ahead), bar.n)
            bar.refresh()
        # a CPU engine reads a batch of long prompts for minutes before its first reply: the bar says how many
        # it has begun (admitted to the decode loop) meanwhile, so a run that works is seen to work
        started = self.engines.prompts_started()
        ticker = _Ticker(lambda: self._verify_status(bar, claims_done[0], len(rows), started))

        def on_call(calls: int) -> None:
            if calls > least:
                floor[0] += 1
                set_total()
            bar.update(1)

        buffer: list[tuple] = []
        last = [time.perf_counter()]

        def flush(stats: list[tuple] = ()) -> None:
            if buffer or stats:
                self.store.save_verdicts(buffer, stats, replace=verified_before)
            claims_done[0] += len(buffer)
            self._verify_status(bar, claims_done[0], len(rows), started)
            buffer.clear()
            last[0] = time.perf_counter()

        def on_verdict(i, verdict):
            kind = checks[i].claim.kind
            waiting[kind] -= 1
            finished[kind][0] += 1
            calls = sum(1 for t in verdict.chain if t.prompt_tokens or t.completion_tokens)
            finished[kind][1] += max(least_of[kind], calls)
            set_total()
            # the verdict is only read from here on, so its twins share it rather than copy it
            buffer.extend((cid, verdict) for cid in claim_ids[i])
            if len(buffer) >= VERDICT_BATCH or time.perf_counter() - last[0] > VERDICT_FLUSH_S:
                flush()

        # the replies kept before a stop stay counted (a resumed run asks them no more); the costs replace them
        self.store.count_cached_replies(self.verifier.name)
        with ticker:
            self.verifier.verify(checks, self.engines, on_verdict=on_verdict, on_call=on_call)
        flush([(name, c.llm_calls, c.prompt_tokens, c.completion_tokens, c.cached_tokens, c.wall_s, c.failed_calls)
               for name, c in self.verifier.costs.items()])
        self.store.count_cached_replies(None)
        bar.total = bar.n
        bar.refresh()
        bar.close()
