"""Run directories: ``predictions.jsonl`` + ``metrics.json`` per verifier run, and the comparison table.

A run directory holds one verifier's results on one or more datasets of one split:

``predictions.jsonl`` — one JSON object per item, in item order::

    {"id": "wice:17", "dataset": "wice", "group": "wice:17", "label": true,
     "prediction": false, "score": 0.31}

``label``/``prediction`` are booleans with true = hallucinated, ``score`` is the probability of
hallucination in [0, 1]. ``prediction``/``score`` are null when the verifier gave no answer (then
``error`` says why); HaluEval QA items also carry ``answer_words``.

``metrics.json``::

    {"verifier": ..., "split": ..., "cost": {"llm_calls", "prompt_tokens", "completion_tokens",
     "wall_time_s"}, "bootstrap": {"n_boot", "seed", "ci", "resample"},
     "results": {"<dataset>": {"n", "n_positive", "n_missing",
                               "metrics": {"<name>": {"value", "ci_low", "ci_high", "higher_is_better"}},
                               "length_controlled": {...}}},   # HaluEval QA sets only
     "calibration": {"calibrated": false} | {"calibrated": true, "calibrator", "fitted_on", "split",
                     "results": {"<dataset>": {"n", "before": {"ece" | "brier" | "auroc"
                                                                [| "length_matched_auroc"]: {...}},
                                                      "after": {...},
                                                      "ece_if_calibrated": {"before" | "after":
                                                          {"mean", "p95", "observed", "p_value"}}}}}}

Items without a prediction are left out of the metrics and counted in ``n_missing`` (shown in the
comparison table), so a verifier that fails often is visible rather than silently penalised or
flattered. NaN values are written as ``null``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from halucheck.verifiers.calibration import json_safe
from halucheck.errors import InputError
from halucheck.evaluation.datasets import EvalItem
from halucheck.evaluation.chains import chain_stats
from halucheck.evaluation.metrics import CI, METRICS, N_BOOT, SEED, compute_metrics, length_controlled
from halucheck.records import Cost

PREDICTIONS_FILE = "predictions.jsonl"
METRICS_FILE = "metrics.json"
LENGTH_CONTROLLED_SETS = frozenset({"halueval-qa", "halueval-qa-cleaned"})


@dataclass
class Prediction:
    """A verifier's output for one item: True = hallucinated; ``score`` = P(hallucinated); ``detail``:
    what the verifier wants kept beside it in ``predictions.jsonl`` (the debate: its whole verdict)."""

    prediction: bool | None
    score: float | None = None
    error: str | None = None
    detail: dict | None = None


def _prediction(p) -> Prediction:
    if isinstance(p, Prediction):
        return p
    if isinstance(p, Mapping):
        return Prediction(p.get("prediction"), p.get("score"), p.get("error"))
    if isinstance(p, (tuple, list)):
        return Prediction(*p)
    if isinstance(p, bool) or p is None:
        return Prediction(p)
    raise TypeError(f"cannot read a prediction from {p!r}")


def _nan(x):
    return math.nan if x is None else x


def score_predictions(rows: Sequence[Mapping], n_boot: int = N_BOOT, seed: int = SEED, ci: float = CI) -> dict:
    """Per-dataset metrics from prediction rows (the ``predictions.jsonl`` shape)."""
    by_ds: dict[str, list[Mapping]] = {}
    for r in rows:
        by_ds.setdefault(r["dataset"], []).append(r)
    results = {}
    for ds, rs in by_ds.items():
        done = [r for r in rs if r.get("prediction") is not None]
        labels = [bool(r["label"]) for r in done]
        preds = [bool(r["prediction"]) for r in done]
        # A verifier with no probability gets its hard answer as the score.
        scores = [float(r["prediction"]) if r.get("score") is None else float(r["score"]) for r in done]
        groups = [r.get("group") or r["id"] for r in done]
        res = compute_metrics(labels, preds, scores, groups, n_boot=n_boot, seed=seed, ci=ci)
        res["n_missing"] = len(rs) - len(done)
        chains = chain_stats(rs)
        if chains is not None:  # the debate: how its agents behaved (see evaluation/chains.py)
            res["debate"] = chains
        if ds in LENGTH_CONTROLLED_SETS and done and all("answer_words" in r for r in done):
            res["length_controlled"] = length_controlled(
                labels, preds, scores, [r["answer_words"] for r in done], groups, n_boot=n_boot, seed=seed, ci=ci
            )
        results[ds] = res
    return results


def write_run(
    run_dir: str | os.PathLike,
    items: Sequence[EvalItem],
    preds: Sequence,
    cost: Cost | Mapping | None = None,
    verifier: str | None = None,
    split: str | None = None,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    ci: float = CI,
) -> dict:
    """Write ``predictions.jsonl`` and ``metrics.json`` into ``run_dir`` and return the metrics dict.

    ``preds`` is aligned with ``items``; each entry is a :class:`Prediction`, a dict with
    ``prediction``/``score``/``error``, a ``(prediction, score)`` tuple or a bare bool.
    ``cost`` is a :class:`~halucheck.records.Cost` or a dict with the keys of its ``as_metrics()``.
    ``verifier`` defaults to the directory name; ``split`` to the split shared by the items.
    """
    if len(items) != len(preds):
        raise ValueError(f"{len(items)} items but {len(preds)} predictions")
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for item, raw in zip(items, preds):
        p = _prediction(raw)
        if p.score is not None and not 0.0 <= float(p.score) <= 1.0:
            raise ValueError(f"{item.id}: score {p.score} is not a probability in [0, 1]")
        row = {
            "id": item.id,
            "dataset": item.dataset,
            "group": item.group,
            "label": bool(item.label),
            "prediction": None if p.prediction is None else bool(p.prediction),
            "score": None if (p.score is None or p.prediction is None) else float(p.score),
        }
        if "answer_words" in item.meta:
            row["answer_words"] = item.meta["answer_words"]
        if p.error:
            row["error"] = p.error
        if p.detail:
            row["detail"] = p.detail
            if p.detail.get("chain"):
                row["claim"] = item.claim  # chains.py tells restating the claim from copying an agent
        rows.append(row)
    with open(run_dir / PREDICTIONS_FILE, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    cost_d = {**Cost().as_metrics(), **(cost.as_metrics() if isinstance(cost, Cost) else dict(cost or {}))}
    splits = {it.split for it in items}
    out = {
        "verifier": verifier or run_dir.resolve().name,
        "split": split or (splits.pop() if len(splits) == 1 else "all"),
        "cost": cost_d,
        "bootstrap": {"n_boot": n_boot, "seed": seed, "ci": ci, "resample": "group"},
        "results": score_predictions(rows, n_boot=n_boot, seed=seed, ci=ci),
    }
    out = json_safe(out)
    with open(run_dir / METRICS_FILE, "w", encoding="utf-8") as fh:
        json.dump(out, fh, indent=2, ensure_ascii=False, allow_nan=False)
        fh.write("\n")
    return out


def _not_written_by_eval(path: Path, run_dir, why: str) -> InputError:
    """The one line for a run file that cannot be read as halucheck eval writes it."""
    return InputError(f"{path}: not a {path.name} as halucheck eval writes it ({why}); run that eval again to "
                      f"write it, or leave {run_dir} out of --compare")


def _why(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text: byte 0x{exc.object[exc.start]:02x} at offset {exc.start}"
    if isinstance(exc, OSError):
        return f"cannot be read: {exc.strerror or exc}"
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")


def read_predictions(run_dir: str | os.PathLike) -> list[dict]:
    """The rows of a run's ``predictions.jsonl``; one :class:`InputError` line naming the file (and line)
    when it is missing, unreadable or not as halucheck eval writes it."""
    path = Path(run_dir) / PREDICTIONS_FILE
    if not path.is_file():
        raise InputError(f"{path} not found; is {run_dir} a run directory written by halucheck eval?")
    rows = []
    try:
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except (ValueError, RecursionError) as exc:
                    raise _not_written_by_eval(Path(f"{path}:{n}"), run_dir, _why(exc)) from None
                if not (isinstance(row, dict) and isinstance(row.get("dataset"), str)
                        and isinstance(row.get("id"), (str, int))):
                    raise _not_written_by_eval(Path(f"{path}:{n}"), run_dir, "a line must be an object with a "
                                               "\"dataset\" and an \"id\"")
                rows.append(row)
    except (OSError, UnicodeDecodeError) as exc:
        raise _not_written_by_eval(path, run_dir, _why(exc)) from None
    return rows


def read_run(run_dir: str | os.PathLike) -> dict:
    """A run's ``metrics.json``; raises :class:`InputError` (one line) when the directory has none, or it cannot
    be read, is not JSON or is not a mapping."""
    path = Path(run_dir) / METRICS_FILE
    if not path.is_file():
        raise InputError(f"{path} not found; is {run_dir} a run directory written by halucheck eval?")
    try:
        with open(path, encoding="utf-8") as fh:
            run = json.load(fh)
    except (OSError, ValueError, RecursionError) as exc:  # ValueError: not JSON, or not UTF-8
        raise _not_written_by_eval(path, run_dir, _why(exc)) from None
    if not isinstance(run, dict):
        raise _not_written_by_eval(path, run_dir, f"a mapping of results, got {type(run).__name__}")
    return run


def _fmt(v, digits: int = 3) -> str:
    v = _nan(v)
    return "–" if isinstance(v, float) and math.isnan(v) else f"{v:.{digits}f}"


def _cell(m: Mapping | None, bold: bool = False) -> str:
    if not m:
        return "–"
    val = _fmt(m.get("value"))
    if bold:
        val = f"**{val}**"
    lo, hi = _nan(m.get("ci_low")), _nan(m.get("ci_high"))
    if math.isnan(lo) or math.isnan(hi):
        return val
    return f"{val} [{_fmt(lo)}, {_fmt(hi)}]"


def _best(rows: list[tuple[str, str, dict, dict]], metric: str) -> dict[str, float]:
    """Best value per dataset for ``metric`` (only where two or more runs share the dataset)."""
    best: dict[str, list[float]] = {}
    for _, ds, res, _ in rows:
        v = _nan(res.get("metrics", {}).get(metric, {}).get("value"))
        if not math.isnan(v):
            best.setdefault(ds, []).append(v)
    hib = METRICS[metric].higher_is_better
    return {ds: (max(vs) if hib else min(vs)) for ds, vs in best.items() if len(vs) > 1}


def common_results(dirs: Sequence[str | os.PathLike]) -> list[dict]:
    """Each run's per-dataset results rescored on the items that every run of that dataset has,
    so that runs of different sizes compare on the same items (same bootstrap settings as the run)."""
    runs = [(read_run(d), read_predictions(d)) for d in dirs]
    shared: dict[str, set[str]] = {}
    for _, preds in runs:
        by_ds: dict[str, set[str]] = {}
        for r in preds:
            by_ds.setdefault(r["dataset"], set()).add(r["id"])
        for ds, ids in by_ds.items():
            shared[ds] = shared[ds] & ids if ds in shared else ids
    out = []
    for run, preds in runs:
        boot = run.get("bootstrap", {})
        rows = [r for r in preds if r["id"] in shared[r["dataset"]]]
        out.append(score_predictions(rows, n_boot=boot.get("n_boot", N_BOOT), seed=boot.get("seed", SEED),
                                     ci=boot.get("ci", CI)))
    return out


def compare(dirs: Sequence[str | os.PathLike], common: bool = False) -> str:
    """One markdown table of runs (verifier × dataset rows) × metrics with 95 % intervals.

    The best value per dataset is bold when several runs share it. Cost columns are per run
    (repeated on each of its dataset rows). A second table gives the length-controlled view for
    runs that include HaluEval QA. ``common``: score every run only on the items all runs have
    (:func:`common_results`); the cost columns stay those of the whole runs.
    """
    runs = [(d, read_run(d)) for d in dirs]
    try:
        rescored = common_results(dirs) if common else [None] * len(dirs)
    except (AttributeError, TypeError, KeyError, ValueError) as exc:
        raise InputError(f"the predictions.jsonl of {', '.join(map(str, dirs))} are not as halucheck eval writes "
                         f"them ({_why(exc)}); run those evals again, or compare without --common") from None
    for (d, run), results in zip(runs, rescored):  # each run alone first: a file laid out otherwise is named
        try:
            _table([(d, run)], [results], common)
        except (AttributeError, TypeError, KeyError, ValueError, IndexError) as exc:
            raise _not_written_by_eval(Path(d) / METRICS_FILE, d, _why(exc)) from None
    return _table(runs, rescored, common)


def _table(runs: list[tuple[str | os.PathLike, dict]], rescored: list, common: bool) -> str:
    """The tables of :func:`compare`: ``runs`` (directory, metrics.json), ``rescored`` their common results."""
    rows = []
    for (d, run), results in zip(runs, rescored):
        name = run.get("verifier") or Path(d).name
        for ds, res in (results if results is not None else run.get("results", {})).items():
            rows.append((name, ds, res, run))
    names = list(METRICS)
    best = {m: _best(rows, m) for m in names}
    header = ["verifier", "dataset", "split", "n", "missing", *[METRICS[m].label for m in names], "LLM calls", "tokens (prompt/completion)", "wall s"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for name, ds, res, run in rows:
        cells = [name, ds, str(run.get("split", "")), str(res.get("n", "")), str(res.get("n_missing", 0))]
        for m in names:
            mm = res.get("metrics", {}).get(m)
            v = _nan(mm.get("value")) if mm else math.nan
            cells.append(_cell(mm, bold=ds in best[m] and not math.isnan(v) and math.isclose(v, best[m][ds])))
        c = run.get("cost", {})
        cells += [str(c.get("llm_calls", 0)), f"{c.get('prompt_tokens', 0)}/{c.get('completion_tokens', 0)}", _fmt(c.get("wall_time_s", 0.0), 1)]
        lines.append("| " + " | ".join(cells) + " |")
    if common:
        lines += ["", "Scored on the items every run has; the cost columns are those of the whole runs."]
    lc_rows = [(n, ds, res["length_controlled"]) for n, ds, res, _ in rows if res.get("length_controlled")]
    if lc_rows:
        lines += [
            "",
            "Length-controlled view (HaluEval QA): AUROC over hallucinated/correct pairs with the same answer word count; "
            "answer length alone scores the length-only AUROC.",
            "",
            "| verifier | dataset | length-matched AUROC | matched pairs | matched items | length-only AUROC |",
            "|---|---|---|---|---|---|",
        ]
        for n, ds, lc in lc_rows:
            lines.append(
                f"| {n} | {ds} | {_cell(lc.get('length_matched_auroc'))} | {lc.get('matched_pairs', 0)} | "
                f"{lc.get('matched_items', 0)} | {_fmt(lc.get('length_only_auroc'))} |"
            )
    lines += _calibration_table(runs)
    return "\n".join(lines) + "\n"


def _calibration_table(runs: list[tuple[str | os.PathLike, Mapping]]) -> list[str]:
    """The rows of the runs made with a stored calibrator: each metric before -> after, with intervals."""
    cal_runs = [(d, run) for d, run in runs if (run.get("calibration") or {}).get("calibrated")]
    if not cal_runs:
        return []
    lines = ["", "Calibration: P(hallucinated) before and after the stored calibrator "
                 "(`halucheck calibrate`; AUROC is reported to show the ranking is kept).", ""]
    for d, run in cal_runs:
        cal = run["calibration"]
        named = f" `{cal['name']}`" if cal.get("name") else ""
        lines.append(f"- {run.get('verifier') or Path(d).name}{named}: {cal.get('calibrator', '')}; fitted on "
                     f"{', '.join(cal.get('fitted_on', []))} ({cal.get('split', '')})"
                     + (f"; {cal['file']}" if cal.get("file") else ""))
    lines += ["", "| verifier | dataset | n | ECE before | ECE after | ECE if calibrated | Brier before | Brier after | "
                  "AUROC before | AUROC after | length-matched AUROC before | length-matched AUROC after |",
              "|" + "---|" * 12]
    for d, run in cal_runs:
        for ds, res in run["calibration"].get("results", {}).items():
            cells = [run.get("verifier") or Path(d).name, ds, str(res.get("n", ""))]
            for m in ("ece", "brier", "auroc", "length_matched_auroc"):
                cells += [_cell(res.get("before", {}).get(m)), _cell(res.get("after", {}).get(m))]
                if m == "ece":
                    cells.append(_if_calibrated((res.get("ece_if_calibrated") or {}).get("after")))
            lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "ECE if calibrated: the ECE that perfectly calibrated scores show on these items by chance "
                  "(mean, 95th percentile, and p: the share of such draws at least as far off as the calibrated "
                  "scores; p < 0.05 is evidence they are miscalibrated)."]
    return lines


def _if_calibrated(c: Mapping | None) -> str:
    """``mean (95 %: p95), p = ...`` of :func:`~halucheck.verifiers.calibration.ece_if_calibrated`; ``–`` when absent."""
    if not c or c.get("mean") is None:
        return "–"
    p = c.get("p_value")
    return f"{_fmt(c['mean'])} (95 %: {_fmt(c.get('p95'))}){'' if p is None else f', p = {p:.2f}'}"


__all__ = [
    "METRICS_FILE",
    "PREDICTIONS_FILE",
    "Prediction",
    "common_results",
    "compare",
    "read_predictions",
    "read_run",
    "score_predictions",
    "write_run",
]
