"""Would `direct` spare passes by stopping at the first chunk that supports the claim? Offline, on the clean panel's
dev items (every chunk of every item was computed by `clean_panel.py score -v direct`, so its passes are in the
model's feature store; no model is run here, only its tokenizer).

A claim's verdict is its best-supporting chunk's: it is flagged when no chunk reaches P(hallucinated) < the
threshold. So once one chunk is below a floor at or under the threshold, the verdict is decided (supported) and the
remaining chunks can only lower P further. Reading the chunks in an order that puts the likely supporting one first
(the most content words shared with the claim) and stopping there keeps every verdict and spares passes; the
claim's P can only be higher than with every chunk read (by less than the floor). Printed per set: chunks, passes
read in document order / closest first, and what changes in P (balanced accuracy, AUROC) at each floor.

    python scripts/experiments/early_exit.py [--sets wice,contract-nli]

The store read is the one of the model in bfloat16 (set HALUCHECK_PRECISION=int8 or float32 for another).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

MODEL = "qwen2.5-coder-1.5b-instruct"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default="", help="comma-separated panel sets (default: all)")
    ap.add_argument("--floors", default="0.25,0.15,0.10,0.05")
    args = ap.parse_args()

    import numpy as np

    from halucheck.evaluation.metrics import auroc, balanced_accuracy
    from halucheck.verifiers.probe.prompt import closest
    from halucheck.verifiers.probe.verifier import DIRECT_THRESHOLD

    wanted = set(filter(None, args.sets.split(",")))
    floors = [float(f) for f in args.floors.split(",")]
    assert all(f <= DIRECT_THRESHOLD for f in floors), "a floor above the threshold could change verdicts"
    rows = defaultdict(list)  # set -> (hallucinated, P per chunk in document order, closest-first order)
    scored, missing = panel_chunk_scores(wanted)
    for item, case, parts, p in scored:
        rows[item.id.split(":", 1)[0]].append((bool(item.label), p, _closest_first(parts, case.claim.statement,
                                                                                   closest)))
    print(f"items without every chunk in the store (skipped): {missing}")
    head = f"{'set':14} {'items':>5} {'chunks':>6} | {'floor':>5} {'passes doc':>10} {'closest':>8} " \
           f"{'BalAcc all':>10} {'stop':>6} {'AUROC all':>9} {'stop':>6}"
    print(head)
    totals = defaultdict(float)
    for name, items in sorted(rows.items()):
        y = np.array([h for h, _, _ in items])
        full = np.array([min(p) for _, p, _ in items])
        chunks = sum(len(p) for _, p, _ in items)
        for f in floors:
            doc, near, stopped = 0, 0, []
            for _, p, order in items:
                doc += _read(p, range(len(p)), f)
                n = _read(p, order, f)
                near += n
                stopped.append(min(p[j] for j in order[:n]))
            stopped = np.array(stopped)
            assert ((full >= DIRECT_THRESHOLD) == (stopped >= DIRECT_THRESHOLD)).all()  # verdicts unchanged
            b_all = balanced_accuracy(y, full >= DIRECT_THRESHOLD, full)
            b_stop = balanced_accuracy(y, stopped >= DIRECT_THRESHOLD, stopped)
            print(f"{name:14} {len(items):5} {chunks:6} | {f:5.2f} {doc:10} {near:8} {b_all:10.3f} {b_stop:6.3f} "
                  f"{auroc(y, None, full):9.3f} {auroc(y, None, stopped):6.3f}")
            totals[(f, "chunks")] += chunks
            totals[(f, "doc")] += doc
            totals[(f, "near")] += near
    for f in floors:
        c = totals[(f, "chunks")]
        print(f"all sets, floor {f:.2f}: passes {c:.0f} -> {totals[(f, 'doc')]:.0f} in document order "
              f"({totals[(f, 'doc')] / c:.2f}), {totals[(f, 'near')]:.0f} closest first ({totals[(f, 'near')] / c:.2f})")


def panel_chunk_scores(sets=frozenset(), features: bool = False):
    """(item, case, chunks, raw P(hallucinated) of each chunk in document order) for the clean panel's items (of
    ``sets``; all when empty) whose every pass is in the default model's feature store, and how many were not;
    ``features``: each chunk's stored features instead of its P."""
    import numpy as np
    from transformers import AutoTokenizer

    from halucheck import weights
    from halucheck.evaluation.panel import load_panel
    from halucheck.evaluation.verifiers import case_of
    from halucheck.store.features import FeatureStore
    from halucheck.verifiers.probe.features import Features, default_store
    from halucheck.verifiers.probe.prompt import RECIPE
    from halucheck.verifiers.probe.verifier import prompts_of

    model_id = f"{MODEL}@{weights.spec_for(MODEL).sha256[:12]}"
    tok = AutoTokenizer.from_pretrained(weights.resolve(MODEL))
    store = FeatureStore(default_store(model_id, os.environ.get("HALUCHECK_PRECISION", "bfloat16")))
    out, missing = [], 0
    for item in load_panel():
        if sets and item.id.split(":", 1)[0] not in sets:
            continue
        case = case_of(item)
        parts, prompts = prompts_of(case)
        ids = [tok(tok.apply_chat_template([dict(m) for m in p], tokenize=False, add_generation_prompt=True),
                   add_special_tokens=False)["input_ids"] for p in prompts]
        keys = [FeatureStore.key(f"{model_id}|{RECIPE}", i) for i in ids]
        got = store.get(keys)
        if len(got) < len(keys):
            missing += 1
            continue
        if features:
            out.append((item, case, parts, [Features(got[k].hidden, got[k].yes, got[k].no, got[k].tokens) for k in keys]))
        else:
            out.append((item, case, parts, [1.0 - float(1 / (1 + np.exp(got[k].no - got[k].yes))) for k in keys]))
    return out, missing


def _closest_first(parts, claim: str, closest) -> list[int]:
    """Chunk indices, the one sharing the most content words with the claim first (then the next of the rest...)."""
    left = list(range(len(parts)))
    out = []
    while left:
        j = left[closest([parts[i] for i in left], claim)]
        out.append(j)
        left.remove(j)
    return out


def _read(p: list[float], order, floor: float) -> int:
    """How many chunks are read in ``order`` before (and including) the first below ``floor``; all when none is."""
    for n, j in enumerate(order, 1):
        if p[j] < floor:
            return n
    return len(p)


if __name__ == "__main__":
    main()
