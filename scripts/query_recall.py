#!/usr/bin/env python
"""Do the model's search queries find evidence the claim's own words miss? Recall@k in corpus mode, on labelled sets
whose gold evidence is known, with the claim alone (its words, and its question's) and with the query stage's
queries added (what `halucheck run --corpus` searches: the model's two queries and the claim, fused).

Corpus: every distinct evidence passage of the set (`halucheck.evaluation.datasets.corpus`: Factcheck-GPT's 2,386,
HaluEval-QA's knowledge paragraphs), indexed with the real `build_index` (hybrid BM25 + dense) in a scratch folder.
A claim counts as found at k when one of its top-k fused passages is (part of) one of its own gold passages.
The model's queries are kept in WORKDIR/queries-<set>.json, so a stopped run goes on where it stopped.

    python scripts/query_recall.py --workdir /tmp/halucheck-qrecall [-p cpu-1.5b] [-d factcheck-gpt,halueval-qa] [-n 60]

Prints, per set, recall@k both ways with a paired bootstrap interval of the difference, the calls and tokens the
queries cost, and a rule that asks the model only for claims the claim's own search serves poorly: recall and model
calls when queries are written only for claims whose best passage (of the claim's own top k) holds less than t of
the claim's content words. Exits 0 with a note when the datasets are absent.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def norm(text: str) -> str:
    return " ".join(text.split())


def words(text: str) -> set[str]:
    from halucheck.coverage import content_words

    return {w.norm for w in content_words(text)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("-p", "--profile", default="cpu-1.5b")
    ap.add_argument("-d", "--datasets", default="factcheck-gpt,halueval-qa")
    ap.add_argument("-n", type=int, default=60, help="first N dev items of each set")
    ap.add_argument("-k", type=int, default=10)
    args = ap.parse_args()

    import numpy as np

    from halucheck.claims import QUERY_SAMPLING, make_queries
    from halucheck.config import Settings
    from halucheck.errors import HalucheckError
    from halucheck.evaluation.datasets import corpus, load
    from halucheck.evaluation.metrics import bootstrap_indices, percentile_ci
    from halucheck.evidence import fuse
    from halucheck.retrieval import Index, build_index

    settings = Settings.load(profile=args.profile)
    pool = None
    for name in args.datasets.split(","):
        try:
            passages = corpus(name)
            items = load(name, "dev", limit=args.n)
        except HalucheckError as exc:
            print(f"skipped {name}: {exc}")
            continue
        work = args.workdir / name
        (work / "corpus").mkdir(parents=True, exist_ok=True)
        db = work / "index.duckdb"
        if not db.exists():
            with open(work / "corpus" / "passages.jsonl", "w", encoding="utf-8") as f:
                for text in passages:
                    f.write(json.dumps({"text": text}) + "\n")
            build_index(work / "corpus", db, progress=False)
        claims = [it.claim if not it.question else f"{it.question} {it.claim}" for it in items]
        cache = args.workdir / f"queries-{name}.json"
        written = json.loads(cache.read_text()) if cache.exists() else {}
        todo = [c for c in dict.fromkeys(claims) if c not in written]
        spent = {"calls": 0, "prompt_tokens": 0, "cached_tokens": 0, "completion_tokens": 0}
        if todo:
            if pool is None:
                from halucheck.engines.pool import EnginePool

                pool = EnginePool(settings)
            engine = pool.engine_for("query")
            for start in range(0, len(todo), 16):  # a stage batch at a time, kept as it comes
                batch = todo[start:start + 16]
                outs = make_queries(engine, batch, settings.sampling("query", QUERY_SAMPLING))
                for c, o in zip(batch, outs):
                    if not o.error:
                        written[c] = o.value
                    spent["calls"] += o.calls
                    spent["prompt_tokens"] += o.prompt_tokens
                    spent["cached_tokens"] += o.cached_tokens
                    spent["completion_tokens"] += o.completion_tokens
                cache.write_text(json.dumps(written, indent=1))
        ways = {"claim alone": [[c] for c in claims], "with the model's queries": [written.get(c, [c]) for c in claims]}
        found, cover = {}, []
        with Index.open(db) as index:
            for way, queries in ways.items():
                flat = [q for qs in queries for q in qs]
                hits = index.search_many(flat, k=args.k)
                pos, hit = 0, []
                for qs, it in zip(queries, items):
                    top = fuse(hits[pos:pos + len(qs)], args.k)
                    pos += len(qs)
                    gold = [norm(g) for g in it.evidence]
                    hit.append(any(norm(e.text) in g or g in norm(e.text) for e in top for g in gold))
                    if way == "claim alone":  # how much of the claim its best passage holds, word by word
                        want = words(qs[0])
                        cover.append(max((len(want & words(e.text)) / len(want) for e in top), default=0.0)
                                     if want else 1.0)
                found[way] = np.array(hit, dtype=float)
        a, b = found["claim alone"], found["with the model's queries"]
        boots = bootstrap_indices(len(a))
        lo, hi = percentile_ci([float(b[i].mean() - a[i].mean()) for i in boots])
        cover = np.array(cover)
        policy = {}
        for t in (0.5, 0.67, 0.8, 1.0):  # the model writes queries only for claims their best passage covers less
            ask = cover < t
            policy[str(t)] = {"recall": round(float(np.where(ask, b, a).mean()), 3), "model_calls": int(ask.sum())}
        queries_per = np.mean([len(q) - 1 for q in ways["with the model's queries"]])
        print(json.dumps({"set": name, "items": len(items), "k": args.k, "recall_claim_alone": round(a.mean(), 3),
                          "recall_with_queries": round(b.mean(), 3), "difference": round(b.mean() - a.mean(), 3),
                          "difference_ci": [round(lo, 3), round(hi, 3)],
                          "only_with_queries": int(((b == 1) & (a == 0)).sum()),
                          "only_claim_alone": int(((a == 1) & (b == 0)).sum()),
                          "model_queries_per_claim": round(float(queries_per), 2),
                          "queries_only_below_coverage": policy, "spent_now": spent}))
    if pool is not None:
        pool.close()


if __name__ == "__main__":
    main()
