"""`halucheck eval --data FILE`: the user's own labelled JSONL/CSV, its bad lines, corpus evidence, the CLI."""

import json
import re
from itertools import count
from pathlib import Path

import pytest
from typer.testing import CliRunner

from halucheck.cli import app
from halucheck.config import Settings
from halucheck.engines import register
from halucheck.engines.fake import FakeEngine
from halucheck.errors import InputError
from halucheck.evaluation import EvalItem, harness
from halucheck.evaluation.harness import run_eval, select_evidence
from halucheck.evaluation.userdata import (
    CONTEXT_PASSAGE_CHARS,
    add_corpus_evidence,
    context_passages,
    dataset_name,
    load_user_data,
    read_user_data,
)
from halucheck.evaluation.verifiers import text_of

runner = CliRunner()
_names = count()


def write_jsonl(path, rows):
    """Rows are dicts (written as JSON) or raw strings (written as they are)."""
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


GOOD = [
    {"id": "q1", "question": "Where is the Eiffel Tower?", "answer": "Berlin.",
     "evidence": ["The Eiffel Tower is in Paris.", "Berlin has the Brandenburg Gate."], "hallucinated": True},
    {"id": "q2", "answer": "Paris is the capital of France.", "context": "Paris is the capital and largest city of France.",
     "hallucinated": False},
    {"id": 3, "claim": "Water boils at 100 degrees Celsius at sea level.", "hallucinated": False},
]


@pytest.fixture
def fast_boot(monkeypatch):
    monkeypatch.setattr(harness, "N_BOOT", 50)  # the intervals' arithmetic is tested in test_eval_metrics


@pytest.fixture
def fake_embeddings(monkeypatch, tmp_path):
    """Hash embeddings instead of the embedding model, and corpus indexes in a temporary cache."""
    from halucheck.retrieval import get_embedder

    monkeypatch.setenv("HALUCHECK_EMBED_MODEL", "fake")
    monkeypatch.setenv("HALUCHECK_HOME", str(tmp_path / "home"))
    get_embedder.cache_clear()
    yield
    get_embedder.cache_clear()


# ---------------------------------------------------------------- reading JSONL and CSV


def test_jsonl_rows_become_eval_items(tmp_path):
    d = read_user_data(write_jsonl(tmp_path / "mine.jsonl", GOOD))
    assert d.name == "data:mine" == dataset_name(tmp_path / "mine.jsonl") and not d.problems
    a, b, c = d.items
    assert [it.id for it in d.items] == ["data:mine:q1", "data:mine:q2", "data:mine:3"]
    # different questions and evidence: a group each (the third, with neither, is its own)
    assert len({it.group for it in d.items}) == 3 and d.items[2].group == "data:mine:3"
    assert [it.position for it in d.items] == [1, 2, 3]  # the line number
    assert {it.dataset for it in d.items} == {"data:mine"}
    assert [it.label for it in d.items] == [True, False, False]
    # a question + answer is judged as such; the claim carries both for evidence selection
    assert (a.question, a.answer) == ("Where is the Eiffel Tower?", "Berlin.")
    assert text_of(a) == ("Where is the Eiffel Tower?", "Berlin.")
    assert a.claim == "Where is the Eiffel Tower? Berlin."
    assert a.evidence == GOOD[0]["evidence"]
    # an answer without a question is a plain claim; a short context is one passage
    assert (b.question, b.answer, b.claim) == (None, None, "Paris is the capital of France.")
    assert text_of(b) == (None, "Paris is the capital of France.")
    assert b.evidence == ["Paris is the capital and largest city of France."]
    # "claim" works as well as "answer"; no context, no evidence: closed-book
    assert c.claim == GOOD[2]["claim"] and c.evidence == []
    assert d.evidence_counts() == {"own": 2, "corpus": 0, "none": 1}


def test_csv_rows_with_every_label_spelling_and_evidence_form(tmp_path):
    path = tmp_path / "sheet.csv"
    path.write_text(
        'id,question,answer,context,evidence,hallucinated\n'
        'r1,,"Paris, the capital, is in France.",,"[""Paris is in France."", ""Lyon too.""]",FALSE\n'
        'r2,Who wrote Hamlet?,Marlowe.,,Shakespeare wrote Hamlet.,True\n'
        'r3,,"A claim that spans\ntwo lines.",Some context.,,1\n'
        'r4,,Zero.,,,0\n'
        '\n'
        'r5,,Yes.,,,yes\n'
        'r6,,No.,,,No\n',
        encoding="utf-8",
    )
    d = read_user_data(path)
    assert not d.problems, [str(p) for p in d.problems]
    assert [it.id.split(":")[-1] for it in d.items] == ["r1", "r2", "r3", "r4", "r5", "r6"]
    assert [it.label for it in d.items] == [False, True, True, False, True, False]
    r1, r2, r3 = d.items[:3]
    assert r1.claim == "Paris, the capital, is in France."  # a quoted comma stays in the field
    assert r1.evidence == ["Paris is in France.", "Lyon too."]  # a JSON array string is a list of passages
    assert r2.evidence == ["Shakespeare wrote Hamlet."]  # a plain string is one passage
    assert (r2.question, r2.answer) == ("Who wrote Hamlet?", "Marlowe.")
    assert r3.claim == "A claim that spans\ntwo lines." and r3.evidence == ["Some context."]
    assert [it.position for it in d.items] == [2, 3, 4, 6, 8, 9]  # a row's first line; blank lines count


def test_long_context_is_cut_into_sentences_and_the_harness_picks_the_relevant_ones(tmp_path):
    filler = " ".join(f"Sentence {i} is about the weather in town number {i}." for i in range(40))
    context = f"{filler} Marie Curie won the Nobel Prize in Physics in 1903. {filler}"
    assert len(context) > CONTEXT_PASSAGE_CHARS
    passages = context_passages(context)
    assert len(passages) == 81 and "Marie Curie won the Nobel Prize in Physics in 1903." in passages
    assert context_passages("  Short.  ") == ["Short."] and context_passages("") == []
    d = read_user_data(write_jsonl(tmp_path / "long.jsonl", [
        {"id": "x", "answer": "Marie Curie won the Nobel Prize in 1903.", "context": context, "hallucinated": False}]))
    shown = select_evidence(d.items[0].claim, d.items[0].evidence, 3)
    assert len(shown) == 3 and "Marie Curie won the Nobel Prize in Physics in 1903." in shown


def test_limit_keeps_the_first_usable_items_but_checks_every_line(tmp_path):
    rows = [{"id": f"i{n}", "answer": f"Text {n}.", "hallucinated": n % 2 == 0} for n in range(6)]
    rows.insert(1, "{broken")
    rows.append({"id": "i0", "answer": "again", "hallucinated": True})
    d = read_user_data(write_jsonl(tmp_path / "f.jsonl", rows), limit=3)
    assert [it.id for it in d.items] == ["data:f:i0", "data:f:i1", "data:f:i2"]
    assert [p.line for p in d.problems] == [2, 8]  # the problems after the limit are reported too


# ---------------------------------------------------------------- bad lines: FILE:LINE, the rest is read

OK_ROW = {"id": "ok", "answer": "The Moon orbits the Earth.", "hallucinated": False}

BAD_JSONL = [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object, got a list"),
    ({"answer": "x", "hallucinated": True}, 'missing "id"'),
    ({"id": "", "answer": "x", "hallucinated": True}, 'missing "id"'),
    ({"id": [1], "answer": "x", "hallucinated": True}, '"id" must be a string or a whole number'),
    ({"id": "ok", "answer": "again", "hallucinated": True}, "duplicate id 'ok' (first on line 1)"),
    ({"id": "b", "hallucinated": True}, 'missing "answer" (or "claim")'),
    ({"id": "b", "answer": "  ", "hallucinated": True}, '"answer" is empty'),
    ({"id": "b", "answer": 5, "hallucinated": True}, '"answer" must be a string, got a number'),
    ({"id": "b", "answer": "x", "claim": "y", "hallucinated": True}, 'both "answer" and "claim"'),
    ({"id": "b", "answer": "x"}, 'missing "hallucinated"; add true'),
    ({"id": "b", "answer": "x", "label": 1}, 'missing "hallucinated" (found "label"; rename it'),
    ({"id": "b", "answer": "x", "hallucinated": "maybe"}, "\"hallucinated\" must be true or false (also 1/0, yes/no), got 'maybe'"),
    ({"id": "b", "answer": "x", "hallucinated": 2}, '"hallucinated" must be true or false'),
    ({"id": "b", "answer": "x", "hallucinated": True, "question": ["q"]}, '"question" must be a string, got a list'),
    ({"id": "b", "answer": "x", "hallucinated": True, "context": ["a", "b"]}, 'put a list of passages in "evidence"'),
    ({"id": "b", "answer": "x", "hallucinated": True, "evidence": 7}, '"evidence" must be a list of strings, got a number'),
    ({"id": "b", "answer": "x", "hallucinated": True, "evidence": ["a", None]}, "entry 2 is null"),
]


@pytest.mark.parametrize("bad,message", BAD_JSONL, ids=[m[:30] for _, m in BAD_JSONL])
def test_each_bad_jsonl_line_is_reported_at_its_line_and_the_rest_is_read(tmp_path, bad, message):
    path = write_jsonl(tmp_path / "f.jsonl", [OK_ROW, bad, {**OK_ROW, "id": "ok2"}])
    d = read_user_data(path)
    assert [it.id for it in d.items] == ["data:f:ok", "data:f:ok2"]
    assert len(d.problems) == 1
    text = str(d.problems[0])
    assert text.startswith(f"{path}:2: ") and message in text, text


def test_non_utf8_line_is_reported_and_skipped(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_bytes(json.dumps(OK_ROW).encode() + b"\n" + b'{"id": "b", "answer": "caf\xe9", "hallucinated": true}\n')
    d = read_user_data(path)
    assert len(d.items) == 1 and str(d.problems[0]).startswith(f"{path}:2: not UTF-8") and "0xe9" in str(d.problems[0])


def test_lone_surrogates_are_replaced_and_noted_and_the_line_is_used(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_text('{"id": "s", "answer": "Oslo \\ud83d.", "hallucinated": false}\n' + json.dumps(OK_ROW) + "\n")
    warned = []
    d = load_user_data(path, warn=warned.append)
    assert [it.claim for it in d.items] == ["Oslo \ufffd.", OK_ROW["answer"]] and not d.problems
    assert [str(n) for n in d.notes] == [f"{path}:1: 1 lone UTF-16 surrogate escape(s) (like \"\\ud83d\" without its pair), "
                                         "which are not text, replaced with U+FFFD; write the whole pair "
                                         "(\"\\ud83d\\ude00\") or the character itself"]
    assert warned == [f"warning: {d.notes[0]}"]
    csv_path = tmp_path / "g.csv"
    csv_path.write_text('id,answer,evidence,hallucinated\na,First.,"[""x \\udfff""]",no\n')
    d = read_user_data(csv_path)
    assert d.items[0].evidence == ["x \ufffd"] and d.notes[0].line == 2 and "U+FFFD" in d.notes[0].message


def test_unclosed_csv_quote_is_reported_and_the_rows_after_it_are_read(tmp_path):
    path = tmp_path / "f.csv"
    path.write_text('id,answer,hallucinated\na,First.,no\nb,"Second.,yes\nc,Third.,yes\nd,"Fourth, yes.",no\n')
    d = read_user_data(path)
    assert [it.id for it in d.items] == ["data:f:a", "data:f:c", "data:f:d"]
    assert [p.line for p in d.problems] == [3]
    assert 'field "answer" at line 3, column 3 is not closed on its line' in d.problems[0].message


def test_bad_csv_rows_are_reported_at_their_line(tmp_path):
    path = tmp_path / "f.csv"
    path.write_text(
        "id,answer,evidence,hallucinated\n"
        "a,First.,,false\n"
        "b,Second,with a comma,,true\n"          # 5 fields for 4 columns
        "c,Third.,[\"unclosed,true\n"            # evidence that looks like JSON but is not
        "d,Fourth.,,perhaps\n"
        "a,Duplicate.,,true\n"
        ",No id.,,true\n"
        "e,Fifth.,,no\n",
        encoding="utf-8",
    )
    d = read_user_data(path)
    assert [it.id for it in d.items] == ["data:f:a", "data:f:e"]
    got = {p.line: p.message for p in d.problems}
    assert sorted(got) == [3, 4, 5, 6, 7]
    assert "5 fields but the header has 4" in got[3]
    assert "not a valid JSON array" in got[4]
    assert "'perhaps'" in got[5]
    assert "duplicate id 'a' (first on line 2)" in got[6]
    assert 'missing "id"' in got[7]


def test_an_unreadable_csv_row_is_reported_and_the_next_rows_are_read(tmp_path):
    path = tmp_path / "f.csv"
    path.write_text("id,answer,hallucinated\na,First.,no\nb," + "x" * 200_000 + ",yes\nc,Third.,yes\n")
    d = read_user_data(path)
    assert [it.id for it in d.items] == ["data:f:a", "data:f:c"]
    assert [p.line for p in d.problems] == [3] and "cannot be read" in d.problems[0].message


def test_load_user_data_warns_each_bad_line_then_fails_when_none_is_usable(tmp_path):
    warned = []
    d = load_user_data(write_jsonl(tmp_path / "f.jsonl", [OK_ROW, "nope"]), warn=warned.append)
    assert len(d.items) == 1 and warned == [f"warning: {tmp_path / 'f.jsonl'}:2: not valid JSON "
                                            f"(Expecting value at column 1); each line must be one JSON object like "
                                            '{"id": "q1", "answer": "...", "hallucinated": false}']
    with pytest.raises(InputError, match=r"no usable line \(2 bad line\(s\); the first, line 1: missing \"id\""):
        load_user_data(write_jsonl(tmp_path / "g.jsonl", [{"answer": "x", "hallucinated": True}, "nope"]))


@pytest.mark.parametrize("name,content,message", [
    ("missing.jsonl", None, "no such file"),
    ("items.txt", "x", "unsupported file type '.txt'"),
    ("empty.jsonl", "\n \n", "is empty"),
    ("array.jsonl", json.dumps([OK_ROW, OK_ROW]), "holds one JSON array; write one JSON object per line"),
    ("nohead.csv", "id,text,label\na,x,true\n", "lacks the column(s) answer (or claim), hallucinated"),
    ("header.csv", "id,answer,hallucinated\n", "no items"),
])
def test_file_level_problems_raise_one_error_naming_the_file(tmp_path, name, content, message):
    path = tmp_path / name
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError, match=re.escape(message)) as exc:
        load_user_data(path)
    assert str(path) in str(exc.value) and "\n" not in str(exc.value)


def test_a_folder_or_unreadable_file_is_one_error(tmp_path, monkeypatch):
    with pytest.raises(InputError, match="is a folder"):
        read_user_data(tmp_path)
    path = write_jsonl(tmp_path / "locked.jsonl", [OK_ROW])

    def denied(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(type(path), "read_bytes", denied)
    with pytest.raises(InputError, match=re.escape(f"{path}: cannot read the file (Permission denied)")):
        read_user_data(path)


# ---------------------------------------------------------------- evidence from a corpus


def corpus_dir(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tower.txt").write_text("The Eiffel Tower was completed in 1889. It stands in Paris on the Champ de Mars.")
    (docs / "river.txt").write_text("The Danube flows through Vienna and Budapest before reaching the Black Sea.")
    (docs / "moon.txt").write_text("Apollo 11 landed on the Moon in July 1969 with Neil Armstrong.")
    return docs


def test_items_without_evidence_get_their_passages_from_the_corpus(tmp_path, fake_embeddings):
    path = write_jsonl(tmp_path / "f.jsonl", [
        {"id": "t", "question": "When was the Eiffel Tower completed?", "answer": "In 1889.", "hallucinated": False},
        {"id": "own", "answer": "The Danube reaches the Black Sea.", "evidence": ["My own passage."],
         "hallucinated": False},
    ])
    d = read_user_data(path)
    got = add_corpus_evidence(d, corpus_dir(tmp_path), k=1, index=tmp_path / "idx.duckdb")
    tower, own = d.items
    assert got == 1 and d.corpus == tmp_path / "docs"
    assert len(tower.evidence) == 1 and "completed in 1889" in tower.evidence[0]
    assert tower.meta["evidence_from"] == "corpus" and tower.meta["evidence_sources"][0].startswith(
        str((tmp_path / "docs" / "tower.txt").resolve()))
    assert own.evidence == ["My own passage."]  # an item's own evidence is kept, never searched
    assert d.evidence_counts() == {"own": 1, "corpus": 1, "none": 0}
    assert d.describe()["evidence"] == {"own": 1, "corpus": 1, "none": 0}


def test_passages_from_the_corpus_keep_their_place_so_a_verifier_reads_them_as_a_run_would(tmp_path, fake_embeddings):
    from halucheck.evaluation.verifiers import case_of
    from halucheck.verifiers.probe.prompt import joined

    path = write_jsonl(tmp_path / "f.jsonl", [
        {"id": "t", "question": "When was the Eiffel Tower completed?", "answer": "In 1889.", "hallucinated": False},
        {"id": "own", "answer": "The Danube reaches the Black Sea.", "evidence": ["Mine."], "hallucinated": False},
    ])
    d = read_user_data(path)
    add_corpus_evidence(d, corpus_dir(tmp_path), k=2, index=tmp_path / "idx.duckdb")
    tower, own = (case_of(it) for it in d.items)
    docs = {p.resolve(): p.read_text() for p in (tmp_path / "docs").iterdir()}
    for e in tower.evidence:  # located: the passage is its source's text at start-end
        assert docs[Path(e.source)][e.start:e.end] == e.text and e.end > e.start
    assert [(e.source, e.end, e.text) for e in own.evidence] == [(d.items[1].id, 0, "Mine.")]  # no place: as given
    assert joined(own.evidence) == ["Mine."]
    broken = d.items[0]
    broken.meta["evidence_sources"] = ["no-span-here"] + broken.meta["evidence_sources"][1:]
    assert case_of(broken).evidence[0].source == broken.id  # a place that does not parse: read as given


def test_corpus_must_be_a_folder(tmp_path):
    d = read_user_data(write_jsonl(tmp_path / "f.jsonl", [OK_ROW]))
    with pytest.raises(InputError, match="is not a folder"):
        add_corpus_evidence(d, tmp_path / "nope", k=3)


# ---------------------------------------------------------------- the harness and the CLI

CONFIG = """
default_profile: fake
profiles:
  fake:
    engine: fake
    reply: {factuality: false, error_severity: 4, opinion: "Contradicted."}
"""


@pytest.fixture
def config(tmp_path):
    p = tmp_path / "models.yaml"
    p.write_text(CONFIG)
    return p


def scripted_config(tmp_path, engine):
    """A models.yaml whose profile ``fake`` is served by ``engine`` (to see the prompts the CLI sends)."""
    name = f"userdata-scripted-{next(_names)}"
    register(name, lambda model="", **kw: engine)
    p = tmp_path / "scripted.yaml"
    p.write_text(f"default_profile: fake\nprofiles:\n  fake:\n    engine: {name}\n")
    return p


def test_cli_eval_data_end_to_end(tmp_path, config, fast_boot):
    path = write_jsonl(tmp_path / "myfile.jsonl", [*GOOD, "{oops", {"id": "q2", "answer": "dup", "hallucinated": True}])
    out = tmp_path / "run"
    r = runner.invoke(app, ["eval", "--data", str(path), "-v", "selfcheck", "-p", "fake", "--config", str(config),
                            "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert f"warning: {path}:4: not valid JSON" in r.stderr
    assert f"warning: {path}:5: duplicate id 'q2' (first on line 2)" in r.stderr
    m = json.loads((out / "metrics.json").read_text())
    assert list(m["results"]) == ["data:myfile"]
    res = m["results"]["data:myfile"]
    assert res["n"] == 3 and res["n_positive"] == 1 and res["n_missing"] == 0
    assert m["split"] == "all" and m["verifier"] == "selfcheck/fake"
    assert m["settings"]["datasets"] == ["data:myfile"]
    assert m["settings"]["data"][0]["items"] == 3 and m["settings"]["data"][0]["bad_lines"] == 2
    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["data:myfile:q1", "data:myfile:q2", "data:myfile:3"]
    assert [r["label"] for r in rows] == [True, False, False]
    assert all(r["prediction"] is True for r in rows)  # the fake profile always says "not factual"
    assert "| selfcheck/fake | data:myfile | all | 3 |" in r.stdout
    # the run compares like any other
    r = runner.invoke(app, ["eval", "--compare", str(out)])
    assert r.exit_code == 0 and "| selfcheck/fake | data:myfile |" in r.stdout


def test_cli_eval_data_beside_a_named_set_and_limit(tmp_path, config, monkeypatch, fast_boot):
    def fake_load(name, split="dev", limit=None, skip=0):
        its = [EvalItem(id=f"{name}:{i}", dataset=name, claim=f"{name} claim {i}", label=i % 2 == 0,
                        group=f"{name}:{i}", position=i, evidence=["passage"]) for i in range(6)]
        its = [it for it in its if it.split == split]
        its = its[skip:]
        return its[:limit] if limit else its

    monkeypatch.setattr(harness, "load", fake_load)
    rows = [{"id": f"u{i}", "answer": f"User text {i}.", "hallucinated": i < 2} for i in range(7)]
    path = write_jsonl(tmp_path / "mine.jsonl", rows)
    out = tmp_path / "both"
    r = runner.invoke(app, ["eval", "-d", "a", "--data", str(path), "-n", "5", "-v", "selfcheck",
                            "--config", str(config), "-o", str(out)])
    assert r.exit_code == 0, r.output
    m = json.loads((out / "metrics.json").read_text())
    assert list(m["results"]) == ["a", "data:mine"]
    assert m["results"]["a"]["n"] == 5  # the dev split of the named set (position 4 is test)
    assert m["results"]["data:mine"]["n"] == 5  # not split (line 5 is kept), but limited
    ids = [json.loads(line)["id"] for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert "data:mine:u4" in ids and "data:mine:u5" not in ids and "a:4" not in ids
    assert m["split"] == "dev" and m["settings"]["datasets"] == ["a", "data:mine"]


def test_cli_eval_data_with_corpus_shows_the_retrieved_passage(tmp_path, fake_embeddings, fast_boot):
    eng = FakeEngine(responder=lambda req: {"reasoning": "r", "factuality": "Danube" in req.messages[-1]["content"]})
    cfg = scripted_config(tmp_path, eng)
    path = write_jsonl(tmp_path / "rivers.jsonl", [
        {"id": "r1", "question": "Which sea does the Danube reach?", "answer": "The Black Sea.", "hallucinated": False},
        {"id": "r2", "answer": "The Danube flows through Madrid.", "context": "Madrid lies on the Manzanares.",
         "hallucinated": True},
    ])
    out = tmp_path / "run"
    r = runner.invoke(app, ["eval", "--data", str(path), "--corpus", str(corpus_dir(tmp_path)), "--max-evidence", "1",
                            "-v", "selfcheck", "--config", str(cfg), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert f"{path}: 1 item(s) got evidence from" in r.stderr
    prompts = [req.messages[-1]["content"] for req in eng.requests]
    assert len(prompts) == 2
    assert "before reaching the Black Sea" in prompts[0]  # r1: the corpus passage about the Danube
    assert "Madrid lies on the Manzanares." in prompts[1] and "Black Sea" not in prompts[1]  # r2: its own context
    m = json.loads((out / "metrics.json").read_text())
    assert m["settings"]["data"][0]["evidence"] == {"own": 1, "corpus": 1, "none": 0}
    assert m["settings"]["data"][0]["corpus"] == str(tmp_path / "docs")


def test_run_eval_takes_user_data_alone(tmp_path, fast_boot):
    d = read_user_data(write_jsonl(tmp_path / "f.jsonl", GOOD))
    eng = FakeEngine(responder=lambda req: {"reasoning": "r", "factuality": "Berlin" not in req.messages[-1]["content"]})
    register(name := f"userdata-run-{next(_names)}", lambda model="", **kw: eng)
    res = run_eval([], "selfcheck", Settings.from_dict({"profiles": {"p": {"engine": name}}}), tmp_path / "r",
                   split="all", data=[d], max_evidence=1)
    assert res.items == 3 and res.metrics["results"]["data:f"]["n"] == 3
    rows = [json.loads(line) for line in (tmp_path / "r" / "predictions.jsonl").read_text().splitlines()]
    assert [r["prediction"] for r in rows] == [True, False, False]
    # max_evidence applies to user items as to the named sets: q1's 2 passages -> the 1 most relevant
    assert "Eiffel Tower is in Paris" in eng.requests[0].messages[-1]["content"]
    assert "Brandenburg" not in eng.requests[0].messages[-1]["content"]
    bad = read_user_data(write_jsonl(tmp_path / "bad.jsonl", ["x"]))
    with pytest.raises(InputError, match="bad.jsonl: no usable line"):
        run_eval([], "selfcheck", None, tmp_path / "r2", data=[bad])


@pytest.mark.parametrize("args,message", [
    (["--corpus", "docs", "-d", "wice"], "--corpus needs --data"),
    (["--data", "f.jsonl", "--extraction"], "takes no --data"),
    (["--data", "a/f.jsonl", "--data", "b/f.csv"], "would both be dataset data:f"),
    (["--data", "missing.jsonl"], "missing.jsonl: no such file"),
    (["--data", "f.txt"], "unsupported file type"),
    (["--data", "bad.jsonl"], "no usable line"),
])
def test_cli_eval_data_errors_are_one_line(tmp_path, config, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    write_jsonl(tmp_path / "f.jsonl", [OK_ROW])
    write_jsonl(tmp_path / "a" / "f.jsonl", [OK_ROW])
    (tmp_path / "b" / "f.csv").write_text("id,answer,hallucinated\nx,y,true\n")
    (tmp_path / "f.txt").write_text("x")
    write_jsonl(tmp_path / "bad.jsonl", ["nope", {"id": "x"}])
    r = runner.invoke(app, ["eval", *args, "-v", "selfcheck", "--config", str(config)])
    assert r.exit_code == 1, r.output
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], r.stderr
    if args == ["--data", "bad.jsonl"]:  # each bad line was said first, with its line
        assert "warning: bad.jsonl:1: not valid JSON" in r.stderr and "warning: bad.jsonl:2: missing" in r.stderr


def test_cli_eval_still_requires_a_dataset_or_data(config):
    r = runner.invoke(app, ["eval", "--config", str(config)])
    assert r.exit_code == 1 and "--dataset is required" in r.output and "--data FILE" in r.output


def test_twins_share_a_group_and_a_given_group_wins(tmp_path):
    ctx = "Varenholt was founded in 2009 in Tampere."
    rows = [{"id": "a", "question": "When?", "answer": "In 2009.", "context": ctx, "hallucinated": False},
            {"id": "b", "question": "When?", "answer": "In 2012.", "context": ctx, "hallucinated": True},
            {"id": "c", "question": "Where?", "answer": "In Tampere.", "context": ctx, "hallucinated": False},
            {"id": "d", "question": "Where?", "answer": "In Oulu.", "context": ctx, "hallucinated": True, "group": 7},
            {"id": "e", "answer": "x", "hallucinated": True, "group": 7},
            {"id": "f", "answer": "y", "hallucinated": True, "group": ["no"]}]
    d = read_user_data(write_jsonl(tmp_path / "twins.jsonl", rows))
    g = {it.id.rsplit(":", 1)[1]: it.group for it in d.items}
    assert g["a"] == g["b"] != g["c"]  # answers to one question on one evidence are held out together
    assert g["d"] == g["e"] == "data:twins:group:7" and g["c"] != g["d"]
    assert [p.line for p in d.problems] == [6] and '"group" must be a string or a number' in d.problems[0].message
