"""The claim stages before the debate: subjective-sentence removal, claim extraction, search queries.

Every stage is batch-first (a list of inputs -> one engine call with all their requests) with
JSON-schema-constrained output. The extractor reads an answer one sentence at a time (with character
offsets, and the sentences before it as context), so the report can show each claim where it came from.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Sequence

from halucheck.config import MAX_CLAIMS, SUBJECTIVE_FILTER
from halucheck.engines.base import Request, SamplingParams
from halucheck.prompts import load as load_prompts
from halucheck.prompts.untrusted import without_remarks
from halucheck.records import Claim, Cost
from halucheck.registry import import_path
from halucheck.text import sentence_spans, word_spans
from halucheck.arithmetic import numbers_in
from halucheck.kinds import KINDS
from halucheck.kinds.calculations import calculations, find_calculations, list_calculations, unseen_calculations
from halucheck.kinds.results import FinalResult, final_result, is_math_question, result_claim

if TYPE_CHECKING:
    from halucheck.engines.base import Engine
    from halucheck.verifiers.tools.sources import SourceNames

FILTER_SCHEMA = {
    "type": "object",
    "properties": {"response": {"type": "string"}},
    "required": ["response"],
    "additionalProperties": False,
}
EXTRACT_SCHEMA = {
    "type": "object",
    "properties": {"claims": {"type": "array", "items": {"type": "string"}, "maxItems": 24}},
    "required": ["claims"],
    "additionalProperties": False,
}
QUERIES_SCHEMA = {
    "type": "object",
    "properties": {"queries": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 2}},
    "required": ["queries"],
    "additionalProperties": False,
}

_DIALOGUE_HINTS = re.compile(
    r"\?\s*$|\b(I think|I believe|in my opinion|I'd|I would|you|your|hope|feel free|let me know|glad|sorry|"
    r"my pleasure|happy to)\b",
    re.IGNORECASE | re.MULTILINE,
)


@dataclass(frozen=True)
class Segment:
    """A span of an answer: whole sentences, with character offsets into the answer."""

    text: str
    start: int
    end: int


@dataclass
class StageOutput:
    """One input's output of a stage; ``error`` is set when the model's reply was unusable."""

    value: object = None
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    cached_tokens: int = 0  # of prompt_tokens, those the engine served from its prefix cache


def cost_of(outputs: Sequence[StageOutput], wall_s: float, failed: int) -> Cost:
    """What a stage's batch spent: its outputs' calls and tokens, its seconds and its failed calls."""
    return Cost(llm_calls=sum(o.calls for o in outputs), prompt_tokens=sum(o.prompt_tokens for o in outputs),
                completion_tokens=sum(o.completion_tokens for o in outputs),
                cached_tokens=sum(o.cached_tokens for o in outputs), failed_calls=failed, wall_s=wall_s)


def sentences(text: str) -> list[Segment]:
    """The answer's sentences as Segments, with exact offsets (``halucheck.text.sentence_spans``)."""
    return [Segment(text[s:e], s, e) for s, e in sentence_spans(text)]


CONTEXT_WORDS = 60


def units(text: str, max_words: int = 80, question: str | None = None) -> list[tuple[Segment, str]]:
    """What the extractor reads, one call each: every sentence of ``text`` (a longer one cut into pieces
    of ``max_words``), with the context it may need to resolve "he" or "the company": the question and up
    to ``CONTEXT_WORDS`` words of the sentences before it. Small models given a paragraph extract its
    first fact or two and stop (measured on Factcheck-GPT's dev responses: recall of the people's claims
    0.68 per 80-word segment); one sentence at a time they miss far less."""
    out: list[tuple[Segment, str]] = []
    pieces = [p for s in sentences(text) for p in _split_long(s, max_words)]
    for k, seg in enumerate(pieces):
        before, n = [], 0
        for prev in reversed(pieces[:k]):
            n += len(prev.text.split())
            if n > CONTEXT_WORDS and before:
                break
            before.insert(0, prev.text)
        context = " ".join(([question] if question else []) + before)
        out.append((seg, context))
    return out


def select(found: Sequence[tuple[str, Segment]]) -> list[tuple[str, Segment]]:
    """An answer's claims from its sentences' extractions, each once (the first sentence that gave it):
    small models also extract again from the sentences they were given as context. (Dropping claims
    whose words are mostly in the context instead lost 2-3 points of recall of the people's claims on
    the dev split, so only exact repeats go.)"""
    seen: set[str] = set()
    out = []
    for claim, seg in found:
        key = " ".join(claim.lower().rstrip(".").split())
        if key not in seen:
            seen.add(key)
            out.append((claim, seg))
    return out


def _split_long(s: Segment, max_words: int) -> list[Segment]:
    spans = list(word_spans(s.text))
    if len(spans) <= max_words:
        return [s]
    out = []
    for i in range(0, len(spans), max_words):
        a, b = spans[i][0], spans[min(i + max_words, len(spans)) - 1][1]
        out.append(Segment(s.text[a:b], s.start + a, s.start + b))
    return out


_AUX = frozenset(
    "is are was were be been being am has have had does do did can could will would shall should may might "
    "must isn't aren't wasn't weren't hasn't haven't hadn't doesn't don't didn't can't won't".split())
_SUBJECT = frozenset("i you he she it we they this that there who which".split())


def is_short_answer(answer: str, max_words: int = 8) -> bool:
    """A QA answer that is not a full statement on its own ("Paris.", "1889", "About 340 people.") is
    verified as one claim: question + answer (paper §4.1.2). A statement, however short ("It makes
    enzyme kits."), goes to claim extraction like any answer, so two facts in it are two claims.

    A statement is recognised by a verb: an auxiliary or copula, a lower-case word ending in -ed, or
    one ending in -s right after a name or a pronoun ("Varenholt employs", "It contains")."""
    words = re.findall(r"[\w'’-]+", answer)
    if len(words) > max_words or len(sentences(answer)) > 1:
        return False
    for prev, w in zip([""] + words, words):
        lw = w.lower()
        if lw in _AUX or (w.islower() and len(w) > 3 and lw.endswith("ed")):
            return False
        if w.islower() and len(w) > 2 and lw.endswith("s") and not lw.endswith("ss") and prev and (
                prev[:1].isupper() or prev.lower() in _SUBJECT):
            return False
    return True


# What makes a sentence more than one claim, or a claim that needs the sentences before it to be read: a clause
# joined on, a list, a reference back, a person speaking.
_COMPOUND = re.compile(r"[,;:()\[\]\"“”]|\b(and|or|but|nor|while|whereas|although|though|because|since|unless|if|"
                       r"which|who|whom|whose|where|when|after|before|including|as well as|also|both|either|neither|"
                       r"it|its|he|she|him|his|her|hers|they|them|their|theirs|this|these|that|those|i|me|my|we|us|"
                       r"our|you|your)\b", re.I)
SIMPLE_WORDS = (4, 14)  # a simple statement's length in words


def is_simple_statement(sentence: str) -> bool:
    """A sentence that is one claim as it stands, checked without an extraction call: a statement (it has a verb,
    :func:`is_short_answer`'s test) of 4-14 words ending in a full stop, with no clause or list joined on, no
    pronoun or demonstrative that needs the sentences before it, nobody speaking in the first or second person
    ("The Limnos Station is powered by a small wind turbine."; not "It opened in 2014." nor "Varenholt makes
    sensors and kits."). Of Factcheck-GPT's 250 dev sentences 9 are; the sentence itself matches each of the 11
    claims people extracted from them (content-word F1 >= 0.5, ``evaluation.extraction``), where the extractor finds
    0.797 of all gold claims: the rule spares calls and loses no recall there."""
    text = sentence.strip()
    words = re.findall(r"[\w'’-]+", text)
    if not (SIMPLE_WORDS[0] <= len(words) <= SIMPLE_WORDS[1]) or not text.endswith(".") or _COMPOUND.search(text):
        return False
    return len(sentences(text)) == 1 and not is_short_answer(text, max_words=len(words))


def looks_like_dialogue(answer: str) -> bool:
    """Chatty answers (questions back, first/second person, pleasantries) get the subjective filter."""
    return bool(_DIALOGUE_HINTS.search(answer))


def locate(claim: str, answer: str, within: Segment | None = None) -> tuple[int, int]:
    """The sentence of ``answer`` (inside ``within`` if given) sharing most words with ``claim``:
    where the report highlights it."""
    words = {w.lower() for w in re.findall(r"\w+", claim) if len(w) > 2}
    best, best_score = None, -1.0
    for s in sentences(answer):
        if within and not (within.start <= s.start and s.end <= within.end):
            continue
        sw = {w.lower() for w in re.findall(r"\w+", s.text) if len(w) > 2}
        score = len(words & sw) / (len(words) or 1)
        if score > best_score:
            best, best_score = s, score
    if best is None:
        return (within.start, within.end) if within else (0, len(answer))
    return best.start, best.end


def _run(engine: "Engine", stage: str, schema: dict, inputs: Sequence[dict], key: str,
         sampling: SamplingParams) -> list[StageOutput]:
    prompts = load_prompts("claims")[stage]
    requests = [
        Request(
            messages=(
                {"role": "system", "content": prompts["system"].render()},
                {"role": "user", "content": prompts["user"].render(**inp)},
            ),
            schema=schema,
            sampling=sampling,
            tag=f"claims:{stage}",
        )
        for inp in inputs
    ]
    out = []
    for res in engine.generate(requests):
        value = res.parsed[key] if res.ok else None
        spent = res.attempts > 0  # a reply from the run's cache costs no call and no token now
        out.append(StageOutput(value, res.error, res.prompt_tokens * spent, res.completion_tokens * spent,
                               res.attempts, res.cached_tokens * spent))
    return out


# Each stage's own defaults; models.yaml's `sampling:` section (per role) goes on top (Settings.sampling).
FILTER_SAMPLING = SamplingParams(max_tokens=512)
EXTRACT_SAMPLING = SamplingParams(max_tokens=384)
QUERY_SAMPLING = SamplingParams(max_tokens=96)


def filter_subjective(engine: "Engine", texts: Sequence[str],
                      sampling: SamplingParams = FILTER_SAMPLING) -> list[StageOutput]:
    """Remove purely subjective sentences (Table 9). The value is the remaining text ('' if none)."""
    outs = _run(engine, "filter", FILTER_SCHEMA, [{"text": t} for t in texts], "response", sampling)
    for o, original in zip(outs, texts):
        if o.error:
            o.value = original  # keep everything rather than lose facts
        elif str(o.value).strip().lower() in ("none", "none.", ""):
            o.value = ""
    return outs


def extract_claims(engine: "Engine", texts: Sequence[str], contexts: Sequence[str] | None = None,
                   sampling: SamplingParams = EXTRACT_SAMPLING) -> list[StageOutput]:
    """Atomic, self-contained claims (FacTool style) for each text, each once and none a question; value is a list
    of strings."""
    contexts = contexts or [""] * len(texts)
    outs = _run(engine, "extract", EXTRACT_SCHEMA,
                [{"text": t, "context": c} for t, c in zip(texts, contexts)], "claims", sampling)
    for o in outs:
        if o.value is not None:
            seen, clean = set(), []
            for c in o.value:
                c = " ".join(c.split())
                if c and not c.endswith("?") and c.lower() not in seen:  # a question (the user's, restated)
                    # asserts nothing: the demo's "What does a CalibraKit contain?" was judged "supported"
                    seen.add(c.lower())
                    clean.append(c)
            o.value = clean
    return outs


@dataclass(frozen=True)
class Finding:
    """What a kind's finder is given besides the text: ``cite`` (a bibliography to check citations against),
    ``sources`` (a corpus to look named documents up in: True, or the names of its documents)."""

    cite: bool = False
    sources: "bool | SourceNames" = False


def finders(reads: str) -> list[tuple[str, Callable[[str, Finding], list[tuple]]]]:
    """(kind, finder) for the kinds of :data:`halucheck.kinds.KINDS` with a finder that reads ``reads``, in
    the table's order."""
    return [(k.name, import_path(k.finder)) for k in KINDS.values() if k.finder and k.reads == reads]


@dataclass
class AnswerClaims:
    """What the claim stage made of one answer: its claims, each with its span in the answer and its kind
    (``question`` set only for the short-QA claim question + answer; the kinds: :data:`halucheck.kinds.KINDS`), or
    the ``error`` (stage, message) of a failed call (the answer is then tried again later); ``warning``:
    claims were cut at ``max_claims``."""

    claims: list[Claim] = field(default_factory=list)
    error: tuple[str, str] | None = None
    warning: str | None = None


def claims_of_answers(answers: Sequence[tuple[str | None, str, int | None]], engine_filter: "Engine",
                      engine_extract: "Engine", subjective_filter: str = SUBJECTIVE_FILTER, max_claims: int = MAX_CLAIMS,
                      filter_sampling: SamplingParams = FILTER_SAMPLING,
                      extract_sampling: SamplingParams = EXTRACT_SAMPLING,
                      cite: bool = False, sources: "bool | SourceNames" = False,
                      grounded: Sequence[bool] | None = None,
                      ) -> tuple[list[AnswerClaims], list[StageOutput]]:
    """The claim stage over a batch of answers, ``(question, answer, checked_chars)`` each (``checked_chars``:
    where an over-long answer's checked part ends, None for all of it). Returns one AnswerClaims per answer
    and the stage outputs (for the cost accounting). Two engine calls for the whole batch: the subjective
    filter, then the extractor (and a third listing the calculations of the math answers).

    The rules: a short QA answer that is not a statement (:func:`is_short_answer`) is one claim, question +
    answer, with no model call; any other answer is read one sentence at a time (:func:`units`), after the
    subjective filter when ``subjective_filter`` is ``on``, or ``auto`` and the answer reads like dialogue;
    its claims are each kept once (:func:`select`), cut at ``max_claims``, and located in the answer
    (:func:`locate`). Every calculation written in the answer (``48 x 125 = 5800``) is a claim of its own,
    word for word, found without a model (:func:`halucheck.kinds.calculations.calculations`); with ``cite`` (a bibliography to check
    against), so is every reference-shaped citation (:func:`citations`); an extracted claim that restates
    one is dropped. With ``sources`` (a corpus to look them up in: True, or better the names of its documents,
    :class:`halucheck.verifiers.tools.sources.SourceNames`, so that ``(source: Q3 report (draft) v2.md)`` is
    read as the corpus spells it), every document the answer names as its source (``(source: products.md)``,
    :func:`halucheck.verifiers.tools.sources.find_sources`) is a claim of kind ``source``. An answer to a math
    question (:func:`halucheck.kinds.results.is_math_question`) gets its final result as a claim of
    kind ``result`` (checked by program), the calculations the model lists in it that the regex finder missed
    (:func:`halucheck.kinds.calculations.list_calculations`, one more call per math answer) as
    ``calculation`` claims, and its other claims sorted by :func:`math_claims`; an answer with evidence of its
    own to search (``grounded``: a corpus, or the item's context) is one only when its question is a word
    problem on its own (``strict``), and keeps its derived steps as knowledge claims.
    The claims found without a model are those of the kinds of :data:`halucheck.kinds.KINDS` that name a finder
    (:func:`finders`), each run on every answer in the table's order. A failed call fails its whole answer."""
    out = [AnswerClaims() for _ in answers]
    finding, first, then = Finding(cite, sources), finders("answer"), finders("prose")
    work = []  # (answer index, sentence, needs the filter, context for the extractor, is its own claim)
    prose: dict[int, str] = {}  # each answer's checked text with its code blocks blanked out
    for i, (question, answer, cut) in enumerate(answers):
        if question and is_short_answer(answer):  # the paper's short-QA rule: question + answer is one claim
            out[i].claims = [Claim(answer.strip(), question, "knowledge", 0, len(answer))]
            continue
        text = answer[:cut] if cut else answer
        for kind, find in first:  # e.g. code answering the question: one claim, run against independent solutions
            for block, s, e, *_ in find(text, finding):
                out[i].claims.append(Claim(block, question, kind, s, e))
                text = text[:s] + " " * (e - s) + text[e:]  # the prose around it is read as usual, offsets kept
        text = without_remarks(text, question)  # a note about the answer itself is no claim of it (the report lists
        # it), nor is small talk ("Happy to help!"): neither reaches the subjective filter or the extractor
        prose[i] = text
        needs = subjective_filter == "on" or (subjective_filter == "auto" and looks_like_dialogue(text))
        mathy = is_math_question(question, text, strict=bool(grounded and grounded[i]))
        for seg, context in units(text, question=question):  # a simple statement is its own claim, without a call
            work.append((i, seg, needs, context, not needs and not mathy and is_simple_statement(seg.text)))
    to_filter = [w for w in work if w[2]]
    filtered = filter_subjective(engine_filter, [w[1].text for w in to_filter], filter_sampling) if to_filter else []
    texts = {id(w): w[1].text for w in work}
    for w, f in zip(to_filter, filtered):
        if f.error and out[w[0]].error is None:
            out[w[0]].error = ("filter", f.error)
        texts[id(w)] = f.value
    to_extract = [w for w in work if out[w[0]].error is None and texts[id(w)].strip() and not w[4]]
    extracted = extract_claims(engine_extract, [texts[id(w)] for w in to_extract], [w[3] for w in to_extract],
                               extract_sampling)
    math = [i for i, (q, _, _) in enumerate(answers) if i in prose and out[i].error is None
            and is_math_question(q, prose[i], strict=bool(grounded and grounded[i]))]
    listed = [StageOutput(c.value, c.error, c.cost.prompt_tokens, c.cost.completion_tokens, c.cost.llm_calls,
                          c.cost.cached_tokens)
              for c in (list_calculations(engine_extract, [prose[i] for i in math]) if math else [])]
    model_calcs: dict[int, list[str]] = {}
    for i, o in zip(math, listed):
        if o.error:
            if out[i].error is None:
                out[i].error = ("calculations", o.error)
        else:
            model_calcs[i] = o.value
    found: dict[int, list[tuple[str, Segment]]] = {}
    replies = {id(w): o for w, o in zip(to_extract, extracted)}
    for w in work:  # in the answer's order
        o = replies.get(id(w))
        if w[4]:
            found.setdefault(w[0], []).append((w[1].text.strip(), w[1]))
        elif o is not None and o.error:
            if out[w[0]].error is None:
                out[w[0]].error = ("extract", o.error)
        elif o is not None:
            found.setdefault(w[0], []).extend((c, w[1]) for c in o.value)
    for i, (_, answer, _) in enumerate(answers):
        a = out[i]
        if a.error or (a.claims and a.claims[0].kind == "knowledge"):  # failed, or the short-QA claim
            continue
        tools = {kind: find(prose[i], finding) for kind, find in then}  # the kinds found without a model
        calcs, cites = tools["calculation"], tools["citation"]
        written = {_calc_key(c[0]) for c in calcs}
        titles = [_words(c[3]) for c in cites]
        kept = [(c, seg) for c, seg in select(found.get(i, [])) if not _restates(c, written)
                and not any(t and t <= _words(c) for t in titles)]
        if len(calcs) + len(kept) > max_claims:
            a.warning = (f"{len(calcs) + len(kept)} claims found; the first {max_claims} are checked "
                         "(raise --max-claims to check more)")
            kept = kept[:max(0, max_claims - len(calcs))]
            calcs = tools["calculation"] = calcs[:max_claims]
        coded = code_names([c.text for c in a.claims if c.kind == "code"])
        if coded:  # what the answer's code does is the code check's to decide: never guessed closed-book
            kept = [(c, seg) for c, seg in kept if not coded.search(c)]
        searchable = bool(grounded and grounded[i])
        if i in model_calcs:
            question = answers[i][0]
            kept, derived, result = math_claims(question, prose[i], kept, keep_derived=searchable)
            a.claims += [Claim(c, None, "calculation", *locate(c, answer))
                         for c in unseen_calculations(model_calcs[i], calcs)]
            if result is not None:
                a.claims.append(Claim(result_claim(result), question, "result", result.start, result.end))
            a.claims += [Claim(c, None, "knowledge", *locate(c, answer, within=seg)) for c, seg in derived]
            kind = "premise"
        else:
            kind = "knowledge"
        a.claims += [Claim(c, None, kind, *locate(c, answer, within=seg)) for c, seg in kept]
        for kind, spans in tools.items():
            a.claims += [Claim(text, None, kind, s, e) for text, s, e, *_ in spans]
        a.claims.sort(key=lambda c: c.start)
    return out, filtered + extracted + listed


def math_claims(question: str, answer: str, kept: list[tuple[str, Segment]], keep_derived: bool = False,
                ) -> tuple[list[tuple[str, Segment]], list[tuple[str, Segment]], FinalResult | None]:
    """A math answer's extracted claims, sorted by what decides them: (premises, derived steps kept, final result).

    A claim from a sentence that writes out a calculation, or that states the final result, is dropped: the
    calculation check and the program check decide that sentence, a model judging it closed-book would only
    guess. So is a claim with a number the question does not have (a derived step, "so 12 apples are left"):
    the question cannot confirm it, and a wrong step shows in the final result. So are the working's own words,
    which state no fact (:func:`is_working`: "Let's start by finding how much laundry David does.", "Dividing
    both sides by 15, we get:", "The weight of the boxes will be 15x.", a question). The claims left restate
    the question's premises ("each box holds 125 items"): they are checked against the question (kind
    ``premise``). With ``keep_derived`` (the answer has evidence to search) the derived steps are returned too,
    to be checked as knowledge claims."""
    result = final_result(answer, question)
    given = numbers_in(question)
    premises, derived = [], []
    for claim, seg in kept:
        if find_calculations(seg.text) or (result is not None and seg.start <= result.start < seg.end) \
                or is_working(claim):
            continue
        (derived if numbers_in(claim) - given else premises).append((claim, seg))
    return premises, derived if keep_derived else [], result


# the working of a solution, not a fact: a step announced ("let's", "to find ...", "we need to"), a line that
# leads into what follows ("we get:"), an unknown (x, 15x) or a question
_WORKING_START = re.compile(
    r"^\W*(?:(?:so|then|now|first|next|finally|therefore|thus|hence)\W+)*(?:let'?s|let\s+us|let\s+[a-z]\s+be|"
    r"to\s+(?:find|calculate|compute|determine|solve|get|work\s+out|figure\s+out)|"
    r"we\s+(?:need|want|have|are\s+going)\s+to|we\s+(?:can|will|must|should)\s+(?:now\s+)?(?:find|calculate|compute|"
    r"use|set|write|start|subtract|add|divide|multiply|simplify|solve|substitute|plug|express|rewrite))\b",
    re.IGNORECASE)
_WORKING_ANYWHERE = re.compile(r"\b(?:we\s+(?:need|have)\s+to|let'?s|let\s+us)\b", re.IGNORECASE)
_UNKNOWN = re.compile(r"(?<![\w.])\d*[xyz](?![\w'])")


def is_working(claim: str) -> bool:
    """Whether a claim from a math answer is its working rather than a fact (see :func:`math_claims`)."""
    text = claim.strip().strip('"\'')
    if text.endswith((":", "?")) or _WORKING_START.search(text) or _UNKNOWN.search(text):
        return True
    return bool(_WORKING_ANYWHERE.search(text)) and not re.search(r"\d", text)


_CODE_BLOCK = re.compile(r"```[\w+-]*[ \t]*\n(.*?)```", re.DOTALL)


def code_names(blocks: Sequence[str]) -> re.Pattern | None:
    """A pattern that finds, in a sentence, the name of a function or class the answer's code blocks define
    (``count_vowels``; names of three letters at least, not to take "A" or "f" for one), or None when they define
    none. A sentence of the answer that names one describes what the code does ("The function count_vowels
    returns the number of vowels."): the code check runs the code against solutions written for the question
    and so decides it; a model judging the sentence without evidence would only guess (it called a right
    answer's "Here is the function:", extracted as such a sentence, false this way)."""
    from halucheck.verifiers.tools.code_source import parse_python

    names = {node.name for block in blocks for tree in [parse_python(block)] if tree is not None for node in tree.body
             if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and len(node.name) > 2}
    return re.compile(r"(?<![\w.])(?:" + "|".join(sorted(map(re.escape, names))) + r")(?!\w)") if names else None


def code_blocks(text: str) -> list[tuple[str, int, int]]:
    """The fenced code blocks of ``text`` (```` ```python ... ``` ````) as (code, start, end of the fence):
    each becomes a ``code`` claim."""
    return [(m.group(1), m.start(), m.end()) for m in _CODE_BLOCK.finditer(text) if m.group(1).strip()]


def found_code(text: str, finding: Finding) -> list[tuple[str, int, int]]:
    """The finder of kind ``code`` (:data:`halucheck.kinds.KINDS`): :func:`code_blocks`."""
    return code_blocks(text)


def found_calculations(text: str, finding: Finding) -> list[tuple[str, int, int]]:
    """The finder of kind ``calculation``: :func:`halucheck.kinds.calculations.calculations`."""
    return calculations(text)


def found_citations(text: str, finding: Finding) -> list[tuple[str, int, int, str]]:
    """The finder of kind ``citation``: :func:`citations`, given a bibliography (``finding.cite``)."""
    return citations(text) if finding.cite else []


def found_sources(text: str, finding: Finding) -> list[tuple[str, int, int]]:
    """The finder of kind ``source``, given a corpus (``finding.sources``): the documents the answer names as its
    source (:func:`halucheck.verifiers.tools.sources.find_sources`), as the corpus spells them when it names them."""
    if not finding.sources:
        return []
    from halucheck.verifiers.tools.sources import find_sources

    names = None if finding.sources is True else finding.sources
    return [(r.name, r.start, r.end) for r in find_sources(text, names)]


def citations(text: str) -> list[tuple[str, int, int, str]]:
    """The reference-shaped citations in ``text`` (:func:`halucheck.verifiers.tools.citations.find_citations`) as (exact
    text, start, end, cited title): each becomes a ``citation`` claim, looked up in the bibliography."""
    from halucheck.verifiers.tools.citations.finder import find_citations

    return [(text[s:e], s, e, c.title) for c, (s, e) in find_citations(text)]


def _words(text: str) -> frozenset[str]:
    return frozenset(w for w in re.findall(r"\w+", text.lower()) if len(w) > 2)


def _restates(claim: str, written: set[str]) -> bool:
    """Whether an extracted claim is little more than a calculation already taken word for word from the
    answer ("48 x 125 = 5800 apples."); one that also states other facts stays."""
    calcs = calculations(claim)
    if not calcs or _calc_key(claim) not in written:
        return False
    rest = claim
    for text, _, _ in calcs:
        rest = rest.replace(text, " ")
    return len(re.findall(r"\w+", rest)) <= 3


def _calc_key(text: str) -> str:
    """A calculation's identity whatever its spacing or signs: its expression and result, digits and operators."""
    found = calculations(text)
    return re.sub(r"\s+", "", found[0][0]).lower() if found else ""


_TRUTH_QUESTION = re.compile(
    r"\s*[,.;:-]?\s*\b(is|are|was|were)\s+(this|that|the|it|these)\s*(claim|statement|fact|information)?\s*"
    r"(true|false|correct|incorrect|accurate|right|wrong)\b\s*\??\s*$|\s*\?\s*$", re.IGNORECASE)


def search_query(text: str) -> str:
    """A model's query without a question about truth at its end ("... Is this claim true?"): words that
    no passage contains only dilute a keyword search."""
    prev = None
    while prev != text:
        prev, text = text, _TRUTH_QUESTION.sub("", text).strip()
    return text


def queries_where(ask: Sequence[bool], claims: Sequence[str], engine: Callable[[], "Engine"],
                  sampling: SamplingParams = QUERY_SAMPLING) -> list[StageOutput]:
    """Search queries for the claims ``ask`` marks (:func:`make_queries`; ``engine()`` is called only then); every
    other claim is searched by its own words."""
    asked = iter(make_queries(engine(), [c for c, a in zip(claims, ask) if a], sampling) if any(ask) else [])
    return [next(asked) if a else StageOutput(value=[c]) for c, a in zip(claims, ask)]


def make_queries(engine: "Engine", claims: Sequence[str],
                 sampling: SamplingParams = QUERY_SAMPLING) -> list[StageOutput]:
    """Two search queries per claim (FacTool); on failure the claim itself is the query."""
    outs = _run(engine, "queries", QUERIES_SCHEMA, [{"claim": c} for c in claims], "queries", sampling)
    for o, claim in zip(outs, claims):
        qs = [search_query(q) for q in (o.value or []) if q and q.strip()]
        qs = [q for q in qs if q]
        o.value = list(dict.fromkeys(qs + [claim]))  # the claim text is always searched too
    return outs
