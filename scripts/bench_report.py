"""How long the reports take: results.jsonl from a run database of many claims, or the reports of one
very long answer.

    python scripts/bench_report.py --items 2000 --claims-per-item 5
    python scripts/bench_report.py --answer-mb 0.5,1,2,5
    python scripts/bench_report.py --items 50000 --claims-per-item 1 --html

The first fills a synthetic run database (every claim with 3 queries, 10 evidence passages and a 7-turn
debate) and times ``build_results`` on it. Prints claims, rows and seconds.

The second runs `halucheck run -p fake` on one synthetic answer of each size (sentences of names, numbers
and chat, so its coverage has many gaps), then times rebuilding its reports as `halucheck report` does:
``build_results`` (coverage) and ``write_html`` (the highlighting). Prints, per size, the claims and gaps
and the seconds of the run and of each report step.

With ``--html`` the first also writes the HTML report of that database twice, as one page (what every run
wrote before reports were paged) and in pages of ``reports.PAGE_ANSWERS`` answers, and prints their sizes in
MB and the seconds each took.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

from halucheck import reports
from halucheck.reports import build_results
from halucheck.store.runstore import RunStore

WORDS = ("The company Varenholt employs about 340 people in Bremen and makes calibration kits since 1998 ; its "
         "revenue rose 12 percent to 48 million euros , Interestingly the AquaProbe weighs 410 grams and runs "
         "for 30 hours on one charge in Oulu").split()
CHAT = ("I think", "Feel free to ask", "Sure,", "Honestly,")


def fill(store: RunStore, items: int, per_item: int) -> int:
    text = "Passage text about the instrument maker and its founding year, long enough to look real. " * 3
    its, cls, qs, ev, turns, vs = [], [], [], [], [], []
    for i in range(items):
        its.append((i, f"a{i}", i + 1, "Q?", "An answer. " * per_item, None, None, True))
        for c in range(per_item):
            cid = f"{i}:{c}"
            cls.append((cid, i, c, f"Claim {c} of answer {i}.", None, 11 * c, 11 * c + 10, True))
            qs += [(cid, q, f"query {q} for {cid}") for q in range(3)]
            ev += [(cid, r, f"doc{r}.md", 100 * r, 100 * r + 90, 1.0 / (r + 1), text) for r in range(10)]
            turns += [(cid, t, "S1", "trust", "An opinion of a few words.", t % 2 == 0, 2, None, 900, 40, 600, 1.5)
                      for t in range(7)]
            vs.append((cid, False, 3, 0.71, 2, False, None))
    store._tx([
        ("INSERT INTO items VALUES (?, ?, ?, ?, ?, ?, ?, ?)", its),
        ("INSERT INTO claims VALUES (?, ?, ?, ?, ?, ?, ?, ?)", cls),
        ("INSERT INTO queries VALUES (?, ?, ?)", qs),
        ("INSERT INTO evidence VALUES (?, ?, ?, ?, ?, ?, ?)", ev),
        ("INSERT INTO turns VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", turns),
        ("INSERT INTO verdicts VALUES (?, ?, ?, ?, ?, ?, ?)", vs),
    ])
    return len(cls)


def long_answer(chars: int, seed: int = 0) -> str:
    """A synthetic answer of ``chars`` characters: short sentences of names, numbers and chat."""
    r = random.Random(seed)
    out, n = [], 0
    while n < chars:
        words = [r.choice(WORDS) for _ in range(r.randint(4, 16))]
        if r.random() < 0.1:
            words.insert(0, r.choice(CHAT))
        sentence = " ".join(words).replace(" ,", ",").replace(" ;", ";") + r.choice((". ", ". ", "! ", "? ", ".\n"))
        out.append(sentence[0].upper() + sentence[1:])
        n += len(sentence)
    return "".join(out)[:chars]


def bench_answer(mb: float) -> None:
    from halucheck.config import Settings
    from halucheck.pipeline import Pipeline, RunOptions

    answer = long_answer(int(mb * 1_000_000))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "answers.jsonl"
        path.write_text(json.dumps({"id": "long", "answer": answer}) + "\n", encoding="utf-8")
        out = Path(tmp) / "run"
        t0 = time.perf_counter()
        pipe = Pipeline(RunOptions(input=path, out=out), Settings.load(profile="fake"), log=lambda m: None)
        try:
            pipe.run()
        finally:
            pipe.close()
        t_run = time.perf_counter() - t0
        store = RunStore(out / "run.duckdb")
        try:
            t0 = time.perf_counter()
            results = reports.build_results(store)
            t_build = time.perf_counter() - t0
            t0 = time.perf_counter()
            reports.write_results(out, results)
            reports.write_html(out, results, store)
            t_write = time.perf_counter() - t0
        finally:
            store.close()
    claims, gaps = len(results[0]["claims"]), len(results[0]["coverage"]["gaps"])
    print(f"answer {mb:g} MB: {claims} claims, {gaps} gaps; run (fake engine, reports included) {t_run:.1f} s; "
          f"report: build_results {t_build:.2f} s, write_results + write_html {t_write:.2f} s, "
          f"total {t_build + t_write:.2f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--claims-per-item", type=int, default=5)
    ap.add_argument("--html", action="store_true", help="Also write the HTML report, as one page and paged")
    ap.add_argument("--answer-mb", default=None, help="Comma-separated sizes of one long answer, in MB (e.g. 0.5,1,2,5)")
    args = ap.parse_args()
    if args.answer_mb:
        for mb in args.answer_mb.split(","):
            bench_answer(float(mb))
        return
    with tempfile.TemporaryDirectory() as tmp:
        store = RunStore(Path(tmp) / "run.duckdb")
        t0 = time.perf_counter()
        claims = fill(store, args.items, args.claims_per_item)
        t_fill = time.perf_counter() - t0
        t0 = time.perf_counter()
        results = build_results(store)
        t_build = time.perf_counter() - t0
        sizes = bench_html(Path(tmp), results, store) if args.html else None
        store.close()
    assert sum(len(r["claims"]) for r in results) == claims
    print(f"items {args.items}, claims {claims}, evidence rows {claims * 10}, turns {claims * 7}")
    print(f"fill {t_fill:.1f} s; build_results {t_build:.2f} s ({1e3 * t_build / claims:.3f} ms per claim)")
    if sizes:
        print(sizes)


def bench_html(tmp: Path, results: list, store: RunStore) -> str:
    """The HTML report of ``results`` as one page and paged: sizes in MB and seconds."""
    mb = 2 ** 20
    one, paged = tmp / "one", tmp / "paged"
    one.mkdir()
    paged.mkdir()
    t0 = time.perf_counter()
    reports.write_html(one, results, store, page_answers=max(1, len(results)))
    t_one = time.perf_counter() - t0
    t0 = time.perf_counter()
    reports.write_html(paged, results, store)
    t_paged = time.perf_counter() - t0
    pages = sorted(paged.glob("report*.html"), key=lambda p: p.stat().st_size)
    total = sum(p.stat().st_size for p in pages)
    return (f"HTML, one page: report.html {(one / 'report.html').stat().st_size / mb:.1f} MB [{t_one:.1f} s]; "
            f"in pages of {reports.PAGE_ANSWERS} answers: report.html {(paged / 'report.html').stat().st_size / mb:.1f} MB, "
            f"{len(pages)} pages, largest {pages[-1].stat().st_size / mb:.1f} MB, all {total / mb:.1f} MB "
            f"[{t_paged:.1f} s]")


if __name__ == "__main__":
    main()
