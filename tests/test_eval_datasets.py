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


def test_multi_file_set_without_its_files_names_the_pattern(tmp_path):
    (tmp_path / "q2").mkdir()
    with pytest.raises(InputError, match=r"no \*_\*consistent\.csv in .*q2.*HALUCHECK_DATASETS"):
        load("q2", root=tmp_path)
    with pytest.raises(InputError, match="summedits"):
        load("summedits", root=tmp_path)


def test_unknown_name_and_split(root):
    with pytest.raises(InputError, match="(?i)available"):
        load("no-such-set", root=root)
    with pytest.raises(InputError, match="split"):
        load("wice", split="train", root=root)


def test_env_var_wins(root, monkeypatch):
    monkeypatch.setenv("HALUCHECK_DATASETS", str(root))
    assert dataset_root() == root


def test_registry_names():
    for name in ["factool-qa", "factool-qa-response", "factcheck-gpt", "wice", "halueval-qa", "halueval-general", "halueval2", "truthfulqa",
                 "wice-dev", "summedits", "begin", "faithdial", "q2", "contract-nli"]:
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


# ---------------------------------------------------------------- grounded sets added later: hand-checked records


def _labels(items) -> dict[str, list[int]]:
    """split -> [not hallucinated, hallucinated] counts."""
    out = {"dev": [0, 0], "test": [0, 0]}
    for i in items:
        out[i.split][i.label] += 1
    return out


def _evidence_shown(items):
    assert all(i.evidence and all(e.strip() for e in i.evidence) for i in items)


def test_wice_dev(root):
    _need(root, "wice")
    items = load("wice-dev", "all", root=root)
    by = _by_id(items)
    assert len(items) == 349 and sum(i.label for i in items) == 191 + 43  # partially + not supported
    assert _labels(items) == {"dev": [92, 188], "test": [23, 46]}
    w0 = by["wice-dev:0"]  # claim_dev.jsonl line 0: partially_supported
    assert w0.claim.startswith("Arnold is currently the publisher and editorial director of Media Play News")
    assert w0.label is True and w0.meta["label3"] == "partially_supported" and len(w0.evidence) == 67
    assert w0.meta["supporting_sentences"] == [[5, 15], [15, 17]]
    assert by["wice-dev:1"].label is True and by["wice-dev:1"].meta["label3"] == "not_supported"
    w4 = by["wice-dev:4"]  # line 4: supported, a test position
    assert w4.label is False and w4.split == "test" and w4.claim.startswith("The band's third album, \"Emotive\"")
    # the wice set still reads claim_test.jsonl
    assert load("wice", "all", root=root)[0].claim.startswith("Irene Hervey")


def test_summedits(root):
    folder = _need(root, "summedits")
    items = load("summedits", "all", root=root)
    by = _by_id(items)
    assert len(items) == 4681 and sum(i.label for i in items) == 3033  # SOURCE.md: inconsistent 3,033
    assert _labels(items) == {"dev": [1360, 2447], "test": [288, 586]}
    domains = {}
    for i in items:
        domains.setdefault(i.meta["domain"], [0, 0])[i.label] += 1
    assert domains["news"] == [321, 498] and domains["scitldr"] == [145, 321] and len(domains) == 8
    # summedits_news.json records 0 and 1: the seed summary (label 1) and its first edit (label 0), one document
    seed, edit = by["summedits:news:0:0"], by["summedits:news:0:1"]
    assert seed.meta["summedits_id"] == "63f9455b8d931ba6e664fb84_og" and seed.label is False
    assert edit.meta["summedits_id"] == "63f9455b8d931ba6e664fb84_0" and edit.label is True
    assert edit.claim.startswith("On the eve of the one-year anniversary of Russia's invasion of Ukraine, British activists")
    assert seed.group == edit.group == "summedits:news:0" and seed.evidence == edit.evidence
    assert seed.evidence[0].startswith("Send this page to someone via email")  # the document's first paragraph
    assert by["summedits:news:0:2"].label is False and by["summedits:news:0:3"].label is True
    # summedits_ectsum.json: the fifth document (records 117-144) is a test document, all its 28 summaries
    doc4 = [i for i in items if i.group == "summedits:ectsum:4"]
    assert len(doc4) == 28 and {i.split for i in doc4} == {"test"} and [i.meta["record"] for i in doc4] == list(range(117, 145))
    assert doc4[0].meta["summedits_id"] == "ectsum_CL_q4_2020_og"
    assert doc4[0].evidence[:2] == ["So now I'll provide some thoughts on why I believe what we did last year leaves us well "
                                    "positioned to continue our growth journey in 2021 and beyond.", "We expect net sales to be up 4% to 7%."]
    # positions are documents, counted per file: test = the documents at index % 5 == 4 of each file
    expected = 0
    for path in sorted(folder.glob("summedits_*.json")):
        docs: dict[str, int] = {}
        for r in json.loads(path.read_text(encoding="utf-8")):
            expected += docs.setdefault(r["doc"], len(docs)) % 5 == 4
    assert _count("summedits", root, "test") == expected
    _evidence_shown(items)
    podcast = next(i for i in items if i.meta["domain"] == "podcast")  # one line: cut into sentences
    assert len(podcast.evidence) > 10


def test_begin(root):
    folder = _need(root, "begin")
    items = load("begin", "all", root=root)
    by = _by_id(items)
    assert len(items) == 4836 - 87  # Generic excluded
    assert sum(i.label for i in items) == 278 + 307 + 250 + 2209  # Not fully attributable, per file
    assert _labels(items) == {"dev": [1371, 2434], "test": [334, 610]}
    # wow_begin_dev_wow.tsv rows 0 (t5, Fully attributable) and 1 (gpt2, Not fully attributable)
    a, n = by["begin:dev_wow:0"], by["begin:dev_wow:1"]
    assert a.label is False and a.claim.startswith("crayola shifted its focus to art products") and a.meta["model"] == "t5"
    assert a.question.startswith("strange name, but it makes sense") and a.evidence[0].startswith("originally an industrial pigment")
    assert n.label is True and n.claim.startswith("I think there is a very large thread going into university")
    assert by["begin:test_wow:3"].label is False  # "Fully attributable"
    assert by["begin:test_wow:4"].label is True and by["begin:test_wow:4"].split == "test"
    assert "begin:dev_cmu:2" not in by and "begin:dev_cmu:13" not in by  # Generic
    assert by["begin:dev_cmu:0"].label is True and by["begin:dev_cmu:0"].claim == "but i didn't watch the whole movie"
    expected = 0
    for path in sorted(folder.glob("*.tsv")):
        with open(path, encoding="utf-8", newline="") as fh:
            rows = list(csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))
        expected += sum(1 for i, r in enumerate(rows) if i % 5 == 4 and r["begin_label"] != "Generic")
    assert _count("begin", root, "test") == expected
    _evidence_shown(items)


def test_faithdial(root):
    _need(root, "faithdial")
    items = load("faithdial", "all", root=root)
    by = _by_id(items)
    # 2,404 labelled rows less 189 Generic, one empty response and three rows without knowledge
    assert len(items) == 2404 - 189 - 1 - 3
    assert _labels(items) == {"dev": [450, 1326], "test": [122, 313]}
    # gold/wow.csv: Entailment, Partial Hallucination, Hallucination; row 25 Uncooperative (entailed); 36 Generic
    assert [by[f"faithdial:gold-wow:{j}"].label for j in range(3)] == [False, True, True]
    g = by["faithdial:gold-wow:0"]
    assert g.claim.startswith("Law work involves practical legal application") and g.question == "oh, what else can you tell me about it"
    assert by["faithdial:gold-wow:1"].meta["begin_label"] == "Partial Hallucination"
    assert by["faithdial:gold-wow:25"].label is False and by["faithdial:gold-wow:25"].meta["begin_label"] == "Uncooperative"
    assert "faithdial:gold-wow:36" not in by
    # CTRL/ctrl_processed_wow.csv: row 0 entailment with no history; row 2 hallucination; row 5 entailment,hallucination
    c0 = by["faithdial:ctrl-wow:0"]
    assert c0.label is False and c0.question is None and c0.claim.startswith("Hi ! Are you familiar with the color blue ?")
    assert c0.evidence == ["Blue is one of the three primary colours of pigments in painting and traditional colour theory , "
                           "as well as in the RGB colour model ."]
    assert by["faithdial:ctrl-wow:2"].label is True and by["faithdial:ctrl-wow:2"].question.startswith("Oh that sounds really nice.")
    assert by["faithdial:ctrl-wow:5"].label is True and by["faithdial:ctrl-wow:5"].meta["begin_label"] == "entailment,hallucination"
    # gold/topical.csv: rows 0-199 and 989-993 are labelled, the rest are not; DoHA cmu row 198 has no response
    topical = [i for i in items if i.meta["part"] == "gold-topical"]
    assert all(i.position < 200 or 989 <= i.position <= 993 for i in topical) and "faithdial:gold-topical:989" in by
    assert "faithdial:doha-cmu:198" not in by and "faithdial:ctrl-topical:100" not in by  # empty response, empty knowledge
    _evidence_shown(items)


def test_q2(root):
    folder = _need(root, "q2")
    items = load("q2", "all", root=root)
    by = _by_id(items)
    assert len(items) == 600 and sum(i.label for i in items) == 300
    assert _labels(items) == {"dev": [240, 240], "test": [60, 60]}
    c = by["q2:dodeca_consistent:0"]  # dodeca_consistent.csv row 0
    assert c.label is False and c.claim == "i love gardening as well . it is considered to be relaxing ."
    assert c.question == "I like Gardening, even when I've only been doing it for a short time."
    assert c.evidence == ["Gardening is considered by many people to be a relaxing activity."]
    assert by["q2:dodeca_inconsistent:0"].label is True and by["q2:memnet_inconsistent:4"].split == "test"
    assert {i.meta["model"] for i in items} == {"dodeca", "memnet"}
    # cross_annotation.csv agrees (its *_label 1 = inconsistent) and is not loaded
    with open(folder / "cross_annotation.csv", encoding="utf-8", newline="") as fh:
        cross = {(r["episode_idx"], r["round"], r[f"{m}_response"].strip()): r[f"{m}_label"] == "1"
                 for r in csv.DictReader(fh) for m in ("dodeca", "memnet")}
    assert all(cross[(str(i.meta["episode_idx"]), str(i.meta["round"]), i.claim)] == i.label for i in items)
    _evidence_shown(items)


def test_contract_nli(root):
    folder = _need(root, "contract-nli")
    items = load("contract-nli", "all", root=root)
    by = _by_id(items)
    assert len(items) == 1037 + 2091
    label3 = {}
    for i in items:
        label3[i.meta["label3"]] = label3.get(i.meta["label3"], 0) + 1
        assert i.label == (i.meta["label3"] != "Entailment")
    assert label3 == {"Entailment": 519 + 968, "Contradiction": 95 + 220, "NotMentioned": 423 + 903}
    assert _labels(items) == {"dev": [1216, 1300], "test": [271, 341]}
    # test.json document 0, nda-1 "All Confidential Information shall be expressly identified ...": false (Contradiction)
    t = by["contract-nli:test:0:nda-1"]
    assert t.label is True and t.meta["label3"] == "Contradiction" and t.meta["document_id"] == 1
    assert t.claim == "All Confidential Information shall be expressly identified by the Disclosing Party."
    assert t.evidence[t.meta["gold_spans"][0]].startswith('For purposes of this Agreement, "Confidential Information" means')
    # dev.json document 0: nda-1 true (Entailment), nda-18 na (NotMentioned), nda-2 false
    assert by["contract-nli:dev:0:nda-1"].label is False and by["contract-nli:dev:0:nda-1"].meta["gold_spans"]
    n = by["contract-nli:dev:0:nda-18"]
    assert n.label is True and n.meta["label3"] == "NotMentioned" and n.meta["gold_spans"] == []
    assert by["contract-nli:dev:0:nda-2"].label is True
    doc0 = [i for i in items if i.group == "contract-nli:dev:0"]
    assert len(doc0) == 17 and doc0[0].meta["hypothesis_id"] == "nda-1" and doc0[-1].meta["hypothesis_id"] == "nda-20"
    raw = json.loads((folder / "dev.json").read_text(encoding="utf-8"))["documents"][0]
    assert doc0[0].evidence == [raw["text"][a:b].strip() for a, b in raw["spans"] if raw["text"][a:b].strip()]
    assert by["contract-nli:test:4:nda-1"].split == "test" and by["contract-nli:dev:5:nda-1"].split == "dev"
    assert _count("contract-nli", root, "test") == 17 * (sum(1 for i in range(61) if i % 5 == 4) + sum(1 for i in range(123) if i % 5 == 4))
    _evidence_shown(items)
