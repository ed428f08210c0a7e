"""Evaluation harness data and metrics: labeled datasets, detection metrics, run directories.

Typical use::

    from halucheck.evaluation import load, write_run, compare
    items = load("wice", split="dev")
    preds = [Prediction(prediction=..., score=...) for item in items]   # True = hallucinated
    write_run("runs/debate-wice", items, preds, Cost(llm_calls=..., ...), verifier="debate")
    print(compare(["runs/debate-wice", "runs/nli-wice"]))

Positive = hallucinated everywhere: labels, predictions, and scores (P(hallucinated)).
"""

from halucheck.evaluation.datasets import DATASETS, GROUNDED, EvalItem, corpus, dataset_root, load, split_of
from halucheck.evaluation.metrics import METRICS, compute_metrics, length_controlled, register_metric
from halucheck.evaluation.report import Prediction, compare, read_predictions, read_run, write_run
from halucheck.evaluation.userdata import UserData, load_user_data, read_user_data

__all__ = [
    "DATASETS",
    "GROUNDED",
    "METRICS",
    "EvalItem",
    "Prediction",
    "UserData",
    "compare",
    "compute_metrics",
    "corpus",
    "dataset_root",
    "length_controlled",
    "load",
    "load_user_data",
    "read_predictions",
    "read_run",
    "read_user_data",
    "register_metric",
    "split_of",
    "write_run",
]
