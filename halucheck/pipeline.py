"""`halucheck run`: answers -> claims -> queries -> evidence -> debate -> verdicts -> reports.

Stages run over all pending work at once (batch-first), and every result is written to the run
database as soon as it exists. Started again with the same arguments, a run skips what is finished
(items with claims, claims with evidence, claims with verdicts) and replays LLM replies from the cache.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from halucheck import claims as claim_stages
from halucheck.config import Settings
from halucheck.debate import Agents, DebateConfig, DebateJob, Scheduler
from halucheck.engines.base import SamplingParams
from halucheck.engines.cache import CachingEngine
from halucheck.errors import InputError
from halucheck.inputs import Item, read_items, truncation_point
from halucheck.records import Claim, Evidence
from halucheck.runstore import RunStore


@dataclass
class RunOptions:
    """Everything that determines a run's results (and so must match to resume it)."""

    input: Path
    out: Path
    corpus: Path | None = None
    index: Path | None = None
    use_context: bool = True
    subjective_filter: str = "auto"  # auto | on | off
    top_k: int = 10
    max_claims: int = 64
    debate: DebateConfig = field(default_factory=DebateConfig)
    batch_items: int = 64

    def fingerprint(self, settings: Settings, input_bytes: bytes) -> str:
        profiles = {r: asdict(settings.profile_for(r)) for r in ("initial", "trust", "skeptic", "leader",
                                                                 "filter", "extractor", "query")}
        payload = {
            "input_sha256": hashlib.sha256(input_bytes).hexdigest(),
            "corpus": str(self.corpus.resolve()) if self.corpus else None,
            "use_context": self.use_context, "filter": self.subjective_filter, "top_k": self.top_k,
            "max_claims": self.max_claims, "debate": asdict(self.debate), "profiles": profiles,
            "role_sampling": settings.role_sampling,
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


Progress = Callable[..., object]  # tqdm-like factory: progress(total=, desc=) -> bar with update()/close()


def _null_progress(**_):
    class _Bar:
        def update(self, n=1): ...
        def close(self): ...
        def set_postfix_str(self, s): ...
    return _Bar()


class Pipeline:
    """One run: owns the run database, the cached engines and the evidence sources."""

    def __init__(self, opts: RunOptions, settings: Settings, progress: Progress | None = None,
                 log: Callable[[str], None] = print) -> None:
        self.opts, self.settings, self.log = opts, settings, log
        self.progress = progress or _null_progress
        opts.out.mkdir(parents=True, exist_ok=True)
        self.store = RunStore(opts.out / "run.duckdb")
        settings.wrap = lambda engine: CachingEngine(engine, self.store)
        self.agents = Agents(settings)
        self._corpus = None

    # -- the run ---------------------------------------------------------------------------------
    def run(self) -> dict:
        t0 = time.perf_counter()
        items = self.load_items()
        self.extract_claims(items)
        self.gather_evidence(items)
        self.debate()
        from halucheck import reports

        results = reports.build_results(self.store)
        reports.write_results(self.opts.out, results)
        reports.write_html(self.opts.out, results, self.store)
        summary = reports.summarize(results, self.store)
        summary["wall_s"] = round(time.perf_counter() - t0, 1)
        self.store.set_meta("last_summary", json.dumps(summary))
        return summary

    def close(self) -> None:
        self.store.close()
        self.settings.close()

    # -- stage 0: input ----------------------------------------------------------------------------
    def load_items(self) -> list[tuple[int, Item]]:
        items, problems = read_items(self.opts.input)
        fp = self.opts.fingerprint(self.settings, Path(self.opts.input).read_bytes())
        old = self.store.get_meta("fingerprint")
        if old and old != fp:
            raise InputError(
                f"{self.opts.out} holds a run made with other inputs or settings; use a new --out DIR, "
                "or --restart to discard it"
            )
        fresh = old is None
        self.store.set_meta("fingerprint", fp)
        self.store.set_meta("input", str(self.opts.input))
        for p in problems:
            self.log(f"{'warning' if not p.fatal else 'skipped'}: {self.opts.input}:{p.line}: {p.message}")
        if fresh:
            for p in problems:
                self.store.add_error(None, p.line, "input" if p.fatal else "input-warning", p.message)
        if not items:
            raise InputError(f"{self.opts.input}: no usable line ({len(problems)} problem(s) above); "
                             "each line needs an \"answer\"")
        indexed = list(enumerate(items))
        self.store.add_items([(i, it.id, it.line, it.question, it.answer, it.context,
                               truncation_point(it.answer)) for i, it in indexed])
        return indexed

    # -- stage 1: claims -------------------------------------------------------------------------
    def extract_claims(self, items: list[tuple[int, Item]]) -> None:
        done = {r[0] for r in self.store.query("SELECT idx FROM items WHERE claims_done")}
        todo = [(i, it) for i, it in items if i not in done]
        if not todo:
            return
        engine_f, engine_x = self.settings.engine_for("filter"), self.settings.engine_for("extractor")
        bar = self.progress(total=len(todo), desc="claims   ", unit="answer")
        for start in range(0, len(todo), self.opts.batch_items):
            chunk = todo[start:start + self.opts.batch_items]
            t0 = time.perf_counter()
            work = []  # (item_idx, item, segment, needs_filter)
            short = []
            for i, it in chunk:
                if it.question and claim_stages.is_short_answer(it.answer):
                    short.append((i, it))
                    continue
                cut = truncation_point(it.answer)
                text = it.answer[:cut] if cut else it.answer
                needs = self.opts.subjective_filter == "on" or (
                    self.opts.subjective_filter == "auto" and claim_stages.looks_like_dialogue(text))
                for seg in claim_stages.segments(text):
                    work.append((i, it, seg, needs))
            for i, it in short:  # the paper's short-QA rule: question + answer is one claim
                self.store.save_claims(i, [(f"{i}:0", 0, it.answer.strip(), it.question, 0, len(it.answer))])
                bar.update(1)
            to_filter = [w for w in work if w[3]]
            filtered = claim_stages.filter_subjective(
                engine_f, [w[2].text for w in to_filter],
                self.settings.sampling("filter", claim_stages.FILTER_SAMPLING)) if to_filter else []
            texts = {id(w): w[2].text for w in work}
            for w, f in zip(to_filter, filtered):
                texts[id(w)] = f.value
            to_extract = [w for w in work if texts[id(w)].strip()]
            extracted = claim_stages.extract_claims(
                engine_x, [texts[id(w)] for w in to_extract], [w[1].question or "" for w in to_extract],
                self.settings.sampling("extractor", claim_stages.EXTRACT_SAMPLING))
            per_item: dict[int, list] = {i: [] for i, _ in chunk if (i, _) not in short}
            failed: set[int] = set()
            for w, out in zip(to_extract, extracted):
                i, it, seg, _ = w
                if out.error:
                    failed.add(i)
                    self.store.add_error(i, it.line, "extract", out.error)
                    continue
                per_item[i].extend((c, seg) for c in out.value)
            for i, it in chunk:
                if i not in per_item or i in failed:
                    if i in failed:
                        bar.update(1)
                    continue
                found = per_item[i]
                if len(found) > self.opts.max_claims:
                    msg = (f"{len(found)} claims found; the first {self.opts.max_claims} are checked "
                           "(raise --max-claims to check more)")
                    self.log(f"warning: {self.opts.input}:{it.line}: answer {it.id!r}: {msg}")
                    self.store.add_error(i, it.line, "claims-warning", msg)
                    found = found[:self.opts.max_claims]
                rows = []
                for k, (c, seg) in enumerate(found):
                    s, e = claim_stages.locate(c, it.answer, within=seg)
                    rows.append((f"{i}:{k}", k, c, None, s, e))
                self.store.save_claims(i, rows)
                bar.update(1)
            calls = sum(o.calls for o in filtered + extracted)
            self.store.add_stage_stats("claims", calls, sum(o.prompt_tokens for o in filtered + extracted),
                                       sum(o.completion_tokens for o in filtered + extracted), 0,
                                       time.perf_counter() - t0)
        bar.close()

    # -- stage 2: queries and evidence ------------------------------------------------------------
    def gather_evidence(self, items: list[tuple[int, Item]]) -> None:
        rows = self.store.query(
            "SELECT c.claim_id, c.item_idx, c.text, c.question FROM claims c WHERE NOT c.evidence_done "
            "ORDER BY c.item_idx, c.ordinal")
        if not rows:
            return
        by_idx = dict(items)
        corpus = self.corpus()
        if corpus is None and not any(by_idx[r[1]].context for r in rows if r[1] in by_idx):
            self.log("note: no --corpus and no context in the input: claims are judged without evidence")
        engine_q = self.settings.engine_for("query")
        bar = self.progress(total=len(rows), desc="evidence ", unit="claim")
        for start in range(0, len(rows), self.opts.batch_items * 4):
            chunk = rows[start:start + self.opts.batch_items * 4]
            t0 = time.perf_counter()
            statements = [f"{q} {t}" if q else t for _, _, t, q in chunk]
            outs = claim_stages.make_queries(engine_q, statements,
                                             self.settings.sampling("query", claim_stages.QUERY_SAMPLING))
            queries = [o.value for o in outs]
            found = [[] for _ in chunk]
            if corpus is not None:
                flat = [q for qs in queries for q in qs]
                hits = corpus.search_many(flat, k=self.opts.top_k)
                pos = 0
                for j, qs in enumerate(queries):
                    found[j].append(hits[pos:pos + len(qs)])
                    pos += len(qs)
            if self.opts.use_context:
                for j, (cid, idx, _, _) in enumerate(chunk):
                    ctx = by_idx[idx].context if idx in by_idx else None
                    if ctx:
                        found[j].append(self.context_index(idx, ctx).search_many(queries[j], k=self.opts.top_k))
            for j, (cid, idx, _, _) in enumerate(chunk):
                ev = fuse([ranked for group in found[j] for ranked in group], self.opts.top_k)
                self.store.save_evidence(cid, queries[j], ev)
                bar.update(1)
            self.store.add_stage_stats("queries", sum(o.calls for o in outs), sum(o.prompt_tokens for o in outs),
                                       sum(o.completion_tokens for o in outs), 0, time.perf_counter() - t0)
        bar.close()

    def corpus(self):
        """The corpus index (built or refreshed on first use), or None without --corpus."""
        if self.opts.corpus is None:
            return None
        if self._corpus is None:
            from halucheck import retrieval

            db = self.opts.index or default_index_path(self.opts.corpus)
            retrieval.build_index(self.opts.corpus, db, warn=self.log)
            self._corpus = retrieval.Index.open(db)
        return self._corpus

    def context_index(self, idx: int, context: str):
        from halucheck import retrieval

        if getattr(self, "_ctx", (None,))[0] != idx:
            self._ctx = (idx, retrieval.PassageIndex.from_text(context, source=f"context:{idx}"))
        return self._ctx[1]

    # -- stage 3: debate ---------------------------------------------------------------------------
    def debate(self) -> None:
        rows = self.store.query(
            "SELECT c.claim_id, c.text, c.question FROM claims c LEFT JOIN verdicts v USING (claim_id) "
            "WHERE v.claim_id IS NULL AND c.evidence_done ORDER BY c.item_idx, c.ordinal")
        if not rows:
            return
        jobs = [DebateJob(Claim(text, question), tuple(self.store.evidence_for(cid))) for cid, text, question in rows]
        bar = self.progress(total=len(jobs), desc="debate   ", unit="claim")

        def on_verdict(i, verdict):
            self.store.save_verdict(rows[i][0], verdict)
            bar.update(1)

        sched = Scheduler(self.agents, self.opts.debate, on_verdict=on_verdict)
        sched.run(jobs)
        bar.close()
        s = sched.stats
        self.store.add_stage_stats("debate", s.llm_calls, s.prompt_tokens, s.completion_tokens, s.cached_tokens,
                                   s.wall_s)


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


def default_index_path(corpus: Path) -> Path:
    """Indexes live in the user cache (the corpus folder may be read-only), one per corpus path."""
    from halucheck.config import user_cache_dir

    corpus = Path(corpus).resolve()
    tag = hashlib.sha256(str(corpus).encode()).hexdigest()[:12]
    return user_cache_dir() / "indexes" / f"{corpus.name}-{tag}.duckdb"
