#!/usr/bin/env python
"""Recall@k of retrieval on HaluEval QA: index the `knowledge` paragraphs, query with each `question`.

Uses the dev split of ``qa_data_first1000.json`` (record position % 5 != 4, see datasets/SPLITS.md). The
paragraphs are written to a scratch folder as one .jsonl (never into the repository) and indexed with the
real `build_index`; a question counts as a hit at k when a chunk of its own paragraph (or a passage whose
text is part of that paragraph) is in the top k. With --workdir pointing at an existing index folder (e.g.
the benchmark's), the paragraphs are added to its corpus and the other passages act as distractors.
Exits 0 with a note when the dataset is absent.

    python scripts/recall_halueval.py [--data ../shared/datasets/halueval] [--split dev] [-k 10]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "datasets" / "halueval")
    ap.add_argument("--split", choices=["dev", "test", "all"], default="dev")
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--embed-model", default=None, help="local sentence-transformers folder (default model if unset)")
    ap.add_argument("--workdir", type=Path, default=None, help="keep the corpus and index here")
    args = ap.parse_args()

    path = args.data / "qa_data_first1000.json"
    if not path.is_file():
        print(f"skipped: {path} not found (pass --data FOLDER holding qa_data_first1000.json)")
        return

    from halucheck.retrieval import MODES, Index, build_index

    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    keep = {
        "dev": lambda i: i % 5 != 4,
        "test": lambda i: i % 5 == 4,
        "all": lambda i: True,
    }[args.split]
    items = [r for i, r in enumerate(records) if keep(i)]

    # one corpus line per distinct paragraph; a question's target is its paragraph's line
    line_of: dict[str, int] = {}
    for r in items:
        line_of.setdefault(r["knowledge"], len(line_of) + 1)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="halucheck-recall-"))
    corpus = work / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    with open(corpus / "knowledge.jsonl", "w", encoding="utf-8") as f:
        for text in line_of:
            f.write(json.dumps({"text": text}) + "\n")
    db = work / "index.duckdb"
    report = build_index(corpus, db, embed_model=args.embed_model, progress=sys.stderr.isatty())
    print(f"{args.split} split: {len(items)} questions, {len(line_of)} distinct paragraphs; {report.summary()}")

    questions = [r["question"] for r in items]
    targets = [f"{corpus / 'knowledge.jsonl'}#L{line_of[r['knowledge']]}" for r in items]
    paragraphs = [r["knowledge"] for r in items]
    with Index.open(db) as index:
        for mode in MODES:
            t = time.perf_counter()
            results = index.search_many(questions, k=args.k, mode=mode)
            ms = (time.perf_counter() - t) * 1000 / len(questions)
            ranks = []
            for hits, target, para in zip(results, targets, paragraphs):
                ranks.append(
                    next((i for i, h in enumerate(hits, 1) if h.source == target or h.text in para), None)
                )
            recall = sum(r is not None for r in ranks) / len(ranks)
            r1 = sum(r == 1 for r in ranks) / len(ranks)
            mrr = sum(1 / r for r in ranks if r) / len(ranks)
            print(f"{mode:<6} recall@{args.k} {recall:.3f}  recall@1 {r1:.3f}  MRR@{args.k} {mrr:.3f}  "
                  f"(n={len(ranks)}, batched {ms:.1f} ms/query)")


if __name__ == "__main__":
    main()
