"""One markdown table from several `halucheck eval` runs: each verifier on each set, side by side.

    python scripts/experiments/verifier_table.py runs/i37/vllm-debate-dev runs/i37/vllm-selfcheck-dev runs/i37/vllm-consistency-dev

Per run and set: items decided and missing, balanced accuracy and AUROC with the run's bootstrap intervals; for a
debate, the verdicts it moved away from its first agent's, right and wrong, in each direction, and its share of
void stances; model calls per claim (the turns of each item's chain that were calls: a walkover, decided without
a Leader call, is not one; where every chain is one turn, the run's replies over its items); and seconds per claim (the run's wall time
over its items: a run replayed from its reply cache reports the replay's time, so this is read from the run
that made the calls). Rows are grouped by set, in the order the runs are given.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

WALKOVER = "without a Leader call"


def _ci(m: dict | None) -> str:
    if not m or m.get("value") is None:
        return "–"
    if m.get("ci_low") is None:
        return f"{m['value']:.3f}"
    return f"{m['value']:.3f} [{m['ci_low']:.3f}, {m['ci_high']:.3f}]"


def _calls(row: dict) -> int:
    chain = (row.get("detail") or {}).get("chain") or []
    if not chain:
        return 1
    return sum(1 for t in chain if WALKOVER not in (t.get("opinion") or ""))


def rows_of(run: Path) -> list[tuple]:
    metrics = json.loads((run / "metrics.json").read_text("utf-8"))
    preds = [json.loads(line) for line in (run / "predictions.jsonl").read_text("utf-8").splitlines() if line]
    total = sum(r["n"] + r.get("n_missing", 0) for r in metrics["results"].values()) or 1
    per_claim_s = metrics.get("cost", {}).get("wall_time_s", 0.0) / total
    out = []
    for name, result in metrics["results"].items():
        mine = [p for p in preds if p.get("dataset", name) == name or p["id"].startswith(f"{name}:")]
        # the chains' calls; where every chain is one turn (a verifier whose samples leave one summary turn),
        # the run's replies (cached ones too) over its items
        single = all(len((p.get("detail") or {}).get("chain") or []) <= 1 for p in mine)
        calls = (max(1.0, metrics.get("cost", {}).get("replies", 0) / total) if single
                 else sum(_calls(p) for p in mine) / max(1, len(mine)))
        debate = result.get("debate") or {}
        flips = debate.get("flips") or {}
        moved = (" / ".join(f"{flips.get(d, {}).get('right', 0)}–{flips.get(d, {}).get('wrong', 0)}"
                            for d in ("to_hallucinated", "to_factual")) if flips else "–")
        void = f"{debate['void_share']:.2f}" if "void_share" in debate else "–"
        m = result["metrics"]
        out.append((name, metrics["verifier"], result["n"], result.get("n_missing", 0),
                    _ci(m.get("balanced_accuracy")), _ci(m.get("auroc")), moved, void, f"{calls:.1f}",
                    f"{per_claim_s:.1f}"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    args = ap.parse_args()
    rows = [r for run in args.runs for r in rows_of(run)]
    sets = list(dict.fromkeys(r[0] for r in rows))
    print("| set | verifier | n | missing | BalAcc | AUROC | moved right–wrong (to hallucinated / to factual) "
          "| void stances | calls / claim | s / claim |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for s in sets:
        for r in rows:
            if r[0] == s:
                print("| " + " | ".join(str(x) for x in r) + " |")


if __name__ == "__main__":
    main()
