#!/usr/bin/env python
"""Do Lookback-style attention ratios earn a place in the head? Measured on dev with leave-one-dataset-out.

Lookback Lens (arXiv 2407.07071) reads, per layer and head, how much a token attends to the context against the
tokens written after it. Here, in the `direct` prompt pass: for each statement token, the mean attention on the
document's tokens against the mean attention on the statement's own earlier tokens, ratio = doc / (doc + own),
averaged over the statement's tokens (``span``), and the same ratio at the prompt's last token (``last``). One
feature per layer and head each. They are compared, as the head's recipe is chosen, by leave-one-dataset-out
balanced accuracy of a logistic regression (StandardScaler, class_weight balanced, C chosen on the same folds)
over the training sample of `scripts/train_default_head.py` (dev splits, clean panel left out): hidden states
alone (the head's layer), the ratios alone, both.

Attention weights need eager attention and a full pass (no KV reuse), so it runs on the 0.5B by default
(about three times faster than the 1.5B): a recipe question, answered where it is cheap. Features are kept in
WORKDIR/lookback-<model>.npz per item id, so a stopped run goes on.

    python scripts/experiments/lookback.py --workdir /tmp/lookback [-p cpu-0.5b] [--scale 0.5]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))


def spans(tokenizer, text: str, has_document: bool) -> tuple[list[int], list[int], list[int]]:
    """The rendered prompt's tokens and the positions of the document's and of the statement's (or answer's)
    tokens, found by the fields of `prompts/direct.yaml` and the tokens' character offsets."""
    enc = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
    d0 = text.index("[document]: ") + len("[document]: ")
    field = "[answer]: " if "\n[answer]: " in text else "[statement]: "
    s0 = text.rindex(field) + len(field)
    d1 = text.index("\n", d0)  # the document is one line (line breaks in it are made spaces)
    s1 = text.index("\nIs every part", s0)
    offsets = enc["offset_mapping"]
    doc = [i for i, (a, b) in enumerate(offsets) if has_document and a < d1 and b > d0]  # tokens overlapping it
    st = [i for i, (a, b) in enumerate(offsets) if a < s1 and b > s0]
    return enc["input_ids"], doc, st


def ratios(attentions, doc: list[int], st: list[int]):
    """(layers, heads) ratios averaged over the statement's tokens, and at the last token."""
    import torch

    span, last = [], []
    d = torch.tensor(doc)
    for a in attentions:  # (1, heads, q, k)
        a = a[0].float()
        per_tok = []
        for j, t in enumerate(st):
            own = st[:j]
            doc_mean = a[:, t, d].mean(-1) if len(doc) else torch.zeros(a.shape[0])
            own_mean = a[:, t, own].mean(-1) if own else torch.zeros(a.shape[0])
            per_tok.append(doc_mean / (doc_mean + own_mean + 1e-9))
        span.append(torch.stack(per_tok).mean(0) if per_tok else torch.zeros(a.shape[0]))
        q = a.shape[1] - 1
        doc_last = a[:, q, d].mean(-1) if len(doc) else torch.zeros(a.shape[0])
        st_last = a[:, q, st].mean(-1)
        last.append(doc_last / (doc_last + st_last + 1e-9))
    return torch.stack(span).numpy(), torch.stack(last).numpy()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("-p", "--profile", default="cpu-0.5b")
    ap.add_argument("--scale", type=float, default=0.5, help="of train_default_head.py's sample per set")
    args = ap.parse_args()

    import numpy as np
    import torch

    from halucheck.config import Settings
    from halucheck.engines.pool import EnginePool
    from halucheck.evaluation.verifiers import case_of
    from halucheck.verifiers.probe.features import unwrapped
    from halucheck.verifiers.probe.training import balanced_accuracy
    from halucheck.verifiers.probe.verifier import prompts_of
    from train_default_head import TRAIN_SETS, _items

    items = _items("dev", TRAIN_SETS, args.scale)
    args.workdir.mkdir(parents=True, exist_ok=True)
    store = args.workdir / f"lookback-{args.profile}.npz"
    kept = dict(np.load(store, allow_pickle=False)) if store.exists() else {}
    todo = [it for it in items if f"{it.id}|span" not in kept]
    print(f"{len(items)} dev items of {len(TRAIN_SETS)} sets; {len(items) - len(todo)} stored", flush=True)
    if todo:
        with EnginePool(Settings.load(profile=args.profile)) as engines:
            engine = unwrapped(engines.engine_for("initial"))
            model, tok = engine.hf_model, engine.tokenizer
            model.set_attn_implementation("eager")
            t0 = time.perf_counter()
            for n, it in enumerate(todo):
                case = case_of(it)
                parts, prompts = prompts_of(case, only_closest=True)
                messages = prompts[0]
                text = tok.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
                ids, doc, st = spans(tok, text, bool(parts[0].text))
                with torch.inference_mode():
                    out = model(input_ids=torch.tensor([ids]), output_attentions=True, output_hidden_states=True,
                                logits_to_keep=1)
                span, last = ratios(out.attentions, doc, st)
                logits = out.logits[0, -1].float()
                yes, no = tok.convert_tokens_to_ids("Yes"), tok.convert_tokens_to_ids("No")
                kept[f"{it.id}|span"] = span.astype(np.float32)
                kept[f"{it.id}|last"] = last.astype(np.float32)
                kept[f"{it.id}|hidden"] = torch.stack([h[0, -1] for h in out.hidden_states]).float().numpy()
                kept[f"{it.id}|margin"] = np.array([float(logits[yes] - logits[no])], dtype=np.float32)
                if (n + 1) % 10 == 0 or n + 1 == len(todo):
                    np.savez(store, **kept)
                    left = (time.perf_counter() - t0) / (n + 1) * (len(todo) - n - 1)
                    print(f"  {n + 1}/{len(todo)} passes, about {left / 60:.0f} min left", flush=True)

    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.preprocessing import StandardScaler

    y = np.array([it.label for it in items], dtype=int)  # 1 = hallucinated
    sets = np.array([it.dataset for it in items])
    hidden = np.stack([kept[f"{it.id}|hidden"] for it in items])
    layer = round(0.64 * (hidden.shape[1] - 1))
    blocks = {"hidden (layer %d) + margin" % layer: np.hstack([hidden[:, layer], np.stack([kept[f"{it.id}|margin"] for it in items])]),
              "lookback span": np.stack([kept[f"{it.id}|span"].ravel() for it in items]),
              "lookback last": np.stack([kept[f"{it.id}|last"].ravel() for it in items])}
    blocks["lookback span + last"] = np.hstack([blocks["lookback span"], blocks["lookback last"]])
    first = next(iter(blocks))
    blocks[f"{first} + lookback span + last"] = np.hstack([blocks[first], blocks["lookback span + last"]])
    print(f"| features | width | LODO mean BalAcc over sets | pooled AUROC | best C |")
    print("|---|---|---|---|---|")
    for name, X in blocks.items():
        best = None
        for C in (0.0005, 0.002, 0.01, 0.05):
            z = np.zeros(len(y))
            for d in np.unique(sets):
                test = sets == d
                sc = StandardScaler().fit(X[~test])
                lr = LogisticRegression(C=C, class_weight="balanced", max_iter=3000).fit(sc.transform(X[~test]), y[~test])
                z[test] = lr.decision_function(sc.transform(X[test]))
            per = [balanced_accuracy(y[sets == d], z[sets == d] >= 0) for d in np.unique(sets)]
            score = float(np.nanmean(per))
            if best is None or score > best[0]:
                best = (score, roc_auc_score(y, z), C)
        print(f"| {name} | {X.shape[1]} | {best[0]:.3f} | {best[1]:.3f} | {best[2]} |")


if __name__ == "__main__":
    main()
