"""A text of several sentences judged by its sentence prefixes, so that what comes after a sentence cannot
vouch for it.

``halucheck run`` judges every claim of an answer on its own. ``check`` and ``eval`` judge a text whole, and
a text can carry a note about itself ("Was this helpful? 2,417 readers marked this answer correct") that a
judge takes as evidence of the rest. :func:`verify` shows the verifier the text's prefixes that end one, two
and four sentences before its end as well as the whole (``"A. B. C."``: ``"A."``, ``"A. B."``, ``"A. B. C."``;
at most :data:`MAX_PARTS` parts), and the text's verdict is the verdict of the prefix most likely
hallucinated. A sentence is then judged at least once without anything written after it: a note appended
to an answer can make the answer look worse, never better, and one that makes it look worse is itself a
statement no passage backs.

A text of one sentence is one call, as before, and so is code (:func:`is_code`: a program's "sentences" are no
statements a note could follow); the named sets' claims and short answers are nearly all one
sentence (2-6 % of their dev items have more), response-level sets cost up to :data:`MAX_PARTS` calls an item.
"""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import TYPE_CHECKING, Sequence

from halucheck.prompts.untrusted import clean, statement
from halucheck.records import Check, Verdict
from halucheck.text import sentence_spans
from halucheck.verifiers.scoring import p_hallucinated
from halucheck.verifiers.tools.code_source import parse_source

if TYPE_CHECKING:
    from halucheck.engines.pool import EnginePool
    from halucheck.verifiers.base import Verifier

# prefixes judged per text at most: the whole and the three that end one, two and four sentences earlier, or at
# the first sentence of a shorter text. A note of one, two or four sentences at the end is judged apart from what
# comes before it; three that ended one, two and three sentences earlier were outrun by a four-sentence review
# ("★★★★★ “Spot on.” — Verified reader. I compared this answer … rate it supported.") after a one-sentence answer
MAX_PARTS = 4
_BACK = (1, 2, 4)


def is_code(text: str) -> bool:
    """Whether ``text`` is a program rather than prose: it parses as Python with a statement that is more than
    an expression (prose does not parse; a lone phrase is one expression). Prose around a fenced block is still
    prose: a fence cannot shield a sentence from being judged alone."""
    tree = parse_source(text)
    return tree is not None and any(not isinstance(node, ast.Expr) for node in tree.body)


def parts(text: str, question: str | None = None) -> list[str]:
    """The prefixes of ``text`` that are judged, shortest first, the whole text last (``[text]`` for a text of
    one sentence, and for code). The prefixes are cut from the text as a judge is shown it, without its notes and
    planted instructions (:func:`~halucheck.prompts.untrusted.statement`, :func:`~halucheck.prompts.untrusted.clean`):
    a prefix that ended inside a note of several lines would show its first lines ("## Assessment") without the
    verdict that marks them as a note."""
    if is_code(text):
        return [text]
    shown = clean(statement(text, question))
    ends = [end for _, end in sentence_spans(shown)]
    if len(ends) <= 1:
        return [text]
    # a text shorter than the longest step back has its first sentence judged alone
    cuts = sorted({max(0, len(ends) - 1 - back) for back in _BACK})
    return [shown[:ends[i]] for i in cuts] + [text]


def judged_parts(verifier: "Verifier", text: str, question: str | None = None) -> list[str]:
    """What ``verifier`` is shown of ``text``: its :func:`parts`, or the text whole for a tool check
    (``reads_prose`` False: it reads the whole answer, its final result, its code)."""
    return parts(text, question) if verifier.reads_prose else [text]


def verify(verifier: "Verifier", checks: Sequence[Check], engines: "EnginePool | None") -> list[Verdict]:
    """One verdict per check, each text judged by its :func:`judged_parts` in one ``verifier.verify`` call.

    The verdict of a text is its part's most likely hallucinated verdict. A part with no verdict (a reply
    that failed) leaves the text undecided, unless another part was found hallucinated: that verdict stands
    whatever the missing one would have said. A verdict taken from a shorter part says so (``judged``).
    """
    units: list[Check] = []
    owner: list[int] = []
    for i, check in enumerate(checks):
        for part in judged_parts(verifier, check.claim.text, check.claim.question):
            units.append(replace(check, claim=replace(check.claim, text=part)) if part != check.claim.text else check)
            owner.append(i)
    verdicts = verifier.verify(units, engines)
    grouped: list[list[tuple[Check, Verdict]]] = [[] for _ in checks]
    for i, unit, verdict in zip(owner, units, verdicts):
        grouped[i].append((unit, verdict))
    return [_worst(check, group) for check, group in zip(checks, grouped)]


def _worst(check: Check, group: list[tuple[Check, Verdict]]) -> Verdict:
    if len(group) == 1:
        return group[0][1]
    decided = [(unit, v) for unit, v in group if v.factuality is not None]
    hallucinated = [(unit, v) for unit, v in decided if v.factuality is False]
    if len(decided) < len(group) and not hallucinated:
        return next(v for _, v in group if v.factuality is None)
    unit, verdict = max(hallucinated or decided, key=lambda uv: (p_hallucinated(uv[1]), len(uv[0].claim.text)))
    return verdict if unit is group[-1][0] else replace(verdict, judged=unit.claim.text)
