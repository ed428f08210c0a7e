"""An edited or deleted corpus file never leaves its old text in a run's verdicts: the index is refreshed
(only changed files read again), and exactly the claims with evidence from those files are checked again."""

import json

import pytest
from typer.testing import CliRunner

from halucheck.cli import app
from halucheck.engines import register
from halucheck.engines.fake import FakeEngine
from halucheck.retrieval import build_index, get_embedder
from halucheck.prompts import read_field

runner = CliRunner()


def responder(request):
    user = request.messages[-1]["content"]
    if request.tag == "claims:filter":
        return {"response": read_field(user, "text", last=True).strip()}
    if request.tag == "claims:extract":
        return {"claims": [read_field(user, "text", last=True).strip()]}
    if request.tag == "claims:queries":
        claim = read_field(user, "claim", last=True).strip()
        return {"queries": [claim, claim]}
    return {"opinion": "ok", "factuality": True, "error_severity": 0}


@pytest.fixture
def corpus_run(tmp_path, monkeypatch):
    monkeypatch.setenv("HALUCHECK_EMBED_MODEL", "fake")  # hash embeddings: no embedding model here
    get_embedder.cache_clear()
    engine = FakeEngine(responder=responder, max_batch=8)
    register("corpus-scripted", lambda model="", **kw: engine)
    cfg = tmp_path / "models.yaml"
    cfg.write_text("default_profile: s\nprofiles:\n  s: {engine: corpus-scripted}\n")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "founding.txt").write_text("Varenholt Instruments was founded in 1901 in Oslo.\n")
    (docs / "products.txt").write_text("The AquaProbe 3 weighs 410 grams.\n")
    (docs / "staff.txt").write_text("Varenholt employs 340 people in Tampere.\n")
    answers = tmp_path / "answers.jsonl"
    answers.write_text("\n".join(json.dumps({"id": i, "answer": a}) for i, a in [
        ("founded", "Varenholt Instruments was founded in 1901 in Oslo."),
        ("weight", "The AquaProbe 3 weighs 410 grams."),
        ("staff", "Varenholt employs 340 people in Tampere.")]) + "\n")
    args = ["run", "--corpus", str(docs), "--input", str(answers), "--out", str(tmp_path / "run"), "--config", str(cfg),
            "--index", str(tmp_path / "ix.duckdb"), "--top-k", "1", "-v", "selfcheck", "--quiet"]

    def invoke():
        res = runner.invoke(app, args)
        assert res.exit_code == 0, res.output
        rows = [json.loads(x) for x in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
        return res.output, {r["id"]: r for r in rows}

    yield docs, invoke, engine
    get_embedder.cache_clear()


def evidence_of(result):
    return [e for c in result["claims"] for e in c["evidence"]]


def test_an_edited_and_a_deleted_file_are_checked_again_and_nothing_else(corpus_run, tmp_path):
    docs, invoke, engine = corpus_run
    _, first = invoke()
    assert "1901 in Oslo" in evidence_of(first["founded"])[0]["text"]
    assert evidence_of(first["weight"])[0]["source"].endswith("products.txt")

    (docs / "founding.txt").write_text("Varenholt Instruments was founded in 1955 in Bergen.\n")
    (docs / "products.txt").unlink()
    calls_before = len(engine.requests)
    output, second = invoke()

    assert "2 corpus file(s) changed or deleted" in output and "2 claim(s)" in output
    founded = evidence_of(second["founded"])
    assert founded and "1955 in Bergen" in founded[0]["text"] and not any("Oslo" in e["text"] for e in founded)
    assert not any(e["source"].endswith("products.txt") for r in second.values() for e in evidence_of(r))
    # the untouched file's claim kept its evidence and verdict: nothing of it was asked again
    assert evidence_of(second["staff"]) == evidence_of(first["staff"])
    asked = [r.messages[-1]["content"] for r in engine.requests[calls_before:]]
    assert asked and not any(f"{field}: \"Varenholt employs 340" in a for a in asked for field in ("[text]", "[claim]"))

    # the same command once more: nothing changed, nothing checked again
    output, third = invoke()
    assert "changed or deleted" not in output and third == second


def test_search_never_returns_a_deleted_or_stale_file(corpus_run, tmp_path):
    docs, _, _ = corpus_run
    db = tmp_path / "search.duckdb"
    build_index(docs, db, progress=False)
    (docs / "founding.txt").write_text("Varenholt Instruments was founded in 1955 in Bergen.\n")
    (docs / "products.txt").unlink()
    res = runner.invoke(app, ["search", "Varenholt founded AquaProbe", "--corpus", str(docs), "--db", str(db),
                              "--json"])
    assert res.exit_code == 0, res.output
    hits = json.loads(res.output[res.output.index("["):])
    assert not any(h["source"].endswith("products.txt") for h in hits)
    assert not any("Oslo" in h["text"] for h in hits) and any("Bergen" in h["text"] for h in hits)


def test_an_index_whose_build_was_stopped_is_never_searched(corpus_run, tmp_path, monkeypatch):
    from halucheck.errors import InputError
    from halucheck.retrieval import Index, build

    docs, _, _ = corpus_run
    db = tmp_path / "half.duckdb"

    def killed(*a, **k):
        raise KeyboardInterrupt  # stands in for a SIGTERM between the chunks and BM25

    monkeypatch.setattr(build, "ensure_bm25", killed)
    with pytest.raises(KeyboardInterrupt):
        build_index(docs, db, progress=False)
    with pytest.raises(InputError, match="no index at"):  # a new index is built beside db, moved there when done
        Index.open(db)
    monkeypatch.undo()
    monkeypatch.setenv("HALUCHECK_EMBED_MODEL", "fake")
    build_index(docs, db, progress=False)  # the next build finishes it
    with Index.open(db) as index:
        assert index.search("AquaProbe", k=1)[0].source.endswith("products.txt")
    # an update of an existing index stopped half-way: the index says so and is not searched
    (docs / "products.txt").write_text((docs / "products.txt").read_text() + " It also makes AquaLens.")
    monkeypatch.setattr(build, "ensure_bm25", killed)
    with pytest.raises(KeyboardInterrupt):
        build_index(docs, db, progress=False)
    with pytest.raises(InputError, match="not finished"):
        Index.open(db)
    monkeypatch.undo()
    monkeypatch.setenv("HALUCHECK_EMBED_MODEL", "fake")
    build_index(docs, db, progress=False)
    with Index.open(db) as index:
        assert index.search("AquaLens", k=1)[0].source.endswith("products.txt")
