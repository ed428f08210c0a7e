"""What is loaded for good is left out of the garbage collector's passes, and still freed once dropped."""

import gc
import weakref

from halucheck import heap


def test_objects_kept_for_good_are_not_read_by_the_collector_and_still_freed_when_dropped():
    class Loaded:
        pass

    loaded, freed = Loaded(), []
    ref = weakref.ref(loaded, lambda r: freed.append(True))
    try:
        heap.keep()
        assert gc.get_freeze_count() > 0
        assert not any(o is loaded for o in gc.get_objects())  # no pass of the collector reads it again
        made_after = Loaded()
        assert any(o is made_after for o in gc.get_objects())  # what comes later is collected as usual
        del loaded
        assert freed and ref() is None  # nothing refers to it: freed at once all the same
    finally:
        gc.unfreeze()


def test_the_embedding_model_and_a_corpus_s_document_names_are_kept_for_good(tmp_path, monkeypatch):
    from pathlib import Path

    from halucheck.evidence import EvidenceSources
    from halucheck.retrieval import build_index
    from halucheck.retrieval.dense import FakeEmbedder

    kept = []
    monkeypatch.setattr(heap, "keep", lambda: kept.append(True))
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("The Eiffel Tower is in Paris. It was finished in 1889.")
    build_index(corpus, tmp_path / "i.duckdb", progress=False, embedder=FakeEmbedder())
    sources = EvidenceSources(Path(corpus), tmp_path / "i.duckdb", 5, built=True)
    assert sources.source_names() is not None and kept == [True]
    assert sources.source_names() is not None and kept == [True]  # once, when they are made
    sources.close()

    import sys
    import types

    from halucheck.retrieval.dense import Embedder

    model = tmp_path / "model"
    model.mkdir()
    (model / "modules.json").write_text("[]")
    loads = types.ModuleType("sentence_transformers")
    loads.SentenceTransformer = lambda *args, **kwargs: object()  # noqa: ARG005 - a model stand-in
    monkeypatch.setitem(sys.modules, "sentence_transformers", loads)
    embedder = Embedder(str(model))
    assert embedder.model is embedder.model and kept == [True, True]  # after the model loads, once
