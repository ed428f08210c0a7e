"""The citation check: bibliographies (BibTeX, CSL-JSON, CSV), citations found in text, matching, the
``citation`` verifier, and ``halucheck eval -d factool-sci -v citation`` end to end."""

from __future__ import annotations

import json
import os
import time

import pytest
from typer.testing import CliRunner

from halucheck.verifiers.tools.citations.bibliography import Bibliography, load_bibliography
from halucheck.verifiers.tools.citations.finder import find_citations, parse_citation
from halucheck.verifiers.tools.citations.formats import latex_to_text, write_csl_json
from halucheck.verifiers.tools.citations.match import TITLE_THRESHOLD, match, title_similarity
from halucheck.verifiers.tools.citations.names import split_authors
from halucheck.verifiers.tools.citations.records import Citation, Work
from halucheck.verifiers.tools.citations.verifier import CitationVerifier
from halucheck.cli import app
from halucheck.errors import ConfigError, InputError
from halucheck.evaluation import harness
from halucheck.records import Case, Claim
from halucheck.verifiers import VerifierOptions, get_verifier

runner = CliRunner()

BIB = r"""% references for the tests
@string{nips = "Advances in Neural Information Processing Systems"}

@inproceedings{vaswani2017,
  title     = {Attention Is All You Need},
  author    = {Vaswani, Ashish and Shazeer, Noam and Parmar, Niki and Uszkoreit, Jakob and Jones, Llion
               and Gomez, Aidan N. and Kaiser, {\L}ukasz and Polosukhin, Illia},
  booktitle = nips # " 30",
  year      = 2017,
}

@article{radford2019,
  title  = "Language Models are Unsupervised Multitask Learners",
  author = "Alec Radford and Jeffrey Wu and Rewon Child and David Luan and Dario Amodei and Ilya Sutskever",
  year   = "2019"
}

@article{broken,
  title = {An {unclosed brace,
  year  = 2001
}

@article{notitle, author = {Nobody, A.}, year = 2000}

@article(devlin2019,
  title = {{BERT}: Pre-training of Deep Bidirectional Transformers for Language Understanding},
  author = {Jacob Devlin and Ming-Wei Chang and Kenton Lee and Kristina Toutanova},
  year = {2019}
)

@article{ridker,
  title = {Inflammation in Atherosclerosis and Implications for Therapy},
  author = {Ridker, Paul M. and L{\"u}scher, Thomas F. and others},
  year = {forthcoming}
}

@article{luxburg2007, title = {A Tutorial on Spectral Clustering}, author = {von Luxburg, Ulrike}, year = 2007}
@misc{tcga2012, title = {Comprehensive molecular portraits of human breast tumours},
  author = {{The Cancer Genome Atlas Network}}, year = 2012}
@comment{ @article{hidden, title = {Not an entry}} }
@article{noequals, title {X}, year = 2000}
@article{king, title = {Jr.\ and Sr.\ names}, author = {King, Jr., Martin Luther}, year = 1963}
@article{unclosed, title = {Fine}, year = 2001
@article{last, title = {The Last One}, year = 2002}
"""


@pytest.fixture
def bib_path(tmp_path):
    p = tmp_path / "refs.bib"
    p.write_text(BIB, encoding="utf-8")
    return p


@pytest.fixture
def bib(bib_path):
    return load_bibliography(bib_path)


def _work(bib: Bibliography, key: str) -> Work:
    return next(w for w in bib if w.key == key)


# ---------------------------------------------------------------- BibTeX


def test_bibtex_entries_are_read(bib):
    assert [w.key for w in bib] == ["vaswani2017", "radford2019", "devlin2019", "ridker", "luxburg2007", "tcga2012", "king",
                                   "last"]
    v = _work(bib, "vaswani2017")
    assert v.title == "Attention Is All You Need" and v.year == 2017 and v.source == "refs.bib:4"
    assert len(v.authors) == 8 and v.authors[0] == "Vaswani, Ashish" and v.authors[6] == "Kaiser, Łukasz"
    r = _work(bib, "radford2019")
    assert r.authors == ("Alec Radford", "Jeffrey Wu", "Rewon Child", "David Luan", "Dario Amodei", "Ilya Sutskever")
    assert r.year == 2019  # a quoted year
    d = _work(bib, "devlin2019")  # (...) delimiters, {BERT} protected
    assert d.title.startswith("BERT: Pre-training") and d.year == 2019
    assert _work(bib, "tcga2012").authors == ("The Cancer Genome Atlas Network",)  # {{...}}: one institution
    assert _work(bib, "king").surnames() == ["King"]  # Last, Jr, First


def test_bibtex_and_others_marks_an_incomplete_list_and_accents_are_text(bib):
    w = _work(bib, "ridker")
    assert w.authors == ("Ridker, Paul M.", "Lüscher, Thomas F.") and w.et_al is True
    assert w.year is None  # "forthcoming": kept, year not checked


def test_bibtex_bad_entries_are_file_line_warnings(bib):
    assert bib.warnings == [
        "refs.bib:19: unbalanced braces: a '{' is never closed; entry skipped",
        "refs.bib:23: no title; entry skipped",
        "refs.bib:34: year 'forthcoming' is not a year; entry kept without one (its year is not checked)",
        "refs.bib:41: field 'title' without '=' (write title = {...}); entry skipped",
        "refs.bib:43: entry not closed: '}' missing (unbalanced braces?); entry skipped",
    ]


def test_latex_to_text():
    assert latex_to_text(r"Schr{\"o}dinger and \'{E}mile \c{C}a\u{g}lar \ss{} {\o}ster \emph{big} data \& more") == \
        "Schrödinger and Émile Çağlar ß øster big data & more"
    assert latex_to_text(r"Na\"{\i}ve 1990--2000 $\alpha$-helix $\Omega$") == "Naïve 1990–2000 α-helix Ω"


# ---------------------------------------------------------------- CSL-JSON and CSV


def test_csl_json(tmp_path):
    items = [
        {"id": "a", "title": "Attention Is All You Need", "author": [{"family": "Vaswani", "given": "Ashish"},
                                                                      {"family": "Shazeer", "given": "Noam"}],
         "issued": {"date-parts": [[2017, 6]]}},
        {"id": "b", "title": "A Tutorial on Spectral Clustering",
         "author": [{"family": "Luxburg", "given": "Ulrike", "non-dropping-particle": "von"}], "issued": {"raw": "2007"}},
        {"id": "c", "author": [{"family": "Nobody"}]},  # no title
        {"id": "d", "title": "Institutional", "author": [{"literal": "WHO Collaboration"}, {"literal": "et al."}],
         "issued": {"date-parts": [["2012"]]}},
        {"id": "e", "title": "Bad author", "author": [{"given": "Only"}]},
        "not an object",
        {"id": "f", "title": "Bad year", "issued": {"literal": "someday"}},
    ]
    p = tmp_path / "refs.json"
    p.write_text(json.dumps(items), encoding="utf-8")
    bib = load_bibliography(p)
    assert [w.key for w in bib] == ["a", "b", "d", "f"]
    assert bib.works[0].authors == ("Vaswani, Ashish", "Shazeer, Noam") and bib.works[0].year == 2017
    assert bib.works[1].authors == ("von Luxburg, Ulrike",) and bib.works[1].year == 2007
    assert bib.works[2].authors == ("WHO Collaboration",) and bib.works[2].et_al and bib.works[2].year == 2012
    assert bib.warnings == [
        "refs.json:item 2 (id c): no title; entry skipped",
        "refs.json:item 4 (id e): an author without family name or literal; entry skipped",
        "refs.json:item 5: not an object; entry skipped",
        "refs.json:item 6 (id f): year 'someday' is not a year; entry kept without one (its year is not checked)",
    ]


def test_csl_json_lone_surrogates_are_replaced_with_a_warning(tmp_path):
    p = tmp_path / "refs.json"
    p.write_text('[{"id": "a", "title": "Emoji \\ud83d in titles", "author": [{"family": "Doe\\udc00"}]}]',
                 encoding="utf-8")
    bib = load_bibliography(p)
    assert bib.works[0].title == "Emoji \ufffd in titles" and bib.works[0].authors == ("Doe\ufffd",)
    assert len(bib.warnings) == 1 and bib.warnings[0].startswith("refs.json: 2 lone UTF-16 surrogate")


def test_csl_json_that_is_not_json_names_line_and_column(tmp_path):
    p = tmp_path / "refs.json"
    p.write_text('[\n {"title": "x",\n  "author": ]\n]', encoding="utf-8")
    with pytest.raises(InputError, match=r"refs\.json:3:13: not valid JSON") as e:
        load_bibliography(p)
    assert "\n" not in str(e.value)


def test_csv(tmp_path):
    p = tmp_path / "refs.csv"
    p.write_text(
        "title,authors,year,venue\n"
        '"Attention Is All You Need","Vaswani, A.; Shazeer, N.; Parmar, N.",2017,NeurIPS\n'
        "Random Forests,Leo Breiman,2001,ML\n"
        ",Someone,2000,x\n"
        "Deep Learning,LeCun and Bengio and Hinton,2015\n"
        "Too,many,fields,2000,x,y\n"
        'Multi-line "title",Smith,20x9,\n'
        '"Quoted, with\nnewline",Doe et al.,1999,x\n',
        encoding="utf-8")
    bib = load_bibliography(p)
    assert [w.title for w in bib] == ["Attention Is All You Need", "Random Forests", "Deep Learning",
                                      'Multi-line "title"', "Quoted, with newline"]
    assert bib.works[0].authors == ("Vaswani, A.", "Shazeer, N.", "Parmar, N.") and bib.works[0].year == 2017
    assert bib.works[2].authors == ("LeCun", "Bengio", "Hinton")  # " and ", and a missing last column
    assert bib.works[4].authors == ("Doe",) and bib.works[4].et_al and bib.works[4].source == "refs.csv:8"
    assert bib.warnings == [
        "refs.csv:4: no title; entry skipped",
        "refs.csv:6: 6 fields, the header has 4; entry skipped (quote fields that hold commas)",
        "refs.csv:7: year '20x9' is not a year; entry kept without one (its year is not checked)",
    ]


def test_csv_without_title_column(tmp_path):
    p = tmp_path / "refs.csv"
    p.write_text("name,year\nx,2000\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"refs\.csv:1: no 'title' column \(found: name, year\)"):
        load_bibliography(p)


@pytest.mark.parametrize("name, content, expected", [
    ("missing.bib", None, r"not found; pass --bibliography FILE, a BibTeX \(\.bib\), CSL-JSON \(\.json\) or CSV"),
    ("refs.ris", "TY  - JOUR", r"unknown format '\.ris'; give a \.bib \(BibTeX\), \.json \(CSL-JSON\) or \.csv"),
    ("empty.bib", "@article{x, year = 2000}\n", r"no usable entry \(first problem: empty\.bib:1: no title"),
])
def test_unusable_bibliography_files_are_one_line_input_errors(tmp_path, name, content, expected):
    p = tmp_path / name
    if content is not None:
        p.write_text(content, encoding="utf-8")
    with pytest.raises(InputError, match=expected) as e:
        load_bibliography(p)
    assert "\n" not in str(e.value)


def test_a_bibliography_is_parsed_once_per_file_version(bib_path):
    first = load_bibliography(bib_path)
    assert load_bibliography(str(bib_path)) is first  # same path, mtime and size: the cached parse
    bib_path.write_text(BIB + "\n@article{new, title = {A New Entry}, year = 2024}\n", encoding="utf-8")
    st = bib_path.stat()
    os.utime(bib_path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    again = load_bibliography(bib_path)
    assert again is not first and again.works[-1].title == "A New Entry"


def test_csl_json_round_trip(tmp_path, bib):
    p = write_csl_json(bib.works, tmp_path / "out.json")
    back = load_bibliography(p)
    assert [w.title for w in back] == [w.title for w in bib]
    assert [w.year for w in back] == [w.year for w in bib]
    assert [w.surnames() for w in back] == [w.surnames() for w in bib]
    assert [w.et_al for w in back] == [w.et_al for w in bib]


# ---------------------------------------------------------------- citations in text


@pytest.mark.parametrize("text, title, authors, year, et_al", [
    ("Devlin et al. (2018). BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding. "
     "In NAACL-HLT, pages 4171-4186.",
     "BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding", ("Devlin",), 2018, True),
    ('"Attention Is All You Need" by Vaswani et al., 2017', "Attention Is All You Need", ("Vaswani",), 2017, True),
    ("“Attention Is All You Need” by Vaswani et al. (2017)", "Attention Is All You Need", ("Vaswani",), 2017, True),
    ("Attention Is All You Need (Vaswani, Shazeer, 2017)", "Attention Is All You Need", ("Vaswani", "Shazeer"), 2017,
     False),
    ("Vaswani, A., Shazeer, N., ... (2017). Attention is all you need.", "Attention is all you need",
     ("Vaswani, A.", "Shazeer, N."), 2017, True),
    ("Vaswani, A., Shazeer, N., Parmar, N., ... & Polosukhin, I. (2017). Attention is all you need. Advances in "
     "Neural Information Processing Systems, 30.", "Attention is all you need",
     ("Vaswani, A.", "Shazeer, N.", "Parmar, N.", "Polosukhin, I."), 2017, True),
    ("Chen, H., Chiang, R. H. L., & Storey, V. C. (2012). Business intelligence and analytics: From big data to big "
     "impact. MIS Quarterly, 36(4).", "Business intelligence and analytics: From big data to big impact",
     ("Chen, H.", "Chiang, R. H. L.", "Storey, V. C."), 2012, False),
    ('A. Vaswani et al., "Attention is all you need," in Proc. NeurIPS, 2017, pp. 5998-6008.',
     "Attention is all you need", ("A. Vaswani",), 2017, True),
    ("A study by Breiman et al.(2001) titled 'Random Forests' found that random forests win.", "Random Forests",
     ("Breiman",), 2001, True),
    ("'The Cancer Genome Atlas: exploring genomic alteration in human cancer' by Cancer Genome Atlas Research "
     "Network published in 2013", "The Cancer Genome Atlas: exploring genomic alteration in human cancer",
     ("Cancer Genome Atlas Research Network",), 2013, False),
    ("'Asthma phenotypes: the evolution from clinical to molecular approaches' by Chung KF et al., published in "
     "Nature Medicine in 2011", "Asthma phenotypes: the evolution from clinical to molecular approaches",
     ("Chung KF",), 2011, True),
    ('"CRISPR-Cas9: A Revolutionary Tool" by Jennifer Doudna and Emmanuelle Charpentier (2014)',
     "CRISPR-Cas9: A Revolutionary Tool", ("Jennifer Doudna", "Emmanuelle Charpentier"), 2014, False),
    ("'An Introduction to Unsupervised Learning' by von Luxburg (2007)", "An Introduction to Unsupervised Learning",
     ("von Luxburg",), 2007, False),
    ("(Mansoor et al., 2020; Title: Effects of low-carbohydrate diets v. low-fat diets on metabolic health; "
     "Authors: Mansoor N, Vinknes KJ, Veierød MB, Retterstøl K; Year: 2020)",
     "Effects of low-carbohydrate diets v. low-fat diets on metabolic health",
     ("Mansoor N", "Vinknes KJ", "Veierød MB", "Retterstøl K"), 2020, False),
    ("1. *Deep Residual Learning for Image Recognition* (He, Zhang, Ren, Sun, 2016)",
     "Deep Residual Learning for Image Recognition", ("He", "Zhang", "Ren", "Sun"), 2016, False),
    ("'Employee Creativity: Personal and Contextual Factors at Work' by Greg R. Oldham and A. Cummings",
     "Employee Creativity: Personal and Contextual Factors at Work", ("Greg R. Oldham", "A. Cummings"), None, False),
])
def test_parse_citation(text, title, authors, year, et_al):
    c = parse_citation(text)
    assert c is not None, text
    assert (c.title, c.authors, c.year, c.et_al) == (title, authors, year, et_al)


@pytest.mark.parametrize("text", [
    "BERT (Devlin et al., 2018) is a transformer.",  # no title to look up
    'Recently, "Attention is all you need" showed that attention suffices.',  # a quote, no author
    'He said "yes" by Monday.',  # one quoted word, no year
    "Random forests are strong baselines.",
    "",
])
def test_text_that_is_no_reference_gives_none(text):
    assert parse_citation(text) is None


def test_a_year_shared_by_two_works_is_not_given_to_either():
    found = find_citations("Two papers: 'Parallel Computing: A Survey' by Quinn and 'Introduction to Parallel "
                           "Computing' by Grama et al., published in 1994 and 2003 respectively.")
    assert [(c.title, c.year) for c, _ in found] == [("Parallel Computing: A Survey", None),
                                                     ("Introduction to Parallel Computing", None)]


def test_find_citations_in_an_answer():
    text = ("Supervised learning uses labels. Two papers are 'ImageNet Classification with Deep Convolutional Neural "
            "Networks' by Krizhevsky et al. (2012) and 'A Few Useful Things to Know About Machine Learning' by "
            "Domingos (2012). For unsupervised learning see:\n"
            "- Bengio, Y. (2009). Learning Deep Architectures for AI. Foundations and Trends.\n"
            "- Spectral clustering (von Luxburg, 2007)\n"
            "Unquoted prose is not a title (Smith et al., 2019).")
    found = find_citations(text)
    assert [(c.title, c.authors, c.year) for c, _ in found] == [
        ("ImageNet Classification with Deep Convolutional Neural Networks", ("Krizhevsky",), 2012),
        ("A Few Useful Things to Know About Machine Learning", ("Domingos",), 2012),
        ("Learning Deep Architectures for AI", ("Bengio, Y.",), 2009),
        ("Spectral clustering", ("von Luxburg",), 2007),
    ]
    for c, (a, b) in found:  # each span holds its citation's title
        assert c.title in text[a:b] and c.text == text[a:b].strip()
    spans = [s for _, s in found]
    assert all(x[1] <= y[0] for x, y in zip(spans, spans[1:]))


@pytest.mark.parametrize("text", [
    ("Alpha Beta Gamma Delta, Epsilon Zeta and Eta Theta & Iota Kappa, " * 400) + "'Title' by",
    ("Alpha Beta Gamma Delta, Epsilon Zeta and 'Eta' Theta & Iota Kappa, " * 400),
    ("Smith, A., Jones, B., " * 1000) + "(2019). Title.",
])
def test_finder_stays_fast_on_long_capitalised_text(text):
    t0 = time.perf_counter()
    find_citations(text)
    assert time.perf_counter() - t0 < 2


@pytest.mark.parametrize("written, names, et_al", [
    ("Jacob Devlin, Ming-Wei Chang, Kenton Lee, Kristina Toutanova",
     ("Jacob Devlin", "Ming-Wei Chang", "Kenton Lee", "Kristina Toutanova"), False),
    ("Davenport, T. H. & Harris, J. G.", ("Davenport, T. H.", "Harris, J. G."), False),
    ("Maini RN, Taylor PC, Szechinski J, et al.", ("Maini RN", "Taylor PC", "Szechinski J"), True),
    ("M. Mazzola, A. Bruccoleri, and F. Perrone", ("M. Mazzola", "A. Bruccoleri", "F. Perrone"), False),
    ("Yichen Wang and colleagues", ("Yichen Wang",), True),
    ("Li, et al.", ("Li",), True),
    ("X.-L. Qi and S.-C. Zhang", ("X.-L. Qi", "S.-C. Zhang"), False),
    ("Vaswani, A.; Shazeer, N. and Parmar, N.", ("Vaswani, A.", "Shazeer, N.", "Parmar, N."), False),
])
def test_split_authors(written, names, et_al):
    assert split_authors(written) == (names, et_al)


# ---------------------------------------------------------------- matching


def test_title_match_is_fuzzy_but_bounded(bib):
    variant = Citation.of("language models are unsupervised multi-task learners!", "Radford et al.", 2019)
    r = match(variant, bib)
    assert r.matched and r.candidate.key == "radford2019" and TITLE_THRESHOLD <= r.title_score < 1.0
    invented = Citation.of("Language Models for Unsupervised Speech", "Radford et al.", 2019)
    r = match(invented, bib)
    assert not r.matched and r.failure == "title" and r.severity == 4
    assert r.candidate.key == "radford2019" and r.title_score < TITLE_THRESHOLD  # the closest is still named
    assert r.reason.startswith('no work titled "Language Models for Unsupervised Speech" in refs.bib (8 works); '
                               'closest: "Language Models are Unsupervised Multitask Learners" (Radford, Wu, Child, Luan, '
                               "Amodei, Sutskever 2019), title similarity 0.")


@pytest.mark.parametrize("cited", [
    "Language Models are Supervised Multitask Reasoners",  # ratio 0.93: two words changed, one negated
    "Language Models are Unsupervised Multitask Learners Too",  # a content word added
    "Language Models are Unsupervised Multitask Learner of 2020",  # a number added
    "Language Models are Unsupervised Multishot Learners",  # one word swapped
])
def test_a_close_title_with_other_words_is_not_the_work(bib, cited):
    r = match(Citation.of(cited, "Radford et al.", 2019), bib)
    assert r.title_score >= TITLE_THRESHOLD and not r.matched and r.failure == "title"
    assert "but its words differ" in r.reason


@pytest.mark.parametrize("cited", [
    "Language Models are Unsupervised Multitask Learner",  # plural
    "Language Models are Unsupervized Multi-Task Learners",  # spelling, hyphenation
    "Language Modles are Unsupervised Multitask Learners",  # a typo
    "The Language Models are Unsupervised Multitask Learners",  # a stop word
    "Language Models are Unsupervised Multi task Learners",  # one word written as two
    "language models are unsupervised multitask learners",  # folded
])
def test_spelling_variants_of_a_title_are_the_work(bib, cited):
    assert match(Citation.of(cited, "Radford et al.", 2019), bib).matched


def test_a_title_without_its_subtitle_matches(bib):
    r = match(Citation.of("BERT", "Devlin et al.", 2019), bib)
    assert r.matched and r.candidate.key == "devlin2019"


def test_wrong_year(bib):
    r = match(Citation.of("BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding",
                          "Devlin et al.", 2018), bib)
    assert not r.matched and r.failure == "year" and r.wrong_year and r.severity == 2
    assert r.reason == ('found "BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding" '
                        "(Devlin, Chang, Lee, Toutanova 2019) in refs.bib: year 2018 cited, 2019 recorded")


def test_author_not_in_the_record(bib):
    r = match(Citation.of("Attention Is All You Need", "Vaswani, A., Hinton, G., & Shazeer, N.", 2017), bib)
    assert not r.matched and r.failure == "author" and r.missing_authors == ("Hinton, G.",) and r.severity == 2
    assert r.reason.endswith("in refs.bib: author Hinton not among the record's authors")
    both = match(Citation.of("Attention Is All You Need", "Hinton et al.", 2016), bib)
    assert both.failure == "year" and both.missing_authors == ("Hinton",)
    assert "year 2016 cited, 2017 recorded; author Hinton not among" in both.reason


def test_radford_et_al_against_the_six_author_record(bib):
    r = match(Citation.of("Language Models are Unsupervised Multitask Learners", "Radford et al.", 2019), bib)
    assert r.matched and r.failure is None and r.severity == 0 and r.candidate.key == "radford2019"
    assert r.reason.endswith("title (1.00), year 2019, authors Radford match")
    named = match(Citation.of("Language Models are Unsupervised Multitask Learners", "A. Radford, J. Wu and I. Sutskever",
                              2019), bib)
    assert named.matched  # a subset of the six; initials ignored
    assert not match(Citation.of("Language Models are Unsupervised Multitask Learners", "Radford, Brown, et al.", 2019),
                     bib).matched


@pytest.mark.parametrize("authors", ["Vaswani", "Vaswani, A.", "A. Vaswani", "Ashish Vaswani", "Vaswani A",
                                     "VASWANI", "Kaiser", "Łukasz Kaiser", "Lukasz Kaiser", "K. Vaswani"])
def test_author_forms_and_initials(bib, authors):
    assert match(Citation.of("Attention Is All You Need", authors, 2017), bib).matched


def test_diacritics_and_particles_are_folded(bib):
    assert match(Citation.of("Inflammation in atherosclerosis and implications for therapy", "Ridker PM, Luscher TF",
                             None), bib).matched
    for cited in ("von Luxburg", "Luxburg", "Ulrike von Luxburg", "U. von Luxburg"):
        assert match(Citation.of("A tutorial on spectral clustering", cited, 2007), bib).matched, cited
    assert not match(Citation.of("A tutorial on spectral clustering", "Ulrike", 2007), bib).matched  # a given name


def test_an_incomplete_record_leaves_later_authors_unverified(bib):
    r = match(Citation.of("Inflammation in Atherosclerosis and Implications for Therapy", "Ridker, Creager", 2017), bib)
    assert r.matched and r.unverified_authors == ("Creager",) and "Creager not verifiable" in r.reason
    assert "year not checked (none recorded)" in r.reason
    lead = match(Citation.of("Inflammation in Atherosclerosis and Implications for Therapy", "Creager et al.", 2017), bib)
    assert lead.failure == "author" and lead.missing_authors == ("Creager",)


def test_institutional_authors(bib):
    title = "Comprehensive molecular portraits of human breast tumours"
    assert match(Citation.of(title, "The Cancer Genome Atlas Network", 2012), bib).matched
    assert match(Citation.of(title, "Cancer Genome Atlas Network", 2012), bib).matched
    assert match(Citation.of(title, "Perou et al.", 2012), bib).failure == "author"


def test_among_works_of_one_title_the_consistent_one_is_chosen():
    works = [Work("Deep Learning", ("Goodfellow", "Bengio", "Courville"), 2016, key="book"),
             Work("Deep Learning", ("LeCun", "Bengio", "Hinton"), 2015, key="nature")]
    bib = Bibliography(works, name="two")
    assert match(Citation.of("Deep Learning", "LeCun et al.", 2015), bib).candidate.key == "nature"
    assert match(Citation.of("Deep Learning", "Goodfellow et al.", 2016), bib).candidate.key == "book"
    wrong = match(Citation.of("Deep Learning", "LeCun et al.", 2016), bib)
    assert wrong.failure == "year" and wrong.candidate.key == "nature"  # the author fits it, the year does not


def test_empty_bibliography_and_unstated_fields():
    r = match(Citation.of("Anything at all"), Bibliography([], name="none"))
    assert r.failure == "title" and r.candidate is None and r.reason == 'no work titled "Anything at all" in none (0 works)'
    bib = Bibliography([Work("Random Forests", ("Leo Breiman",), 2001)], name="one")
    r = match(Citation.of("Random Forests"), bib)
    assert r.matched and "year not checked (none cited)" in r.reason and "authors not checked (none cited)" in r.reason


def test_titles_that_differ_only_in_punctuation_and_spacing_match():
    title = "A low-fat vegan diet and a conventional diabetes diet: a randomized, controlled, 74-wk clinical trial"
    bib = Bibliography([Work(title, ("Neal D. Barnard",), 2009)], name="one")
    assert match(Citation.of("a low fat vegan diet and a conventional diabetes diet a randomized controlled 74 wk "
                             "clinical trial", "Barnard et al.", 2009), bib).matched


def test_title_similarity_is_symmetric_in_form():
    assert title_similarity("Attention Is All You Need", "attention is all you need.") == 1.0
    assert title_similarity("Café & Crème", "cafe and creme") == 1.0
    assert title_similarity("Mask R-CNN", "Fast R-CNN") < TITLE_THRESHOLD


# ---------------------------------------------------------------- the verifier


def _verifier(path) -> CitationVerifier:
    v = get_verifier("citation", VerifierOptions(bibliography=str(path)))
    assert isinstance(v, CitationVerifier) and v.name == "citation" and v.uses_llm is False
    return v


def test_verifier_needs_a_bibliography():
    v = get_verifier("citation")
    with pytest.raises(ConfigError, match=r"pass --bibliography FILE \(BibTeX \.bib, CSL-JSON \.json or CSV"):
        v.preflight()


def test_verifier_verdicts(bib_path):
    v = _verifier(bib_path)
    v.preflight()
    checks = [
        Case(Claim("ignored"), meta={"title": "Attention Is All You Need", "authors": "Vaswani et al.", "year": "2017"}),
        Case(Claim('"BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding" by Devlin et al.'
                    " (2018)", kind="citation")),
        Case(Claim("Radford, A. & Hinton, G. (2019). Language models are unsupervised multitask learners.")),
        Case(Claim('"A Study That Nobody Wrote" by Smith and Jones (2020)')),
        Case(Claim("The sky is blue.")),
    ]
    seen = []
    out = v.verify(checks, None, on_verdict=lambda i, verdict: seen.append((i, verdict.factuality)))
    assert [(x.factuality, x.error_severity, x.p_hallucinated) for x in out] == [
        (True, 0, 0.02), (False, 2, 0.98), (False, 2, 0.98), (False, 4, 0.98), (None, None, None)]
    assert seen == [(0, True), (1, False), (2, False), (3, False), (4, None)]
    assert all(x.verifier == "citation" for x in out)
    assert "no citation found" in out[4].error
    for verdict in out[:4]:
        assert verdict.confidence == pytest.approx(0.98) and len(verdict.chain) == 1
        t = verdict.chain[0]
        assert (t.state, t.role, t.verifier) == ("S0", "initial", "citation")
        assert t.factuality == verdict.factuality and t.error_severity == verdict.error_severity
    assert out[1].chain[0].opinion == (
        'cited "BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding" (Devlin et al., 2018): '
        'found "BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding" '
        "(Devlin, Chang, Lee, Toutanova 2019) in refs.bib: year 2018 cited, 2019 recorded")
    assert "author Hinton not among the record's authors" in out[2].chain[0].opinion
    assert 'no work titled "A Study That Nobody Wrote" in refs.bib' in out[3].chain[0].opinion
    assert v.costs["citation"].claims == 5 and v.costs["citation"].llm_calls == 0
    assert v.describe()["citation"]["works"] == 8


def test_several_citations_in_one_check_the_worst_decides(bib_path):
    v = _verifier(bib_path)
    good = {"title": "Attention Is All You Need", "authors": "Vaswani et al.", "year": 2017}
    wrong_year = {"title": "A Tutorial on Spectral Clustering", "authors": "von Luxburg", "year": 2008}
    invented = {"title": "Spectral Methods for Everything", "authors": "Nobody", "year": 2008}
    out = v.verify([Case(Claim("r1"), meta={"citations": [good, good]}),
                    Case(Claim("r2"), meta={"citations": [good, wrong_year]}),
                    Case(Claim("r3"), meta={"citations": [wrong_year, invented, good]})], None)
    assert [(x.factuality, x.error_severity) for x in out] == [(True, 0), (False, 2), (False, 4)]
    assert out[2].chain[0].opinion.startswith("[1] cited ") and "[3] cited " in out[2].chain[0].opinion


def test_verifier_with_a_missing_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="not found"):
        _verifier(tmp_path / "nope.bib").preflight()


# ---------------------------------------------------------------- factool-sci, end to end

ROWS = [  # position 4 is the test split
    {"prompt": "p0", "response": "r0", "label": False, "claims": [
        {"paper_title": "Attention Is All You Need", "paper_author(s)": "Vaswani et al.", "paper_pub_year": "2017",
         "label": True},
        {"paper_title": "Attention Is All You Need", "paper_author(s)": "Vaswani et al.", "paper_pub_year": "2016",
         "label": False}]},  # wrong year
    {"prompt": "p1", "response": "r1", "label": True, "claims": [
        {"paper_title": "Random Forests", "paper_author(s)": "Leo Breiman", "paper_pub_year": "2001", "label": True}]},
    {"prompt": "p2", "response": "r2", "label": False, "claims": [
        {"paper_title": "Random Forests", "paper_author(s)": "Hinton and Breiman", "paper_pub_year": "2001",
         "label": False},  # an author the work does not have
        {"paper_title": "A Survey of Everything Ever Written", "paper_author(s)": "Smith", "paper_pub_year": "2019",
         "label": False}]},  # invented
    {"prompt": "p3", "response": "r3", "label": False, "claims": [
        {"paper_title": "Random Forests", "paper_author(s)": "Breiman", "paper_pub_year": "2001",
         "label": False}]},  # labelled false, yet the same as a true one: matching cannot tell
    {"prompt": "p4", "response": "r4", "label": True, "claims": [
        {"paper_title": "Deep Residual Learning for Image Recognition", "paper_author(s)": "He, K., Zhang, X.",
         "paper_pub_year": "2016", "label": True}]},
]


@pytest.fixture
def sci_root(tmp_path, monkeypatch):
    folder = tmp_path / "datasets" / "factool"
    folder.mkdir(parents=True)
    (folder / "scientific.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    monkeypatch.setenv("HALUCHECK_DATASETS", str(tmp_path / "datasets"))
    monkeypatch.setattr(harness, "N_BOOT", 20)
    return tmp_path


def _predictions(run):
    return {r["id"]: r for r in map(json.loads, (run / "predictions.jsonl").read_text().splitlines())}


def test_factool_sci_items_and_bibliography(sci_root):
    from halucheck.evaluation import load
    from halucheck.evaluation.datasets import factool_sci_bibliography

    items = load("factool-sci", "all")
    assert [i.id for i in items] == ["factool-sci:0:0", "factool-sci:0:1", "factool-sci:1:0", "factool-sci:2:0",
                                     "factool-sci:2:1", "factool-sci:3:0", "factool-sci:4:0"]
    assert [i.label for i in items] == [False, True, False, True, True, True, False]
    first = items[0]
    assert first.claim == '"Attention Is All You Need" by Vaswani et al. (2017)' and first.group == "factool-sci:0"
    assert first.meta["title"] == "Attention Is All You Need" and first.meta["year"] == 2017
    assert [i.split for i in items].count("test") == 1
    bib = factool_sci_bibliography()
    assert [(w.title, w.year) for w in bib] == [("Attention Is All You Need", 2017), ("Random Forests", 2001),
                                               ("Deep Residual Learning for Image Recognition", 2016)]  # test split too
    responses = load("factool-sci-response", "all")
    assert [r.label for r in responses] == [True, False, True, True, False]
    assert len(responses[2].meta["citations"]) == 2 and responses[2].claim == "r2"


def test_eval_factool_sci_end_to_end(sci_root):
    out = sci_root / "run"
    r = runner.invoke(app, ["eval", "-d", "factool-sci", "-d", "factool-sci-response", "-v", "citation",
                            "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "matching against 3 works the set brings" in r.output
    bib = json.loads((out / "bibliography.json").read_text())
    assert [w["title"] for w in bib] == ["Attention Is All You Need", "Random Forests",
                                         "Deep Residual Learning for Image Recognition"]
    preds = _predictions(out)
    assert {k: v["prediction"] for k, v in preds.items() if k.startswith("factool-sci:")} == {
        "factool-sci:0:0": False, "factool-sci:0:1": True, "factool-sci:1:0": False, "factool-sci:2:0": True,
        "factool-sci:2:1": True, "factool-sci:3:0": False}  # 3:0 is the one matching cannot catch
    assert "year 2016 cited, 2017 recorded" in preds["factool-sci:0:1"]["detail"]["chain"][0]["opinion"]
    assert preds["factool-sci:2:0"]["detail"]["error_severity"] == 2
    assert preds["factool-sci:2:1"]["detail"]["error_severity"] == 4
    metrics = json.loads((out / "metrics.json").read_text())
    claim = metrics["results"]["factool-sci"]
    assert claim["n"] == 6 and claim["n_positive"] == 4
    assert claim["metrics"]["precision"]["value"] == 1.0
    assert claim["metrics"]["recall"]["value"] == pytest.approx(0.75)
    assert claim["metrics"]["f1"]["value"] == pytest.approx(6 / 7)
    resp = metrics["results"]["factool-sci-response"]
    assert resp["n"] == 4 and resp["metrics"]["recall"]["value"] == pytest.approx(2 / 3)  # response 3 missed
    assert metrics["settings"]["citation"]["works"] == 3 and metrics["cost"]["llm_calls"] == 0


def test_eval_factool_sci_with_a_bibliography_of_ones_own(sci_root):
    refs = sci_root / "refs.csv"
    refs.write_text("title,authors,year\nAttention Is All You Need,Vaswani; Shazeer,2017\n"
                    "Random Forests,Leo Breiman,2002\nbroken row without title column value,,\n", encoding="utf-8")
    out = sci_root / "own"
    r = runner.invoke(app, ["eval", "-d", "factool-sci", "-v", "citation", "--bibliography", str(refs), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert not (out / "bibliography.json").exists()
    preds = _predictions(out)
    assert preds["factool-sci:0:0"]["prediction"] is False
    assert preds["factool-sci:1:0"]["prediction"] is True  # 2001 cited, 2002 in this file
    assert "year 2001 cited, 2002 recorded" in preds["factool-sci:1:0"]["detail"]["chain"][0]["opinion"]


def test_eval_citation_without_any_bibliography_says_how(sci_root, tmp_path):
    data = tmp_path / "mine.jsonl"
    data.write_text(json.dumps({"id": "a", "claim": '"Random Forests" by Breiman (2001)', "hallucinated": False}) + "\n")
    r = runner.invoke(app, ["eval", "--data", str(data), "-v", "citation", "--out", str(tmp_path / "x")])
    assert r.exit_code == 1 and "--bibliography FILE" in r.output


def test_real_factool_sci_counts():
    from halucheck.evaluation import dataset_root, load
    from halucheck.evaluation.datasets import factool_sci_bibliography

    try:
        if not (dataset_root() / "factool" / "scientific.jsonl").is_file():
            pytest.skip("factool/scientific.jsonl absent")
    except InputError as e:
        pytest.skip(str(e))
    items = load("factool-sci", "all")
    assert len(items) == 186 and sum(i.label for i in items) == 153  # SOURCE.md: True 33 / False 153
    assert items[0].meta == {"title": "BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding",
                             "authors": "Jacob Devlin, Ming-Wei Chang, Kenton Lee, Kristina Toutanova", "year": 2018,
                             "response_label": True}
    assert len(load("factool-sci-response", "all")) == 100
    assert len(factool_sci_bibliography()) == 32  # 33 true citations, one repeated
