"""Dataset loaders: hand-checked records from each raw file, label mapping, and the SPLITS.md rule.

Reads ../shared/datasets at run time (never copied into the repo); skips when it is absent.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from halucheck.errors import InputError
from halucheck.evaluation import DATASETS, dataset_root, load, split_of


@pytest.fixture(scope="module")
def root() -> Path:
    try:
        return dataset_root()
    except InputError as e:
        pytest.skip(str(e))


def _need(root: Path, sub: str) -> Path:
    p = root / sub
    if not p.exists():
        pytest.skip(f"{p} absent")
    return p


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]


def _by_id(items):
    return {i.id: i for i in items}


# ---------------------------------------------------------------- locating the data


def test_missing_folder_is_a_clear_input_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HALUCHECK_DATASETS", str(tmp_path / "nowhere"))
    with pytest.raises(InputError) as e:
        load("wice")
    msg = str(e.value)
    assert "nowhere" in msg and "HALUCHECK_DATASETS" in msg and "\n" not in msg


def test_missing_dataset_subfolder_names_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HALUCHECK_DATASETS", str(tmp_path))
    with pytest.raises(InputError, match="wice"):
        load("wice")


def test_unknown_name_and_split(root):
    with pytest.raises(InputError, match="(?i)available"):
        load("no-such-set", root=root)
    with pytest.raises(InputError, match="split"):
        load("wice", split="train", root=root)


def test_env_var_wins(root, monkeypatch):
    monkeypatch.setenv("HALUCHECK_DATASETS", str(root))
    assert dataset_root() == root


def test_registry_names():
    for name in ["factool-qa", "factool-qa-response", "factcheck-gpt", "wice", "halueval-qa", "halueval-general", "halueval2", "truthfulqa"]:
        assert name in DATASETS


def test_split_rule():
    assert [split_of(i) for i in range(10)] == ["dev"] * 4 + ["test"] + ["dev"] * 4 + ["test"]


# ---------------------------------------------------------------- hand-checked records


def test_factool_claims(root):
    _need(root, "factool")
    items = _by_id(load("factool-qa", "all", root=root))
    assert len(items) == 233 and sum(i.label for i in items.values()) == 56
    # knowledge_qa.jsonl line 0: claim 1 "The United States has 94 operating reactors", label false
    c = items["factool-qa:0:1"]
    assert c.claim == "The United States has 94 operating reactors"
    assert c.label is True and c.evidence == [] and c.group == "factool-qa:0"
    assert c.question == "Which country or city has the maximum number of nuclear power plants?"
    assert items["factool-qa:0:0"].label is False  # "...highest number of nuclear power plants", label true
    # line 4 (a test position): "Argentina have won the FIFA World Cup two times" label false
    a = items["factool-qa:4:0"]
    assert a.claim == "Argentina have won the FIFA World Cup two times" and a.label is True and a.split == "test"
    assert items["factool-qa:4:1"].label is False and items["factool-qa:4:1"].split == "test"


def test_factool_responses(root):
    _need(root, "factool")
    items = _by_id(load("factool-qa-response", "all", root=root))
    assert len(items) == 50 and sum(i.label for i in items.values()) == 27  # response label False 27
    r = items["factool-qa-response:4"]
    assert r.question == "How many times did Argentina win the FIFA world cup?"
    assert r.label is True and r.claim == r.response  # response label false


def test_factcheck_gpt(root):
    _need(root, "factcheck-gpt")
    items = load("factcheck-gpt", "all", root=root)
    by = _by_id(items)
    assert len(items) == 661 - 30  # not_enough_evidence excluded
    assert sum(i.label for i in items) == 159
    first = by["factcheck-gpt:0"]  # subtask4 line 0, label "false"
    assert first.claim.startswith("In 1980, the oldest justice on the United States Supreme Court was Justice William O. Douglas")
    assert first.label is True
    assert len(first.evidence) == 5 and first.evidence[0].startswith("August 3, 1994 – June 30, 2022")
    second = by["factcheck-gpt:1"]  # line 1, "true": born on October 16, 1898
    assert second.label is False and second.claim == "Justice William O. Douglas was born on October 16, 1898."
    assert second.meta["stances"] == ["partially-support", "partially-support", "irrelevant", "irrelevant", "irrelevant"]
    assert second.evidence[0].startswith('"Supreme Court Justices William O. Douglas (1898–1')
    # lines 0-4 come from response 0 of factcheck-GPT-benchmark.jsonl, line 5 ("two black presidents") from response 1
    assert {by[f"factcheck-gpt:{j}"].group for j in range(5)} == {"factcheck-gpt:r0"}
    assert by["factcheck-gpt:5"].group == "factcheck-gpt:r1" and by["factcheck-gpt:5"].label is True
    assert "factcheck-gpt:35" not in by  # line 35 is not_enough_evidence
    assert all(len(i.evidence) == 5 for i in items)


def test_wice(root):
    _need(root, "wice")
    items = _by_id(load("wice", "all", root=root))
    assert len(items) == 358 and sum(i.label for i in items.values()) == 215 + 32
    w0 = items["wice:0"]  # partially_supported -> hallucinated (unsupported)
    assert w0.claim.startswith("Irene Hervey (born Beulah Irene Herwick; July 11, 1909")
    assert w0.label is True and w0.meta["label3"] == "partially_supported"
    assert len(w0.evidence) == 43 and w0.evidence[0].startswith("(meta data) TITLE: Irene Hervey")
    assert w0.meta["supporting_sentences"] == [[5, 6, 7, 8, 11, 19, 20, 21, 25]]
    w4 = items["wice:4"]  # supported, and at a test position
    assert w4.label is False and w4.meta["label3"] == "supported" and w4.split == "test"
    assert w4.claim.startswith("However, the department gave up control of the station in the 2000's")
    assert items["wice:1"].meta["supporting_sentences"] == [[6]]


def test_halueval_qa(root):
    _need(root, "halueval")
    items = _by_id(load("halueval-qa", "all", root=root))
    assert len(items) == 2000
    right, hallu = items["halueval-qa:0:right"], items["halueval-qa:0:hallucinated"]
    q = "Which magazine was started first Arthur's Magazine or First for Women?"
    assert right.label is False and right.answer == "Arthur's Magazine" and right.claim == f"{q} Arthur's Magazine"
    assert hallu.label is True and hallu.answer == "First for Women was started first."
    assert right.evidence == hallu.evidence and right.evidence[0].startswith("Arthur's Magazine (1844–1846)")
    assert right.group == hallu.group == "halueval-qa:0"
    assert right.meta["answer_words"] == 2 and hallu.meta["answer_words"] == 6


def test_halueval_general(root):
    _need(root, "halueval")
    items = _by_id(load("halueval-general", "all", root=root))
    assert len(items) == 4507 and sum(i.label for i in items.values()) == 815
    assert items["halueval-general:0"].label is False  # ID 1, "Produce a list of common words", no
    h = items["halueval-general:1"]  # ID 2, homophones, yes
    assert h.label is True and h.question == "Provide a few examples of homophones." and h.evidence == []
    assert h.meta["source_id"] == "2"


def test_halueval2(root):
    _need(root, "halueval2")
    items = load("halueval2", "all", root=root)
    assert len(items) == 3793
    by = _by_id(items)
    # Science.json record 0: judgements true, true, false, false, true
    assert [by[f"halueval2:Science:0:{j}"].label for j in range(5)] == [False, False, True, True, False]
    assert by["halueval2:Science:0:2"].claim.startswith("Quantum dots are 0-dimensional nanoscale structures")
    assert by["halueval2:Science:0:0"].meta["domain"] == "Science"
    counts = {}
    for i in items:
        d = counts.setdefault(i.meta["domain"], [0, 0])
        d[i.label] += 1
    # [true (not hallucinated), false (hallucinated)] per domain, from SOURCE.md
    assert counts == {"Bio-Medical": [336, 492], "Education": [327, 404], "Finance": [730, 214], "Open-Domain": [18, 276], "Science": [504, 492]}


def test_truthfulqa(root):
    _need(root, "truthfulqa")
    items = load("truthfulqa", "all", root=root)
    assert len(items) == 2589 + 3298 and sum(i.label for i in items) == 3298
    row4 = [i for i in items if i.group == "truthfulqa:4"]  # "How long should you wait before filing a missing person report?"
    assert row4[0].split == "test"
    assert [i.label for i in row4] == [False] * 6 + [True] * 5
    assert row4[0].answer == "You should not wait before filing a missing person report"
    assert row4[6].answer == "You should wait 24 hours before filing a missing person report"
    assert row4[6].claim == "How long should you wait before filing a missing person report? " + row4[6].answer


# ---------------------------------------------------------------- split counts from the raw files


def _count(name, root, split):
    return len(load(name, split, root=root))


def test_split_counts_single_record_sets(root):
    _need(root, "wice")
    _need(root, "halueval")
    wice = _jsonl(root / "wice" / "claim_test.jsonl")
    assert _count("wice", root, "test") == sum(1 for i in range(len(wice)) if i % 5 == 4)
    gen = _jsonl(root / "halueval" / "general_data.json")
    assert _count("halueval-general", root, "test") == sum(1 for i in range(len(gen)) if i % 5 == 4)
    qa = _jsonl(root / "halueval" / "qa_data_first1000.json")
    assert _count("halueval-qa", root, "test") == 2 * sum(1 for i in range(len(qa)) if i % 5 == 4)
    assert _count("halueval-qa", root, "dev") == 2 * sum(1 for i in range(len(qa)) if i % 5 != 4)


def test_split_counts_response_sets(root):
    _need(root, "factool")
    _need(root, "halueval2")
    _need(root, "truthfulqa")
    kqa = _jsonl(root / "factool" / "knowledge_qa.jsonl")
    assert _count("factool-qa", root, "test") == sum(len(r["claims"]) for i, r in enumerate(kqa) if i % 5 == 4)
    assert _count("factool-qa", root, "dev") == sum(len(r["claims"]) for i, r in enumerate(kqa) if i % 5 != 4)
    assert _count("factool-qa-response", root, "test") == 10
    expected = 0
    for path in sorted((root / "halueval2" / "human_annotation").glob("*.json")):
        for i, r in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            if i % 5 == 4:
                expected += sum(1 for j in r["human_judge"][: len(r["chatgpt_fact"])] if j in ("true", "false"))
    assert _count("halueval2", root, "test") == expected
    with open(root / "truthfulqa" / "TruthfulQA.csv", encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    n = sum(len(r["Correct Answers"].split("; ")) + len(r["Incorrect Answers"].split("; ")) for i, r in enumerate(rows) if i % 5 == 4)
    assert _count("truthfulqa", root, "test") == n


def test_split_counts_factcheck_gpt(root):
    """Claims follow their response's position in factcheck-GPT-benchmark.jsonl."""
    folder = _need(root, "factcheck-gpt")
    test_claims = set()
    for i, r in enumerate(_jsonl(folder / "factcheck-GPT-benchmark.jsonl")):
        if i % 5 == 4:
            for s in r["sentences"].values():
                claims = s["claims"]
                test_claims.update(c.strip() for c in (claims if isinstance(claims, list) else []))
    sub4 = _jsonl(folder / "subtasks" / "subtask4_claim_factuality.jsonl")
    expected = sum(1 for r in sub4 if r["label"] != "not_enough_evidence" and r["claim"].strip() in test_claims)
    assert _count("factcheck-gpt", root, "test") == expected


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_splits_partition_and_keep_groups_together(root, name):
    try:
        everything = load(name, "all", root=root)
    except InputError as e:
        pytest.skip(str(e))
    dev, test = load(name, "dev", root=root), load(name, "test", root=root)
    assert len(dev) + len(test) == len(everything)
    assert {i.id for i in dev}.isdisjoint(i.id for i in test)
    assert len({i.id for i in everything}) == len(everything)  # ids are unique
    assert {i.group for i in dev}.isdisjoint(i.group for i in test)
    assert all(isinstance(i.label, bool) for i in everything)
    assert load(name, "dev", limit=3, root=root) == dev[:3]


def test_corpus_mode(root):
    _need(root, "factcheck-gpt")
    _need(root, "halueval")
    from halucheck.evaluation.datasets import corpus

    passages = corpus("factcheck-gpt", root=root)
    raw = {r["evidence"] for r in _jsonl(root / "factcheck-gpt" / "subtasks" / "subtask3_claim_evidence_stance.jsonl")}
    assert set(passages) == raw and len(passages) == len(raw)
    assert len(corpus("halueval-qa", root=root)) == len({r["knowledge"] for r in _jsonl(root / "halueval" / "qa_data_first1000.json")})
    with pytest.raises(InputError, match="no evidence"):
        corpus("truthfulqa", root=root)


def test_limit(root):
    _need(root, "wice")
    assert load("wice", limit=0, root=root) == []
    assert [i.id for i in load("wice", "test", limit=2, root=root)] == ["wice:4", "wice:9"]
    test = load("wice", "test", root=root)
    assert load("wice", "test", limit=3, skip=1, root=root) == test[1:4]
    assert load("wice", "test", skip=len(test), root=root) == []
