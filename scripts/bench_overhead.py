"""The pipeline's own cost per answer: `halucheck run` over many one-line answers with an engine that
answers at once (the fake engine), so all the time measured is bookkeeping: prompts, validation, the
scheduler, the run database and the reports.

    python scripts/bench_overhead.py --answers 20000             # the shipped `fake` profile
    python scripts/bench_overhead.py --answers 20000 --distinct  # every answer its own debate

By default the engine is the `fake` profile of models.yaml (a schema-shaped reply to every call, as
`halucheck run --profile fake` does): every answer costs an extraction call, a query call and its own
rows everywhere, and identical claims share one debate. With ``--distinct`` the fake engine echoes each
answer's sentence as its claim, so every answer also gets a full debate of its own (S0 + 2 states, 7
agent turns: prompts rendered, replies validated, turns stored). Prints the wall time of each stage and
the milliseconds per answer of the whole run (wall clock, and CPU time of the process: on a busy machine
the wall time includes waiting for a core).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from halucheck import engines
from halucheck.config import Settings
from halucheck.verifiers.debate import DebateConfig
from halucheck.engines.fake import FakeEngine
from halucheck.pipeline import Pipeline, RunOptions


def responder(request):
    """Echo the answer as its one claim and the claim as its query; every claim is judged true."""
    user = request.messages[-1]["content"]
    if request.tag == "claims:extract":
        return {"claims": [user.rsplit("[text]: ", 1)[1].strip()]}
    if request.tag == "claims:queries":
        claim = user.rsplit("[claim]: ", 1)[1].strip()
        return {"queries": [claim, "about " + claim]}
    return {"opinion": "Supported.", "factuality": True, "error_severity": 0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--answers", type=int, default=20000)
    ap.add_argument("--distinct", action="store_true", help="a distinct claim and debate for every answer")
    ap.add_argument("--keep", type=Path, help="run directory to keep (default: a temporary one)")
    args = ap.parse_args()
    engines.register("bench", lambda model="", **kw: FakeEngine(
        model="bench", responder=responder if args.distinct else None))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        src = tmp / "answers.jsonl"
        with open(src, "w", encoding="utf-8") as fh:
            for i in range(args.answers):
                fh.write(json.dumps({"id": f"a{i}", "answer": f"River number {i} is {i % 900 + 100} km long."}) + "\n")
        opts = RunOptions(input=src, out=args.keep or tmp / "run", subjective_filter="off",
                          debate=DebateConfig(min_rounds=2, max_rounds=4))
        settings = Settings.from_dict({"profiles": {"bench": {"engine": "bench"}}})
        t0, c0 = time.perf_counter(), time.process_time()
        pipe = Pipeline(opts, settings, log=lambda m: None)
        try:
            summary = pipe.run()
        finally:
            pipe.close()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert summary["checked"] == args.answers and summary["claims"] == args.answers, summary
    for name, st in summary["stages"].items():
        print(f"{name:<8} {st['llm_calls']:>7} calls  {st['wall_s']:>7.1f} s")
    # CPU time (all threads of this process) as well as wall time: on a shared machine the wall time
    # also counts the time other processes held the cores
    print(f"{args.answers} answers, {summary['claims']} claims: {wall:.1f} s wall, {cpu:.1f} s CPU; "
          f"{1e3 * wall / args.answers:.2f} ms per answer (wall), {1e3 * cpu / args.answers:.2f} ms (CPU)")


if __name__ == "__main__":
    main()
