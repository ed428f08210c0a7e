"""The Python API (`halucheck.Checker`) with the fake engine: typed verdicts, models made once, `run` equal
to the CLI's, one-line errors; and once with the real 0.5B model (slow)."""

import json
import re

import pytest
from typer.testing import CliRunner

from halucheck import engines
from halucheck.cli import app
from halucheck.engines.fake import FakeEngine
from halucheck.errors import ConfigError, HalucheckError, InputError
from halucheck.prompts import read_field, read_statement
from halucheck.records import Evidence, Turn

CONFIG = """
default_profile: counted
profiles:
  counted:
    engine: counted
  debating:
    engine: counted
    verifier: debate
"""

ANSWERS = [
    {"id": "tower", "question": "Where is the Eiffel Tower?", "answer": "The Eiffel Tower is in Berlin. It was completed in 1889.",
     "context": "The Eiffel Tower stands in Paris, France. Its construction was completed in 1889."},
    {"id": "short", "question": "Where is the Louvre?", "answer": "Paris.",
     "context": "The Louvre is a museum in Paris."},
]


def split(text):
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]


def responder(request):
    """Replies by stage; a claim mentioning Berlin is judged false."""
    user = request.messages[-1]["content"]
    if request.tag == "claims:filter":
        return {"response": read_field(user, "text", last=True)}
    if request.tag == "claims:extract":
        return {"claims": split(read_field(user, "text", last=True))}
    if request.tag == "claims:queries":
        return {"queries": [read_field(user, "claim", last=True)]}
    false = "Berlin" in read_statement(user)
    return {"opinion": "It is in Paris." if false else "As stated.", "reasoning": "It is in Paris." if false else "As stated.",
            "factuality": not false, "error_severity": 4 if false else 0, "reason": "settled", "winner": "trust"}


class Counted(FakeEngine):
    made: list["Counted"] = []

    def __init__(self, model="", **options):
        super().__init__(model=model, responder=responder, **options)
        self.closed = False
        Counted.made.append(self)

    def close(self):
        self.closed = True
        super().close()


@pytest.fixture
def config(tmp_path, monkeypatch):
    from halucheck.retrieval import get_embedder

    Counted.made = []
    engines.register("counted", Counted)
    monkeypatch.setenv("HALUCHECK_EMBED_MODEL", "fake")  # a context is searched with hash embeddings
    get_embedder.cache_clear()
    p = tmp_path / "models.yaml"
    p.write_text(CONFIG)
    yield p
    get_embedder.cache_clear()


def test_a_false_claim_comes_back_hallucinated_with_its_evidence_and_typed_fields(config):
    from halucheck import Checker, ClaimVerdict

    with Checker(config=config) as checker:
        v = checker.check("The Eiffel Tower is in Berlin.", evidence=["The Eiffel Tower is in Paris, France."])
    assert isinstance(v, ClaimVerdict)
    assert v.hallucinated is True and v.factuality is False and v.verifier == "selfcheck"
    assert v.text == "The Eiffel Tower is in Berlin." and v.basis == "evidence" and v.parts_judged == 1
    assert v.evidence == (Evidence("The Eiffel Tower is in Paris, France.", "<evidence>"),)
    assert isinstance(v.confidence, float) and 0.5 <= v.confidence <= 1
    assert isinstance(v.p_hallucinated, float) and v.p_hallucinated > 0.5 and v.p_raw == v.p_hallucinated
    assert v.severity is None or isinstance(v.severity, int)
    assert v.calibrated is False and v.calibration.startswith("uncalibrated")
    assert v.trace and all(isinstance(t, Turn) for t in v.trace) and v.reasoning == "It is in Paris."
    assert v.to_dict()["factuality"] is False and v.to_dict()["basis"] == "evidence"

    with Checker(config=config) as checker:
        right = checker.check("Paris.", question="Where is the Eiffel Tower?",
                              context="Intro.\n\nThe Eiffel Tower is in Paris, France.")
        none = checker.check("The Eiffel Tower is in Berlin.")
    assert right.hallucinated is False and right.question == "Where is the Eiffel Tower?"
    assert [(e.text, e.source, e.start) for e in right.evidence] == [
        ("Intro.", "<context>", 0), ("The Eiffel Tower is in Paris, France.", "<context>", 8)]
    assert none.basis == "closed-book" and none.evidence == () and none.confidence <= 0.6


def test_models_are_made_once_and_closed_with_the_checker(config, tmp_path):
    from halucheck import Checker

    checker = Checker(config=config)
    first = checker.check("The Eiffel Tower is in Berlin.", evidence=["It is in Paris."])
    second = checker.check("The Louvre is in Paris.", evidence=["The Louvre is a museum in Paris."])
    done = checker.run(ANSWERS, out=tmp_path / "run")
    assert first.hallucinated is True and second.hallucinated is False and done.summary["hallucinated"] == 1
    assert len(Counted.made) == 1 and not Counted.made[0].closed
    checker.close()
    assert Counted.made[0].closed


def test_the_check_command_prints_what_the_api_gives(config):
    from halucheck import Checker

    args = ["The Eiffel Tower is in Berlin.", "-e", "The Eiffel Tower is in Paris."]
    r = CliRunner().invoke(app, ["check", *args, "--config", str(config), "--json"])
    assert r.exit_code == 0, r.output
    with Checker(config=config) as checker:
        api = checker.check(args[0], evidence=[args[2]]).to_dict()
    assert json.loads(r.stdout) == api


def test_without_a_verifier_the_profiles_own_is_used(config):
    from halucheck import Checker

    with Checker(profile="debating", config=config) as checker:
        assert checker.verifier == "debate"
        v = checker.check("The Eiffel Tower is in Berlin.", evidence=["It is in Paris."])
    assert v.verifier == "debate" and len(v.trace) > 1
    assert Checker(profile="debating", verifier="selfcheck", config=config).verifier == "selfcheck"
    assert Checker(config=config).verifier == "selfcheck"  # no `verifier:` in the profile: DEFAULT_VERIFIER
    r = CliRunner().invoke(app, ["check", "The Eiffel Tower is in Berlin.", "-e", "It is in Paris.", "-p", "debating",
                                 "--config", str(config), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["verifier"] == "debate"


def test_run_over_items_writes_what_the_cli_writes(config, tmp_path):
    from halucheck import Checker

    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(a, ensure_ascii=False) + "\n" for a in ANSWERS), encoding="utf-8")
    r = CliRunner().invoke(app, ["run", "--input", str(path), "--out", str(tmp_path / "cli"), "--config", str(config),
                                 "--quiet"])
    assert r.exit_code == 0, r.output
    with Checker(config=config) as checker:
        done = checker.run(ANSWERS, out=tmp_path / "api")
        from_file = checker.run(path, out=tmp_path / "api-file")
    cli = (tmp_path / "cli" / "results.jsonl").read_text(encoding="utf-8")
    assert done.results.read_text(encoding="utf-8") == cli == from_file.results.read_text(encoding="utf-8")
    assert done.report.is_file() and done.summary["checked"] == 2 and done.undecided == 0
    answers = done.answers()
    assert [a.id for a in answers] == ["tower", "short"]
    tower = answers[0]
    assert tower.hallucinated is True and [c.hallucinated for c in tower.claims] == [True, False]
    berlin = tower.claims[0]
    assert berlin.text == "The Eiffel Tower is in Berlin." and berlin.basis == "evidence"
    assert berlin.evidence and all(isinstance(e, Evidence) for e in berlin.evidence)
    assert berlin.trace and all(isinstance(t, Turn) for t in berlin.trace) and berlin.reasoning == "It is in Paris."


@pytest.mark.parametrize("make, error, words", [
    (lambda c, cfg, tmp: c(profile="nope", config=cfg), ConfigError, "unknown profile 'nope'"),
    (lambda c, cfg, tmp: c(verifier="nosuch", config=cfg), ConfigError, "nosuch"),
    (lambda c, cfg, tmp: c(config=tmp / "missing.yaml"), ConfigError, "does not exist"),
    (lambda c, cfg, tmp: c(config=cfg).check("  "), InputError, "the text to check is empty"),
    (lambda c, cfg, tmp: c(config=cfg).check("c", evidence=["ok", 3]), InputError, "evidence[1] is int"),
    (lambda c, cfg, tmp: c(config=cfg).check("c", context=["a"]), InputError, "context must be a string"),
    (lambda c, cfg, tmp: c(config=cfg).run([{"answer": "a"}, "b"], out=tmp / "r"), InputError, "items[1] is str"),
    (lambda c, cfg, tmp: c(config=cfg).run({"answer": "a"}, out=tmp / "r"), InputError, "items is one mapping"),
    (lambda c, cfg, tmp: c(config=cfg).run(ANSWERS, corpus=tmp / "none", out=tmp / "r"), InputError, "is not a folder"),
    (lambda c, cfg, tmp: c(config=cfg).run(ANSWERS, out=tmp / "r", top_k=0), ConfigError, "at least 1"),
    (lambda c, cfg, tmp: c(config=cfg).run(tmp / "none.jsonl", out=tmp / "r"), InputError, "none.jsonl"),
])
def test_bad_input_is_a_one_line_error_naming_what_to_fix(config, tmp_path, make, error, words):
    from halucheck import Checker

    with pytest.raises(HalucheckError) as caught:
        make(Checker, config, tmp_path)
    assert isinstance(caught.value, error), repr(caught.value)
    assert words in str(caught.value) and "\n" not in str(caught.value)
    assert not Counted.made  # refused before any model was made


@pytest.mark.slow
def test_one_claim_with_the_real_model(model_ready):
    from halucheck import Checker

    with Checker(profile="cpu-0.5b") as checker:
        v = checker.check("The Eiffel Tower is in Berlin.",
                          evidence=["The Eiffel Tower is a wrought-iron lattice tower in Paris, France."])
    assert v.verifier == "selfcheck" and len(v.trace) == 1 and v.reasoning.strip()
    assert v.factuality in (True, False) and 0.0 <= v.p_hallucinated <= 1.0
    assert v.hallucinated == (not v.factuality) and v.basis == "evidence"
