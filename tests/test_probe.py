"""The direct verdict and the trained head (halucheck/verifiers/probe/): chunking, the feature store, prompt passes
with prefix reuse on a tiny random model, fitting and loading heads, the two verifiers, sampling training items and
the `train` command's errors. No real model is run: the tiny model has the 0.5B's tokenizer (read from its
converted folder when there is one) and random weights."""

from __future__ import annotations

import json
import random
import re
from collections import Counter

import numpy as np
import pytest

from halucheck import weights
from halucheck.config import VerifierOptions
from halucheck.errors import ConfigError, InputError
from halucheck.evaluation.heads import sample
from halucheck.evaluation.items import EvalItem
from halucheck.records import Case, Claim, Evidence
from halucheck.verifiers.probe import training
from halucheck.verifiers.probe.features import MIN_REUSE, Extractor, Features, FeatureStore, extractor_for
from halucheck.verifiers.probe.head import Head, resolve
from halucheck.verifiers.probe.prompt import RECIPE, Chunk, chunks, closest, messages
from halucheck.verifiers.probe.training import Example
from halucheck.verifiers.probe.verifier import Direct, Probe, prompts_of

MODEL = "qwen2.5-coder-0.5b-instruct"
# Read at collection, before the tests' own HALUCHECK_MODELS / HALUCHECK_HOME are set (conftest): a folder the user
# already converted, whose tokenizer files can be read without converting (which would load the weights).
_USER_MODELS = weights.models_dir()

WORDS = ["river", "castle", "engine", "garden", "harbour", "lantern", "meadow", "orchard", "quarry", "tower",
         "valley", "winter", "bridge", "market", "forest", "island", "copper", "silver", "violin", "parade"]


def sentence(rng: random.Random, n_words: int) -> str:
    words = [rng.choice(WORDS) for _ in range(n_words)]
    return " ".join([words[0].capitalize(), *words[1:]]) + "."


def one_line(exc: pytest.ExceptionInfo) -> bool:
    return "\n" not in str(exc.value).strip()


# -- chunks ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [60, 200, 1600])
def test_chunks_keep_every_sentence_once_in_order_and_within_size(size):
    rng = random.Random(size)
    passages = [" ".join(sentence(rng, rng.randint(2, 6)) for _ in range(rng.randint(1, 12))) for _ in range(7)]
    assert max(len(s) for p in passages for s in re.findall(r"[^.]+\.", p)) < 60  # sentences fit a chunk
    sentences = [s for p in passages for s in re.findall(r"[^.]+\.", p)]
    sentences = [s.strip() for s in sentences]
    parts = chunks(passages, size)
    assert all(isinstance(c, Chunk) for c in parts)
    assert [(c.index, c.of) for c in parts] == [(i, len(parts)) for i in range(len(parts))]
    assert all(0 < len(c.text) <= size for c in parts)
    # each chunk is whole consecutive sentences; together: every sentence once, in order
    seen = []
    for c in parts:
        mine = [s.strip() for s in re.findall(r"[^.]+\.", c.text)]
        assert c.text == " ".join(mine)
        seen += mine
    assert seen == sentences
    # whitespace-normalised, the chunks are the passages
    assert " ".join(c.text for c in parts).split() == " ".join(passages).split()
    # greedy: a chunk ends only where the next sentence would not fit
    for c, nxt in zip(parts, parts[1:]):
        first = re.match(r"[^.]+\.", nxt.text).group()
        assert len(c.text) + 1 + len(first) > size


def test_chunks_of_a_long_passage_are_several_and_cover_it():
    rng = random.Random(1)
    text = " ".join(sentence(rng, 12) for _ in range(80))
    assert len(text) > 4000
    parts = chunks([text])
    assert len(parts) >= 3 and all(len(c.text) <= 1600 for c in parts)
    assert " ".join(c.text for c in parts) == text


@pytest.mark.parametrize("seed", range(6))
def test_joined_reads_each_overlapping_window_of_a_source_once(seed):
    from halucheck.records import Evidence
    from halucheck.verifiers.probe.prompt import joined

    rng = random.Random(seed)
    docs = {f"doc{d}.md": " ".join(sentence(rng, rng.randint(3, 8)) for _ in range(30)) for d in range(3)}
    windows = []
    for name, text in docs.items():  # overlapping windows, as a corpus index cuts them
        for start in range(0, len(text), 120):
            windows.append(Evidence(text[start:start + 200], name, start, min(len(text), start + 200)))
    hits = rng.sample(windows, 10)
    spans = joined(hits)
    # every hit's text is read, inside a span of its own source, and each span is a slice of one document
    for h in hits:
        assert any(h.text in s for s in spans)
    for s in spans:
        assert sum(s in text for text in docs.values()) == 1
    # no two spans of one source overlap: each character is read once
    located = sorted((name, text.index(s), text.index(s) + len(s)) for s in spans
                     for name, text in docs.items() if s in text)
    for (n1, _, e1), (n2, s2, _) in zip(located, located[1:]):
        assert n1 != n2 or s2 >= e1
    # the first span is the best-ranked hit's
    assert hits[0].text in spans[0]
    assert sum(len(s) for s in spans) <= sum(len(h.text) for h in hits)


def test_joined_keeps_unlocated_touching_and_differing_passages_apart():
    from halucheck.records import Evidence
    from halucheck.verifiers.probe.prompt import joined

    given = [Evidence("Alpha one.", "item-1"), Evidence("Alpha one.", "item-1")]  # eval's passages: no location
    assert joined(given) == ["Alpha one.", "Alpha one."]
    touching = [Evidence("abc.", "d", 0, 4), Evidence(" def.", "d", 4, 9)]
    assert joined(touching) == ["abc.", " def."]
    differing = [Evidence("abcdef", "d", 0, 6), Evidence("XYZghi", "d", 3, 9)]  # overlap does not read the same
    assert joined(differing) == ["abcdef", "XYZghi"]
    other_source = [Evidence("abcdef", "d", 0, 6), Evidence("defghi", "e", 3, 9)]
    assert joined(other_source) == ["abcdef", "defghi"]
    overlapping = [Evidence("defghi", "d", 3, 9), Evidence("xyz", "e", 0, 3), Evidence("abcdef", "d", 0, 6)]
    assert joined(overlapping) == ["abcdefghi", "xyz"]
    bridged = [Evidence("ab", "d", 0, 2), Evidence("fg", "d", 5, 7), Evidence("bcdef", "d", 1, 6)]
    assert joined(bridged) == ["abcdefg"]


def test_chunks_no_evidence_is_one_empty_chunk():
    assert chunks([]) == [Chunk("")]
    assert chunks(["", "  \n "]) == [Chunk("")]
    assert chunks([], 10)[0].of == 1


def test_chunks_cut_overlong_sentences_and_words_but_lose_no_text():
    long_sentence = " ".join(["lantern"] * 40) + "."  # 320 characters, one sentence
    parts = chunks([long_sentence], 50)
    assert len(parts) > 1 and all(len(c.text) <= 50 for c in parts)
    assert " ".join(c.text for c in parts).split() == long_sentence.split()
    word = "x" * 130  # one word longer than a chunk: cut inside it
    parts = chunks([word], 50)
    assert all(len(c.text) <= 50 for c in parts)
    assert "".join(c.text for c in parts) == word


def test_a_passage_boundary_ends_a_sentence():
    parts = chunks(["Copper river flows", "Silver tower stands."], len("Copper river flows") + 3)
    assert [c.text for c in parts] == ["Copper river flows", "Silver tower stands."]


def test_closest_picks_the_chunk_with_the_claims_content_words():
    parts = [Chunk("The the the of of and and a a it it is is.", 0, 3),
             Chunk("Copper mining started in the quarry near Lyon in 1850.", 1, 3),
             Chunk("The violin parade took place in winter.", 2, 3)]
    assert closest(parts, "The violin was played at the parade") == 2
    assert closest(parts, "Copper was mined at Lyon") == 1
    # stop words count for nothing; a tie goes to the first chunk
    assert closest(parts, "the of and it is") == 0
    assert closest(parts[1:], "nothing shared") == 0


def test_messages_render_document_statement_and_question():
    system, *shots, user = messages("Paris is the capital of France.", "Paris is in France.")
    assert system["role"] == "system" and user["role"] == "user"
    assert "Paris is the capital of France." in user["content"]
    assert "[statement]: Paris is in France." in user["content"]
    assert "[question]" not in user["content"]
    *_, qa = messages("Doc text here.", "Paris", question="What is the capital of France?")
    assert "[question]: What is the capital of France?" in qa["content"] and "[answer]: Paris" in qa["content"]
    *_, closed = messages("", "Paris is in France.")
    assert "no document was given" in closed["content"]
    # the worked examples: earlier turns in the item's own form, answered "Yes" or "No", both answers shown, the
    # same for every item (so every pass shares their KV)
    assert [m["role"] for m in shots] == ["user", "assistant"] * (len(shots) // 2) and shots
    assert {m["content"] for m in shots[1::2]} == {"Yes", "No"}
    assert all("Is every part of the" in m["content"] and "[document]: " in m["content"] for m in shots[0::2])
    assert messages("Another document.", "Another claim.")[:-1] == (system, *shots)
    # the document comes before the statement (the claims about one chunk share its prefix)
    assert user["content"].index("capital of France.") < user["content"].index("[statement]")


# -- the feature store -------------------------------------------------------------------------------------------
def test_feature_store_round_trip(tmp_path):
    from halucheck.store.features import FeatureRow

    rng = np.random.default_rng(0)
    store = FeatureStore(tmp_path / "sub" / "f.sqlite")
    want = {}
    for n in range(520):  # more than one SELECT of 500 keys
        row = FeatureRow(rng.normal(size=(4, 8)).astype(np.float32), float(rng.normal()), float(rng.normal()), n)
        key = FeatureStore.key(f"m@1|{RECIPE}", [n, 7, 9])
        store.put(key, row)
        want[key] = row
    assert len(store) == 520
    store.close()
    store = FeatureStore(tmp_path / "sub" / "f.sqlite")  # reopened: what was put is there
    missing = FeatureStore.key(f"m@1|{RECIPE}", [99999])
    got = store.get([*want, missing])
    assert set(got) == set(want)
    for key, row in want.items():
        g = got[key]
        assert g.hidden.dtype == np.float16 and g.hidden.shape == (4, 8)
        assert np.array_equal(g.hidden, row.hidden.astype(np.float16))
        assert (g.yes, g.no, g.tokens) == (row.yes, row.no, row.tokens)
    store.close()


def test_feature_keys_depend_on_what_makes_the_pass_and_its_tokens():
    k = FeatureStore.key("m@1|r", [1, 2, 3])
    assert k == FeatureStore.key("m@1|r", [1, 2, 3])
    assert len({k, FeatureStore.key("m@2|r", [1, 2, 3]), FeatureStore.key("m@1|r2", [1, 2, 3]),
                FeatureStore.key("m@1|r", [1, 2, 4]), FeatureStore.key("m@1|r", [1, 2]),
                FeatureStore.key("m@1|r", [12, 3])}) == 6


def test_features_margin_and_p_supported():
    f = Features(np.zeros((2, 2), np.float16), yes=2.0, no=0.5)
    assert f.margin == pytest.approx(1.5)
    assert f.p_supported == pytest.approx(1 / (1 + np.exp(-1.5)))
    assert Features(np.zeros((2, 2), np.float16), 0.0, 0.0).p_supported == pytest.approx(0.5)


def test_model_identity_of_a_folder_follows_its_config(tmp_path):
    from halucheck.verifiers.probe.features import model_identity

    folder = tmp_path / "mymodel"
    folder.mkdir()
    (folder / "config.json").write_text('{"a": 1}')

    class E:
        model = "mymodel"
        path = str(folder)

    first = model_identity(E())
    assert first.startswith("mymodel@") and first == model_identity(E())
    (folder / "config.json").write_text('{"a": 2}')
    assert model_identity(E()) != first

    class Known:
        model = MODEL

    assert model_identity(Known()) == f"{MODEL}@{weights.spec_for(MODEL).sha256[:12]}"


# -- prompt passes on a tiny random model -------------------------------------------------------------------------
class TinyEngine:
    """What the extractor uses of the embedded transformers engine."""

    name = "transformers"
    model = "tiny"
    threads = 1

    def __init__(self, hf_model, tokenizer) -> None:
        self.hf_model = hf_model
        self.tokenizer = tokenizer
        self.requests = []  # what generate was asked (nothing: direct and probe decode nothing, grades included)
        self.replies = []  # what it answers, in order; a default grade when they run out

    def generate(self, requests):
        from halucheck.engines.base import Result

        self.requests += requests
        out = []
        for _ in requests:
            out.append(self.replies.pop(0) if self.replies else
                       Result(text='{"error_severity": 3}', parsed={"error_severity": 3}, prompt_tokens=7,
                              completion_tokens=5))
        return out

    def _encode(self, messages):  # as TransformersEngine._encode
        text = self.tokenizer.apply_chat_template([dict(m) for m in messages], tokenize=False,
                                                  add_generation_prompt=True)
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]


class Pool:
    def __init__(self, engine) -> None:
        self.engine = engine
        self.roles = []

    def engine_for(self, role):
        self.roles.append(role)
        return self.engine


def _tokenizer_folder():
    if weights.status(MODEL) == "not installed":
        pytest.skip(f"{MODEL} weights are not installed (halucheck models pull {MODEL})")
    if weights.status(MODEL) == "ready":
        return weights.resolve(MODEL)
    folder = _USER_MODELS / weights.spec_for(MODEL).name
    if (folder / "config.json").is_file() and (folder / "tokenizer_config.json").is_file():
        return folder
    pytest.skip(f"{MODEL} is installed but not converted (converting loads its weights; halucheck models pull)")


@pytest.fixture(scope="module")
def tiny():
    import torch
    import transformers
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(_tokenizer_folder())
    torch.manual_seed(0)
    config = transformers.Qwen2Config(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                                      num_attention_heads=4, num_key_value_heads=2)
    model = transformers.Qwen2ForCausalLM(config).float().eval()
    return TinyEngine(model, tok)


DOC = ("The copper bridge over the river was built in 1871 by the town's engineers. It was painted silver in 1902 "
       "and closed to carts in 1950. The market on its east bank opens every Saturday and sells apples from the "
       "orchard in the valley.")
OTHER_DOC = "The violin parade takes place every winter on the island. It starts at the harbour at noon."


def _same(a: Features, b: Features) -> None:
    assert a.hidden.shape == b.hidden.shape
    assert np.allclose(a.hidden.astype(np.float32), b.hidden.astype(np.float32), atol=1e-2)
    assert abs(a.yes - b.yes) < 1e-3 and abs(a.no - b.no) < 1e-3
    assert a.tokens == b.tokens


def test_prefix_reuse_gives_the_features_of_fresh_passes(tiny):
    prompts = [messages(DOC, "The bridge was built in 1871."),
               messages(OTHER_DOC, "The parade starts at noon."),
               messages(DOC, "The copper bridge over the river was painted silver in 1902 by the engineers."),
               messages(DOC, "The bridge was built in 1871.")]  # the first again, in the same call
    ex = Extractor(tiny)
    got = ex.features(prompts)
    assert ex.passes == 3  # the repeated prompt is computed once
    assert ex.reused_tokens > 0 and ex.reused_tokens >= MIN_REUSE
    assert any(f.cached > 0 for f in got)
    assert ex.computed_tokens + ex.reused_tokens == sum(f.tokens for f in got[:3])
    fresh = Extractor(tiny)
    want = []
    for p in prompts:
        fresh.forget()
        want += fresh.features([p])
    assert fresh.reused_tokens == 0
    for a, b, p in zip(got, want, prompts):
        _same(a, b)
        assert a.tokens == len(tiny._encode(p))
        assert a.hidden.dtype == np.float16 and a.hidden.shape == (3 + 1, 64)
    # the prompts differ, and so do their features (a mix-up of the order would show)
    assert not np.allclose(want[0].hidden.astype(np.float32), want[2].hidden.astype(np.float32), atol=1e-2)
    assert abs(want[0].yes - want[2].yes) > 1e-4 or abs(want[0].no - want[2].no) > 1e-4
    # the last prompt's hidden row is the final (normed) state the logits are read from
    h = want[0].hidden[-1].astype(np.float32)
    import torch

    logits = tiny.hf_model.lm_head(torch.tensor(h)).detach().numpy()
    assert abs(logits[ex.yes_id] - want[0].yes) < 5e-2


def test_batched_passes_give_each_prompt_the_features_of_its_own_pass(tiny, monkeypatch):
    claims = ["The bridge was built in 1871.", "The bridge was painted silver in 1902.", "Carts crossed it in 1960.",
              "The market opens every Saturday and sells apples from the orchard in the valley."]
    prompts = [messages(DOC, c) for c in claims] + [messages(OTHER_DOC, "The parade starts at noon.")]
    alone = Extractor(tiny, batch=1)
    want = []
    for p in prompts:
        alone.forget()
        want += alone.features([p])
    calls = []
    forward = tiny.hf_model.model.forward
    monkeypatch.setattr(tiny.hf_model.model, "forward", lambda *a, **k: calls.append(k["input_ids"].shape) or forward(*a, **k))
    ex = Extractor(tiny, batch=8)
    got = ex.features(prompts)
    # the four claims about DOC: their shared start (instructions and DOC) once, then their own parts in one pass;
    # the prompt on another document is a batch of its own
    assert [c[0] for c in calls] == [1, 4, 1]
    for a, b in zip(got, want):
        _same(a, b)
    shared = calls[0][1]
    assert sorted(f.cached for f in got[:4]) == [0, shared, shared, shared]  # the batch's first computes it
    assert ex.computed_tokens == sum(f.tokens for f in got) - 3 * shared - got[4].cached


def test_the_same_prompt_again_reuses_all_but_its_last_token(tiny):
    p = messages(OTHER_DOC, "The parade is in winter.")
    ex = Extractor(tiny)
    first = ex.features([p])[0]
    again = ex.features([p])[0]
    assert again.cached == first.tokens - 1 and ex.passes == 2
    _same(first, again)


def test_a_store_spares_every_pass_seen_before(tiny, tmp_path):
    prompts = [messages(DOC, "The market opens on Sundays."), messages(OTHER_DOC, "The parade starts at noon.")]
    store = FeatureStore(tmp_path / "f.sqlite")
    ex = Extractor(tiny, store)
    done = []
    first = ex.features(prompts, progress=lambda d, t: done.append((d, t)))
    assert ex.passes == 2 and ex.stored == 2 and len(store) == 2
    assert done[0] == (0, 2) and done[-1] == (2, 2)
    again = ex.features(prompts)
    assert ex.passes == 2
    other = Extractor(tiny, store)  # a new run on the same store
    third = other.features(list(reversed(prompts)))
    assert other.passes == 0 and all(f.cached == 0 for f in third)
    for a, b, c in zip(first, again, reversed(third)):
        _same(a, b)
        _same(a, c)
        assert b.hidden.dtype == np.float16 and b.hidden.shape == (4, 64)


def test_a_store_never_serves_another_model_or_recipe(tiny, tmp_path, monkeypatch):
    from halucheck.verifiers.probe import features

    prompts = [messages(OTHER_DOC, "The parade is on the island.")]
    store = FeatureStore(tmp_path / "f.sqlite")
    Extractor(tiny, store).features(prompts)
    other_model = Extractor(tiny, store)
    other_model.model_id = "other@0123"
    other_model.features(prompts)
    assert other_model.passes == 1 and len(store) == 2
    monkeypatch.setattr(features, "RECIPE", "direct-v0")
    other_recipe = Extractor(tiny, store)
    other_recipe.features(prompts)
    assert other_recipe.passes == 1 and len(store) == 3


def test_extractor_for_needs_hidden_states(tiny):
    class Server:
        name = "llama-server"
        model = "m"

    with pytest.raises(ConfigError) as exc:
        extractor_for(Server(), purpose="-v direct")
    assert one_line(exc) and "transformers" in str(exc.value) and "-v direct" in str(exc.value)

    class Wrapper:
        name = "cached"

        def __init__(self, inner):
            self.inner = inner

    assert extractor_for(Wrapper(Wrapper(tiny))).engine is tiny


# -- heads -------------------------------------------------------------------------------------------------------

N_LAYERS, WIDTH, SIGNAL_ROW = 4, 8, 3


def synthetic(sets=("a", "b", "c"), per_set=40, seed=0, column=None, amp=1.5) -> list[Example]:
    """Examples whose hidden row SIGNAL_ROW carries the label in its first coordinate (``column``: set -> another
    coordinate for that set); everything else is noise."""
    rng = np.random.default_rng(seed)
    out = []
    for d in sets:
        col = (column or {}).get(d, 0)
        for i in range(per_set):
            label = i % 2 == 0
            h = rng.normal(size=(N_LAYERS + 1, WIDTH))
            h[SIGNAL_ROW, col] += amp if label else -amp
            feats = [Features(h.astype(np.float16), float(rng.normal()), float(rng.normal()))]
            out.append(Example(f"{d}:{i}", d, f"{d}:g{i // 2}", label, feats))
    return out


def balacc(y, hallucinated) -> float:
    y, hallucinated = np.asarray(y, bool), np.asarray(hallucinated, bool)
    return 0.5 * (hallucinated[y].mean() + (~hallucinated[~y]).mean())


@pytest.fixture(scope="module")
def fitted():
    exs = synthetic()
    head, choice = training.fit(exs, "m@1", N_LAYERS, "test")
    return exs, head, choice


def test_fit_finds_the_signal_and_holds_out_each_dataset(fitted):
    exs, head, choice = fitted
    assert SIGNAL_ROW in head.layers
    assert head.meta["held_out_is"] == "leave one dataset out"
    assert set(head.meta["held_out"]) == {"a", "b", "c", "all"}
    for part in ("a", "b", "c"):
        f = head.meta["held_out"][part]
        assert f["n"] == 40 and f["balacc"] > 0.8 and f["auroc"] > 0.85
    assert head.meta["sets"] == {d: {"supported": 20, "hallucinated": 20} for d in "abc"}
    assert head.meta["recipe"] == RECIPE and head.meta["model"] == "m@1" and head.meta["examples"] == 120
    assert head.platt[0] > 0  # a higher decision value is more likely hallucinated
    # on new data from the same source the calibrated head separates the classes
    new = synthetic(seed=7)
    p = head.p_hallucinated([e.representative for e in new])
    assert ((p >= 0) & (p <= 1)).all()
    assert balacc([e.label for e in new], p >= 0.5) > 0.8


def test_held_out_scores_come_from_heads_fitted_without_the_part():
    # set c carries the label in another coordinate: a head fitted on a and b cannot read it
    exs = synthetic(column={"c": 1}, per_set=60, amp=2.5)
    z = training.held_out_scores(exs, (SIGNAL_ROW,), 0.01)
    figures = training.per_part(exs, z)
    assert figures["a"]["balacc"] > 0.9 and figures["b"]["balacc"] > 0.9
    assert figures["c"]["balacc"] < 0.8  # had c been in its own training part it would be near 1
    alike = synthetic(per_set=60, amp=2.5)  # c as a and b are: then it is read well
    assert training.per_part(alike, training.held_out_scores(alike, (SIGNAL_ROW,), 0.01))["c"]["balacc"] > 0.95


def test_folds_one_per_dataset_or_by_group():
    exs = synthetic()
    parts = training.folds(exs)
    assert [sorted({exs[i].dataset for i in p}) for p in parts] == [["a"], ["b"], ["c"]]
    assert sorted(np.concatenate(parts).tolist()) == list(range(len(exs)))
    one = synthetic(sets=("only",), per_set=60)
    parts = training.folds(one)
    assert len(parts) == training.FOLDS
    assert sorted(np.concatenate(parts).tolist()) == list(range(len(one)))
    owner = {}
    for k, p in enumerate(parts):
        for i in p:
            assert owner.setdefault(one[i].group, k) == k  # a group is never split across folds
    assert training.folds(one)[0].tolist() == parts[0].tolist()  # the same folds every time


def test_fit_on_one_dataset_says_it_held_out_folds():
    head, _ = training.fit(synthetic(sets=("only",), per_set=60), "m@1", N_LAYERS, "one")
    assert head.meta["held_out_is"] == f"{training.FOLDS} folds by group"
    assert SIGNAL_ROW in head.layers and set(head.meta["held_out"]) == {"all"}
    assert head.meta["held_out"]["all"]["n"] == 60 and head.meta["held_out"]["all"]["balacc"] > 0.8


def test_layer_rows():
    assert training.layer_rows((0.5,), 28) == (14,)
    assert training.layer_rows((0.43, 0.64, 0.86), 28) == (12, 18, 24)
    assert training.layer_rows((0.0, 1.0, 0.99), 4) == (1, 4)  # never the embeddings, never past the last layer


def test_check_labels_names_the_counts():
    few = [e for e in synthetic(sets=("a",), per_set=40) if not e.label] + \
          [e for e in synthetic(sets=("a",), per_set=40) if e.label][:3]
    with pytest.raises(InputError) as exc:
        training.check_labels(few)
    assert one_line(exc) and "3 hallucinated" in str(exc.value) and "20 supported" in str(exc.value)
    enough = [e for e in synthetic(sets=("a",), per_set=16)]
    training.check_labels(enough)  # 8 of each
    with pytest.raises(InputError):
        training.fit(few, "m@1", N_LAYERS, "x")


def test_head_file_round_trip(fitted, tmp_path):
    exs, head, _ = fitted
    feats = [e.representative for e in exs]
    path = head.save(tmp_path / "heads" / "h.head")  # any name: no ".npz" added
    assert path == tmp_path / "heads" / "h.head" and path.is_file()
    loaded = Head.load(path, "m@1")
    assert loaded.layers == head.layers and loaded.platt == pytest.approx(head.platt)
    assert np.allclose(loaded.p_hallucinated(feats), head.p_hallucinated(feats), rtol=1e-5, atol=1e-6)
    again = Head.load(head.save(tmp_path / "h2.npz"))
    assert np.array_equal(again.p_hallucinated(feats), loaded.p_hallucinated(feats))
    assert loaded.meta["held_out"]["a"]["n"] == 40


def test_head_file_refuses_another_model_or_recipe(fitted, tmp_path):
    _, head, _ = fitted
    path = head.save(tmp_path / "h.npz")
    with pytest.raises(ConfigError) as exc:
        Head.load(path, "other-model@abc")
    assert one_line(exc) and "m@1" in str(exc.value) and "other-model@abc" in str(exc.value)
    # the recipe rewritten in the file
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    meta = json.loads(str(arrays["meta"]))
    meta["recipe"] = "direct-v0"
    arrays["meta"] = np.array(json.dumps(meta))
    tampered = tmp_path / "tampered.npz"
    np.savez(tampered, **arrays)
    with pytest.raises(ConfigError) as exc:
        Head.load(tampered, "m@1")
    assert one_line(exc) and "direct-v0" in str(exc.value) and RECIPE in str(exc.value)


@pytest.mark.parametrize("kind", ["text", "pickled", "no-meta", "missing"])
def test_what_is_not_a_head_file_is_a_config_error(tmp_path, kind):
    path = tmp_path / "bad.npz"
    if kind == "text":
        path.write_text("not a head\nat all\n")
    elif kind == "pickled":  # data, never code: an object array is refused
        np.savez(path, meta=np.array([{"layers": [1]}], dtype=object), mean=np.zeros(2))
    elif kind == "no-meta":
        np.savez(path, mean=np.zeros(2))
    with pytest.raises(ConfigError) as exc:
        Head.load(path, "m@1")
    assert one_line(exc) and str(path) in str(exc.value) and "halucheck train" in str(exc.value)


def test_resolve_by_path_name_or_shipped(fitted, tmp_path):
    from halucheck.verifiers.probe.head import heads_dir

    _, head, _ = fitted
    path = head.save(tmp_path / "mine.npz")
    assert resolve(str(path), "m@1").layers == head.layers
    head.save(heads_dir() / "probe-test-saved.npz")
    assert resolve("probe-test-saved", "m@1").layers == head.layers
    with pytest.raises(ConfigError) as exc:
        resolve("probe-test-saved", "another@1")
    assert one_line(exc)
    with pytest.raises(ConfigError) as exc:
        resolve("no-such-head", "m@1")
    assert one_line(exc) and "halucheck train --name no-such-head" in str(exc.value)
    with pytest.raises(ConfigError) as exc:
        resolve(None, "tiny@0123")
    assert one_line(exc) and "no head is shipped for tiny" in str(exc.value)


# -- the verifiers ---------------------------------------------------------------------------------------------


def _long_passage(seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(sentence(rng, 10) for _ in range(14))  # about 1000 characters


def two_chunk_check() -> Case:
    check = Case(Claim("The copper bridge was painted silver."),
                  (Evidence(_long_passage(1)), Evidence(_long_passage(2))))
    assert len(chunks([e.text for e in check.evidence])) == 2
    return check


def _reference(tiny, check):
    parts, prompts = prompts_of(check)
    ex = Extractor(tiny)
    out = []
    for p in prompts:
        ex.forget()
        out += ex.features([p])
    return parts, out


def _probe_head(tiny, tmp_path, sign: float, name: str, feats=None):
    """A head on row 3 (the last layer) of the tiny model's states, for its identity. With ``feats`` (two chunks'
    features) it reads the direction from the first chunk's state to the second's (``sign``: which way), its
    decision values one apart and well below 0 (both chunks supported)."""
    model_id = Extractor(tiny).model_id
    coef = np.zeros(65, np.float32)
    intercept = -3.0
    if feats is not None:
        h0, h1 = (f.hidden[3].astype(np.float32) for f in feats)
        d = h1 - h0
        coef[:64] = sign * d / float(d @ d)
        intercept = -3.0 - float(coef[:64] @ (h0 + h1) / 2)
    head = Head((3,), np.zeros(65, np.float32), np.ones(65, np.float32), coef, intercept, (1.0, 0.0),
                {"model": model_id, "recipe": RECIPE})
    return head, head.save(tmp_path / f"{name}.npz")


def test_direct_judges_every_chunk_and_names_the_deciding_one(tiny):
    check = two_chunk_check()
    pool = Pool(tiny)
    v = Direct(VerifierOptions(grade=False)).verify([check], pool)[0]
    assert pool.roles and set(pool.roles) == {"initial"}
    parts, feats = _reference(tiny, check)
    scores = np.array([1 - f.p_supported for f in feats])
    assert abs(scores[0] - scores[1]) > 1e-5  # distinct enough for the argmin to be meaningful
    best = int(np.argmin(scores))
    turn = v.chain[0]
    assert len(v.chain) == 1 and turn.chunk == {"index": best, "of": 2, "text": parts[best].text}
    assert f"chunk {best + 1} of 2" in turn.opinion
    assert v.p_hallucinated == pytest.approx(scores[best], abs=1e-4)
    assert v.factuality == (scores[best] < 0.5) and v.verifier == "direct"
    assert v.error_severity == (0 if v.factuality else None) and turn.error_severity == v.error_severity
    assert turn.prompt_tokens == sum(f.tokens for f in feats)


def test_probe_picks_the_lowest_p_hallucinated_chunk_with_either_head(tiny, tmp_path):
    check = two_chunk_check()
    parts, feats = _reference(tiny, check)
    picked = set()
    tiny.requests.clear()
    for sign, name in ((1.0, "up"), (-1.0, "down")):
        head, path = _probe_head(tiny, tmp_path, sign, name, feats)
        p = head.p_hallucinated(feats)
        assert abs(p[0] - p[1]) > 1e-2
        probe = Probe(VerifierOptions(head=str(path)))
        probe.preflight()
        v = probe.verify([check], Pool(tiny))[0]
        best = int(np.argmin(p))
        picked.add(best)
        assert v.chain[0].chunk["index"] == best and v.chain[0].chunk["of"] == 2
        assert f"chunk {best + 1} of 2" in v.chain[0].opinion
        assert v.p_hallucinated == pytest.approx(p[best], abs=1e-3)
        assert v.factuality is True and v.error_severity == 0 and v.chain[0].error_severity == 0
        assert probe.describe()["head_model"] == head.model
    assert picked == {0, 1}  # the two heads disagree, so both indexes were exercised
    assert tiny.requests == []  # a supported claim is not graded


def test_unsupported_claims_are_graded_in_their_deciding_pass_conversation(tiny, tmp_path):
    from halucheck.verifiers.severity import GRADES, conversation

    head, _ = _probe_head(tiny, tmp_path, 1.0, "flat")
    head.intercept = 3.0  # every chunk hallucinated, P = sigmoid(3); ties go to the first chunk
    path = head.save(tmp_path / "always.npz")
    a, closed = two_chunk_check(), Case(Claim("Paris is the capital of France."))
    tiny.requests.clear()
    probe = Probe(VerifierOptions(head=str(path)))
    va, vc = probe.verify([a, closed], Pool(tiny))
    assert va.factuality is False and vc.factuality is False
    assert tiny.requests == []  # no decoded call: the grade is read from a prompt pass
    digits = [str(n) for n in GRADES]
    for v, check in ((va, a), (vc, closed)):
        deciding = prompts_of(check)[1][0]
        talk = conversation(deciding)
        n = len(deciding)
        assert talk[:n] == deciding and talk[n] == {"role": "assistant", "content": "No"} and len(talk) == n + 2
        assert "How severe is the error of the statement?" in talk[-1]["content"]
        fresh, total, reused = Extractor(tiny).reply_logits(talk, digits)  # nothing kept: all computed
        assert reused == 0 and total == len(tiny._encode(talk))
        assert np.ptp(fresh) > 1e-2  # the digits' logits differ, so the argmax means something
        assert v.error_severity == GRADES[int(fresh.argmax())] and v.chain[0].error_severity == v.error_severity
        assert v.chain[0].completion_tokens == 0
    # the grade went on from the deciding pass's kept KV: only its own question was computed
    cost = probe.costs["probe"]
    assert cost.llm_calls == 3 + 2
    asked = [len(tiny._encode(prompts_of(c)[1][0])) for c in (a, closed)]
    assert cost.cached_tokens >= sum(asked)  # each grade reused its whole deciding prompt


def test_a_grade_without_the_kept_pass_is_the_same_grade(tiny):
    from halucheck.verifiers.severity import GRADES, conversation

    check = two_chunk_check()
    prompt = prompts_of(check)[1][1]
    talk = conversation(prompt)
    digits = [str(n) for n in GRADES]
    ex = Extractor(tiny)
    ex.features([prompt])
    kept, total, reused = ex.reply_logits(talk, digits)
    assert reused == len(tiny._encode(prompt)) and total > reused
    ex.forget()
    fresh, _, none = ex.reply_logits(talk, digits)
    assert none == 0 and np.allclose(kept, fresh, atol=1e-3)


def test_claims_are_judged_and_handed_on_in_groups(tiny, monkeypatch):
    """A run writes verdicts as it goes: a group's verdicts are handed on before the next group's passes, and each
    group starts from no kept KV (what it computes does not depend on the groups before it)."""
    from halucheck.verifiers.probe import verifier

    monkeypatch.setattr(verifier, "GROUP", 2)
    checks = [Case(Claim(f"The bridge was built in {1870 + i}."), (Evidence(DOC),)) for i in range(5)]
    events = []
    direct = Direct(VerifierOptions(grade=False))
    ex = direct.extractor(Pool(tiny))
    features = ex.features
    monkeypatch.setattr(ex, "features", lambda prompts, progress=None: events.append(("passes", len(prompts)))
                        or features(prompts, progress))
    forget = ex.forget
    monkeypatch.setattr(ex, "forget", lambda: events.append("forget") or forget())
    shown = []
    direct.progress = lambda done, total: shown.append((done, total))
    out = direct.verify(checks, Pool(tiny), on_verdict=lambda i, v: events.append(i))
    assert shown[-1] == (5, 5) and {t for _, t in shown} == {5}  # passes over all the groups, not each group's
    assert [d for d, _ in shown] == sorted(d for d, _ in shown) and (2, 5) in shown and (4, 5) in shown
    assert events == ["forget", ("passes", 2), 0, 1, "forget", ("passes", 2), 2, 3, "forget", ("passes", 1), 4,
                      "forget"]
    assert direct.costs["direct"].claims == 5 and direct.costs["direct"].llm_calls == 5
    alone = Direct(VerifierOptions(grade=False)).verify(checks[4:], Pool(tiny))[0]
    assert alone.p_hallucinated == out[4].p_hallucinated  # the last group computed as if it came first


def test_with_a_feature_store_groups_go_on_from_the_kv_before(tiny, monkeypatch, tmp_path):
    """A resumed eval reads its passes back from the store, so its groups need not start afresh."""
    from halucheck.verifiers.probe import verifier

    monkeypatch.setattr(verifier, "GROUP", 2)
    checks = [Case(Claim(f"The bridge was built in {1870 + i}."), (Evidence(DOC),)) for i in range(5)]
    direct = Direct(VerifierOptions(grade=False, features=str(tmp_path / "f.sqlite")))
    ex = direct.extractor(Pool(tiny))
    forgotten = []
    forget = ex.forget
    monkeypatch.setattr(ex, "forget", lambda: forgotten.append(ex.passes) or forget())
    direct.verify(checks, Pool(tiny))
    assert forgotten == [5]  # only when all is done
    assert direct.costs["direct"].cached_tokens > 0 and ex.stored == 5


def test_several_checks_in_one_call_keep_their_own_chunks(tiny, tmp_path):
    a = two_chunk_check()
    b = Case(Claim("The parade starts at noon."), (Evidence(OTHER_DOC),))
    c = Case(Claim("Paris is the capital of France."))
    direct = Direct(VerifierOptions(features=str(tmp_path / "f.sqlite"), grade=False))
    seen = []
    out = direct.verify([a, b, c], Pool(tiny), on_verdict=lambda i, v: seen.append(i))
    assert seen == [0, 1, 2] and len(out) == 3
    assert out[0].chain[0].chunk["of"] == 2
    assert out[1].chain[0].chunk == {"index": 0, "of": 1, "text": OTHER_DOC}
    assert direct.costs["direct"].llm_calls == 4 and direct.expected_calls([a, b, c]) == 4
    # no evidence: judged closed-book, never confident, no chunk named
    closed = out[2]
    assert closed.chain[0].chunk is None and "no evidence" in closed.chain[0].opinion
    assert closed.confidence <= 0.6 and 0.4 <= closed.p_hallucinated <= 0.6
    again = Direct(VerifierOptions(features=str(tmp_path / "f.sqlite"), grade=False)).verify([b, a], Pool(tiny))
    assert again[0].p_hallucinated == pytest.approx(out[1].p_hallucinated)
    assert again[1].chain[0].chunk == out[0].chain[0].chunk


def test_probe_needs_an_embedded_engine(tiny, tmp_path):
    class Server:
        name = "llama-server"
        model = "m"

    with pytest.raises(ConfigError) as exc:
        Probe().verify([two_chunk_check()], Pool(Server()))
    assert one_line(exc) and "transformers" in str(exc.value) and "-v probe" in str(exc.value)


def test_probe_on_a_profile_without_hidden_states_is_refused_before_any_work(tmp_path):
    from halucheck.verifiers import get_verifier

    with pytest.raises(ConfigError) as exc:
        Probe().preflight_engine("vllm")
    assert one_line(exc) and "'vllm' engine does not" in str(exc.value) and "-v direct" in str(exc.value)
    Probe().preflight_engine("transformers")
    Direct().preflight_engine("vllm")  # direct reads a server's log-probabilities
    with pytest.raises(ConfigError):
        get_verifier("selfcheck,probe").preflight_engine("vllm-local")  # a cascade asks each stage
    # `run` says so before it reads the input or opens the run folder
    from halucheck.config import RunOptions, Settings
    from halucheck.pipeline import Pipeline

    cfg = tmp_path / "models.yaml"
    cfg.write_text("profiles:\n  s:\n    engine: vllm\n    model: m\n    base_url: http://127.0.0.1:9/v1\n")
    opts = RunOptions(input=tmp_path / "missing.jsonl", out=tmp_path / "out", verifier="probe")
    with pytest.raises(ConfigError):
        Pipeline(opts, Settings.load(cfg, profile="s"))
    assert not (tmp_path / "out").exists()


def _alternatives(*pairs, text=None):
    from halucheck.engines.base import Result

    top = sorted(pairs, key=lambda a: -a[1])
    return Result(text=text or top[0][0], prompt_tokens=50, completion_tokens=1, cached_tokens=40,
                  logprobs=[top[0]], top_logprobs=[top])


def test_direct_through_a_server_reads_yes_and_no_among_the_alternatives():
    """On an engine without hidden states (a vLLM server), each chunk is a request for one token and its 20
    likeliest alternatives; P(supported) is read from "Yes" and "No" among them, a missing one as the least listed."""
    import math

    from halucheck.engines.base import Result
    from halucheck.engines.fake import FakeEngine
    from halucheck.verifiers.severity import GRADES

    engine = FakeEngine()
    a = two_chunk_check()
    b = Case(Claim("The parade starts at noon."), (Evidence(OTHER_DOC),))
    c = Case(Claim("The parade starts at dusk."), (Evidence(OTHER_DOC),))
    engine.enqueue(_alternatives(("Yes", -2.0), ("No", -0.2)),  # a, chunk 1
                   _alternatives(("Yes", -0.1), ("The", -3.0)),  # a, chunk 2: "No" below the last listed
                   _alternatives(("Sure", -0.1), ("The", -3.0)),  # b: neither
                   Result(error="engine error: timed out"),  # c: failed
                   )
    direct = Direct(VerifierOptions())
    va, vb, vc = direct.verify([a, b, c], Pool(engine))
    passes = [r for r in engine.requests if r.tag == "direct:pass"]
    assert len(passes) == 4 and all(r.top_logprobs == 20 and r.sampling.max_tokens == 1 and
                                    r.sampling.temperature == 0.0 and r.schema is None for r in passes)
    # a: chunk 2 supports it best: P(supported) = sigmoid(-0.1 - (-3.0))
    assert va.chain[0].chunk["index"] == 1 and va.factuality is True and va.error_severity == 0
    assert va.p_hallucinated == pytest.approx(1 - 1 / (1 + math.exp(-2.9)), abs=1e-6)
    assert va.chain[0].prompt_tokens == 100 and va.chain[0].cached_tokens == 80
    # b and c decide nothing: failed (a run asks again), never read as supported
    for v, why in ((vb, "neither 'Yes' nor 'No'"), (vc, "timed out")):
        assert v.factuality is None and v.error and why in v.error
    assert not [r for r in engine.requests if r.tag == "severity:pass"]  # nothing flagged, nothing graded

    # a flagged claim is graded by one more request, the deciding pass's conversation going on
    engine = FakeEngine()
    engine.enqueue(_alternatives(("Yes", -3.0), ("No", -0.05)),
                   _alternatives(("2", -1.5), ("4", -0.4), ("x", -2.0)))
    [v] = Direct(VerifierOptions()).verify([b], Pool(engine))
    graded = engine.requests[-1]
    assert v.factuality is False and v.error_severity == 4 and graded.tag == "severity:pass"
    n = len(engine.requests[0].messages)
    assert graded.top_logprobs == 20 and graded.messages[:n] == engine.requests[0].messages
    assert graded.messages[n] == {"role": "assistant", "content": "No"} and len(graded.messages) == n + 2
    assert str(GRADES[-1]) in graded.messages[-1]["content"]
    engine.enqueue(_alternatives(("Yes", -3.0), ("No", -0.05)), _alternatives(("x", -0.1)))
    [v] = Direct(VerifierOptions()).verify([b], Pool(engine))
    assert v.factuality is False and v.error_severity is None  # no digit among the alternatives: unrated


def test_probe_refuses_a_head_for_another_model_or_a_missing_one(tiny, tmp_path):
    head, _ = _probe_head(tiny, tmp_path, 1.0, "x")
    head.meta["model"] = "someone-else@123"
    path = head.save(tmp_path / "else.npz")
    with pytest.raises(ConfigError) as exc:
        Probe(VerifierOptions(head=str(path))).verify([two_chunk_check()], Pool(tiny))
    assert one_line(exc) and "someone-else@123" in str(exc.value)
    with pytest.raises(ConfigError) as exc:
        Probe(VerifierOptions(head="no-such-head")).preflight()
    assert one_line(exc)


def test_training_examples_read_the_closest_chunk_or_every_chunk(tiny):
    a = two_chunk_check()
    b = Case(Claim("The parade starts at noon."), (Evidence(OTHER_DOC),))
    parts, feats = _reference(tiny, a)
    near = closest(parts, a.claim.statement)
    args = ([a, b], [True, False], ["x:0", "x:1"], ["x", "x"], ["g0", "g1"])
    exs = training.examples(*args, Extractor(tiny))
    assert [(e.id, e.dataset, e.group, e.label, len(e.chunks)) for e in exs] == [("x:0", "x", "g0", True, 1),
                                                                               ("x:1", "x", "g1", False, 1)]
    _same(exs[0].chunks[0], feats[near])
    every = training.examples(*args, Extractor(tiny), every_chunk=True)
    assert [len(e.chunks) for e in every] == [2, 1]
    for got, want in zip(every[0].chunks, feats):
        _same(got, want)
    assert every[0].representative is max(every[0].chunks, key=lambda f: f.margin)
    assert Direct(VerifierOptions(grade=False)).verify([], Pool(tiny)) == []


def test_direct_and_probe_are_registered():
    from halucheck.verifiers import VERIFIERS

    assert VERIFIERS["direct"] is Direct and VERIFIERS["probe"] is Probe


# -- sampling training items -------------------------------------------------------------------------------------


def items(groups=30, per=6, true_every=2):
    return [EvalItem(id=f"s:{g}:{k}", dataset="s", claim=f"claim {g} {k}", label=k % true_every == 0, group=f"g{g}",
                     position=g) for g in range(groups) for k in range(per)]


def test_sample_is_balanced_capped_per_group_and_the_same_every_time():
    pool = items()
    s = sample(pool, 40, seed=0, per_group=2)
    assert len(s) == 40 and Counter(it.label for it in s) == {True: 20, False: 20}
    assert max(Counter(it.group for it in s).values()) <= 2
    assert len({it.id for it in s}) == 40
    assert [it.id for it in sample(pool, 40, seed=0, per_group=2)] == [it.id for it in s]
    assert [it.id for it in sample(list(pool), 40, seed=1, per_group=2)] != [it.id for it in s]
    odd = sample(pool, 41, seed=0, per_group=2)
    assert Counter(it.label for it in odd) == {True: 20, False: 21}


def test_sample_never_takes_an_excluded_item():
    pool = items()
    first = sample(pool, 40, per_group=2)
    skip = {it.id for it in first[:25]}
    s = sample(pool, 40, per_group=2, exclude=skip)
    assert not skip & {it.id for it in s} and len(s) == 40
    everything = sample(pool, None, exclude=skip)
    assert len(everything) == len(pool) - 25 and not skip & {it.id for it in everything}
    assert len(sample(pool, 10_000)) == len(pool)


def test_sample_keeps_the_group_cap_when_a_class_runs_short():
    pool = [EvalItem(id=f"f:{g}:{k}", dataset="f", claim="c", label=False, group=f"g{g}", position=g)
            for g in range(5) for k in range(10)]
    pool.append(EvalItem(id="t", dataset="f", claim="c", label=True, group="gt", position=9))
    s = sample(pool, 10, per_group=2)
    assert len(s) == 10  # 5 groups x 2 + the one hallucinated item leave room for it
    assert max(Counter(it.group for it in s).values()) <= 2


# -- the command -------------------------------------------------------------------------------------------------
def test_train_without_data_is_one_line_and_exit_2():
    from typer.testing import CliRunner

    from halucheck.cli import app

    r = CliRunner().invoke(app, ["train", "--name", "x"])
    assert r.exit_code == 2, r.output
    err = r.stderr.strip()
    assert "\n" not in err and err.startswith("error:") and "--data" in err


def test_train_and_eval_help_name_the_head_options():
    from typer.testing import CliRunner

    from halucheck.cli import app

    r = CliRunner().invoke(app, ["eval", "--help"])
    assert r.exit_code == 0 and "--head" in r.output
    r = CliRunner().invoke(app, ["train", "--help"])
    assert r.exit_code == 0 and "--name" in r.output and "--data" in r.output and "--every-chunk" in r.output


def test_a_one_class_set_trains_but_does_not_vote_in_the_choice():
    """A set of hallucinated items only (the D2C negatives) has no balanced accuracy of its own: its part is nan
    and the choice is made on the mean of the other sets, not turned into nan."""
    exs = synthetic(("a", "b", "c"))
    only = [Example(f"d:{i}", "d", f"d:g{i}", True, e.chunks) for i, e in enumerate(synthetic(("d",), seed=3)) if e.label]
    choices = training.choose(exs + only, N_LAYERS)
    assert all(np.isfinite(c.score) for c in choices) and choices[0].score > 0.8
    assert np.isnan(choices[0].figures["d"]["balacc"]) and choices[0].figures["all"]["n"] == len(exs) + len(only)
    assert choices == sorted(choices, key=lambda c: -c.score)
    assert SIGNAL_ROW in choices[0].layers


def test_through_a_server_a_runs_claims_go_out_together_and_their_grades_too():
    """A server (a GPU box) is kept busy only by many requests at once: the passes of up to 512 claims go out in
    one batch, and the grades of the flagged ones in one more, not one after another."""
    from halucheck.engines.fake import FakeEngine

    engine, batches = FakeEngine(), []
    generate = engine.generate
    engine.generate = lambda requests, *a, **k: (batches.append([r.tag for r in requests]), generate(requests, *a, **k))[1]
    checks = [Case(Claim(f"The parade starts at {h} o'clock."), (Evidence(OTHER_DOC),)) for h in range(40)]
    for k in range(40):  # every other claim leans "No"
        engine.enqueue(_alternatives(("Yes", -0.1), ("No", -3.0)) if k % 2 else
                       _alternatives(("Yes", -3.0), ("No", -0.1)))
    engine.enqueue(*[_alternatives(("3", -0.2), ("1", -2.0))] * 20)
    verdicts = Direct(VerifierOptions()).verify(checks, Pool(engine))
    assert [len(b) for b in batches] == [40, 20]
    assert set(batches[0]) == {"direct:pass"} and set(batches[1]) == {"severity:pass"}
    assert [v.error_severity for v in verdicts] == [3, 0] * 20


def test_the_default_feature_store_is_one_per_model_and_precision(tiny, monkeypatch, tmp_path):
    """int8, bfloat16 and float32 passes of one prompt differ in their last bits: a run in one precision never reads
    passes another computed."""
    from halucheck.verifiers.probe.features import default_store

    monkeypatch.setenv("HALUCHECK_HOME", str(tmp_path))
    assert len({default_store("m@abc", p) for p in ("int8", "bfloat16", "float32")}) == 3
    tiny.dtype = "int8"
    direct = Direct(VerifierOptions(grade=False, features="default"))
    direct.verify([two_chunk_check()], Pool(tiny))
    stored = sorted(p.name for p in (tmp_path / "features").glob("*.sqlite"))
    assert len(stored) == 1 and stored[0].endswith("-int8.sqlite")
    tiny.dtype = "float32"
    again = Direct(VerifierOptions(grade=False, features="default"))
    again.verify([two_chunk_check()], Pool(tiny))
    assert again.extractor(Pool(tiny)).passes == 2  # computed, not read from the int8 store
    assert len(list((tmp_path / "features").glob("*.sqlite"))) == 2
