"""Check cited works against a bibliography: does the cited title exist, with that year and those authors?

The FacTool-style scientific-literature check, made deterministic: the citation is looked up in a
bibliography the user supplies and compared field by field; no model is asked anything.

- :mod:`.names`: text folding and reading author names and author lists;
- :mod:`.records`: a :class:`Work` of a bibliography and a :class:`Citation` as written;
- :mod:`.formats`: BibTeX, CSL-JSON and CSV bibliography files read, CSL-JSON written;
- :mod:`.bibliography`: :class:`Bibliography` (works indexed by title) and :func:`load_bibliography`;
- :mod:`.finder`: reference-shaped citations found in text (:func:`find_citations`, :func:`parse_citation`);
- :mod:`.match`: a citation looked up in a bibliography (:func:`match`);
- :mod:`.verifier`: the ``citation`` verifier (:class:`CitationVerifier`).
"""

from halucheck.verifiers.tools.citations.bibliography import Bibliography, load_bibliography
from halucheck.verifiers.tools.citations.finder import find_citations, parse_citation
from halucheck.verifiers.tools.citations.formats import (latex_to_text, parse_bibtex, parse_csl_json, parse_csv,
                                                         to_csl_json, write_csl_json)
from halucheck.verifiers.tools.citations.match import (TITLE_THRESHOLD, WORD_SIMILARITY, MatchResult, match,
                                                       title_similarity)
from halucheck.verifiers.tools.citations.names import fold, normalize_title, split_authors, surname
from halucheck.verifiers.tools.citations.records import Citation, Work
from halucheck.verifiers.tools.citations.verifier import CitationVerifier

__all__ = ["Bibliography", "Citation", "CitationVerifier", "MatchResult", "TITLE_THRESHOLD", "WORD_SIMILARITY", "Work",
           "find_citations", "fold", "latex_to_text", "load_bibliography", "match", "normalize_title", "parse_bibtex",
           "parse_citation", "parse_csl_json", "parse_csv", "split_authors", "surname", "title_similarity",
           "to_csl_json", "write_csl_json"]
