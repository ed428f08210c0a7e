"""`halucheck check` end to end with the fake engine, and its one-line errors."""

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from halucheck.cli import app

runner = CliRunner()

CONFIG = """
default_profile: fake
profiles:
  fake:
    engine: fake
    reply: {factuality: false, error_severity: 4, reasoning: "Paris, not Berlin.", opinion: "Paris, not Berlin."}
  down:
    engine: vllm
    model: m
    base_url: http://127.0.0.1:9/v1
    timeout_s: 2
    max_attempts: 1
"""


@pytest.fixture
def config(tmp_path):
    p = tmp_path / "models.yaml"
    p.write_text(CONFIG)
    return p


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_check_json_contract(config):
    r = invoke("check", "-v", "debate", "The Eiffel Tower is in Berlin.", "--evidence", "The Eiffel Tower is in Paris.",
               "--config", config, "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["factuality"] is False and out["error_severity"] == 4 and 0 <= out["confidence"] <= 1
    chain = out["chain"]
    assert chain[0]["state"] == "S0" and chain[0]["role"] == "initial"
    assert all(set(t) >= {"state", "role", "opinion", "factuality", "error_severity"} for t in chain)
    assert {t["state"] for t in chain[1:]} <= {"S1", "S2"}
    assert chain[-1]["role"] == "leader"


def test_check_options_reach_the_debate(config):
    r = invoke("check", "-v", "debate", "c", "-e", "ev", "--config", config, "--json", "--min-rounds", "1", "--max-rounds", "1",
               "--policy", "always-skeptic")
    chain = json.loads(r.stdout)["chain"]
    assert [t["state"] for t in chain] == ["S0", "S2", "S2", "S2"]


def test_check_text_output(config):
    r = invoke("check", "-v", "debate", "The Eiffel Tower is in Berlin.", "-e", "In Paris.", "--config", config)
    assert r.exit_code == 0
    assert "NOT FACTUAL" in r.stdout and "severity 4/5" in r.stdout and "Paris, not Berlin." in r.stdout


def test_check_without_evidence_is_never_confident(config):
    r = invoke("check", "The Eiffel Tower is in Berlin.", "--config", config, "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["factuality"] is False and out["basis"] == "closed-book" and out["confidence"] <= 0.6
    with_evidence = json.loads(invoke("check", "The Eiffel Tower is in Berlin.", "-e", "It is in Paris.", "--config",
                                      config, "--json").stdout)
    assert with_evidence["basis"] == "evidence" and with_evidence["confidence"] > 0.6
    r = invoke("check", "The Eiffel Tower is in Berlin.", "--config", config)
    assert "rests on the model's own knowledge alone" in r.stdout


def test_evidence_file_passages(config, tmp_path):
    f = tmp_path / "ev.txt"
    f.write_text("First passage.\n\nSecond passage.\n")
    r = invoke("check", "c", "-f", f, "--config", config, "--json")
    assert r.exit_code == 0


@pytest.mark.parametrize(
    "args, message",
    [
        (["check", "  "], "the claim is empty"),
        (["check", "c", "--profile", "nope"], "unknown profile 'nope'"),
        (["check", "c", "--policy", "random"], "unknown policy 'random'"),
        (["check", "c", "-f", "/nonexistent/ev.txt"], "evidence file /nonexistent/ev.txt does not exist"),
        (["check", "c", "-e", "ev", "--profile", "down"], "cannot reach the vLLM server at http://127.0.0.1:9/v1"),
    ],
)
def test_bad_input_is_one_line_error(config, args, message):
    r = invoke(*args, "--config", config)
    assert r.exit_code == 1
    err = r.stderr.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err and "Traceback" not in err


def test_missing_model_package_is_one_line_error(config, tmp_path, monkeypatch):
    import dataclasses

    from halucheck import weights

    name = "smollm2-135m-instruct"
    missing = dataclasses.replace(weights.KNOWN_MODELS[name], packages=("halucheck-test-no-such-part",))
    monkeypatch.setitem(weights.KNOWN_MODELS, name, missing)
    monkeypatch.setenv("HALUCHECK_HOME", str(tmp_path / "home"))  # nothing converted here
    monkeypatch.delenv("HALUCHECK_MODELS")
    cfg = tmp_path / "m.yaml"
    cfg.write_text(f"profiles:\n  q:\n    engine: transformers\n    model: {name}\n")
    r = invoke("check", "c", "-e", "e", "--config", cfg)
    err = r.stderr.strip()
    assert r.exit_code == 1 and err.startswith("error: ") and "\n" not in err, err
    assert "is not installed" in err and f"halucheck models pull {name}" in err


def test_help_loads_no_heavy_library():
    code = "import sys; from halucheck.cli import app; import typer.testing as t; t.CliRunner().invoke(app, ['--help']); " \
           "print(sorted(m for m in ('torch', 'transformers', 'vllm', 'duckdb', 'outlines') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_version_flags_and_profiles_in_help():
    from halucheck import __version__

    got = invoke("--version")
    assert got.exit_code == 0 and got.output.strip() == f"halucheck {__version__}"
    text = invoke("check", "--help").output
    line = next(l for l in text.splitlines() if "--json" in l)
    assert "<bool>" not in line  # a flag, not an option taking true/false
    for args in ((), ("models",), ("run",), ("models", "list")):  # typer's own --help, on groups and commands
        assert "<bool>" not in invoke(*args, "--help").output
    # --profile lists the profiles of the models.yaml in use, the default marked
    assert "(default)" in " ".join(text.split()) and "cpu-0.5b" in text


def test_models_list_marks_the_default_and_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models.yaml").write_text("default_profile: p\nprofiles:\n  p: {engine: transformers, model: qwen2.5-coder-0.5b-instruct}\n")
    lines = invoke("models", "list").output.splitlines()
    marked = [l for l in lines if l.startswith("*") and "instruct " in l]
    assert len(marked) == 1 and "qwen2.5-coder-0.5b-instruct" in marked[0]
    assert all(("pip install" in l or "models pull" in l) for l in lines if "instruct " in l)


def test_check_gives_the_calibrated_probability_of_a_stored_calibrator(config, tmp_path, monkeypatch):
    from halucheck.verifiers import calibration
    from halucheck.cli.app import settings_of

    monkeypatch.setenv("HALUCHECK_HOME", str(tmp_path / "home"))
    r = invoke("check", "-v", "debate", "The Eiffel Tower is in Berlin.", "-e", "In Paris.", "--config", config, "--json")
    out = json.loads(r.stdout)
    assert out["calibrated"] is False and out["calibration"].startswith("uncalibrated")
    raw = out["p_hallucinated"]
    assert raw is not None

    prof = settings_of(config, None, None).profile_for("initial")
    # an overconfident verifier: its P = raw is right only 60 % of the time, P = 1 - raw 40 %
    scores = [raw] * 10 + [1 - raw] * 10
    labels = [True] * 6 + [False] * 4 + [True] * 4 + [False] * 6
    cal = calibration.fit(scores, labels, methods=["isotonic"], verifier="debate", profile=prof.name,
                          model=prof.model, datasets=["toy"], split="dev")
    calibration.save(cal)
    r = invoke("check", "-v", "debate", "The Eiffel Tower is in Berlin.", "-e", "In Paris.", "--config", config, "--json")
    out = json.loads(r.stdout)
    assert out["calibrated"] is True and out["p_raw"] == raw
    assert out["p_hallucinated"] == pytest.approx(cal.apply(raw), abs=1e-4) and out["p_hallucinated"] != raw
    assert out["calibrated_decision"] == cal.decide(raw)
    assert "isotonic map for debate/fake fitted on toy" in out["calibration"]
    r = invoke("check", "-v", "debate", "The Eiffel Tower is in Berlin.", "-e", "In Paris.", "--config", config)
    assert f"(raw {raw:.2f})" in r.stdout and "calibrated: isotonic map" in r.stdout

    # fitted on another model: refused before any call, never applied
    calibration.save(calibration.fit(scores, labels, methods=["isotonic"], verifier="debate", profile=prof.name,
                                     model="another-model", split="dev"))
    r = invoke("check", "-v", "debate", "c", "-e", "ev", "--config", config)
    assert r.exit_code == 1 and "another-model" in r.stderr and "calibrate" in r.stderr
    # a named calibrator (or its file) is used only when asked for, the other model's default left alone
    named = calibration.fit(scores, labels, methods=["temperature"], verifier="debate", profile=prof.name,
                            model=prof.model, name="toys", datasets=["toy"], split="dev")
    calibration.save(named)
    for choice in ("toys", str(calibration.calibration_path("debate", prof.name, name="toys"))):
        r = invoke("check", "-v", "debate", "The Eiffel Tower is in Berlin.", "-e", "In Paris.", "--config", config, "--json",
                   "--calibration", choice)
        out = json.loads(r.stdout)
        assert out["calibrated"] is True and out["p_hallucinated"] == pytest.approx(named.apply(raw), abs=1e-4)
        assert "temperature map 'toys' for debate/fake" in out["calibration"]
    r = invoke("check", "-v", "debate", "c", "-e", "ev", "--config", config, "--calibration", "legal")
    assert r.exit_code == 1 and "no calibrator named 'legal'" in r.stderr and "stored: toys" in r.stderr


def test_run_check_and_eval_default_to_the_verifier_that_measured_best(config, tmp_path):
    """selfcheck: the best mean balanced accuracy on the test splits with the default 1.5B
    (docs/eval-comparison.md); the debate is one flag away."""
    from halucheck.config import DEFAULT_VERIFIER, RunOptions

    assert DEFAULT_VERIFIER == "selfcheck" and RunOptions(input=tmp_path, out=tmp_path).verifier == "selfcheck"
    out = json.loads(invoke("check", "The Eiffel Tower is in Berlin.", "-e", "In Paris.", "--config", config,
                            "--json").stdout)
    assert out["verifier"] == "selfcheck" and [t["role"] for t in out["chain"]] == ["initial"]
    out = json.loads(invoke("check", "-v", "debate", "The Eiffel Tower is in Berlin.", "-e", "In Paris.", "--config",
                            config, "--json").stdout)
    assert out["verifier"] == "debate" and len(out["chain"]) > 1


def test_check_run_and_eval_share_the_debate_flags_and_their_defaults():
    """The debate's flags are declared once (cli/app.py) with config's defaults, and each command taking them
    gets them as one DebateFlags."""
    import typer.main

    from halucheck.cli.app import DebateFlags, with_debate_flags
    from halucheck.config import DebateConfig

    group = typer.main.get_command(app)
    debate = {"policy", "min_rounds", "max_rounds", "prompts", "leader_both_orders"}
    for name in ("check", "run", "eval"):
        defaults = {p.name: p.default for p in group.commands[name].params if p.name in debate}
        assert DebateConfig(**defaults) == DebateConfig(), name

    seen = []
    wrapped = with_debate_flags(lambda verbose=False, debate=DebateFlags(): seen.append((verbose, debate)))
    wrapped(verbose=True, policy="true-trust", min_rounds=0, max_rounds=3, prompts="paper", leader_both_orders=False)
    assert seen == [(True, DebateFlags("true-trust", 0, 3, "paper", False))]
    assert seen[0][1].config() == DebateConfig("true-trust", 0, 3, "paper", False)
