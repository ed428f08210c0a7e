"""Citations of the corpus's own documents: finding them in an answer, resolving names, the check."""

from __future__ import annotations

from halucheck.records import Case, Claim, Evidence
from halucheck.verifiers.tools.sources import SourceNames, SourceVerifier, backing_sources, find_sources, name_key, title_of

DOCS = [
    ("/c/products.md", "# Products\n\nThe AquaProbe 3 runs for 30 hours."),
    ("/c/guides/setup-guide.txt", "Setting up the AquaProbe\n\nCharge it first."),
    ("/c/notes.html", "This first line is a long sentence of prose that goes on for far too many words to be a title."),
]


def test_file_names_and_source_notes_are_found_with_their_spans():
    text = ("The AquaProbe 3 runs for 30 hours (source: products.md). See also [Source: Setting up the AquaProbe]. "
            "Details are in Q3-report.PDF and at www.example.com/specs.pdf or https://x.org/a.md.\n"
            "Sources: Warranty terms")
    refs = find_sources(text)
    assert [r.name for r in refs] == ["products.md", "Setting up the AquaProbe", "Q3-report.PDF", "Warranty terms"]
    for r in refs:
        assert text[r.start:r.end] == r.name
    assert find_sources("Version 3.5 is out. Email a@b.md or see http://x.io/y.pdf") == []
    assert find_sources("No sources here, only 3.14 and e.g. a sentence.") == []


def test_a_document_answers_to_its_file_name_path_and_title():
    names = SourceNames(DOCS, root="/c")
    assert names.resolve("products.md") == names.resolve("Products") == names.resolve("PRODUCTS") == "/c/products.md"
    assert names.resolve("setup guide") == names.resolve("guides/setup-guide.txt") == "/c/guides/setup-guide.txt"
    assert names.resolve("Setting up the AquaProbe") == "/c/guides/setup-guide.txt"  # its title
    assert names.resolve("setup-guide.pdf") == "/c/guides/setup-guide.txt"  # same name, other extension
    assert names.resolve("notes") == "/c/notes.html"
    assert names.resolve("warranty-2024.pdf") is None and names.resolve("") is None
    assert title_of(DOCS[2][1]) is None  # a long first line is prose, not a title
    assert name_key("Café_Menu-2024.md") == "cafe menu 2024 md"


def test_the_sources_a_claim_comes_from_are_those_of_its_sentence():
    answer = "It runs for 30 hours (source: products.md). It is waterproof. Charge it first, says setup-guide.txt."
    refs = find_sources(answer)
    first = answer.index("It runs")
    second = answer.index("It is waterproof")
    assert [r.name for r in backing_sources(answer, first, first + 20, refs)] == ["products.md"]
    assert backing_sources(answer, second, second + 15, refs) == []


def test_the_check_reads_whether_the_name_was_found():
    v = SourceVerifier(None)
    found = v.verdict(Case(Claim("products.md", kind="source"), (Evidence("# Products", source="/c/products.md"),)))
    missing = v.verdict(Case(Claim("warranty-2024.pdf", kind="source"), ()))
    assert found.factuality is True and found.error_severity == 0 and "/c/products.md" in found.chain[0].opinion
    assert missing.factuality is False and missing.error_severity == 4 and missing.p_hallucinated > 0.9
    assert "no document" in missing.chain[0].opinion and missing.verifier == "source"


SPACED = [
    ("/c/Company Facts 2023.txt", "Company facts\n\nVarenholt was founded in 1990."),
    ("/c/reports/Q3 report (draft) v2.md", "# Third quarter\n\nRevenue rose 12 percent."),
    ("/c/Café Menü_2024-v1.md", "Menu\n\nCoffee and tea."),
    ("/c/products.md", "# Products\n\nThe AquaProbe 3 runs for 30 hours."),
]


def test_names_with_spaces_parentheses_and_accents_are_the_corpus_documents_they_name():
    names = SourceNames(SPACED, root="/c")
    text = ("Varenholt was founded in 1990 (source: Company Facts 2023.txt). "
            "Revenue rose 12 percent (source: Q3 report (draft) v2.md). "
            "Coffee is served (sources: CAFÉ MENÜ 2024 v1; products.md, p. 4). "
            "Per Company Facts 2023.txt it grew, and per reports/Q3 report (draft) v2.md too. "
            "It has 340 staff (see company facts 2023, section 2). "
            "It was sold (source: Annual Review 2022.pdf) and rebuilt [source: Q3 report (final)].")
    refs = find_sources(text, names)
    assert [r.name for r in refs] == [
        "Company Facts 2023.txt", "Q3 report (draft) v2.md", "CAFÉ MENÜ 2024 v1", "products.md",
        "Company Facts 2023.txt", "reports/Q3 report (draft) v2.md", "company facts 2023",
        "Annual Review 2022.pdf", "Q3 report (final)"]
    for r in refs:
        assert text[r.start:r.end] == r.name
    assert [names.resolve(r.name) for r in refs] == [
        "/c/Company Facts 2023.txt", "/c/reports/Q3 report (draft) v2.md", "/c/Café Menü_2024-v1.md",
        "/c/products.md", "/c/Company Facts 2023.txt", "/c/reports/Q3 report (draft) v2.md",
        "/c/Company Facts 2023.txt", None, None]  # the last two are not in the corpus: still reported missing


def test_a_name_is_matched_whole_or_not_at_all():
    names = SourceNames(SPACED, root="/c")
    # "Products and more" is no document, though it starts with one's title; an unknown file name keeps its spaces
    assert [r.name for r in find_sources("It floats (source: Products and more).", names)] == ["Products and more"]
    assert [r.name for r in find_sources("It floats (source: Old Company Facts 2023.txt).", names)] == [
        "Old Company Facts 2023.txt"]
    assert [r.name for r in find_sources("It floats (see the manual, products.md).", names)] == [
        "the manual", "products.md"]
    assert find_sources("It floats (seeing is believing).", names) == []
    quoted = find_sources('Founded in 1990 (source: "Company Facts 2023").', names)
    assert [(r.name, names.resolve(r.name)) for r in quoted] == [("Company Facts 2023", "/c/Company Facts 2023.txt")]
