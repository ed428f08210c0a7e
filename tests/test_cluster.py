"""`halucheck run --ray`: shards on a local Ray cluster give the single-process results; a worker killed
mid-shard is retried without repeating anything in the store; a killed driver resumes without asking
finished work again. The shard bookkeeping (naming, seeding, merging) is tested without Ray."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from halucheck.cluster import ClusterOptions, process, shard_name, shards_of
from halucheck.config import Settings
from halucheck.pipeline import Pipeline, RunOptions
from halucheck.store.runstore import RunStore

TESTS = Path(__file__).parent

ANSWERS = [{"id": f"a{i}", "question": f"Where is landmark {i}?",
            "answer": f"Landmark {i} is in {'Berlin' if i % 3 == 0 else 'Paris'}. It opened in {1800 + i}."}
           for i in range(10)]
CONTEXT = "Every landmark stands in Paris. Each opened in the year its number says, after 1800."


def responder(request):
    """Deterministic replies by stage (importable by Ray workers: this module is on their path)."""
    import re

    from halucheck.prompts import read_field, read_statement

    user = request.messages[-1]["content"]
    if request.tag in ("claims:filter", "claims:extract"):
        sentences = [s for s in re.split(r"(?<=[.!?])\s+", read_field(user, "text", last=True).strip()) if s]
        return {"response": " ".join(sentences)} if request.tag == "claims:filter" else {"claims": sentences}
    if request.tag == "claims:queries":
        claim = read_field(user, "claim", last=True)
        return {"queries": [claim, "where " + claim]}
    claim = read_statement(user)
    return {"reasoning": f"on {claim}", "factuality": "Berlin" not in claim, "error_severity": 3}


def settings(**options):
    return Settings.from_dict({"profiles": {"s": {"engine": "fake", "responder": responder, **options}}})


def write_input(tmp_path):
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps({**a, "context": CONTEXT}) + "\n" for a in ANSWERS))
    return path


def results_of(out):
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return [strip(r) for r in rows]


def strip(obj):
    """A result without its timings (the only thing two runs may differ in)."""
    if isinstance(obj, dict):
        return {k: strip(v) for k, v in obj.items() if k not in ("latency_s", "wall_s")}
    if isinstance(obj, list):
        return [strip(x) for x in obj]
    return obj


def run(tmp_path, out, cluster=None, **options):
    opts = RunOptions(input=write_input(tmp_path), out=tmp_path / out)
    pipe = Pipeline(opts, settings(**options), log=lambda m: None)
    try:
        pipe.run(None if cluster is None else lambda p, items: process(p, items, cluster))
    finally:
        pipe.close()
    return results_of(tmp_path / out)


def table_counts(path):
    store = RunStore(path, read_only=True)
    try:
        return {t: store.query(f"SELECT count(*) FROM {t}")[0][0]
                for t in ("items", "claims", "queries", "evidence", "turns", "verdicts", "errors")}
    finally:
        store.close()


# -- shard bookkeeping, no Ray ---------------------------------------------------------------------------
def test_shards_are_fixed_blocks_of_the_input_named_the_same_in_every_run():
    assert shards_of([0, 1, 2, 5, 9, 10, 11], 4) == [(0, 1, 2), (5,), (9, 10, 11)]
    # the same block, whatever of it is left, has the same name: a resumed run finds its database
    assert shard_name((0, 1, 2), 4) == shard_name((3,), 4) == "00000000-00000003"
    assert shard_name((9, 10, 11), 4) == "00000008-00000011"


def test_a_shard_seeded_from_a_run_and_merged_back_replaces_only_its_items(tmp_path, monkeypatch):
    monkeypatch.setenv("HALUCHECK_EMBED_MODEL", "fake")
    run(tmp_path, "whole")
    whole = tmp_path / "whole" / "run.duckdb"
    before = table_counts(whole)
    store = RunStore(whole)
    try:
        store.write_shard(tmp_path / "shard.duckdb", [0, 1])
        seeded = table_counts(tmp_path / "shard.duckdb")
        assert seeded["items"] == 2 and seeded["claims"] == 4 and seeded["verdicts"] == 4
        assert seeded["evidence"] > 0 and seeded["queries"] == 4  # no corpus: each claim's own words, no model query
        # the shard's verdict changed, as a worker would change it: merged, it replaces the run's
        shard = RunStore(tmp_path / "shard.duckdb")
        shard.query("UPDATE verdicts SET error_severity = 5")
        shard.close()
        store.merge_shard(tmp_path / "shard.duckdb", [0, 1])
        store.merge_shard(tmp_path / "shard.duckdb", [0, 1])  # twice: the same rows, not twice as many
        assert store.query("SELECT count(*) FROM verdicts WHERE error_severity = 5")[0][0] == 4
        assert store.query("SELECT count(*) FROM verdicts WHERE error_severity = 5 AND "
                           "claim_id NOT LIKE '0:%' AND claim_id NOT LIKE '1:%'")[0][0] == 0
        assert store.items_with_work() == []
    finally:
        store.close()
    assert table_counts(whole) == before


def test_items_with_work_names_every_kind_of_unfinished_item(tmp_path, monkeypatch):
    monkeypatch.setenv("HALUCHECK_EMBED_MODEL", "fake")
    run(tmp_path, "whole")
    store = RunStore(tmp_path / "whole" / "run.duckdb")
    try:
        store.query("UPDATE items SET claims_done = FALSE WHERE idx = 2")
        store.query("UPDATE claims SET evidence_done = FALSE WHERE claim_id = '4:0'")
        store.query("DELETE FROM verdicts WHERE claim_id = '6:1'")
        store.query("UPDATE verdicts SET factuality = NULL WHERE claim_id = '8:0'")
        assert store.items_with_work() == [2, 4, 6, 8]
    finally:
        store.close()


def test_without_ray_the_flag_says_how_to_install_it(monkeypatch):
    from halucheck import cluster
    from halucheck.errors import ConfigError

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as if it were not installed
    with pytest.raises(ConfigError, match=r"pip install 'halucheck\[ray\]'"):
        cluster.check_installed()


# -- on a local Ray cluster ---------------------------------------------------------------------------------
ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'halucheck[ray]')")


@pytest.fixture(scope="module")
def local_cluster():
    """A 2-CPU local cluster whose workers import this module (for ``responder``) and hash embeddings."""
    path = os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])
    ray.init(num_cpus=2, object_store_memory=100 * 2**20, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path, "HALUCHECK_EMBED_MODEL": "fake"}})
    yield
    ray.shutdown()


def test_run_on_ray_gives_the_single_process_results(tmp_path, monkeypatch, local_cluster):
    monkeypatch.setenv("HALUCHECK_EMBED_MODEL", "fake")
    alone = run(tmp_path, "alone")
    sharded = run(tmp_path, "sharded", ClusterOptions(shard_answers=3, workers=2))
    assert sharded == alone
    assert sum(c["factuality"] is False for r in alone for c in r["claims"]) == 4  # Berlin: items 0, 3, 6, 9
    assert table_counts(tmp_path / "sharded" / "run.duckdb") == table_counts(tmp_path / "alone" / "run.duckdb")
    assert not list((tmp_path / "sharded" / "shards").iterdir())  # every shard merged and cleaned up


def test_a_worker_killed_mid_shard_is_retried_and_nothing_is_stored_twice(tmp_path, monkeypatch, local_cluster):
    monkeypatch.setenv("HALUCHECK_EMBED_MODEL", "fake")
    alone = run(tmp_path, "alone")
    marker, log = tmp_path / "crashed", tmp_path / "calls.jsonl"
    # the worker dies on its 16th request: in its first shard's verdicts (5 answers: 5 filter and 5 extract requests
    # come first, the first sentence of each being a simple statement, its own claim; no corpus, so no query is
    # written), after the claims and the evidence were written
    sharded = run(tmp_path, "sharded", ClusterOptions(shard_answers=5, workers=1),
                  crash_marker=str(marker), crash_after=16, call_log=str(log))
    assert marker.exists()  # the worker did die
    assert sharded == alone
    assert table_counts(tmp_path / "sharded" / "run.duckdb") == table_counts(tmp_path / "alone" / "run.duckdb")
    # the retry reopened the shard's database: what it had finished was not asked again, only its verdicts
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    prompts = [c["prompt"] for c in calls if c["tag"] == "claims:extract"]
    assert len(prompts) == len(set(prompts)) == len(ANSWERS)  # "It opened in …" of each answer, once
    assert not [c for c in calls if c["tag"] == "claims:queries"]
    verdicts = [c["prompt"] for c in calls if c["tag"] == "eval:selfcheck"]
    assert len(verdicts) == 2 * len(ANSWERS) + 10  # the first shard's 10 asked twice


def test_a_killed_driver_resumes_without_asking_finished_shards_again(tmp_path, monkeypatch):
    """The CLI as a user runs it: killed (with its local cluster) after a first shard is merged, the same
    command finishes the run; no prompt of a merged answer is sent again."""
    monkeypatch.setenv("HALUCHECK_EMBED_MODEL", "fake")
    config = tmp_path / "models.yaml"
    log = tmp_path / "calls.jsonl"
    config.write_text(json.dumps({"default": "slow", "profiles": {"slow": {
        "engine": "fake", "responder": "test_cluster:responder", "step_latency": [0.3, 0.0], "call_log": str(log)}}}))
    env = {**os.environ, "HALUCHECK_EMBED_MODEL": "fake", "PYTHONPATH": str(TESTS)}
    cmd = [sys.executable, "-c", "from halucheck.cli import app; app()", "run", "-i", str(write_input(tmp_path)),
           "-o", str(tmp_path / "run"), "--config", str(config), "--quiet", "--ray", "--ray-workers", "1",
           "--shard-answers", "2"]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True)
    merged = []
    deadline = time.monotonic() + 240
    for line in proc.stderr:
        if "merged" in line:
            merged.append(line.split()[1].rstrip(":"))
            os.killpg(proc.pid, signal.SIGKILL)  # the driver and the local cluster it started
            break
        assert time.monotonic() < deadline, "no shard was merged in 4 minutes"
    proc.wait()
    assert merged, "the run ended before any shard was merged"
    lo, hi = (int(x) for x in merged[0].split("-"))
    # what only a finished answer's prompts hold: its own sentences (claims) and its question (verdicts)
    marks = [m for i in range(lo, hi + 1) for m in (f"Landmark {i} is", f"in {1800 + i}.", f"landmark {i}?")]
    assert any(m in json.loads(line)["prompt"] for line in log.read_text().splitlines() for m in marks)
    log.write_text("")
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    again = [json.loads(line)["prompt"] for line in log.read_text().splitlines()]
    assert again  # the shards not merged before the kill were worked on
    assert not [p for p in again for m in marks if m in p]
    assert results_of(tmp_path / "run") == run(tmp_path, "alone")
