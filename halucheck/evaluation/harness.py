"""``halucheck eval``: load labeled items -> one verifier -> ``predictions.jsonl`` + ``metrics.json``.

The harness owns what every verifier must share to be compared fairly: the items, the evidence each
item is shown (:func:`select_evidence`), and the cost accounting. Cost is counted by a same-interface
wrapper around every engine the run creates (:class:`MeteredEngine`), so the debate and the baselines
are measured the same way: engine calls (retries included), prompt and completion tokens from the
Results, invalid replies, and the wall time of the verify step (model loading included).

Every valid reply is also kept in the run directory (``replies.duckdb``, keyed on the request's hash), so
a run stopped part-way is cheap to start again: the same command reuses what came back and asks only
the rest (``cached_replies`` in the cost says how many were reused; they count no LLM call and no
token). Within one run the cache also answers requests identical to an earlier one: with greedy decoding
a debate state whose input repeats the previous state's (agents that copy an opinion) gets the same reply.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from halucheck.config import EVIDENCE_K
from halucheck.engines.base import Engine, Request, Result, WrappedEngine
from halucheck.errors import InputError
from halucheck.evaluation.datasets import EvalItem, load
from halucheck.evaluation.metrics import N_BOOT, calibration_effect
from halucheck.evaluation.report import LENGTH_CONTROLLED_SETS, METRICS_FILE, write_run
from halucheck.evaluation.userdata import UserData
from halucheck.evaluation.verifiers import VerifierOptions, case_of, get_verifier
from halucheck.records import Cost
from halucheck.text import stop_words

if TYPE_CHECKING:
    from halucheck.config import Settings
    from halucheck.engines.pool import EnginePool

REPLIES_FILE = "replies.duckdb"


class MeteredEngine(WrappedEngine):
    """Wraps ``inner`` and counts what it spends; everything else is the inner engine's."""

    name = "meter"

    def __init__(self, inner: Engine, meter: "Meter") -> None:
        super().__init__(inner)
        self.meter = meter

    def generate(self, requests: Sequence[Request]) -> list[Result]:
        results = self.inner.generate(requests)
        self.meter.add(results)
        return results


class Meter:
    """Totals over every Result of a run (thread-safe: server engines answer from threads)."""

    def __init__(self) -> None:
        self.llm_calls = self.prompt_tokens = self.completion_tokens = 0
        self.replies = self.invalid_replies = self.retried = self.cached = 0
        self._lock = threading.Lock()
        self.progress = None  # progress(replies, expected) after each batch of replies
        self.expected = 0

    def add(self, results: Sequence[Result]) -> None:
        with self._lock:
            for r in results:
                self.replies += 1
                self.invalid_replies += r.error is not None
                if r.attempts == 0:  # a reply from the cache: no call made, no token spent now
                    self.cached += r.error is None
                    continue
                self.llm_calls += r.attempts
                self.prompt_tokens += r.prompt_tokens
                self.completion_tokens += r.completion_tokens
                self.retried += r.attempts > 1
            if self.progress is not None:
                self.progress(self.replies, max(self.expected, self.replies))

    def install(self, engines: "EnginePool") -> None:
        """Wrap every engine the pool creates from now on (outside any wrapper already added)."""
        engines.add_wrapper(lambda engine: MeteredEngine(engine, self))


def install_cache(engines: "EnginePool", path: Path):
    """Wrap every engine the pool creates in a reply cache stored at ``path``; returns the store."""
    from halucheck.engines.cache import CachingEngine
    from halucheck.store.runstore import RunStore

    store = RunStore(path)
    engines.add_wrapper(lambda engine: CachingEngine(engine, store))
    return store


_WORD = re.compile(r"(?u)\b\w\w+\b")
def _terms(text: str) -> list[str]:
    return [t for t in _WORD.findall(text.lower()) if t not in stop_words()]


def select_evidence(claim: str, passages: Sequence[str], k: int = EVIDENCE_K) -> list[str]:
    """The ``k`` passages most relevant to ``claim`` by BM25 (the retrieval package's, over the item's own
    passages, with the shared stop-word list (``halucheck.text``)), in their original order; all of them when there are
    ``k`` or fewer (or ``k`` is 0). Ties go to the earlier passage.

    Sets such as WiCE cite whole articles (median ~960 words, up to ~17k): the paper's own answer for
    long sources is the top sentences by similarity to the claim, which keeps every verifier's prompt
    within a small model's reach and the same for all verifiers.
    """
    from halucheck.retrieval.bm25 import BM25

    passages = list(passages)
    if k <= 0 or len(passages) <= k:
        return passages
    scores = BM25.build(passages, tokenizer=_terms).scores(claim)
    if len(scores) != len(passages):  # no passage has an indexable word: keep the first k
        scores = [0.0] * len(passages)
    keep = sorted(range(len(passages)), key=lambda i: (round(float(scores[i]), 9), -i), reverse=True)[:k]
    return [passages[i] for i in sorted(keep)]


@dataclass
class EvalResult:
    """What a finished eval run produced: its folder, the metrics dict (as written) and the cost."""

    out: Path
    metrics: dict
    items: int


def load_items(datasets: Sequence[str], split: str = "dev", limit: int | None = None, skip: int = 0) -> list[EvalItem]:
    """Items of every dataset (``skip`` and ``limit`` apply per dataset), in order."""
    items: list[EvalItem] = []
    for name in datasets:
        items += load(name, split=split, limit=limit, skip=skip)
    if not items:
        raise InputError(f"no items in {', '.join(datasets)} ({split} split, limit {limit}"
                         + (f", skip {skip}); lower --skip" if skip else "); raise --limit"))
    return items


def run_eval(
    datasets: Sequence[str],
    verifier: str,
    settings: "Settings | None",
    out: str | Path,
    split: str = "dev",
    limit: int | None = None,
    options: VerifierOptions | None = None,
    max_evidence: int = EVIDENCE_K,
    label: str | None = None,
    log: Callable[[str], None] | None = None,
    n_boot: int | None = None,
    cache: bool = True,
    data: Sequence[UserData] = (),
    calibration: str | Path | None | bool = None,
    skip: int = 0,
    replies: str | Path | None = None,
    sample: int | None = None,
) -> EvalResult:
    """Run ``verifier`` on ``datasets`` and write the run folder ``out``; returns its metrics.

    ``label`` names the run in metrics.json and the comparison table (default: verifier/profile);
    ``n_boot`` the bootstrap resamples (default :data:`N_BOOT`); ``cache``: reuse and keep the replies
    in ``out/replies.duckdb`` (see the module docstring). ``data``: the user's own files, already read
    (:mod:`halucheck.evaluation.userdata`), scored after the named sets as datasets of their own; they
    are not split, and their ``limit`` was applied when they were read. ``datasets`` may then be empty.
    ``skip``: leave out the first ``skip`` items of each named set's split (items a run before has seen).
    ``calibration``: which calibrator's effect to report (:func:`halucheck.verifiers.calibration.resolve`: None the
    stored unnamed one, else a name or a file); False none (a run that fits one). ``replies``: where the reply
    cache lives when not in ``out`` (several runs sharing one, as the clean panel's do). ``sample``: instead of the
    split's first items, a fixed sample of this many per named set, classes balanced, at most 4 of a source group
    (:func:`halucheck.evaluation.heads.sample`: the same items every time; for sets whose files are sorted by label).
    """
    log = log or (lambda _m: None)
    options = dataset_bibliography(datasets, verifier, options, Path(out), log) or VerifierOptions()
    if cache and options.features is None:  # direct/probe keep their prompt passes in the model's feature store
        options = replace(options, features="default")
    v = get_verifier(verifier, options)
    v.preflight()
    for d in data:
        d.require_items()
    if sample:
        from halucheck.evaluation.heads import sample as balanced

        items = [it for name in datasets for it in balanced(load(name, split), sample)]
    else:
        items = load_items(datasets, split, limit, skip) if datasets or not data else []
    items += [it for d in data for it in d.items]
    names = [*datasets, *(d.name for d in data)]
    # what every verifier is shown: the top sentences of the evidence; a verifier that reads it all, chunked, the whole
    whole = getattr(v.verifier, "whole_evidence", False)
    shown = items if whole else [replace(it, evidence=select_evidence(it.claim, it.evidence, max_evidence))
                                 for it in items]
    from halucheck.verifiers import calibration as calibration_module

    meter = Meter()
    profile = store = engines = None
    if v.uses_llm:
        if settings is None:
            raise InputError(f"verifier {verifier!r} needs models: load settings (models.yaml) first")
        profile = settings.profile_for("initial")
        v.preflight_engine(profile.engine)  # e.g. the head on a server: refused before any item is read
    # the calibrator for this verifier and profile, found (or refused: fitted on another model) before any work
    cal, cal_path = (None, None) if calibration is False else calibration_module.resolve(
        v.name, profile.name if profile else None, profile.model if profile else None, calibration or None)
    if v.uses_llm:
        from halucheck.engines.pool import EnginePool

        engines = EnginePool(settings)  # this run's engines, closed when it ends
        if cache:
            store = install_cache(engines, Path(replies) if replies else Path(out) / REPLIES_FILE)
        meter.install(engines)
    scope = f"{split} split of the named sets, every item of the user files" if datasets and data else split
    log(f"{v.name}: {len(items)} items of {', '.join(names)} ({scope})"
        + (f" on profile {profile.name} ({profile.engine}: {profile.model})" if profile else ""))
    from halucheck.evaluation.progress import Progress

    if whole:
        v.verifier.progress = Progress(f"{v.name}: {len(items)} items")
    else:
        meter.progress = Progress(f"{v.name}: {len(items)} items", unit="replies (about)")
        meter.expected = v.verifier.expected_calls([case_of(it) for it in shown])
        if meter.expected:  # replies read from the cache count as done work from here
            meter.progress(0, meter.expected)
    t0 = time.perf_counter()
    try:
        preds = v.predict(shown, engines)
    finally:
        if engines is not None:
            engines.close()
        if store is not None:
            store.close()
    wall = time.perf_counter() - t0
    if len(preds) != len(items):  # a verifier bug, not a user error
        raise RuntimeError(f"{v.name} returned {len(preds)} predictions for {len(items)} items")
    spent = Cost(llm_calls=meter.llm_calls, prompt_tokens=meter.prompt_tokens, completion_tokens=meter.completion_tokens)
    if whole:  # prompt passes, not engine calls: the verifier counts them
        own = list(v.verifier.costs.values())
        spent = Cost(llm_calls=sum(c.llm_calls for c in own), prompt_tokens=sum(c.prompt_tokens for c in own),
                     cached_tokens=sum(c.cached_tokens for c in own))
    spent.wall_s = round(wall, 2)
    cost = {
        **spent.as_metrics(),
        **({"cached_prompt_tokens": spent.cached_tokens} if whole else {}),
        "replies": meter.replies,
        "invalid_replies": meter.invalid_replies,
        "retried_replies": meter.retried,
        "cached_replies": meter.cached,
    }
    name = label or (f"{v.name}/{profile.name}" if profile else v.name)
    metrics = write_run(out, items, preds, cost, verifier=name, split=split,
                        n_boot=N_BOOT if n_boot is None else n_boot)
    # how the run was made, beside the metrics (read_run returns it too)
    metrics["settings"] = {
        "verifier": v.name,
        "datasets": names,
        **({"data": [d.describe() for d in data]} if data else {}),
        "limit": limit,
        **({"skip": skip} if skip else {}),
        "max_evidence": max_evidence,
        **({"profile": profile.name, "engine": profile.engine, "model": profile.model} if profile else {}),
        **v.describe(),
    }
    metrics["calibration"] = calibration_report(cal, v.name, profile, items, preds, Path(out), cal_path,
                                                n_boot=N_BOOT if n_boot is None else n_boot)
    path = Path(out) / METRICS_FILE
    path.write_text(json.dumps(metrics, indent=2, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8")
    return EvalResult(Path(out), metrics, len(items))


BIBLIOGRAPHY_FILE = "bibliography.json"


def dataset_bibliography(datasets: Sequence[str], verifier: str, options: VerifierOptions | None, out: Path,
                         log: Callable[[str], None] | None = None) -> VerifierOptions | None:
    """``options`` with the bibliography a named set brings (``datasets.BIBLIOGRAPHIES``: factool-sci's
    true citations) when the ``citation`` verifier runs on it and none was given: written to
    ``out/bibliography.json`` (CSL-JSON), so the run folder shows what the citations were matched against.
    A bibliography given in ``options`` always wins; other verifiers and sets leave ``options`` as it is."""
    from halucheck.evaluation.datasets import BIBLIOGRAPHIES

    if (options is not None and options.bibliography) or "citation" not in [n.strip() for n in verifier.split(",")]:
        return options
    makers = list(dict.fromkeys(BIBLIOGRAPHIES[d] for d in datasets if d in BIBLIOGRAPHIES))
    if not makers:
        return options
    from halucheck.verifiers.tools.citations.formats import write_csl_json

    works = [w for make in makers for w in make(None)]
    path = write_csl_json(works, out / BIBLIOGRAPHY_FILE)
    if log is not None:
        log(f"citation: no --bibliography given; matching against {len(works)} works the set brings "
            f"({', '.join(d for d in datasets if d in BIBLIOGRAPHIES)}), written to {path}")
    return replace(options or VerifierOptions(), bibliography=str(path))


def calibration_report(cal, verifier: str, profile, items: Sequence[EvalItem], preds, out: Path,
                       path: Path | None = None, n_boot: int = N_BOOT) -> dict:
    """ECE, Brier and AUROC per dataset before and after ``cal``, the calibrator fitted for this verifier
    and profile (`halucheck calibrate`; None: "uncalibrated"; read from ``path``), with bootstrap intervals
    (:func:`~halucheck.evaluation.metrics.calibration_effect`; HaluEval QA also gets its length-matched
    AUROC), and ``reliability.svg`` in ``out``."""
    from halucheck.verifiers import calibration

    scored = [(p.score, it) for p, it in zip(preds, items) if p.score is not None]
    raw = [s for s, _ in scored]
    labels = [it.label for _, it in scored]
    after = cal.apply_many(raw) if cal else None
    title = f"{verifier}{' / ' + profile.name if profile else ''}: " + ("raw and calibrated" if cal else "uncalibrated")
    if scored:
        (out / "reliability.svg").write_text(calibration.reliability_svg(raw, labels, title=title, calibrated=after),
                                             encoding="utf-8")
    if cal is None:
        return {"calibrated": False}
    per_set = {}
    for ds in dict.fromkeys(it.dataset for _, it in scored):
        idx = [i for i, (_, it) in enumerate(scored) if it.dataset == ds]
        its = [scored[i][1] for i in idx]
        lengths = ([it.meta["answer_words"] for it in its]
                   if ds in LENGTH_CONTROLLED_SETS and all("answer_words" in it.meta for it in its) else None)
        per_set[ds] = calibration_effect([labels[i] for i in idx], [raw[i] for i in idx], [after[i] for i in idx],
                                         groups=[it.group or it.id for it in its], lengths=lengths, n_boot=n_boot)
    return {"calibrated": True, "calibrator": cal.summary(), "name": cal.name, "file": str(path) if path else None,
            "fitted_on": [*cal.datasets, *cal.files], "split": cal.split,
            "results": calibration.json_safe(per_set)}  # undefined values (NaN) as null


def default_out(verifier: str, datasets: Sequence[str], split: str, profile: str | None) -> Path:
    """``runs/eval/<verifier>[-<profile>]-<datasets>-<split>``."""
    parts = [verifier] + ([profile] if profile else []) + ["+".join(datasets), split]
    return Path("runs") / "eval" / "-".join(parts)


__all__ = ["BIBLIOGRAPHY_FILE", "EVIDENCE_K", "EvalResult", "Meter", "MeteredEngine", "dataset_bibliography", "default_out",
           "install_cache", "load_items", "run_eval", "select_evidence"]
