"""A debate's checked quotes reach every output: results.jsonl, report.html and `check --json`, each quote
marked verified or not; the verdict follows the Leader's winner through the run store."""

import json

import pytest
from typer.testing import CliRunner

from halucheck import engines
from halucheck.cli import app
from halucheck.config import DebateConfig, Settings
from halucheck.engines.fake import FakeEngine
from halucheck.pipeline import Pipeline, RunOptions

CORPUS_TEXT = "The Eiffel Tower is a wrought-iron lattice tower in Paris, France. It was completed in 1889."


def responder(request):
    stage = request.tag
    if stage == "claims:filter":
        return {"response": "The Eiffel Tower is in Berlin."}
    if stage == "claims:extract":
        return {"claims": ["The Eiffel Tower is in Berlin."]}
    if stage == "claims:queries":
        return {"queries": ["Eiffel Tower location", "Eiffel Tower city"]}
    role = stage.split(":")[1]
    if role == "initial":
        return {"reasoning": "Looks right.", "factuality": True}
    if role == "leader":
        return {"reason": "The quote puts it in Paris.", "winner": "skeptic"}
    if request.schema["title"] == "stance_factual":
        return {"quotes": ["The tower stands in Berlin since 1889"], "argument": "It says so."}  # invented
    return {"finding": "contradicted", "quotes": ["a wrought-iron lattice tower in Paris, France"],
            "argument": "Paris, not Berlin.", "error_severity": 4}


@pytest.fixture
def scripted_engine():
    """The engine `quoting`, answering every stage with the replies above."""
    engines.register("quoting", lambda model="", **kw: FakeEngine(responder=responder))  # conftest restores ENGINES


def test_quotes_and_their_checks_reach_results_and_the_report(tmp_path, scripted_engine):
    corpus = tmp_path / "docs"
    corpus.mkdir()
    (corpus / "eiffel.txt").write_text(CORPUS_TEXT)
    src = tmp_path / "answers.jsonl"
    src.write_text(json.dumps({"id": "a1", "answer": "The Eiffel Tower is in Berlin."}) + "\n")
    opts = RunOptions(input=src, out=tmp_path / "out", corpus=corpus, verifier="debate",
                      debate=DebateConfig(min_rounds=1, max_rounds=1))
    pipe = Pipeline(opts, Settings.from_dict({"profiles": {"q": {"engine": "quoting"}}}), log=lambda m: None)
    try:
        pipe.run()
    finally:
        pipe.close()
    result = json.loads((tmp_path / "out" / "results.jsonl").read_text().splitlines()[0])
    claim = result["claims"][0]
    # the Trust side's invented quote is void; the Leader, reading both checks, names the Skeptic
    assert claim["factuality"] is False and result["hallucinated"] is True
    chain = claim["chain"]
    skeptic = next(t for t in chain if t["role"] == "skeptic")
    trust = next(t for t in chain if t["role"] == "trust")
    assert skeptic["quotes"] == [{"text": "a wrought-iron lattice tower in Paris, France", "verified": True,
                                  "passage": 1}]
    assert trust["void"] is True and trust["quotes"][0]["verified"] is False
    assert chain[-1]["role"] == "leader" and chain[-1]["winner"] == "skeptic" and chain[-1]["completion_tokens"] > 0
    html = (tmp_path / "out" / "report.html").read_text()
    assert "✔" in html and "verified in passage [1]" in html
    assert "✘" in html and "not verified: not in the passages word for word" in html
    assert "void: no verified quote" in html
    # the passage the verified quote came from is the one the report marks as cited
    assert claim["evidence"][0]["cited_by"] == 1


def test_check_json_marks_each_quote(tmp_path, scripted_engine):
    config = tmp_path / "models.yaml"
    config.write_text("profiles:\n  q:\n    engine: quoting\n")
    r = CliRunner().invoke(app, ["check", "The Eiffel Tower is in Berlin.", "--evidence", CORPUS_TEXT, "--json",
                                 "-v", "debate", "--max-rounds", "1", "--config", str(config), "-p", "q"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    turns = out["chain"] if "chain" in out else out["verdict"]["chain"]
    quotes = [q for t in turns for q in t.get("quotes", [])]
    assert {q["verified"] for q in quotes} == {True, False}
