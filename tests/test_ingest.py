"""Readers per file type, chunking with exact character offsets, and skipping of bad files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from halucheck import ingest
from halucheck.ingest import SkipFile, chunk_text, read_file
from halucheck.text import sentence_spans

DATA = Path(__file__).parent / "data" / "corpus"


def minimal_pdf(text: str) -> bytes:
    """A one-page PDF whose content stream draws ``text`` (xref offsets computed, so it is valid)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def test_sentences_are_trimmed_slices():
    text = '  First one. Second "quoted." Third?\n\nNew paragraph without end'
    spans = sentence_spans(text, line_breaks=False, max_chars=1000)
    assert [text[s:e] for s, e in spans] == ["First one.", 'Second "quoted."', "Third?", "New paragraph without end"]


def test_long_sentence_is_cut_at_whitespace():
    text = " ".join(["word"] * 500)
    spans = sentence_spans(text, line_breaks=False, max_chars=100)
    assert all(e - s <= 100 for s, e in spans)
    assert " ".join(text[s:e] for s, e in spans) == text


def test_chunks_overlap_and_match_offsets():
    text = " ".join(f"Sentence number {i} is here." for i in range(10))
    chunks = chunk_text(text, sentences=3, overlap=1)
    assert all(c.text == text[c.start : c.end] for c in chunks)
    assert chunks[0].text.startswith("Sentence number 0") and chunks[0].text.endswith("number 2 is here.")
    # consecutive chunks share one sentence
    for a, b in zip(chunks, chunks[1:]):
        assert b.start < a.end
        assert text[b.start : a.end].count(".") == 1
    assert chunks[-1].end == len(text)


def test_chunk_respects_max_chars():
    text = " ".join("This sentence is about forty chars long." for _ in range(20))
    chunks = chunk_text(text, sentences=5, overlap=2, max_chars=100)
    assert all(len(c.text) <= 100 for c in chunks)
    assert all(c.text == text[c.start : c.end] for c in chunks)


def test_plain_text_offsets_point_into_the_file():
    for name in ("eiffel.txt", "notes/python.md"):
        path = DATA / name
        (doc,) = read_file(path)
        raw = path.read_bytes().decode("utf-8")
        assert doc.source == str(path) and doc.text == raw
        for c in chunk_text(doc.text):
            assert raw[c.start : c.end] == c.text


def test_crlf_file_offsets(tmp_path):
    path = tmp_path / "win.txt"
    path.write_bytes(b"Line one is here.\r\nLine two is here.\r\n\r\nLine three.")
    (doc,) = read_file(path)
    raw = path.read_bytes().decode()
    for c in chunk_text(doc.text, sentences=1, overlap=0):
        assert raw[c.start : c.end] == c.text


def test_html_drops_scripts_and_styles():
    (doc,) = read_file(DATA / "notes" / "rivers.html")
    assert "The Nile is a major north-flowing river" in doc.text
    assert "secret" not in doc.text and "color" not in doc.text


def test_jsonl_one_document_per_line():
    notes = []
    docs = read_file(DATA / "facts.jsonl", warn=notes.append)
    assert [d.source.rsplit("#", 1)[1] for d in docs] == ["L1", "L2", "L4"]
    assert docs[0].text.startswith("Mount Everest")
    assert len(notes) == 1 and "facts.jsonl" in notes[0] and "line 3" in notes[0]


def test_docx_and_pdf(tmp_path):
    import docx

    d = docx.Document()
    d.add_paragraph("The Danube flows through ten countries.")
    d.add_paragraph("It ends in the Black Sea.")
    d.save(tmp_path / "danube.docx")
    (doc,) = read_file(tmp_path / "danube.docx")
    assert doc.text == "The Danube flows through ten countries.\n\nIt ends in the Black Sea."

    (tmp_path / "hello.pdf").write_bytes(minimal_pdf("Kyoto was the capital of Japan for over a thousand years."))
    (doc,) = read_file(tmp_path / "hello.pdf")
    assert "Kyoto was the capital of Japan" in doc.text


@pytest.mark.parametrize(
    "name, content, reason",
    [
        ("empty.txt", b"", "empty"),
        ("blank.md", b"   \n\n  ", "no text"),
        ("binary.txt", bytes(range(256)) * 10, "binary"),
        ("fake.docx", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 600, "encrypted"),
        ("broken.pdf", b"%PDF-1.4 this is not really a pdf", "unreadable PDF"),
        ("nothing.jsonl", b'{"title": "x"}\n', "no documents"),
    ],
)
def test_bad_files_raise_skip(tmp_path, name, content, reason):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(SkipFile, match=reason):
        read_file(path)


def test_encrypted_pdf_is_skipped(tmp_path):
    from pypdf import PdfReader, PdfWriter

    (tmp_path / "plain.pdf").write_bytes(minimal_pdf("Secret text."))
    writer = PdfWriter()
    writer.append(PdfReader(tmp_path / "plain.pdf"))
    writer.encrypt(user_password="hunter2", owner_password="owner")
    with open(tmp_path / "locked.pdf", "wb") as f:
        writer.write(f)
    with pytest.raises(SkipFile, match="encrypted PDF"):
        read_file(tmp_path / "locked.pdf")


def test_huge_file_is_skipped_without_reading(tmp_path):
    path = tmp_path / "huge.txt"
    with open(path, "wb") as f:
        f.truncate(ingest.MAX_FILE_BYTES + 1)  # sparse: no disk used
    with pytest.raises(SkipFile, match="too large"):
        read_file(path)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root can read any file")
def test_unreadable_file_is_skipped(tmp_path):
    path = tmp_path / "secret.txt"
    path.write_text("hidden")
    path.chmod(0)
    with pytest.raises(SkipFile, match="cannot read"):
        read_file(path)


def test_iter_files_filters_types_and_hidden(tmp_path):
    (tmp_path / "a.txt").write_text("x")
    (tmp_path / "b.exe").write_text("x")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "c.txt").write_text("x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "d.MD").write_text("x")
    assert [p.relative_to(tmp_path).as_posix() for p in ingest.iter_files(tmp_path)] == ["a.txt", "sub/d.MD"]


def test_jsonl_lone_surrogates_become_replacement_characters_with_a_warning(tmp_path, monkeypatch):
    p = tmp_path / "docs.jsonl"
    p.write_text('{"text": "Oslo \\ud83d is cold."}\n{"text": "Bergen \\ud83d\\ude00 is wet."}\n["nested"]\n')
    warnings = []
    docs = read_file(p, warn=warnings.append)
    assert [d.text for d in docs] == ["Oslo \ufffd is cold.", "Bergen \U0001f600 is wet."]
    assert any(w.startswith(f"{p}: line 1: lone UTF-16 surrogate") and "U+FFFD" in w for w in warnings), warnings
    html = tmp_path / "page.html"  # text extracted from other formats (a PDF's text map) is checked too
    html.write_text("<p>x</p>")
    monkeypatch.setattr(ingest, "_read_html", lambda data: "Oslo \udfff is cold.")
    assert read_file(html, warn=warnings.append)[0].text == "Oslo \ufffd is cold."
    assert warnings[-1] == f"{html}: 1 lone UTF-16 surrogate(s), which are not text, replaced with U+FFFD"


def test_file_name_that_is_not_utf8_is_skipped_with_a_warning(tmp_path):
    (tmp_path / "ok.txt").write_text("Fine.")
    try:
        open(os.fsencode(tmp_path) + b"/caf\xe9.txt", "w").close()
    except OSError:
        pytest.skip("the file system refuses names that are not UTF-8")
    warnings = []
    assert [p.name for p in ingest.iter_files(tmp_path, warn=warnings.append)] == ["ok.txt"]
    assert len(warnings) == 1 and "caf\ufffd.txt" in warnings[0] and "not UTF-8" in warnings[0]
