#!/usr/bin/env python
"""Scale benchmark: answers per second of `halucheck run`, single process vs `--ray`, as GPU boxes are added.

OpenAI-compatible stub servers on 127.0.0.1 stand in for GPU boxes running vLLM: each answers after a fixed
latency, at most --capacity requests at once (a box's batch), with replies shaped like a model's (the
answer's sentences as claims, two queries a claim, a verdict), so throughput per stub is capacity/latency
requests a second. Retrieval is real: a corpus of --passages passages (bench_retrieval's text), indexed once
with the real `build_index` (hybrid BM25 + dense). For 1, 2, 4, 8 stubs it runs the same input through
`halucheck run` (a new run folder each time: no reply is cached) and prints one JSON line per run and a table.

    python scripts/bench_scale.py --workdir /tmp/halucheck-scale                 # 100k passages, both modes
    python scripts/bench_scale.py --workdir /tmp/halucheck-scale --stubs 1,2 --answers-per-stub 10 --mode single
    python scripts/bench_scale.py stub --port 8101 --latency 1.0 --capacity 4    # one stub server alone

Each run's line also gives the CPU (user + sys, all threads) of the `halucheck run` process: ``core_s`` in all
(start-up included: imports, the index and the embedding model loaded) and, single-process, ``work_core_s``, from
its first stage to its exit (the stages and the reports: what grows with the answers), over the answers, with and
without the query embeddings' forward passes (which a GPU box runs on its GPU):

    python scripts/bench_scale.py --workdir /tmp/halucheck-scale --stubs 1 --answers-per-stub 40 --mode single

``--hashed-passages`` builds the index in seconds (:class:`HashedPassages`) where its cost, not its hits, is
measured; ``--py-spy FILE`` records each run's stacks (py-spy installed) to see where that CPU goes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import resource
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))


# -- the stub server --------------------------------------------------------------------------------
def stub_reply(body: dict) -> dict:
    """A model's reply, by the request's reply schema: what a judge, an extractor or a query writer sends."""
    from halucheck.engines.fake import example_for, fit
    from halucheck.prompts import read_field

    schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema")
    user = body["messages"][-1]["content"]
    props = (schema or {}).get("properties", {})
    if "claims" in props:
        text = read_field(user, "text", last=True) or ""
        out = {"claims": [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s][:8] or ["None"]}
    elif "queries" in props:
        claim = read_field(user, "claim", last=True) or "claim"
        out = {"queries": [claim, "about " + claim]}
    elif "response" in props:
        out = {"response": read_field(user, "text", last=True) or "None"}
    else:  # a verdict: false for about a third of the claims, the same every run
        false = int(hashlib.sha256(user.encode()).hexdigest(), 16) % 3 == 0
        out = {"reasoning": "checked against the evidence", "opinion": "checked", "factuality": not false,
               "error_severity": 3 if false else 0}
    return fit(out, schema) if schema else example_for(None)


def stub_alternatives(body: dict) -> list[tuple[str, float]]:
    """A one-token reply's alternatives, likeliest first, as a server lists them: "Yes"/"No" for a judge's pass
    (the same every run, "No" first for about a third of the prompts), the digits for a severity question."""
    last = body["messages"][-1]["content"]
    h = int(hashlib.sha256(json.dumps(body["messages"]).encode()).hexdigest(), 16)
    if "one digit" in last:
        return [(str(1 + h % 5), -0.2)] + [(str(d), -3.0 - d) for d in range(1, 6) if d != 1 + h % 5]
    yes, no = ("No", "Yes") if h % 3 == 0 else ("Yes", "No")
    return [(yes, -0.1), (no, -2.4), (" " + yes, -5.0), ("The", -6.0)]


def serve_stub(port: int, latency: float, capacity: int) -> None:
    slots = threading.BoundedSemaphore(capacity)
    model = "stub"

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def _send(self, obj: dict, code: int = 200) -> None:
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._send({"object": "list", "data": [{"id": model, "object": "model"}]})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            with slots:  # the box's batch: a request beyond it waits for a slot
                time.sleep(latency)
            prompt = sum(len(m["content"]) for m in body["messages"]) // 4
            if body.get("top_logprobs"):  # `direct`'s one-token pass: its likeliest first tokens, "Yes" and "No"
                # among them (about a third of the passes lean "No"); a severity question's digits
                listed = stub_alternatives(body)
                content = listed[0][0]
                choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "length",
                          "logprobs": {"content": [{"token": content, "logprob": listed[0][1], "top_logprobs": [
                              {"token": t, "logprob": lp} for t, lp in listed]}]}}
            else:
                content = json.dumps(stub_reply(body))
                choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                if body.get("logprobs"):
                    choice["logprobs"] = {"content": [{"token": t, "logprob": -0.01} for t in content.split('"')[:8]]}
            self._send({"id": "stub", "object": "chat.completion", "model": model, "choices": [choice],
                        "usage": {"prompt_tokens": prompt, "completion_tokens": len(content) // 4}})

    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


# -- corpus, input, runs ------------------------------------------------------------------------------
class HashedPassages:
    """Passage vectors for ``--hashed-passages``: hashed bag-of-words (the tests' FakeEmbedder) of the embedding
    model's width, stored under the default model's name, so a run embeds its queries with the real model and
    scans a matrix of the real shape. A brute-force scan costs the same whatever the vectors hold; the build takes
    seconds instead of the model's quarter of an hour on 2 cores (the dense hits are then not meaningful)."""

    def __init__(self) -> None:
        from halucheck.retrieval.dense import FakeEmbedder, default_model

        self.name, self._inner = default_model(), FakeEmbedder(dim=384)
        self.dim = self._inner.dim

    def encode(self, texts, batch_size=None, show_progress=False):
        return self._inner.encode(texts)


def make_corpus(workdir: Path, passages: int, hashed: bool = False) -> tuple[Path, Path, list[str]]:
    """The corpus folder (JSONL, one passage a line) and its index, built once; the passages."""
    from bench_retrieval import make_passages

    corpus, index = workdir / "corpus", workdir / "index.duckdb"
    files = sorted(corpus.glob("*.jsonl")) if corpus.is_dir() else []
    if not files:
        corpus.mkdir(parents=True, exist_ok=True)
        sources = [p for p in [REPO.parent / "shared" / "datasets"] if p.is_dir()]
        texts = make_passages(sources, passages)
        for k in range(0, len(texts), 10_000):
            with open(corpus / f"part{k // 10_000:03d}.jsonl", "w", encoding="utf-8") as fh:
                fh.writelines(json.dumps({"text": t}) + "\n" for t in texts[k:k + 10_000])
        files = sorted(corpus.glob("*.jsonl"))
    texts = [json.loads(line)["text"] for f in files for line in f.read_text(encoding="utf-8").splitlines()]
    if not index.is_file():
        from halucheck.retrieval import build_index

        t0 = time.perf_counter()
        report = build_index(corpus, index, progress=False, embedder=HashedPassages() if hashed else None)
        print(json.dumps({"index_built_s": round(time.perf_counter() - t0, 1), "passages": report.chunks}), flush=True)
    return corpus, index, texts


def make_input(path: Path, texts: list[str], n: int, seed: int = 0) -> None:
    """``n`` answers of three sentences from the corpus (every third with a changed number or word)."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            sentences = [rng.choice(texts).split(". ")[0].strip().rstrip(".")[:200] + "." for _ in range(3)]
            if i % 3 == 0:
                sentences[0] = re.sub(r"\d+", lambda m: str(int(m.group()) + 7), sentences[0]) if re.search(
                    r"\d", sentences[0]) else "It is not " + sentences[0][0].lower() + sentences[0][1:]
            fh.write(json.dumps({"id": f"a{i}", "question": f"Question {i}?", "answer": " ".join(sentences)}) + "\n")


def start_stubs(n: int, base_port: int, latency: float, capacity: int) -> list[subprocess.Popen]:
    procs = [subprocess.Popen([sys.executable, __file__, "stub", "--port", str(base_port + k), "--latency",
                               str(latency), "--capacity", str(capacity)]) for k in range(n)]
    import httpx

    for k in range(n):
        for _ in range(100):
            try:
                httpx.get(f"http://127.0.0.1:{base_port + k}/v1/models", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
    return procs


# `halucheck run`, writing to stderr at exit the CPU (user + sys, all threads) of its work after start-up: from the
# first stage on, once the index (BM25, the embedding matrix and model) and the corpus's document names are loaded
# (loaded first here rather than at first use; the same results), and of that the query embeddings' forward passes
# (on a GPU box the embedding model runs on the GPU)
RUN_TIMED = """
import atexit, sys, time
from halucheck import pipeline
from halucheck.retrieval import dense
spent, encode, process = {"work": None, "embedding": 0.0}, dense.Embedder.encode, pipeline.Pipeline.process
def timed_encode(self, *args, **kwargs):
    t0 = time.process_time()
    try:
        return encode(self, *args, **kwargs)
    finally:
        spent["embedding"] += time.process_time() - t0
def timed_process(self, items):
    if self.evidence.corpus() is not None:
        self.evidence.corpus().load()
        self.evidence.source_names()
    spent["embedding"], spent["work"] = 0.0, time.process_time()
    return process(self, items)
def report():
    if spent["work"] is not None:
        print(f"bench: work core-s {time.process_time() - spent['work']:.3f} embedding core-s {spent['embedding']:.3f}",
              file=sys.stderr)
dense.Embedder.encode, pipeline.Pipeline.process = timed_encode, timed_process
atexit.register(report)
from halucheck.cli import app
app()
"""


def run_once(workdir: Path, mode: str, n_stubs: int, answers: int, args, corpus: Path, index: Path) -> dict:
    tag = f"{mode}-{n_stubs}"
    config = workdir / f"models-{tag}.yaml"
    urls = [f"http://127.0.0.1:{args.base_port + k}/v1" for k in range(n_stubs)]
    config.write_text(json.dumps({"default": "stub", "profiles": {"stub": {
        "engine": "vllm", "model": "stub", "base_url": urls, "max_concurrency": n_stubs * args.capacity * 2,
        "timeout_s": 600, **({"verifier": args.verifier} if args.verifier else {})}}}))
    inp, out = workdir / f"answers-{answers}.jsonl", workdir / "runs" / tag
    if not inp.is_file():
        make_input(inp, args.texts, answers)
    import shutil

    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-c", RUN_TIMED, "run", "-i", str(inp), "-o", str(out),
           "--corpus", str(corpus), "--index", str(index), "--config", str(config), "--quiet"]
    if mode == "ray":
        cmd += ["--ray", "--shard-answers", str(args.shard_answers)]
    if args.py_spy:  # sampled stacks of every thread of the run (py-spy's CPU then counts in core_s too)
        cmd = ["py-spy", "record", "--threads", "--rate", "200", "--format", "raw", "-o",
               str(args.py_spy.with_suffix(f".{tag}-{answers}.txt")), "--", *cmd]
    stubs = start_stubs(n_stubs, args.base_port, args.latency, args.capacity)
    try:
        t0 = time.perf_counter()
        # the run's own CPU (user + sys of the `halucheck run` process; the stubs are not reaped yet, so their
        # CPU is not in the children's figure)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        # this checkout's halucheck, whatever the installed package points to
        env = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = time.perf_counter() - t0
        core_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    finally:
        for p in stubs:
            p.kill()
            p.wait()
    if done.returncode not in (0, 3):
        raise SystemExit(f"{tag}: halucheck run failed ({done.returncode}): {done.stderr[-1500:]}")
    import duckdb

    con = duckdb.connect(str(out / "run.duckdb"), read_only=True)
    summary = json.loads(con.execute("SELECT value FROM meta WHERE key = 'last_summary'").fetchone()[0])
    calls = con.execute("SELECT sum(calls) FROM stage_stats WHERE pass IS NULL").fetchone()[0]
    claims = con.execute("SELECT count(*) FROM claims").fetchone()[0]
    con.close()
    capacity_rps = n_stubs * args.capacity / args.latency
    row = {"mode": mode, "stubs": n_stubs, "answers": answers, "claims": claims, "undecided": summary["undecided"],
           "llm_calls": int(calls or 0), "run_wall_s": summary["wall_s"], "process_wall_s": round(wall, 1),
           "answers_per_s": round(answers / summary["wall_s"], 3),
           "calls_per_s": round((calls or 0) / summary["wall_s"], 2), "stub_capacity_calls_per_s": capacity_rps,
           "stub_utilisation": round((calls or 0) / summary["wall_s"] / capacity_rps, 2),
           "core_s": round(core_s, 2), "core_s_per_answer": round(core_s / answers, 4)}
    timed = re.findall(r"bench: work core-s ([\d.]+) embedding core-s ([\d.]+)", done.stderr)
    if timed and mode == "single":  # Ray's workers run the stages in processes of their own
        work, embedding = map(float, timed[-1])
        row |= {"work_core_s": work, "work_core_s_per_answer": round(work / answers, 4),
                "embedding_core_s_per_answer": round(embedding / answers, 4),
                "work_core_s_per_answer_without_embedding": round((work - embedding) / answers, 4)}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "stub":
        ap = argparse.ArgumentParser()
        ap.add_argument("stub")
        ap.add_argument("--port", type=int, required=True)
        ap.add_argument("--latency", type=float, default=1.0)
        ap.add_argument("--capacity", type=int, default=4)
        a = ap.parse_args()
        serve_stub(a.port, a.latency, a.capacity)
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/halucheck-scale"))
    ap.add_argument("--passages", type=int, default=100_000)
    ap.add_argument("--stubs", default="1,2,4,8")
    ap.add_argument("--mode", default="single,ray", help="single, ray or both (comma-separated)")
    ap.add_argument("--answers-per-stub", type=int, default=24, help="answers per run = this x stubs")
    ap.add_argument("--latency", type=float, default=1.0, help="seconds a stub takes per request")
    ap.add_argument("--capacity", type=int, default=4, help="requests a stub serves at once")
    ap.add_argument("--shard-answers", type=int, default=8)
    ap.add_argument("--base-port", type=int, default=8101)
    ap.add_argument("--verifier", default=None, help="the stub profile's verifier (default: a profile's own, "
                    "selfcheck); `direct` is what the shipped vllm-1.5b profile runs")
    ap.add_argument("--hashed-passages", action="store_true",
                    help="build the index with hashed passage vectors (HashedPassages: seconds, not a quarter hour)")
    ap.add_argument("--py-spy", type=Path, default=None,
                    help="record every run's stacks with py-spy into files named after this path (raw format)")
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    corpus, index, args.texts = make_corpus(args.workdir, args.passages, args.hashed_passages)
    rows = []
    for mode in args.mode.split(","):
        for n in [int(x) for x in args.stubs.split(",")]:
            rows.append(run_once(args.workdir, mode, n, args.answers_per_stub * n, args, corpus, index))
    print(f"\n{'mode':<7} {'stubs':>5} {'answers':>7} {'calls':>6} {'answers/s':>9} {'calls/s':>8} "
          f"{'stub cap.':>9} {'used':>5} {'vs 1 stub':>9}")
    for r in rows:
        base = next(b for b in rows if b["mode"] == r["mode"] and b["stubs"] == min(
            x["stubs"] for x in rows if x["mode"] == r["mode"]))
        scale = r["answers_per_s"] / base["answers_per_s"] / (r["stubs"] / base["stubs"])
        print(f"{r['mode']:<7} {r['stubs']:>5} {r['answers']:>7} {r['llm_calls']:>6} {r['answers_per_s']:>9.2f} "
              f"{r['calls_per_s']:>8.1f} {r['stub_capacity_calls_per_s']:>9.1f} {r['stub_utilisation']:>5.2f} "
              f"{scale:>8.2f}x")


if __name__ == "__main__":
    main()
