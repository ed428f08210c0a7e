#!/usr/bin/env python
"""The README's main job, timed with the embedded engine's prefix reuse off ("before") and on ("after").

    python scripts/time_main_job.py [--profile cpu-1.5b] [--corpus corpora/demo/docs]
        [--input corpora/demo/answers.jsonl] [--only off|on] [--keep DIR] [--queries auto]

``--queries RULE`` is given to the "on" run (``run --queries``: which claims get model-written search queries;
default: the shipped default); the "off" run writes them for every claim (``--queries model``), as runs did before
the option.

Each run is ``halucheck run --corpus C --input I --out DIR -p PROFILE`` in its own process, from a cold start:
its own empty cache folder (``HALUCHECK_HOME``; the converted weights are linked in, so nothing is converted
again), so both pay the corpus index and the reply schemas' Outlines indexes, as a first run on a new box
does. "off" runs with ``prefix_cache_mb: 0`` in a copy of models.yaml, "on" with the profile as shipped.
Printed per run: wall seconds, peak RSS of the run's process (``wait4``), LLM calls, prompt tokens (and
how many came from reused prefixes) and claims; then one JSON line with both and ``speedup`` (wall off / wall on) and ``same_verdicts`` (claims
whose verdict is the same in both runs / claims). Keep the machine otherwise idle: the ratio is only as
honest as the load is even.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent


def run_once(mode: str, args: argparse.Namespace, work: Path) -> dict:
    from halucheck.config import QUERY_RULE, find_config
    from halucheck.weights import models_dir

    home = work / f"home-{mode}"
    home.mkdir(parents=True)
    models_dir().mkdir(parents=True, exist_ok=True)  # a link to no folder reads as a file to the run
    (home / "models").symlink_to(models_dir().resolve())
    config = yaml.safe_load(find_config(args.config).read_text())
    profile = config["profiles"][args.profile]
    if profile.get("engine") != "transformers":
        sys.exit(f"error: profile {args.profile} uses engine {profile.get('engine')!r}; this times the "
                 "embedded transformers engine (e.g. -p cpu-1.5b)")
    if mode == "off":
        profile["prefix_cache_mb"] = 0
    config_path = work / f"models-{mode}.yaml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    out = work / f"out-{mode}"
    cmd = [sys.executable, "-c", "from halucheck.cli import main; main()", "run", "--corpus", str(args.corpus),
           "--input", str(args.input), "--out", str(out), "-p", args.profile, "--config", str(config_path)]
    cmd += ["--queries", "model" if mode == "off" else args.queries or QUERY_RULE]
    env = dict(os.environ, HALUCHECK_HOME=str(home), OMP_WAIT_POLICY="PASSIVE")
    env.pop("HALUCHECK_INDEX", None)
    print(f"[{mode}] {' '.join(cmd[3:])}", flush=True)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=open(work / f"run-{mode}.log", "w"))
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 3):  # 3: some claims undecided, still a finished run
        sys.exit(f"error: the {mode} run exited with {code}; see {work / f'run-{mode}.log'}")
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
    verdicts = {(r["id"], i): c.get("factuality") for r in results for i, c in enumerate(r.get("claims", []))}
    stats = _stage_stats(out)
    row = {"wall_s": round(wall, 1), "peak_rss_mb": round(usage.ru_maxrss / 1024), "exit": code,
           "claims": len(verdicts), **stats}
    print(f"[{mode}] {json.dumps(row)}", flush=True)
    row["_verdicts"] = verdicts
    return row


def _stage_stats(out: Path) -> dict:
    """LLM calls, prompt tokens and those served from reused prefixes, from the run store's stage_stats."""
    import duckdb

    db = out / "run.duckdb"
    if not db.exists():
        return {}
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute("SELECT stage, sum(calls), sum(prompt_tokens), sum(cached_tokens), sum(completion_tokens), "
                           "sum(wall_s) FROM stage_stats GROUP BY stage ORDER BY min(rowid)").fetchall()
    except duckdb.Error:
        return {}
    finally:
        con.close()
    stages = {stage: {"calls": int(c or 0), "prompt_tokens": int(p or 0), "reused_tokens": int(r or 0),
                      "computed_tokens": int((p or 0) - (r or 0)), "generated_tokens": int(g or 0),
                      "wall_s": round(float(w or 0), 1)} for stage, c, p, r, g, w in rows}
    total = {k: sum(st[k] for st in stages.values())
             for k in ("calls", "prompt_tokens", "reused_tokens", "computed_tokens", "generated_tokens")}
    return {"llm_calls": total.pop("calls"), **total, "stages": stages}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", "-p", default="cpu-1.5b")
    ap.add_argument("--corpus", type=Path, default=REPO / "corpora/demo/docs")
    ap.add_argument("--input", type=Path, default=REPO / "corpora/demo/answers.jsonl")
    ap.add_argument("--config", default=None, help="models.yaml to start from (default: halucheck's own lookup)")
    ap.add_argument("--only", choices=["off", "on"], help="one run only")
    ap.add_argument("--keep", type=Path, help="keep the runs' folders here (default: a temporary folder, removed)")
    ap.add_argument("--queries", default=None, help="`run --queries` for the \"on\" run (default: the shipped one)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="halucheck-time-")) if args.keep is None else args.keep
    work.mkdir(parents=True, exist_ok=True)
    try:
        rows = {mode: run_once(mode, args, work) for mode in (["off", "on"] if args.only is None else [args.only])}
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    line = {"profile": args.profile, "input": str(args.input)}
    for mode, row in rows.items():
        line.update({f"{mode}_{k}": v for k, v in row.items() if not k.startswith("_")})
    if len(rows) == 2:
        off, on = rows["off"], rows["on"]
        line["speedup"] = round(off["wall_s"] / on["wall_s"], 3)
        keys = off["_verdicts"].keys() & on["_verdicts"].keys()
        line["same_verdicts"] = f"{sum(off['_verdicts'][k] == on['_verdicts'][k] for k in keys)}/{len(keys)}"
    print(json.dumps(line))


if __name__ == "__main__":
    main()
