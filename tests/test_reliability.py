"""Failure cases of `halucheck run`: failed LLM calls, reruns that heal, hostile or odd input, damaged
run databases, kills at any point. docs/reliability.md lists each case with its test here."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from faults import FaultServer, echo, quoting as quoting_stances
from halucheck import engines
from halucheck.cli import EXIT_UNDECIDED, app
from halucheck.config import Settings
from halucheck.verifiers.debate import DebateConfig
from halucheck.engines.base import Request
from halucheck.engines.cache import CachingEngine
from halucheck.engines.fake import FakeEngine
from halucheck.errors import ConfigError, InputError
from halucheck.pipeline import Pipeline, RunOptions
from halucheck.store.runstore import RunStore
from halucheck.prompts import read_field, read_statement

TESTS = Path(__file__).resolve().parent
runner = CliRunner()

ANSWERS = [
    {"id": "a1", "answer": "The Eiffel Tower is in Berlin. It opened in 1889."},
    {"id": "a2", "answer": "The Louvre is in Paris."},
    {"id": "a3", "answer": "The Seine flows through Paris. It is long."},
]


def write_jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def results_of(out):
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


@pytest.fixture
def scripted():
    """Engine `scripted`: a FakeEngine echoing claims; swap ``holder["engine"]`` to change behaviour."""
    holder = {"engine": FakeEngine(responder=echo, max_batch=8)}
    engines.register("scripted", lambda model="", **kw: holder["engine"])
    yield holder


@pytest.fixture
def fake_embeddings(monkeypatch):
    """Hash embeddings instead of the embedding model; the process-wide embedder cache is cleared around
    the test, so no other test gets the fake one."""
    from halucheck.retrieval import get_embedder

    monkeypatch.setenv("HALUCHECK_EMBED_MODEL", "fake")
    get_embedder.cache_clear()
    yield
    get_embedder.cache_clear()


def pipeline_run(src, out, settings=None, **kw):
    kw.setdefault("retry_backoff_s", 0.0)
    kw.setdefault("verifier", "debate")  # these tests follow the debate's turns
    opts = RunOptions(input=src, out=out, debate=DebateConfig(min_rounds=1, max_rounds=1, leader_both_orders=False), **kw)
    pipe = Pipeline(opts, settings or Settings.from_dict({"profiles": {"s": {"engine": "scripted"}}}),
                    log=lambda m: None)
    try:
        return pipe.run()
    finally:
        pipe.close()


def server_config(tmp_path, url, **options):
    opts = {"base_url": url, "max_attempts": 1, "backoff_s": 0.01, "timeout_s": 5, **options}
    lines = "".join(f"    {k}: {json.dumps(v)}\n" for k, v in opts.items())
    p = tmp_path / "models.yaml"
    p.write_text(f"default_profile: srv\nprofiles:\n  srv:\n    engine: vllm\n    model: m\n{lines}")
    return p


# -- 1. every call fails: undecided, never clean; exit code 3 -------------------------------------------


def test_every_call_failing_is_undecided_with_exit_code_and_resume_hint(tmp_path):
    src = write_jsonl(tmp_path / "answers.jsonl", ANSWERS)
    with FaultServer(lambda body: "503") as srv:
        r = runner.invoke(app, ["run", "-i", str(src), "-o", str(tmp_path / "out"), "--quiet",
                                "--config", str(server_config(tmp_path, srv.url)), "--max-rounds", "1",
                                "--min-rounds", "1"])
    assert r.exit_code == EXIT_UNDECIDED == 3, r.output
    assert "3 of 3 answers are undecided" in r.stderr and "run the same command again" in r.stderr
    assert "HTTP 503" in r.stderr and "UNDECIDED" in r.stdout
    results = results_of(tmp_path / "out")
    assert [x["hallucinated"] for x in results] == [None, None, None]
    # a2 is one simple statement, its own claim without an extraction call: its verdict is what failed
    assert ["could not be extracted" in x["undecided_reason"] for x in results] == [True, False, True]
    assert "no valid verdict" in results[1]["undecided_reason"]
    html = (tmp_path / "out" / "report.html").read_text()
    assert "3 of 3 answers are undecided" in html and "no false claim" not in html


def test_undecided_claim_makes_the_answer_undecided_not_clean(tmp_path, scripted):
    def responder(request):
        if request.tag.startswith("debate") and "Louvre" in request.messages[-1]["content"]:
            return RuntimeError("server went away")
        return echo(request)

    scripted["engine"] = FakeEngine(responder=responder)
    src = write_jsonl(tmp_path / "answers.jsonl", ANSWERS)
    summary = pipeline_run(src, tmp_path / "out", retries=0)
    by_id = {x["id"]: x for x in results_of(tmp_path / "out")}
    assert by_id["a2"]["hallucinated"] is None
    assert "1 of 1 claim(s) have no valid verdict" in by_id["a2"].get("undecided_reason", "")
    assert by_id["a1"]["hallucinated"] is True and by_id["a3"]["hallucinated"] is False
    # the first agent failed: no standing verdict to argue about, so no stance was asked (one failed call)
    chain = by_id["a2"]["claims"][0]["chain"]
    assert [t["role"] for t in chain] == ["initial"] and "server went away" in chain[0]["error"]
    assert summary["undecided"] == 1 and summary["checked"] == 2 and summary["failed_calls"] == 1


# -- 2. reruns retry exactly the failed work; no stale error ----------------------------------------------


quoting = quoting_stances(echo)  # a stance quotes its first passage, so every round asks the Leader


def test_rerun_retries_only_failed_work_and_leaves_no_stale_error(tmp_path, scripted, fake_embeddings):
    # a corpus, so the model writes each claim's queries (calls that can fail); a1's claims get passages from it,
    # so their debates ask the Leader
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "paris.txt").write_text("The Eiffel Tower stands in Paris, France. It opened to visitors in 1889.\n")
    src = write_jsonl(tmp_path / "answers.jsonl", ANSWERS)
    run = lambda out: pipeline_run(src, out, retries=0, corpus=corpus, index=tmp_path / "ix.duckdb",  # noqa: E731
                                   queries="model")
    scripted["engine"] = FakeEngine(responder=quoting, max_batch=8)
    run(tmp_path / "reference")
    reference = results_of(tmp_path / "reference")
    assert [t["role"] for t in reference[0]["claims"][1]["chain"]] == ["initial", "skeptic", "trust", "leader"]
    assert reference[0]["claims"][1]["chain"][-1]["p_factual"] is not None  # a Leader call, not a walkover

    failing = {"extract": "long", "queries": "Louvre", "debate:leader": "1889"}  # "It is long." of a3 is extracted

    def flaky(request):  # one answer's extraction, one claim's queries, one claim's leader turn fail
        word = failing.get(request.tag.split(":", 1)[1] if request.tag.startswith("claims") else request.tag)
        content = request.messages[-1]["content"]
        if request.tag == "claims:extract":  # the sentence itself, not the sentences before it (its context)
            content = read_field(content, "text", last=True)
        elif request.tag.startswith("debate:"):  # the claim, not the passages (another claim's are alike)
            content = read_statement(content)
        if word and word in content:
            return RuntimeError("connection reset")
        return quoting(request)

    scripted["engine"] = FakeEngine(responder=flaky)
    first = run(tmp_path / "out")
    broken = {x["id"]: x for x in results_of(tmp_path / "out")}
    assert broken["a2"]["hallucinated"] is None and broken["a3"]["hallucinated"] is None
    assert broken["a1"]["hallucinated"] is True  # one false claim decides it, whatever the other says
    # the failed Leader keeps the standing verdict and leaves its error turn (retried on a rerun)
    opened = broken["a1"]["claims"][1]
    assert opened["factuality"] is True and opened["chain"][-1]["role"] == "leader" and opened["chain"][-1].get("error")
    assert first["undecided"] == 2 and first["failed_calls"] == 3
    asked_first = {r.key() for r in scripted["engine"].requests}

    scripted["engine"] = FakeEngine(responder=quoting)
    second = run(tmp_path / "out")
    asked_again = [r for r in scripted["engine"].requests]
    healed = results_of(tmp_path / "out")
    assert healed == reference and second["undecided"] == 0
    text = json.dumps(healed)
    assert '"error":' not in text and '"errors":' not in text  # no stale error left behind
    # only the failed calls (and what depends on them) were asked again, nothing that had succeeded
    assert not {r.key() for r in asked_again} & (asked_first - {r.key() for r in asked_again if r.tag})
    tags = sorted(r.tag for r in asked_again)
    assert tags.count("claims:extract") == 1 and tags.count("claims:queries") == 3  # a3's two claims + Louvre
    debated = {}
    for r in asked_again:
        if r.tag.startswith("debate:"):
            debated.setdefault(read_statement(r.messages[-1]["content"]), []).append(r.tag)
    # the failed Leader turn, and no other turn of its debate; the debates of the claims that had none (a2's claim,
    # whose queries failed, and a3's, not extracted before); none of the Berlin claim, decided the first time
    assert debated.pop("It opened in 1889.") == ["debate:leader"]
    assert set(debated) == {"The Louvre is in Paris.", "The Seine flows through Paris.", "It is long."}
    assert all(turns[0] == "debate:initial" for turns in debated.values())
    assert len(asked_again) < len(scripted["engine"].requests) + len(asked_first)


def test_failed_turn_is_retried_and_valid_turns_come_from_the_cache(tmp_path, scripted):
    src = write_jsonl(tmp_path / "answers.jsonl", ANSWERS[1:2])
    calls, failed = [], []

    def skeptic_fails_once(request):
        calls.append(request.tag)
        if request.tag == "debate:skeptic" and not failed:
            failed.append(request)
            return RuntimeError("timed out")
        return echo(request)

    scripted["engine"] = FakeEngine(responder=skeptic_fails_once)
    pipeline_run(src, tmp_path / "out", retries=0)
    chain = results_of(tmp_path / "out")[0]["claims"][0]["chain"]
    assert any(t.get("error") for t in chain)
    calls.clear()
    pipeline_run(src, tmp_path / "out", retries=0)
    chain = results_of(tmp_path / "out")[0]["claims"][0]["chain"]
    assert not any(t.get("error") for t in chain)
    assert "debate:initial" not in calls and "debate:skeptic" in calls  # the valid first turn was cached


def test_outage_of_a_server_is_retried_within_the_run_with_backoff(tmp_path):
    src = write_jsonl(tmp_path / "answers.jsonl", ANSWERS)
    down: list[float] = []  # the server is down for a second from the first request (not from the test's start:
    # on a loaded machine the run's setup alone took longer than that, and no call met the outage)

    def outage(body):
        down.append(down[0] if down else time.monotonic())
        return "reset" if time.monotonic() - down[0] < 1.0 else None

    with FaultServer(outage) as srv:
        settings = Settings.load(server_config(tmp_path, srv.url))
        summary = pipeline_run(src, tmp_path / "out", settings, retries=3, retry_backoff_s=0.4)
    assert all(x["hallucinated"] is not None and "errors" not in x for x in results_of(tmp_path / "out"))
    assert summary["undecided"] == 0 and summary["failed_calls"] > 0


def test_replies_that_never_match_the_schema_get_no_extra_pass(tmp_path):
    src = write_jsonl(tmp_path / "answers.jsonl", ANSWERS[1:2])
    with FaultServer(lambda body: "invalid") as srv:
        settings = Settings.load(server_config(tmp_path, srv.url))
        pipeline_run(src, tmp_path / "out", settings, retries=2)
        first_pass = len(srv.requests)
        assert first_pass == 3  # the extraction, asked three times by the engine itself; no second pass
        pipeline_run(src, tmp_path / "out", Settings.load(server_config(tmp_path, srv.url)), retries=2)
        assert len(srv.requests) == 2 * first_pass  # the same command again does ask again


@pytest.mark.parametrize("fault", ["garbage", "invalid", "hang"])
def test_bad_replies_become_undecided_then_heal(tmp_path, fault):
    src = write_jsonl(tmp_path / "answers.jsonl", ANSWERS[1:2])
    state = {"fault": None}
    with FaultServer(lambda body: state["fault"], hang_s=2.0) as srv:
        cfg = server_config(tmp_path, srv.url, timeout_s=0.5)
        pipeline_run(src, tmp_path / "clean", Settings.load(cfg), retries=0)  # what a sound server gives
        state["fault"] = fault
        pipeline_run(src, tmp_path / "out", Settings.load(cfg), retries=0)
        assert results_of(tmp_path / "out")[0]["hallucinated"] is None
        state["fault"] = None
        summary = pipeline_run(src, tmp_path / "out", Settings.load(cfg), retries=0)
    clean = results_of(tmp_path / "clean")
    assert clean[0]["hallucinated"] is not None and results_of(tmp_path / "out") == clean
    assert summary["undecided"] == 0


# -- 3. piped input is fingerprinted by its content ------------------------------------------------------------


def _pipe_path(content: bytes) -> str:
    r, w = os.pipe()
    os.write(w, content)
    os.close(w)
    return f"/dev/fd/{r}"


def test_piped_input_is_fingerprinted_by_content(tmp_path, scripted):
    first = _pipe_path(json.dumps(ANSWERS[0]).encode() + b"\n")
    pipeline_run(Path(first), tmp_path / "out")
    other = _pipe_path(json.dumps(ANSWERS[1]).encode() + b"\n")
    with pytest.raises(InputError, match="other inputs or settings"):
        pipeline_run(Path(other), tmp_path / "out")
    assert [x["id"] for x in results_of(tmp_path / "out")] == ["a1"]


# -- 4. no indexable word in a context or a corpus ------------------------------------------------------------


def test_context_without_indexable_words_and_stopword_corpus_do_not_crash(tmp_path, scripted, fake_embeddings):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "stop.txt").write_text("The and of. It is to be.")
    src = write_jsonl(tmp_path / "answers.jsonl", [
        {"id": "na", "answer": "The Louvre is in Paris.", "context": "N/A"},
        {"id": "dots", "answer": "The Seine is long.", "context": "..."},
    ])
    summary = pipeline_run(src, tmp_path / "out", corpus=corpus, index=tmp_path / "index.duckdb")
    assert summary["checked"] == 2 and summary["undecided"] == 0


# -- 5. --restart never discards a run in progress ---------------------------------------------------------------


def test_restart_refuses_while_another_process_holds_the_run(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    RunStore(out / "run.duckdb").set_meta("marker", "kept")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, duckdb; c = duckdb.connect(sys.argv[1]); print('locked', flush=True); "
         "sys.stdin.read()", str(out / "run.duckdb")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        src = write_jsonl(tmp_path / "answers.jsonl", ANSWERS)
        cfg = tmp_path / "models.yaml"
        cfg.write_text("profiles:\n  fake:\n    engine: fake\n")
        r = runner.invoke(app, ["run", "-i", str(src), "-o", str(out), "--restart", "--quiet", "--config", str(cfg)])
    finally:
        holder.communicate("")
    assert r.exit_code == 1
    # one error line (notes about the machine, e.g. a missing sandbox, may come before it)
    [err] = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert "in use by another halucheck process" in err and r.stderr.rstrip().endswith(err)  # the whole error
    assert "delete" not in r.stderr.lower()
    assert RunStore(out / "run.duckdb").get_meta("marker") == "kept"


def test_restart_discards_a_finished_run(tmp_path, scripted):
    src = write_jsonl(tmp_path / "answers.jsonl", ANSWERS[:1])
    pipeline_run(src, tmp_path / "out")
    other = write_jsonl(tmp_path / "other.jsonl", ANSWERS[1:2])
    opts = RunOptions(input=other, out=tmp_path / "out", debate=DebateConfig(min_rounds=1, max_rounds=1))
    pipe = Pipeline(opts, Settings.from_dict({"profiles": {"s": {"engine": "scripted"}}}), log=lambda m: None,
                    restart=True)
    pipe.run()
    pipe.close()
    assert [x["id"] for x in results_of(tmp_path / "out")] == ["a2"]


# -- 6. a symlink out of the corpus is not indexed -------------------------------------------------------------


def test_symlink_leaving_the_corpus_is_skipped_with_a_warning(tmp_path):
    from halucheck.retrieval import Index, build_index

    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:secret password line")
    corpus = tmp_path / "corpus"
    (corpus / "sub").mkdir(parents=True)
    (corpus / "doc.txt").write_text("The Eiffel Tower is in Paris.")
    (corpus / "passwd.txt").symlink_to(secret)
    (corpus / "inside.txt").symlink_to(corpus / "doc.txt")
    (corpus / "sub" / "up").symlink_to(tmp_path, target_is_directory=True)
    warnings = []
    build_index(corpus, tmp_path / "index.duckdb", embed_model="fake", warn=warnings.append)
    with Index.open(tmp_path / "index.duckdb", embedder=None) as index:
        sources = {h.source for h in index.search("secret password", k=10, mode="bm25")}
        paris = index.search("Eiffel Tower Paris", k=10, mode="bm25")
    assert not any("secret" in s or "passwd" in s for s in sources)
    assert any("passwd.txt" in w and "outside the corpus" in w for w in warnings)
    assert {Path(h.source).name for h in paris} == {"doc.txt", "inside.txt"}


# -- 7. engine-only settings never block a resume; result-changing ones do ---------------------------------------


def _fingerprint(**profile):
    settings = Settings.from_dict({"profiles": {"p": {"engine": "vllm", "model": "m", **profile}}})
    return RunOptions(input=Path("x"), out=Path("y")).fingerprint(settings, b"data")


def test_engine_only_settings_do_not_change_the_fingerprint():
    base = _fingerprint(base_url="http://a:8000/v1", timeout_s=60, max_concurrency=8, max_attempts=2)
    assert base == _fingerprint(base_url=["http://b:8000/v1", "http://c:8000/v1"], timeout_s=900,
                                max_concurrency=128, max_attempts=9, backoff_s=2.0, check=False)
    assert base != _fingerprint(base_url="http://a:8000/v1", timeout_s=60, max_concurrency=8, max_attempts=2,
                                temperature=0.7)


def test_resume_with_a_longer_timeout_is_allowed(tmp_path, scripted):
    src = write_jsonl(tmp_path / "answers.jsonl", ANSWERS[:1])
    pipeline_run(src, tmp_path / "out", Settings.from_dict({"profiles": {"s": {"engine": "scripted"}}}))
    # a registered factory takes any option; step_latency is engine-only for the fake engine too
    pipeline_run(src, tmp_path / "out", Settings.from_dict(
        {"profiles": {"s": {"engine": "scripted", "step_latency": [0, 0]}}}))
    with pytest.raises(InputError, match="--restart"):
        pipeline_run(src, tmp_path / "out", Settings.from_dict(
            {"profiles": {"s": {"engine": "scripted", "temperature": 0.5}}}))


# -- 8. 9. 10. odd input lines ---------------------------------------------------------------------------------------


def test_deep_nesting_bom_and_ids(tmp_path, scripted):
    src = tmp_path / "answers.jsonl"
    src.write_bytes(b"\xef\xbb\xbf" + json.dumps(ANSWERS[0]).encode() + b"\n"
                    + b'{"answer": "The Louvre is in Paris."}\n'
                    + json.dumps({"id": "line-2", "answer": "The Seine is long."}).encode() + b"\n"
                    + b'{"id": "deep", "answer": ' + b"[" * 100000 + b"\n"
                    + json.dumps({"id": "mine", "answer": ""}).encode() + b"\n")
    summary = pipeline_run(src, tmp_path / "out")
    results = results_of(tmp_path / "out")
    ids = [x["id"] for x in results]
    assert ids == ["a1", "line-2-2", "line-2", "line-4", "mine"]  # BOM line kept, no id collides
    assert len(set(ids)) == len(ids)
    assert "nested too deeply" in results[3]["errors"][0]
    assert "empty" in results[4]["errors"][0]
    assert summary["checked"] == 3 and summary["unreadable"] == 2


def test_csv_with_bom_keeps_its_first_column(tmp_path, scripted):
    src = tmp_path / "answers.csv"
    src.write_bytes(b"\xef\xbb\xbfid,answer\r\nc1,The Louvre is in Paris.\r\n")
    pipeline_run(src, tmp_path / "out")
    assert [x["id"] for x in results_of(tmp_path / "out")] == ["c1"]


def test_encoding_and_truncation_warnings_reach_results(tmp_path, scripted):
    src = tmp_path / "answers.jsonl"
    long_answer = "Word " * 5001 + "end."
    src.write_bytes(b'{"id": "latin", "answer": "Caf\xe9 is open."}\n'
                    + json.dumps({"id": "long", "answer": long_answer}).encode() + b"\n")
    pipeline_run(src, tmp_path / "out", max_claims=2)
    by_id = {x["id"]: x for x in results_of(tmp_path / "out")}
    assert any("not UTF-8" in e for e in by_id["latin"]["errors"])
    assert any("only the first 5,000" in e for e in by_id["long"]["errors"])


# -- 11. a damaged run database ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["truncate", "zero-head", "zero-middle"])
def test_damaged_run_database_is_one_error_line(tmp_path, scripted, damage):
    src = write_jsonl(tmp_path / "answers.jsonl", ANSWERS * 30)
    out = tmp_path / "out"
    pipeline_run(src, out)
    db = out / "run.duckdb"
    size = db.stat().st_size
    with open(db, "r+b") as fh:
        if damage == "truncate":
            fh.truncate(size // 2)
        elif damage == "zero-head":
            fh.write(b"\0" * 8192)
        else:
            fh.seek(size // 3)
            fh.write(b"\0" * (size // 3))
    cfg = tmp_path / "models.yaml"
    cfg.write_text("profiles:\n  s:\n    engine: scripted\n")
    for args in (["run", "-i", str(src), "-o", str(out), "--quiet", "--config", str(cfg)], ["report", str(out)]):
        r = runner.invoke(app, args)
        lines = r.stderr.strip().splitlines()  # a machine without bubblewrap also prints a note first
        err = lines[-1]
        assert r.exit_code == 1, (args[0], r.output)
        assert err.startswith("error: run database") and "damaged" in err, r.stderr
        assert sum(line.startswith("error:") for line in lines) == 1
        assert "--restart" in err
    r = runner.invoke(app, ["run", "-i", str(src), "-o", str(out), "--quiet", "--config", str(cfg), "--restart",
                            "--max-rounds", "1", "--min-rounds", "1"])
    assert r.exit_code == 0, r.output


# -- 12. configuration and flags ------------------------------------------------------------------------------------------


def test_unknown_profile_option_names_the_file_and_the_valid_keys(tmp_path):
    cfg = tmp_path / "models.yaml"
    cfg.write_text("profiles:\n  srv:\n    engine: vllm\n    model: m\n    timeout: 30\n")
    from halucheck.engines.pool import EnginePool

    settings = Settings.load(cfg)  # data only; the profile's options are checked against the engine ...
    with pytest.raises(ConfigError) as exc:
        EnginePool(settings)  # ... before any engine is made
    msg = str(exc.value)
    assert str(cfg) in msg and "unknown option 'timeout'" in msg and "did you mean 'timeout_s'" in msg
    assert "max_concurrency" in msg and "temperature" in msg


@pytest.mark.parametrize("line, message", [
    ("timeout_s: abc", "timeout_s must be a number, got 'abc'"),
    ("max_concurrency: 2.5", "max_concurrency must be a whole number"),
    ("check: maybe", "check must be true or false"),
    ("temperature: hot", "temperature must be a number"),
])
def test_option_of_the_wrong_kind_is_a_clear_error(tmp_path, line, message):
    cfg = tmp_path / "models.yaml"
    cfg.write_text(f"profiles:\n  srv:\n    engine: vllm\n    model: m\n    base_url: http://127.0.0.1:9/v1\n    {line}\n")
    src = write_jsonl(tmp_path / "answers.jsonl", ANSWERS[:1])
    r = runner.invoke(app, ["run", "-i", str(src), "-o", str(tmp_path / "out"), "--config", str(cfg)])
    assert r.exit_code == 1 and message in r.stderr and str(cfg) in r.stderr and "Traceback" not in r.output


def test_new_sampling_keys_are_accepted(monkeypatch):
    from halucheck import config

    monkeypatch.setattr(config, "SAMPLING_KEYS", config.SAMPLING_KEYS + ("repetition_penalty",))
    s = Settings.from_dict({"profiles": {"f": {"engine": "fake", "repetition_penalty": 1.1}}})
    assert s.sampling_for("initial") == {"repetition_penalty": 1.1}


@pytest.mark.parametrize("args, message", [
    (["--top-k", "0"], "--top-k and --max-claims must be at least 1"),
    (["--max-claims", "0"], "--top-k and --max-claims must be at least 1"),
    (["-o", "FILE"], "is a file; pass a folder"),
])
def test_bad_run_flags_are_one_line_errors(tmp_path, args, message):
    src = write_jsonl(tmp_path / "answers.jsonl", ANSWERS[:1])
    (tmp_path / "FILE").write_text("x")
    cfg = tmp_path / "models.yaml"
    cfg.write_text("profiles:\n  fake:\n    engine: fake\n")
    args = [str(tmp_path / a) if a == "FILE" else a for a in args]
    r = runner.invoke(app, ["run", "-i", str(src), "--quiet", "--config", str(cfg), *args]
                      + ([] if "-o" in args else ["-o", str(tmp_path / "out")]))
    err = r.stderr.strip()
    assert r.exit_code == 1 and message in err and "\n" not in err and "Traceback" not in r.output


def test_empty_corpus_gets_a_note(tmp_path, scripted, fake_embeddings):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "empty.txt").write_text("")
    src = write_jsonl(tmp_path / "answers.jsonl", ANSWERS[:1])
    logs = []
    opts = RunOptions(input=src, out=tmp_path / "out", corpus=corpus, index=tmp_path / "i.duckdb",
                      debate=DebateConfig(min_rounds=1, max_rounds=1))
    pipe = Pipeline(opts, Settings.from_dict({"profiles": {"s": {"engine": "scripted"}}}), log=logs.append)
    pipe.run()
    pipe.close()
    assert any(m.startswith("note: the corpus") and "no indexable text" in m for m in logs)


# -- 14. a server engine's replies are cached as they return -------------------------------------------------------------


class Killed(BaseException):
    """Stands in for a kill: nothing catches it."""


def test_replies_are_on_disk_within_max_defer_s_of_returning(tmp_path, monkeypatch):
    """A kill loses at most the replies of the last MAX_DEFER_S: those kept are written when due even while
    another request is still out (the kill lands while the last one is out)."""
    from halucheck.store import runstore

    monkeypatch.setattr(runstore, "MAX_DEFER_S", 0.2)
    on_disk = []

    class SlowLast(FakeEngine):
        streaming = True

        def _complete(self, requests):
            if requests[0].tag == "last":
                time.sleep(0.6)
                on_disk.append(store.query("SELECT count(*) FROM llm_cache")[0][0])  # what a kill now would leave
                raise Killed()
            return super()._complete(requests)

    store = RunStore(tmp_path / "run.duckdb")
    engine = CachingEngine(SlowLast(max_batch=8), store)
    requests = [Request(messages=({"role": "user", "content": f"q{i}"},), tag="last" if i == 7 else "")
                for i in range(8)]
    with pytest.raises(Killed):
        engine.generate(requests)
    assert on_disk == [7]


def test_a_server_engines_replies_are_written_together_and_all_before_they_are_used(tmp_path):
    class Server(FakeEngine):
        streaming = True

    store = RunStore(tmp_path / "run.duckdb")
    writes, tx = [], store._tx

    def counted(statements):
        writes.append(1)
        tx(statements)

    store._tx = counted
    engine = CachingEngine(Server(max_batch=8), store)
    requests = [Request(messages=({"role": "user", "content": f"q{i}"},)) for i in range(24)]
    replies = engine.generate(requests)
    assert all(r.ok for r in replies) and store.deferred_wait() is None  # nothing left in memory only
    assert store.query("SELECT count(*) FROM llm_cache") == [(24,)]
    assert len(writes) == 1  # one transaction for the 24 replies (all back within MAX_DEFER_S), not one each
    assert [r.text for r in engine.generate(requests)] == [r.text for r in replies] and engine.hits == 24


def test_batch_engine_replies_are_cached_per_engine_batch(tmp_path, monkeypatch):
    from halucheck.engines import cache

    monkeypatch.setattr(cache, "DEFER_S", 0.0)  # as for a real model: each batch takes longer than that

    class DiesOnThirdBatch(FakeEngine):
        def _complete(self, requests):
            if len(self.batch_sizes) == 2:
                raise Killed()
            return super()._complete(requests)

    store = RunStore(tmp_path / "run.duckdb")
    engine = CachingEngine(DiesOnThirdBatch(max_batch=4), store)
    requests = [Request(messages=({"role": "user", "content": f"question {i}"},)) for i in range(12)]
    with pytest.raises(Killed):
        engine.generate(requests)
    # committed, not merely held in memory: what a kill at this point leaves on disk
    assert store.query("SELECT count(*) FROM llm_cache") == [(8,)]


def test_a_reply_cached_again_replaces_the_stored_one(tmp_path):
    """The reply cache's rows are written as INSERT OR REPLACE would (a plain insert after deleting the keys
    stored already): the newer reply of a key is kept, once, beside the others."""
    from halucheck.store.rows import CachedReply

    store = RunStore(tmp_path / "run.duckdb")

    def row(key, text):
        return CachedReply(key, "tag", text, json.dumps({"text": text}), 10, 2, 0, 1, 0.1, None)

    store.cache_put([row("a", "old"), row("b", "kept")])
    store.cache_put([row("a", "new"), row("c", "added")])
    store.cache_put([row("c", "deferred")], defer=True)
    store.close()
    store = RunStore(tmp_path / "run.duckdb")
    assert store.query("SELECT key, text FROM llm_cache ORDER BY key") == [("a", "new"), ("b", "kept"), ("c", "deferred")]
    assert store.cache_get(["a", "b"])["a"].text == "new"
    store.close()


def test_a_cached_replys_row_holds_its_fields_in_the_tables_column_order():
    from dataclasses import astuple, fields

    from halucheck.store.rows import CachedReply
    from halucheck.store.schema import CACHE_COLUMNS

    reply = CachedReply("k", "tag", "text", "{}", 10, 2, 1, 3, 0.5, "[]")
    assert [f.name for f in fields(CachedReply)] == list(CACHE_COLUMNS)
    assert reply.row() == astuple(reply) == ("k", "tag", "text", "{}", 10, 2, 1, 3, 0.5, "[]")


def test_remembered_prompt_renders_follow_their_arguments():
    from dataclasses import dataclass

    from halucheck.prompts import _Template, _ENV

    t = _Template(_ENV.from_string("{{ xs|join(',') }} {{ o.v }}"))

    @dataclass
    class Mutable:
        v: int

    o = Mutable(1)
    assert t.render(xs=["a", "b"], o=o) == "a,b 1"
    o.v = 2  # an object that can change in place is never remembered
    assert t.render(xs=["a", "b"], o=o) == "a,b 2"
    assert t.render(xs=["a", "c"], o=o) == "a,c 2"


# -- 13. kill -9 at any point resumes to identical results ----------------------------------------------------------------


def _cli(args, cwd):
    # verdicts written every 0.2 s instead of every 2 s, so that kills also land between verdict batches
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import faults; faults.register_echo(); "
            "import halucheck.pipeline; halucheck.pipeline.VERDICT_FLUSH_S = 0.2; "
            "from halucheck.cli import app; sys.argv = ['halucheck'] + sys.argv[2:]; app()")
    return subprocess.Popen([sys.executable, "-c", code, str(TESTS), *map(str, args)], cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(TESTS.parent)})


def _progress(db):
    if not db.exists():
        return (0, 0, 0, 0)
    store = RunStore(db)
    try:
        return tuple(store.query(q)[0][0] for q in (
            "SELECT count(*) FROM items WHERE claims_done", "SELECT count(*) FROM claims WHERE evidence_done",
            "SELECT count(*) FROM verdicts", "SELECT count(*) FROM llm_cache"))
    finally:
        store.close()


@pytest.mark.parametrize("engine, verifier", [("echo", None), ("echo-server", None), ("echo-server", "direct")])
# a batch engine; one taking each request alone; `direct` through a server (verdicts handed on 16 claims at a time)
def test_kill_9_at_any_point_resumes_to_identical_results(tmp_path, engine, verifier):
    rows = [{"id": f"q{i}", "answer": f"River {i} is in Berlin. River {i} is {i + 100} km long."} for i in range(60)]
    src = write_jsonl(tmp_path / "answers.jsonl", rows)
    cfg = tmp_path / "models.yaml"
    # each engine call takes 100 ms, so the run lasts long enough to be killed in every stage
    cfg.write_text(f"profiles:\n  e:\n    engine: {engine}\n    max_batch: 16\n    step_latency: [0.1, 0]\n")
    common = ["run", "-i", src, "--quiet", "--config", cfg, "--max-rounds", "2", "--min-rounds", "1",
              *(["-v", verifier] if verifier else [])]
    t0 = time.monotonic()
    ref = _cli(common + ["-o", tmp_path / "ref"], tmp_path)
    assert ref.wait(timeout=300) == 0, ref.stderr.read()
    reference = (tmp_path / "ref" / "results.jsonl").read_text()
    full = time.monotonic() - t0
    # kill -9 a little later each time (each resumed run has less left to do) until a run finishes
    kills, delay, snapshots = 0, 0.5, []
    while True:
        p = _cli(common + ["-o", tmp_path / "out"], tmp_path)
        try:
            p.wait(timeout=delay)
            break
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL)
            p.wait(timeout=60)
            kills += 1
            delay += full / 16
            snapshots.append(_progress(tmp_path / "out" / "run.duckdb"))
    assert p.returncode == 0, p.stderr.read()
    print(f"reference run {full:.1f} s; killed -9 {kills} times, at 0.5 s to {delay - full / 16:.1f} s; "
          f"(answers with claims, claims with evidence, verdicts, cached replies) after each kill: {snapshots}")
    assert snapshots == sorted(snapshots)  # a kill never undoes finished work
    assert kills >= 5
    assert (tmp_path / "out" / "results.jsonl").read_text() == reference


def test_a_replayed_reply_keeps_its_token_logprobs(tmp_path):
    """A verdict scored from token probabilities gets the same score when its reply comes from the cache."""
    from halucheck.engines.base import Result

    class WithLogprobs(FakeEngine):
        def _complete(self, requests):
            out = super()._complete(requests)
            for req, res in zip(requests, out):
                if req.logprobs:
                    res.logprobs = [('{"', -0.01), ("true", -0.357), ("é", -2.5)]
            return out

    store = RunStore(tmp_path / "run.duckdb")
    live = CachingEngine(WithLogprobs(max_batch=4), store)
    requests = [Request(messages=({"role": "user", "content": "q"},), logprobs=True),
                Request(messages=({"role": "user", "content": "r"},))]
    first = live.generate(requests)
    store.close()
    store = RunStore(tmp_path / "run.duckdb")  # after a restart: from the database, not the pending rows
    replay = CachingEngine(FakeEngine(max_batch=4), store).generate(requests)
    assert [r.attempts for r in replay] == [0, 0]
    assert replay[0].logprobs == first[0].logprobs == [('{"', -0.01), ("true", -0.357), ("é", -2.5)]
    assert replay[1].logprobs is None and isinstance(replay[1], Result)
    store.close()


def test_a_replayed_reply_keeps_its_tokens_alternatives(tmp_path):
    """`direct` through a server reads "Yes" and "No" among the first token's alternatives: a resumed run reads
    the same ones from the cache, and a request for them is a request of its own (another key)."""
    store = RunStore(tmp_path / "run.duckdb")
    ask = Request(messages=({"role": "user", "content": "Is it supported?"},), top_logprobs=20)
    plain = Request(messages=ask.messages)
    assert ask.key("m") != plain.key("m") and plain.key("m") == Request(messages=ask.messages, top_logprobs=0).key("m")
    first = CachingEngine(FakeEngine(max_batch=4), store).generate([ask])
    assert first[0].top_logprobs and {t for t, _ in first[0].top_logprobs[0]} == {"Yes", "No"}
    store.close()
    store = RunStore(tmp_path / "run.duckdb")
    replay = CachingEngine(FakeEngine(max_batch=4), store).generate([ask])
    assert replay[0].attempts == 0
    assert replay[0].top_logprobs == first[0].top_logprobs and replay[0].logprobs == first[0].logprobs
    store.close()


# -- 24. lone UTF-16 surrogates; 25. a CSV quote that is never closed -------------------------------------------------


def test_lone_surrogates_in_answers_and_corpus_become_replacement_characters(tmp_path, fake_embeddings):
    """A JSON escape like "\\ud83d" without its pair is valid JSON but not text (no UTF-8 for it): it is
    replaced by U+FFFD where the text is read, with a warning for its line; every line gets its result."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "notes.jsonl").write_text('{"text": "The Louvre is in Paris \\ud83d."}\n{"text": "The Seine is long."}\n')
    src = tmp_path / "answers.jsonl"
    src.write_text('{"id": "a1", "answer": "The Louvre is in Paris \\ud83d.", "question": "Where \\udc00?", '
                   '"context": ["It is \\ude00\\ud83d."]}\n'
                   + json.dumps(ANSWERS[1]) + "\n"
                   + '{"id": "a3\\ud800", "answer": "The Seine is long. \\ud83d\\ude00"}\n')
    res = runner.invoke(app, ["run", "--input", str(src), "--corpus", str(corpus), "--index", str(tmp_path / "ix.duckdb"),
                              "--out", str(tmp_path / "out"), "-p", "fake"])
    assert res.exit_code == 0, res.output
    results = results_of(tmp_path / "out")
    assert [r["id"] for r in results] == ["a1", "a2", "a3\ufffd"]
    assert results[0]["answer"] == "The Louvre is in Paris \ufffd." and results[0]["question"] == "Where \ufffd?"
    assert results[2]["answer"] == "The Seine is long. \U0001f600"  # a whole pair is one character, kept
    assert all(r["claims"] for r in results)
    for r in (results[0], results[2]):
        assert any("surrogate" in e and "U+FFFD" in e for e in r["errors"]), r.get("errors")
    assert "errors" not in results[1] or not results[1]["errors"]
    assert f"{src}:1: " in res.output and f"{src}:3: " in res.output
    assert "notes.jsonl" in res.output and "surrogate" in res.output  # the corpus line is reported too


def test_lone_surrogate_in_a_corpus_jsonl_is_indexed_with_a_warning(tmp_path, fake_embeddings):
    from halucheck.retrieval import Index

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "notes.jsonl").write_text('{"text": "The Louvre is in Paris."}\n{"text": "Oslo \\udfff is cold."}\n')
    res = runner.invoke(app, ["index", str(corpus), "--db", str(tmp_path / "ix.duckdb")])
    assert res.exit_code == 0, res.output
    assert f"{corpus / 'notes.jsonl'}" in res.output and "line 2" in res.output and "U+FFFD" in res.output
    with Index.open(tmp_path / "ix.duckdb", embedder=None) as index:
        hits = index.search("Oslo cold", k=5, mode="bm25")
    assert hits and hits[0].text == "Oslo \ufffd is cold."


CSV_ROWS = ["id,answer", "c1,The Louvre is in Paris.", "c3,The Eiffel Tower is in Paris.", "c4,Rome is in Italy."]


@pytest.mark.parametrize("bad, later", [
    ('c2,"The Seine is long.', []),  # the reader reaches the end of the file inside the quote
    ('c2,"The Seine is long.', ['c5,"Oslo, Norway, is cold."']),  # a later quote would close it
])
def test_unclosed_csv_quote_skips_its_row_and_keeps_the_rows_after_it(tmp_path, bad, later):
    src = tmp_path / "answers.csv"
    src.write_text("\n".join([*CSV_ROWS[:2], bad, *CSV_ROWS[2:], *later]) + "\n")
    res = runner.invoke(app, ["run", "--input", str(src), "--out", str(tmp_path / "out"), "-p", "fake"])
    assert res.exit_code == 0, res.output
    results = {r["id"]: r for r in results_of(tmp_path / "out")}
    assert list(results) == ["c1", "c2", "c3", "c4"] + (["c5"] if later else [])
    assert results["c3"]["answer"] == "The Eiffel Tower is in Paris." and results["c3"]["line"] == 4
    assert results["c4"]["answer"] == "Rome is in Italy."
    if later:
        assert results["c5"]["answer"] == "Oslo, Norway, is cold."
    assert not results["c2"]["claims"] and "the quote that opens" in results["c2"]["errors"][0]
    skipped = [line for line in res.output.splitlines() if line.startswith("skipped:")]
    assert len(skipped) == 1 and skipped[0].startswith(f"skipped: {src}:3: ")
    assert 'field "answer" at line 3, column 4 is ' + ("not closed on its line" if later else "never closed") in skipped[0]
    assert "close the quote" in skipped[0] and '""' in skipped[0]


def test_quoted_multiline_csv_fields_still_read(tmp_path):
    from halucheck.inputs import read_items

    src = tmp_path / "answers.csv"
    src.write_text('id,answer,question\r\nm1,"Paris is big.\r\nIt is in ""France"".",Where?\r\n'
                   'm2,"Rome, Italy",\r\n\r\nm3,Oslo "the city" is cold.,"Which\ncity?"\n')
    items, problems = read_items(src)
    assert not problems
    assert [(it.id, it.line) for it in items] == [("m1", 2), ("m2", 4), ("m3", 6)]
    assert items[0].answer == 'Paris is big.\r\nIt is in "France".' and items[0].question == "Where?"
    assert items[1].answer == "Rome, Italy" and items[2].answer == 'Oslo "the city" is cold.'
    assert items[2].question == "Which\ncity?"


# -- 30. a run never reads its own reports as evidence --------------------------------------------------------------------


def test_a_run_folder_inside_the_corpus_is_never_read_as_evidence(tmp_path, monkeypatch, fake_embeddings):
    """Run from the corpus folder, the default --out (runs/<name>) lies inside it: the next run must not index
    the first one's report.html, which quotes every claim word for word."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "tower.txt").write_text("The Eiffel Tower stands in Paris, France. It opened in 1889.")
    src = write_jsonl(tmp_path / "answers.jsonl", ANSWERS)
    monkeypatch.chdir(corpus)
    args = ["run", "-i", str(src), "--corpus", ".", "--index", str(tmp_path / "ix.duckdb"), "-p", "fake", "--quiet"]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    assert (corpus / "runs" / "answers" / "report.html").is_file()
    again = runner.invoke(app, [*args, "--restart"])  # the same folder, read again from scratch
    assert again.exit_code == 0, again.output
    sources = {e["source"] for r in results_of(corpus / "runs" / "answers") for c in r["claims"] for e in c["evidence"]}
    assert sources and all(Path(s).name == "tower.txt" for s in sources), sources
    assert "corpus: 2 file(s) not read: 2 in folders halucheck wrote" in again.stdout
    # a folder halucheck wrote stays out of every index, not only the run that wrote it
    index = runner.invoke(app, ["index", str(corpus), "--db", str(tmp_path / "other.duckdb")])
    assert index.exit_code == 0 and "1 added" in index.stdout and "2 file(s) halucheck wrote left out" in index.stdout
    # --out the corpus folder itself (or one holding it) is refused: there, nothing could be excluded
    for out in (corpus, tmp_path):
        r = runner.invoke(app, [*args, "-o", str(out)])
        [err] = [line for line in r.stderr.splitlines() if line.startswith("error:")]  # notes may come first
        assert r.exit_code == 1 and "the corpus folder" in err and r.stderr.rstrip().endswith(err), r.output
    assert not (corpus / "results.jsonl").exists()


# -- 31. a run never overwrites its own input ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["results.jsonl", "report.html", "link.jsonl"])
def test_an_input_that_the_run_would_write_is_refused_and_kept(tmp_path, name):
    folder = tmp_path / "D"
    folder.mkdir()
    answers = "".join(json.dumps(a) + "\n" for a in ANSWERS)
    if name == "link.jsonl":  # a hard link to results.jsonl is the same file under another name
        (folder / "results.jsonl").write_text(answers)
        os.link(folder / "results.jsonl", tmp_path / name)
        src = tmp_path / name
    else:
        src = folder / name
        src.write_text(answers)
    r = runner.invoke(app, ["run", "-i", str(src), "-o", str(folder), "-p", "fake", "--quiet"])
    [err] = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert r.exit_code == 1 and r.stderr.rstrip().endswith(err), r.output
    assert "that this run writes in --out" in err and "choose another --out" in err
    assert src.read_text() == answers and not (folder / "run.duckdb").exists()


# -- 32. an answer none of whose text was checked is undecided, never clean --------------------------------------------------


def test_an_answer_with_no_claim_is_undecided_not_clean_and_partial_checking_is_shown(tmp_path, scripted):
    def responder(request):
        if request.tag == "claims:extract":
            text = read_field(request.messages[-1]["content"], "text", last=True)
            if "Louvre" in text or "777" in text:
                return {"claims": []}  # the extractor found nothing to check: all of a2, a3's second sentence
        return echo(request)

    scripted["engine"] = FakeEngine(responder=responder)
    seine = {"id": "a3", "answer": "The Seine flows through Paris. It is 777 km long."}
    # (a2's sentence is no simple statement, so it goes to the extractor, which finds nothing in it)
    louvre = {"id": "a2", "answer": "The Louvre, they say, is in Paris."}
    src = write_jsonl(tmp_path / "answers.jsonl", ANSWERS[:1] + [louvre, seine])
    cfg = tmp_path / "models.yaml"
    cfg.write_text("profiles:\n  s:\n    engine: scripted\n")
    out = tmp_path / "out"
    r = runner.invoke(app, ["run", "-i", str(src), "-o", str(out), "--quiet", "--config", str(cfg)])
    assert r.exit_code == EXIT_UNDECIDED, r.output
    by_id = {x["id"]: x for x in results_of(out)}
    louvre = by_id["a2"]
    assert louvre["hallucinated"] is None and louvre["max_severity"] is None and louvre["score"] is None
    assert louvre["undecided_reason"].startswith("none of its text was checked: no claim was found")
    assert by_id["a1"]["hallucinated"] is True
    seine = by_id["a3"]
    assert seine["hallucinated"] is False and 0 < seine["coverage"]["checked_share"] < 1
    [err] = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert "1 of 3 answers are undecided: 1 with none of their text checked" in err and "failed work" not in err
    assert "halucheck: 1 of 2 answers hallucinated (50%); 1 more UNDECIDED" in r.stdout
    html = (out / "report.html").read_text()
    assert "1 of 3 answers are undecided" in html and "with none of their text checked" in html
    assert html.count('<span class="badge true">no false claim</span>') == 1  # the Seine, and only it
    share = round(100 * seine["coverage"]["checked_share"])
    assert f'<span class="meta partly">{share} % of its text checked</span>' in html
    report = runner.invoke(app, ["report", str(out)])  # rebuilt from the database: the same counts
    assert report.exit_code == 0 and "1 more UNDECIDED" in report.stdout


# -- 33. a run database halucheck did not make is never written into, nor emptied ---------------------------------------


@pytest.mark.parametrize("foreign", ["duckdb", "clash", "text", "folder"])
def test_a_run_database_halucheck_did_not_make_is_left_alone(tmp_path, foreign):
    import duckdb

    out = tmp_path / "out"
    out.mkdir()
    db = out / "run.duckdb"
    if foreign in ("duckdb", "clash"):  # a user's own DuckDB file; "clash": a table named like one of halucheck's
        con = duckdb.connect(str(db))
        con.execute(f"CREATE TABLE {'mine' if foreign == 'duckdb' else 'items'} (note VARCHAR)")
        con.execute(f"INSERT INTO {'mine' if foreign == 'duckdb' else 'items'} VALUES ('keep me')")
        con.close()
    elif foreign == "text":
        db.write_text("my notes, not a database\n")
    else:
        db.mkdir()
        (db / "keep.txt").write_text("keep me")
    before = sorted((p.relative_to(out), p.read_bytes() if p.is_file() else None) for p in out.rglob("*"))
    src = write_jsonl(tmp_path / "answers.jsonl", ANSWERS)
    for extra in ([], ["--restart"]):
        r = runner.invoke(app, ["run", "-i", str(src), "-o", str(out), "-p", "fake", "--quiet", *extra])
        [err] = [line for line in r.stderr.splitlines() if line.startswith("error:")]
        assert r.exit_code == 1 and r.stderr.rstrip().endswith(err), r.output
        assert str(db) in err and "choose another --out" in err and "delete" not in err and "--restart to" not in err
        now = sorted((p.relative_to(out), p.read_bytes() if p.is_file() else None) for p in out.rglob("*")
                     if p.name != ".halucheck-output")
        assert now == before, extra
    if foreign in ("duckdb", "clash"):
        con = duckdb.connect(str(db), read_only=True)
        assert [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()] == \
            ["mine" if foreign == "duckdb" else "items"]
        con.close()


def test_a_run_database_made_before_the_mark_is_still_resumed(tmp_path, scripted):
    """A run database of an older halucheck has no made_by row; its migrations say it is halucheck's."""
    src = write_jsonl(tmp_path / "answers.jsonl", ANSWERS[:1])
    pipeline_run(src, tmp_path / "out")
    store = RunStore(tmp_path / "out" / "run.duckdb")
    store.query("DELETE FROM meta WHERE key = 'made_by'")
    store.query("DELETE FROM migrations WHERE name = '009_made_by'")
    store.close()
    pipeline_run(src, tmp_path / "out")
    assert RunStore(tmp_path / "out" / "run.duckdb").get_meta("made_by") == "halucheck"


# -- 35. one line, never a traceback ---------------------------------------------------------------------------------------


def test_a_json_number_too_long_for_python_skips_only_its_line(tmp_path, fake_embeddings):
    huge = "1" * 5000  # Python reads no integer of more than 4,300 digits
    src = tmp_path / "answers.jsonl"
    src.write_text(json.dumps(ANSWERS[0]) + "\n" + '{"id": "big", "answer": "x", "n": ' + huge + "}\n"
                   + json.dumps(ANSWERS[1]) + "\n")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "notes.jsonl").write_text('{"text": "The Louvre is in Paris."}\n{"text": "x", "n": ' + huge + "}\n")
    r = runner.invoke(app, ["run", "-i", str(src), "--corpus", str(corpus), "--index", str(tmp_path / "ix.duckdb"),
                            "-o", str(tmp_path / "out"), "-p", "fake", "--quiet"])
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    assert f"skipped: {src}:2: a JSON number in it is too long to read" in r.stderr
    assert "skipped 1 line(s) of" in r.stderr and "notes.jsonl (line 2)" in r.stderr  # the rest of the file is read
    by_id = {x["id"]: x for x in results_of(tmp_path / "out")}
    assert by_id["a1"]["claims"] and by_id["a2"]["claims"] and not by_id["line-2"]["claims"]  # its id is unread


@pytest.mark.parametrize("text, message", [
    ("just some text\n", "expected a mapping of settings"),
    ("- a\n- b\n", "expected a mapping of settings"),
    ("profiles:\n  - fake\n", "`profiles:` must be a mapping"),
    ("profiles:\n  f:\n    engine: fake\nroles: 5\n", "`roles:` must be a mapping"),
    (b"profiles:\n  f:\n    engine: fake # \xff\n", "not UTF-8 text"),
    ("a: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
])
def test_a_malformed_models_yaml_is_one_line(tmp_path, text, message):
    cfg = tmp_path / "models.yaml"
    cfg.write_bytes(text if isinstance(text, bytes) else text.encode())
    src = write_jsonl(tmp_path / "answers.jsonl", ANSWERS[:1])
    r = runner.invoke(app, ["run", "-i", str(src), "-o", str(tmp_path / "out"), "--config", str(cfg), "--quiet"])
    [err] = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert r.exit_code == 1 and r.stderr.rstrip().endswith(err) and "Traceback" not in r.output, r.output
    assert str(cfg) in err and message in err


def test_eval_out_naming_a_file_is_one_line(tmp_path):
    data = tmp_path / "mine.jsonl"
    data.write_text(json.dumps({"id": "q1", "answer": "Paris is in France.", "hallucinated": False}) + "\n")
    (tmp_path / "FILE").write_text("x")
    r = runner.invoke(app, ["eval", "--data", str(data), "-v", "selfcheck", "-p", "fake", "-o", str(tmp_path / "FILE")])
    [err] = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert r.exit_code == 1 and r.stderr.rstrip().endswith(err) and "Traceback" not in r.output, r.output
    assert "is a file; pass a folder" in err and (tmp_path / "FILE").read_text() == "x"


def read_only_mount_works(folder) -> bool:
    """Whether ``unshare -m`` can mount ``folder`` read-only here (root, whom permissions do not stop)."""
    import shutil

    return os.geteuid() != 0 or (shutil.which("unshare") is not None and subprocess.run(
        ["unshare", "-m", "sh", "-c", f"mount --bind {folder} {folder} && mount -o remount,ro,bind {folder} {folder}"],
        capture_output=True).returncode == 0)


def halucheck_with_read_only(folder, args, env):
    """`halucheck ARGS` in a subprocess that cannot write ``folder`` (mounted read-only, or for a user who is
    not root, its permissions taken away)."""
    argv = [sys.executable, "-c", "import sys; from halucheck.cli import app; app(sys.argv[1:], prog_name='halucheck')",
            *args]
    if os.geteuid() == 0:
        mount = f"mount --bind {folder} {folder} && mount -o remount,ro,bind {folder} {folder} && exec \"$@\""
        return subprocess.run(["unshare", "-m", "sh", "-c", mount, "sh", *argv], capture_output=True, text=True,
                              env=env, timeout=300)
    folder.chmod(0o555)
    try:
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    finally:
        folder.chmod(0o755)


@pytest.mark.parametrize("home", ["file", "under-a-file", "read-only"])
def test_a_halucheck_home_that_is_a_file_or_read_only_is_one_line_naming_it(tmp_path, monkeypatch, home):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "tower.txt").write_text("The Eiffel Tower stands in Paris.")
    data = tmp_path / "mine.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "answer": f"Paris is in France {i}.", "hallucinated": i % 2 == 0})
                            + "\n" for i in range(24)))
    folder = tmp_path / "home"
    if home == "read-only":
        folder.mkdir()
        if not read_only_mount_works(folder):
            pytest.skip("running as root without unshare: no way to make a folder read-only here")
    else:
        folder.write_text("my notes")
    where = folder if home != "under-a-file" else folder / "cache"
    monkeypatch.setenv("HALUCHECK_HOME", str(where))
    monkeypatch.setenv("HALUCHECK_EMBED_MODEL", "fake")
    for args in (["index", str(corpus)], ["run", "-i", str(write_jsonl(tmp_path / "a.jsonl", ANSWERS[:1])), "-o",
                                          str(tmp_path / "out"), "--corpus", str(corpus), "-p", "fake", "--quiet"],
                 ["calibrate", "--data", str(data), "-v", "selfcheck", "-p", "fake"]):
        if home == "read-only":
            r = halucheck_with_read_only(folder, args, dict(os.environ))
            stderr, code, output = r.stderr, r.returncode, r.stdout + r.stderr
        else:
            r = runner.invoke(app, args)
            stderr, code, output = r.stderr, r.exit_code, r.output
        [err] = [line for line in stderr.splitlines() if line.startswith("error:")]
        assert code == 1 and stderr.rstrip().endswith(err) and "Traceback" not in output, output
        assert f"HALUCHECK_HOME={where} " in err and "point HALUCHECK_HOME at a writable folder (or unset it)" in err
        assert {"file": "is a file, not a folder", "under-a-file": f"lies under the file {folder}, not a folder",
                "read-only": "cannot be written"}[home] in err, err
        assert ("pass --db (or --index) FILE" in err) == (args[0] != "calibrate") and "delete" not in err
    if home != "read-only":
        assert folder.read_text() == "my notes"


@pytest.mark.parametrize("metrics, why", [
    ("{not json", "JSONDecodeError: Expecting property name"),
    ("[1, 2]", "a mapping of results, got list"),
    ('{"results": 5}', "AttributeError"),
    ('{"results": {"ds": {"metrics": {"auroc": {"value": "high"}}}}}', "TypeError: must be real number"),
    ("[" * 100000 + "]" * 100000, "nested too deeply"),
    (b'{"verifier": "x\xff"}', "not UTF-8 text: byte 0xff"),
])
def test_eval_compare_on_a_bad_metrics_json_is_one_line(tmp_path, metrics, why):
    data = tmp_path / "mine.jsonl"
    data.write_text(json.dumps({"id": "q1", "answer": "Paris is in France.", "hallucinated": False}) + "\n")
    good = tmp_path / "good"
    r = runner.invoke(app, ["eval", "--data", str(data), "-v", "selfcheck", "-p", "fake", "-o", str(good)])
    assert r.exit_code == 0, r.output
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "metrics.json").write_bytes(metrics if isinstance(metrics, bytes) else metrics.encode())
    (bad / "predictions.jsonl").write_text((good / "predictions.jsonl").read_text())
    r = runner.invoke(app, ["eval", "--compare", str(good), str(bad)])
    [err] = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert r.exit_code == 1 and r.stderr.rstrip().endswith(err) and "Traceback" not in r.output, r.output
    assert err.startswith(f"error: {bad / 'metrics.json'}: not a metrics.json as halucheck eval writes it (")
    assert why in err and f"or leave {bad} out of --compare" in err
    (bad / "metrics.json").write_text((good / "metrics.json").read_text())
    (bad / "predictions.jsonl").write_text('{"id": "q1"}\n')  # --common reads the predictions too
    r = runner.invoke(app, ["eval", "--compare", "--common", str(good), str(bad)])
    [err] = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert r.exit_code == 1 and f"{bad / 'predictions.jsonl'}:1: not a predictions.jsonl" in err, r.output


@pytest.mark.parametrize("text, message", [
    ("[" * 100000 + "]" * 100000, "nested too deeply to be a CSL-JSON bibliography"),
    ('{"items": [' + '{"a": ' * 3000 + "1" + "}" * 3000 + "]}", "nested too deeply to be a CSL-JSON bibliography"),
    ('[{"title": "A", "id": ' + "1" * 5000 + "}]", "write such numbers as strings"),
])
def test_a_deeply_nested_csl_json_bibliography_is_one_line(tmp_path, text, message):
    bib = tmp_path / "refs.json"
    bib.write_text(text)
    src = write_jsonl(tmp_path / "answers.jsonl", ANSWERS[:1])
    r = runner.invoke(app, ["run", "-i", str(src), "-o", str(tmp_path / "out"), "-p", "fake", "--bibliography", str(bib),
                            "--quiet"])
    [err] = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert r.exit_code == 1 and r.stderr.rstrip().endswith(err) and "Traceback" not in r.output, r.output
    assert err.startswith("error: refs.json: ") and message in err and "list of items such as" in err


# -- 36. no silent coercion ---------------------------------------------------------------------------------------------------


def test_values_of_the_wrong_kind_are_refused_not_stored_as_python_reprs(tmp_path):
    from halucheck.inputs import read_items

    src = write_jsonl(tmp_path / "answers.jsonl", [
        {"id": "q1", "answer": "Paris is in France.", "question": {"q": "when?"}},
        {"id": True, "answer": "Rome is in Italy."},
        '{"id": NaN, "answer": "Oslo is in Norway."}',
        {"id": "q4", "answer": "Bern is in Switzerland.", "context": {"c": 1}},
        {"id": 5, "answer": "Lima is in Peru.", "context": ["Lima is the capital of Peru.", "It is big."]},
    ])
    items, problems = read_items(src)
    assert [(it.id, it.context) for it in items] == [("5", "Lima is the capital of Peru.\n\nIt is big.")]
    assert [(p.line, p.fatal) for p in problems] == [(1, True), (2, True), (3, True), (4, True)]
    assert '"question" must be a string, got an object' in problems[0].message
    assert '"id" must be a string or a whole number, got a boolean' in problems[1].message
    assert '"id" must be a string or a whole number, got a number' in problems[2].message
    assert '"context" must be a string or a list of strings, got an object' in problems[3].message


def test_a_csv_with_two_answer_columns_and_an_empty_out_are_one_line_errors(tmp_path, monkeypatch):
    src = tmp_path / "answers.csv"
    src.write_text("id,answer,answer\nc1,Paris is in France.,Rome is in Italy.\n")
    monkeypatch.chdir(tmp_path)
    for args, message in ((["-i", str(src), "-o", str(tmp_path / "out")], "names the column 'answer' more than once"),
                          (["-i", str(write_jsonl(tmp_path / "a.jsonl", ANSWERS[:1])), "-o", ""], "--out is empty")):
        r = runner.invoke(app, ["run", *args, "-p", "fake", "--quiet"])
        [err] = [line for line in r.stderr.splitlines() if line.startswith("error:")]
        assert r.exit_code == 1 and r.stderr.rstrip().endswith(err) and message in err, r.output
    assert not (tmp_path / "results.jsonl").exists() and not (tmp_path / "run.duckdb").exists()


# -- 37. a bound on what a document expands to ---------------------------------------------------------------------------


def docx_bytes(paragraphs: list[str], extra: dict[str, bytes] | None = None) -> bytes:
    """A minimal .docx: the parts python-docx needs, ``paragraphs`` as the body, ``extra`` parts beside."""
    import io
    import zipfile
    from xml.sax.saxutils import escape

    w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    body = "".join(f"<w:p><w:r><w:t>{escape(p)}</w:t></w:r></w:p>" for p in paragraphs)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/'
                   'package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-'
                   'package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override '
                   'PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.'
                   'wordprocessingml.document.main+xml"/></Types>')
        z.writestr("_rels/.rels", '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/'
                   'package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/'
                   'officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>')
        z.writestr("word/document.xml", f'<?xml version="1.0"?><w:document xmlns:w="{w}"><w:body>{body}</w:body>'
                   "</w:document>")
        for name, data in (extra or {}).items():
            z.writestr(name, data)
    return buf.getvalue()


def test_a_document_past_the_size_bound_is_cut_with_one_warning_per_file(tmp_path, monkeypatch, fake_embeddings):
    """A 334 KB .docx that unpacked to 120 MB gave 133,434 chunks and 2 GB of memory, without a word."""
    import duckdb

    monkeypatch.setenv("HALUCHECK_MAX_DOC_CHARS", "5000")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    line = "The river Danube flows through Vienna and Budapest before it reaches the Black Sea."  # 83 characters
    # read by python-docx, its text past the bound; then one unpacking to 6.4 MB of XML, read as a stream that
    # stops at the bound; then one with a 60 MB part beside a short text (a zip bomb python-docx would load whole)
    (corpus / "small.docx").write_bytes(docx_bytes([line] * 100))
    (corpus / "bomb.docx").write_bytes(docx_bytes([line] * 60000 + ["The END marker is here."]))
    (corpus / "media.docx").write_bytes(docx_bytes(["Budapest is the capital of Hungary."],
                                                   {"word/media/image1.bin": bytes(60 * 2**20)}))
    (corpus / "long.txt").write_text(" ".join([line] * 200) + " The END marker is here.")
    (corpus / "notes.jsonl").write_text(json.dumps({"text": " ".join([line] * 100)}) + "\n"
                                        + json.dumps({"text": "Vienna is the capital of Austria."}) + "\n")
    (corpus / "short.txt").write_text("Vienna lies on the Danube.")
    db = tmp_path / "ix.duckdb"
    r = runner.invoke(app, ["index", str(corpus), "--db", str(db)])
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    cuts = [ln for ln in r.stderr.splitlines() if "HALUCHECK_MAX_DOC_CHARS" in ln]
    assert len(cuts) == 4, cuts  # one per file past the bound, naming the file, its size and the setting to raise
    for name in ("small.docx", "bomb.docx", "long.txt", "notes.jsonl"):
        [warning] = [c for c in cuts if f"{corpus / name} (" in c]
        assert warning.startswith("warning: ") and "5,000 characters a document may hold" in warning
        assert "set HALUCHECK_MAX_DOC_CHARS higher" in warning and ("KB" in warning or "bytes" in warning)
    assert "unpacking to 6." in next(c for c in cuts if "bomb.docx" in c)
    assert "(16,823 characters)" in next(c for c in cuts if "long.txt" in c)
    assert "notes.jsonl (8 KB): line 1: text longer than" in next(c for c in cuts if "notes.jsonl" in c)
    with duckdb.connect(str(db), read_only=True) as con:
        lengths = dict(con.execute("SELECT source, length(text) FROM documents").fetchall())
        cut = dict(con.execute("SELECT path, reason FROM files").fetchall())
    assert max(lengths.values()) <= 5000 and min(lengths[str(corpus / n)] for n in ("small.docx", "bomb.docx")) > 4900
    assert lengths[str(corpus / "media.docx")] == 35 and lengths[str(corpus / "short.txt")] == 26
    assert cut[str(corpus / "bomb.docx")] == "cut at 5000 characters" and cut[str(corpus / "short.txt")] is None
    r = runner.invoke(app, ["search", "END marker", "--db", str(db), "--mode", "bm25", "--json"])
    assert "END marker" not in r.stdout  # past the bound: not indexed
    r = runner.invoke(app, ["index", str(corpus), "--db", str(db)])  # unchanged: said again, as skipped files are
    assert sum("cut at 5000 characters (HALUCHECK_MAX_DOC_CHARS)" in ln for ln in r.stderr.splitlines()) == 4, r.output
    # raised, the bound reads the files it cut again, whole
    monkeypatch.setenv("HALUCHECK_MAX_DOC_CHARS", "10000000")
    r = runner.invoke(app, ["index", str(corpus), "--db", str(db)])
    assert r.exit_code == 0 and "HALUCHECK_MAX_DOC_CHARS" not in r.output and "4 changed" in r.stdout, r.output
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT max(length(text)) FROM documents").fetchone()[0] > 5_000_000
    r = runner.invoke(app, ["search", "END marker", "--db", str(db), "--mode", "bm25", "--json"])
    assert "END marker" in r.stdout
    monkeypatch.setenv("HALUCHECK_MAX_DOC_CHARS", "lots")
    r = runner.invoke(app, ["index", str(corpus), "--db", str(db)])
    assert r.exit_code == 1 and r.stderr.startswith("error: HALUCHECK_MAX_DOC_CHARS='lots' must be a whole number")


def test_fifos_dangling_links_and_link_loops_in_a_corpus_are_counted_and_named_as_skipped(tmp_path, fake_embeddings):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "tower.txt").write_text("The Eiffel Tower stands in Paris, France.")
    os.mkfifo(corpus / "pipe.txt")  # reading it would wait for a writer forever
    (corpus / "dangling.md").symlink_to("gone.md")
    (corpus / "loop1.txt").symlink_to("loop2.txt")
    (corpus / "loop2.txt").symlink_to("loop1.txt")
    (corpus / "sub").mkdir()
    (corpus / "sub" / "up").symlink_to("..")  # a folder loop: walked once, not forever
    reasons = {"pipe.txt": "a FIFO (named pipe), not a file", "dangling.md": "a dangling symlink (to gone.md, which "
               "does not exist)", "loop1.txt": "a symlink loop (to loop2.txt", "loop2.txt": "a symlink loop (to loop1.txt"}
    db = tmp_path / "ix.duckdb"
    for _ in range(2):  # a new index, then an unchanged one
        r = runner.invoke(app, ["index", str(corpus), "--db", str(db)])
        assert r.exit_code == 0, r.output
        assert "1 added" in r.stdout or "1 unchanged" in r.stdout
        assert ", 4 skipped;" in r.stdout, r.stdout
        for name, why in reasons.items():
            [line] = [ln for ln in r.stderr.splitlines() if f"{corpus / name}:" in ln]
            assert line.startswith(f"warning: skipped {corpus / name}: {why}") and "remove" not in line, line
    src = write_jsonl(tmp_path / "answers.jsonl", ANSWERS[:1])
    r = runner.invoke(app, ["run", "-i", str(src), "-o", str(tmp_path / "out"), "--corpus", str(corpus), "--index",
                            str(db), "-p", "fake"])
    assert r.exit_code == 0, r.output
    assert "corpus: 4 file(s) not read: 4 skipped: unreadable, empty or not a file" in r.stdout, r.stdout


@pytest.mark.parametrize("name, text", [
    ("answers.jsonl", '{"id": "a1", "answer": "The Louvre is in Paris."}\r{"id": "a2", "answer": "Rome is in Italy."}\r'),
    ("answers.csv", 'id,answer\rc1,The Louvre is in Paris.\rc2,"Rome, Italy, is old."\r'),
])
def test_cr_only_line_endings_are_line_breaks(tmp_path, name, text):
    from halucheck.evaluation.userdata import read_user_data
    from halucheck.inputs import read_items

    src = tmp_path / name
    src.write_bytes(text.encode())
    items, problems = read_items(src)
    assert not problems and [it.answer for it in items] == (
        ["The Louvre is in Paris.", "Rome is in Italy."] if name.endswith("jsonl")
        else ["The Louvre is in Paris.", "Rome, Italy, is old."])
    assert [it.line for it in items] == ([1, 2] if name.endswith("jsonl") else [2, 3])
    r = runner.invoke(app, ["run", "-i", str(src), "-o", str(tmp_path / "out"), "-p", "fake", "--quiet"])
    assert r.exit_code == 0 and "Extra data" not in r.output, r.output
    assert len(results_of(tmp_path / "out")) == 2
    data = tmp_path / ("labelled" + src.suffix)  # eval --data reads its lines alike
    data.write_bytes(text.replace('"}', '", "hallucinated": false}').replace("answer\r", "answer,hallucinated\r")
                     .replace("Paris.\r", "Paris.,false\r").replace('old."\r', 'old.",true\r').encode())
    labelled = read_user_data(data)
    assert len(labelled.items) == 2 and not labelled.problems, labelled.problems


def test_a_large_run_writes_its_report_in_linked_pages(tmp_path, monkeypatch):
    """A 50,000-answer run wrote one report.html of 212 MB; the report is now pages of PAGE_ANSWERS answers."""
    from halucheck import reports

    monkeypatch.setattr(reports, "PAGE_ANSWERS", 3)
    rows = [{"id": f"p{i}", "answer": f"The Louvre is in Paris. It opened in {1790 + i}."} for i in range(1, 8)]
    src = write_jsonl(tmp_path / "answers.jsonl", rows)
    out = tmp_path / "out"
    r = runner.invoke(app, ["run", "-i", str(src), "-o", str(out), "-p", "fake"])
    assert r.exit_code == 0, r.output
    assert f"report:  {out / 'report.html'} (page 1 of 3, 3 answers a page: report-2.html ... report-3.html)" in r.stdout
    pages = [out / n for n in ("report.html", "report-2.html", "report-3.html")]
    html = [p.read_text() for p in pages]
    for n, (page, ids) in enumerate(zip(html, (["p1", "p2", "p3"], ["p4", "p5", "p6"], ["p7"])), 1):
        assert [i for i in (f"p{k}" for k in range(1, 8)) if f"<span>{i}</span>" in page] == ids
        assert f"page {n} of 3" in page and f'id="item-{3 * n - 2}"' in page
        assert all(f'href="{name}"' in page for name in ("report.html", "report-2.html", "report-3.html")
                   if name != pages[n - 1].name)
        assert ("hallucination rate" in page) == (n == 1)  # the summary is on the first page, the others link to it
    assert "answers 7–7 of 7" in html[2] and "next →" not in html[2] and "← previous" in html[2]
    (out / "report-9.html").write_text("my notes")  # not a page halucheck wrote: left alone
    monkeypatch.setattr(reports, "PAGE_ANSWERS", 5)
    r = runner.invoke(app, ["report", str(out)])
    assert r.exit_code == 0, r.output
    assert (out / "report-2.html").is_file() and not (out / "report-3.html").exists()  # no page of the older report
    assert (out / "report-9.html").read_text() == "my notes" and "page 1 of 2" in (out / "report.html").read_text()
    # a page is a file the run writes: an input of that name is refused, as report.html is
    (out / "report-2.html").write_text(json.dumps(rows[0]) + "\n")
    r = runner.invoke(app, ["run", "-i", str(out / "report-2.html"), "-o", str(out), "-p", "fake"])
    assert r.exit_code == 1 and "is the file report-2.html that this run writes" in r.stderr, r.output
