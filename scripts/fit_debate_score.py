"""Fit the debate's score weights (halucheck/verifiers/debate/score.py) on dev eval runs of the debate.

    python scripts/fit_debate_score.py runs/i37/debate-dev-factcheck-gpt runs/i37/debate-dev-halueval-qa ...
    python scripts/fit_debate_score.py RUN... --write     # store them in score.json with their provenance

Reads each run's predictions.jsonl (the chains with their turns), rebuilds each chain's features, fits a
logistic regression (``score.fit``: scikit-learn, L2, C=1, and the threshold of best balanced accuracy) of the
label on them, and prints the weights with the AUROC and balanced accuracy of the first agent alone, of the
chain's standing verdict, of the shipped and of the fitted score (in-sample and 5-fold cross-validated, folds
by source group, threshold chosen inside each fold). Refuses runs on the test split.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import replace
from datetime import date
from pathlib import Path

from halucheck.verifiers.calibration.metrics import auroc_score
from halucheck.verifiers.debate import score as debate_score


def load(runs: list[Path]) -> tuple[list, list[dict], list[bool], list[float], list[float], list[str]]:
    chains, xs, ys, shipped, first, groups = [], [], [], [], [], []
    for run in runs:
        metrics = json.loads((run / "metrics.json").read_text("utf-8"))
        if metrics.get("split") == "test":
            sys.exit(f"{run}: a test-split run; fit on dev runs only")
        for line in (run / "predictions.jsonl").read_text("utf-8").splitlines():
            r = json.loads(line)
            if r.get("prediction") is None:
                continue
            chain = debate_score.turns_of((r.get("detail") or {}).get("chain") or [])
            if debate_score.standing_of(chain) is None:
                continue
            chains.append(chain)
            xs.append(debate_score.features(chain))
            ys.append(bool(r["label"]))
            shipped.append(float(r["score"]))
            p0 = chain[0].p_factual if chain[0].p_factual is not None else float(chain[0].factuality)
            first.append(1.0 - p0)
            groups.append(r.get("group") or r["id"])
    return chains, xs, ys, shipped, first, groups


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--write", action="store_true", help="store the fitted weights in score.json")
    args = ap.parse_args()
    import numpy as np
    from sklearn.model_selection import GroupKFold

    chains, xs, ys, shipped, first, groups = load(args.runs)
    if len(set(ys)) < 2:
        sys.exit("need both labels among the items")
    names = debate_score.FEATURES
    X = np.array([[x[k] for k in names] for x in xs])
    y = np.array(ys)
    weights = debate_score.fit(chains, ys)
    fitted = [weights.score(x) for x in xs]
    cv, cv_decided = np.zeros(len(y)), np.zeros(len(y), dtype=bool)
    for train, test in GroupKFold(n_splits=5).split(X, y, groups):
        fold = debate_score.fit([chains[i] for i in train], [ys[i] for i in train])
        cv[test] = [fold.score(xs[i]) for i in test]
        cv_decided[test] = cv[test] >= fold.threshold

    def balacc(pred) -> float:
        pred = np.asarray(pred, dtype=bool)
        return float((pred[y].mean() + (~pred[~y]).mean()) / 2)

    standing = [x["verdict"] > 0 for x in xs]
    print(f"items: {len(y)} ({int(y.sum())} hallucinated) from {len(args.runs)} run(s)")
    print(f"AUROC first agent alone {auroc_score(first, list(y)):.3f}; shipped score {auroc_score(shipped, list(y)):.3f}; "
          f"fitted {auroc_score(fitted, list(y)):.3f} in-sample, {auroc_score(list(cv), list(y)):.3f} cross-validated")
    print(f"BalAcc first agent alone {balacc([p >= 0.5 for p in first]):.3f}; the chain's standing verdict "
          f"{balacc(standing):.3f}; fitted score at its threshold {balacc([p >= weights.threshold for p in fitted]):.3f} "
          f"in-sample, {balacc(cv_decided):.3f} cross-validated")
    print(f"bias {weights.bias}; weights {weights.weights}; threshold {weights.threshold}")
    if args.write:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        metas = [json.loads((r / "metrics.json").read_text("utf-8")) for r in args.runs]
        provenance = {
            **weights.provenance, "date": date.today().isoformat(), "commit": commit,
            "runs": [str(r) for r in args.runs], "split": "dev",
            "datasets": sorted({d for m in metas for d in m.get("results", {})}),
            "profile": next((m["settings"].get("profile") for m in metas if m.get("settings")), None),
            "model": next((m["settings"].get("model") for m in metas if m.get("settings")), None),
            "auroc_cross_validated": round(auroc_score(list(cv), list(y)), 4),
            "balanced_accuracy_cross_validated": round(balacc(cv_decided), 4),
        }
        path = debate_score.save_weights(replace(weights, provenance=provenance),
                                         Path(debate_score.__file__).with_name("score.json"))
        print(f"written: {path}")


if __name__ == "__main__":
    main()
