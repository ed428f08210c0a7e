#!/usr/bin/env python
"""Retrieval benchmark: build an index of >= 100k passages and time BM25, dense and hybrid search.

Passages are sentences cut from local text: JSON/JSONL/CSV/Markdown/text files under --source folders
(default: ../shared/datasets when present) topped up with docstrings of the Python standard library. They
are written as .jsonl files to a scratch folder (outside the repository) and indexed with the real
`build_index`. Then it prints build time, p50/p95 single-query latency per mode (query embedding and
the DuckDB text lookup included), batched throughput, memory, and BM25 speed against rank-bm25 in the
same run.

    python scripts/bench_retrieval.py --passages 100000 --workdir /tmp/halucheck-bench
    python scripts/bench_retrieval.py --workdir /tmp/halucheck-bench --reuse   # time an existing index
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import os
import random
import resource
import statistics
import sys
import sysconfig
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from halucheck.text import sentence_spans  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _strings(obj, out: list[str]) -> None:
    if isinstance(obj, str):
        if len(obj) >= 40:
            out.append(obj)
    elif isinstance(obj, dict):
        for v in obj.values():
            _strings(v, out)
    elif isinstance(obj, list):
        for v in obj:
            _strings(v, out)


def texts_from(root: Path) -> list[str]:
    out: list[str] = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or "site-packages" in path.parts or "test" in path.parts:
            continue
        suffix = path.suffix.lower()
        try:
            if suffix in (".json", ".jsonl"):
                raw = path.read_text(encoding="utf-8", errors="replace")
                try:
                    _strings(json.loads(raw), out)
                except json.JSONDecodeError:
                    for line in raw.splitlines():
                        try:
                            _strings(json.loads(line), out)
                        except json.JSONDecodeError:
                            pass
            elif suffix == ".csv":
                with open(path, newline="", encoding="utf-8", errors="replace") as f:
                    for row in csv.reader(f):
                        out.extend(c for c in row if len(c) >= 40)
            elif suffix in (".md", ".txt", ".rst"):
                out.append(path.read_text(encoding="utf-8", errors="replace"))
            elif suffix == ".py":
                tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
                for node in ast.walk(tree):
                    if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                        doc = ast.get_docstring(node)
                        if doc:
                            out.append(doc)
        except (OSError, SyntaxError, ValueError, RecursionError):
            continue
    return out


def make_passages(sources: list[Path], n: int, seed: int = 0) -> list[str]:
    """Up to ``n`` distinct sentences of 40-400 characters from the sources, then the stdlib's docstrings."""
    seen: set[str] = set()
    passages: list[str] = []
    roots = [s for s in sources if s.is_dir()] + [Path(sysconfig.get_paths()["stdlib"])]
    for root in roots:
        for text in texts_from(root):
            if any(ord(c) > 0x2FFF for c in text[:200]):  # keep to Latin-script text (skip CJK sets)
                continue
            for s, e in sentence_spans(text, line_breaks=False, max_chars=400):
                p = " ".join(text[s:e].split())
                if 40 <= len(p) <= 400 and p not in seen:
                    seen.add(p)
                    passages.append(p)
        print(f"  {root}: {len(passages)} passages so far", flush=True)
        if len(passages) >= n:
            break
    random.Random(seed).shuffle(passages)
    return passages[:n]


def percentiles(xs: list[float]) -> tuple[float, float]:
    xs = sorted(xs)
    return statistics.median(xs), xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passages", type=int, default=100_000)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/halucheck-bench"))
    ap.add_argument("--source", type=Path, action="append", help="folder of local text (repeatable)")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rank-bm25-queries", type=int, default=30)
    ap.add_argument("--batch-size", type=int, default=64, help="embedding batch size for the build")
    ap.add_argument("--embed-dtype", default=None, help="float32 (default) or bfloat16")
    ap.add_argument("--reuse", action="store_true", help="time the index already in --workdir")
    ap.add_argument("--torch-threads", type=int, default=None, help="torch threads for query embedding")
    args = ap.parse_args()
    if args.embed_dtype:
        os.environ["HALUCHECK_EMBED_DTYPE"] = args.embed_dtype

    from halucheck.retrieval import Index, build_index, tokenize

    work = args.workdir
    corpus_dir, db = work / "corpus", work / "index.duckdb"
    print(f"cpus: {os.cpu_count()}, load average: {os.getloadavg()[0]:.2f}")

    if not args.reuse:
        sources = args.source or [REPO.parent / "shared" / "datasets"]
        t = time.perf_counter()
        passages = make_passages(sources, args.passages)
        if len(passages) < args.passages:
            sys.exit(f"only {len(passages)} passages found; add --source folders with more text")
        for p in list(corpus_dir.glob("*.jsonl")) if corpus_dir.exists() else []:
            p.unlink()
        for extra in (db, Path(str(db) + ".wal")):
            if extra.exists():
                extra.unlink()
        corpus_dir.mkdir(parents=True, exist_ok=True)
        per_file = 10_000
        for i in range(0, len(passages), per_file):
            with open(corpus_dir / f"part{i // per_file:03d}.jsonl", "w") as f:
                for p in passages[i : i + per_file]:
                    f.write(json.dumps({"text": p}) + "\n")
        print(f"generated {len(passages)} passages in {time.perf_counter() - t:.1f} s "
              f"(mean {statistics.mean(map(len, passages)):.0f} chars)")
        report = build_index(corpus_dir, db, batch_size=args.batch_size, progress=True)
        print(f"BUILD: {report.summary()}")
        print("BUILD phases (s): " + ", ".join(f"{k} {v:.1f}" for k, v in report.timings.items()))
        print(f"memory after build: rss {rss_mb():.0f} MB, peak {peak_mb():.0f} MB")

    if args.torch_threads:
        import torch

        torch.set_num_threads(args.torch_threads)
    t = time.perf_counter()
    index = Index.open(db)
    chunks = index._con.execute("SELECT text FROM chunks ORDER BY chunk_id").fetchall()
    texts = [r[0] for r in chunks]
    print(f"index: {index.stats()}")
    t = time.perf_counter()
    index.load(("bm25",))
    t_bm25 = time.perf_counter() - t
    t = time.perf_counter()
    index.load(("dense",))
    t_dense = time.perf_counter() - t
    print(f"load: bm25 {t_bm25:.2f} s, embedding matrix + model {t_dense:.2f} s; rss {rss_mb():.0f} MB")
    matrix_mb = index._dense.nbytes / 2**20
    bm25_mb = sum(v.nbytes for v in index._bm25._r.scores.values() if hasattr(v, "nbytes")) / 2**20
    db_mb = db.stat().st_size / 2**20
    bm25_disk = sum(f.stat().st_size for f in Path(str(db) + ".bm25").iterdir()) / 2**20
    print(f"sizes: embedding matrix {matrix_mb:.0f} MB (float32 + float16 scan copy), "
          f"bm25 arrays {bm25_mb:.0f} MB in memory; "
          f"DuckDB file {db_mb:.0f} MB, bm25 folder {bm25_disk:.0f} MB")

    # queries: the opening words of random passages, so each has a known source passage
    rnd = random.Random(1)
    picks = rnd.sample(range(len(texts)), args.queries)
    queries = [" ".join(texts[i].split()[:10]) for i in picks]

    results = {}
    for mode in ("bm25", "dense", "hybrid"):
        for q in queries[:5]:
            index.search_many([q], 10, mode)  # warm-up
        lat, cpu = [], []
        for q in queries:
            t, c = time.perf_counter(), time.process_time()
            index.search_many([q], 10, mode)
            lat.append((time.perf_counter() - t) * 1000)
            cpu.append((time.process_time() - c) * 1000)
        t = time.perf_counter()
        batched = index.search_many(queries, 10, mode)
        per_q_batched = (time.perf_counter() - t) * 1000 / len(queries)
        hit = sum(any(h.text == texts[i] for h in hits) for i, hits in zip(picks, batched)) / len(queries)
        p50, p95 = percentiles(lat)
        results[mode] = (p50, p95)
        print(f"SEARCH {mode:<6} p50 {p50:6.1f} ms  p95 {p95:6.1f} ms  (CPU time p50 {statistics.median(cpu):5.1f} ms)  "
              f"batched {per_q_batched:6.2f} ms/query  source passage in top-10: {hit:.3f}")

    # core BM25 scoring alone (no DuckDB text lookup), and rank-bm25 on the same tokens, same queries
    core = []
    for q in queries:
        t = time.perf_counter()
        index._bm25.search_many([q], 10)
        core.append((time.perf_counter() - t) * 1000)
    core_p50 = statistics.median(core)
    from rank_bm25 import BM25Okapi
    import numpy as np

    t = time.perf_counter()
    rb = BM25Okapi([tokenize(x) for x in texts])
    rb_build = time.perf_counter() - t
    rb_lat = []
    for q in queries[: args.rank_bm25_queries]:
        t = time.perf_counter()
        scores = rb.get_scores(tokenize(q))
        np.argpartition(-scores, 10)[:10]
        rb_lat.append((time.perf_counter() - t) * 1000)
    rb_p50 = statistics.median(rb_lat)
    print(f"RANK-BM25 build {rb_build:.1f} s, p50 {rb_p50:.1f} ms/query over {len(rb_lat)} queries")
    print(f"BM25 speed-up vs rank-bm25: {rb_p50 / core_p50:.1f}x (scoring only, p50 {core_p50:.2f} ms), "
          f"{rb_p50 / results['bm25'][0]:.1f}x (end to end incl. text lookup, p50 {results['bm25'][0]:.2f} ms)")
    print(f"memory: rss {rss_mb():.0f} MB, peak {peak_mb():.0f} MB (includes rank-bm25 and the torch model)")
    print(f"load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cpus (latency is wall time)")
    index.close()


if __name__ == "__main__":
    main()
