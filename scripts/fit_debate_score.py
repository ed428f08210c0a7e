"""Fit the debate's score weights (halucheck/verifiers/debate/score.py) on dev eval runs of the debate.

    python scripts/fit_debate_score.py runs/i37/debate-dev-factcheck-gpt runs/i37/debate-dev-halueval-qa ...
    python scripts/fit_debate_score.py RUN... --write     # store them in score.json with their provenance

Reads each run's predictions.jsonl (the chains with their turns), rebuilds each chain's features, fits a
logistic regression (scikit-learn, L2, C=1) of the label on them, and prints the weights with the AUROC of
the shipped score, of the first agent alone and of the fitted score (in-sample and 5-fold cross-validated,
folds by source group). Refuses runs on the test split.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from datetime import date
from pathlib import Path

from halucheck.records import Turn
from halucheck.verifiers.calibration.metrics import auroc_score
from halucheck.verifiers.debate import score as debate_score


def turns_of(chain: list[dict]) -> list[Turn]:
    out = []
    for t in chain:
        if t.get("verifier", "debate") != "debate":
            continue
        out.append(Turn(t["state"], t["role"], t.get("opinion") or "", t.get("factuality"), t.get("error_severity"),
                        error=t.get("error"), p_factual=t.get("p_factual"), **Turn.detail_fields(t)))
    return out


def load(runs: list[Path]) -> tuple[list[dict], list[bool], list[float], list[float], list[str]]:
    xs, ys, shipped, first, groups = [], [], [], [], []
    for run in runs:
        metrics = json.loads((run / "metrics.json").read_text("utf-8"))
        if metrics.get("split") == "test":
            sys.exit(f"{run}: a test-split run; fit on dev runs only")
        for line in (run / "predictions.jsonl").read_text("utf-8").splitlines():
            r = json.loads(line)
            if r.get("prediction") is None:
                continue
            chain = turns_of((r.get("detail") or {}).get("chain") or [])
            if not chain or chain[0].role != "initial" or not chain[0].ok:
                continue
            xs.append(debate_score.features(chain, not r["prediction"]))
            ys.append(bool(r["label"]))
            shipped.append(float(r["score"]))
            p0 = chain[0].p_factual if chain[0].p_factual is not None else float(chain[0].factuality)
            first.append(1.0 - p0)
            groups.append(r.get("group") or r["id"])
    return xs, ys, shipped, first, groups


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--write", action="store_true", help="store the fitted weights in score.json")
    args = ap.parse_args()
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupKFold

    xs, ys, shipped, first, groups = load(args.runs)
    if len(set(ys)) < 2:
        sys.exit("need both labels among the items")
    names = debate_score.FEATURES
    X = np.array([[x[k] for k in names] for x in xs])
    y = np.array(ys)
    model = LogisticRegression(C=1.0).fit(X, y)
    fitted = model.predict_proba(X)[:, 1]
    cv = np.zeros(len(y))
    for train, test in GroupKFold(n_splits=5).split(X, y, groups):
        cv[test] = LogisticRegression(C=1.0).fit(X[train], y[train]).predict_proba(X[test])[:, 1]
    print(f"items: {len(y)} ({int(y.sum())} hallucinated) from {len(args.runs)} run(s)")
    print(f"AUROC first agent alone {auroc_score(first, list(y)):.3f}; shipped score {auroc_score(shipped, list(y)):.3f}; "
          f"fitted {auroc_score(list(fitted), list(y)):.3f} in-sample, {auroc_score(list(cv), list(y)):.3f} cross-validated")
    weights = {k: round(float(w), 4) for k, w in zip(names, model.coef_[0])}
    print(f"bias {model.intercept_[0]:.4f}; weights {weights}")
    if args.write:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        metas = [json.loads((r / "metrics.json").read_text("utf-8")) for r in args.runs]
        provenance = {
            "fitted": True, "date": date.today().isoformat(), "commit": commit, "items": int(len(y)),
            "runs": [str(r) for r in args.runs], "split": "dev",
            "datasets": sorted({d for m in metas for d in m.get("results", {})}),
            "profile": next((m["settings"].get("profile") for m in metas if m.get("settings")), None),
            "model": next((m["settings"].get("model") for m in metas if m.get("settings")), None),
            "auroc_cross_validated": round(auroc_score(list(cv), list(y)), 4),
            "method": "scripts/fit_debate_score.py: sklearn LogisticRegression(C=1) on the chain features",
        }
        path = Path(debate_score.__file__).with_name("score.json")
        path.write_text(json.dumps({"bias": round(float(model.intercept_[0]), 4), "weights": weights,
                                    "provenance": provenance}, indent=2) + "\n", "utf-8")
        print(f"written: {path}")


if __name__ == "__main__":
    main()
