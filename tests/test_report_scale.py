"""Coverage and the report's highlighting of a long answer: work linear in its size, the same pieces as the
plain per-piece reading of spans and gaps (``scripts/bench_report.py`` times 0.5-5 MB answers)."""

from __future__ import annotations

import random
import sys
from collections import Counter
from pathlib import Path

from halucheck import coverage
from halucheck.claims import looks_like_dialogue, sentences
from halucheck.coverage import Coverage, content_words
from halucheck.reports import highlight
from halucheck.text import sentence_spans

PACKAGE = str(Path(coverage.__file__).parent)
WORDS = ("The company Varenholt employs about 340 people in Bremen and makes calibration kits since 1998 its "
         "revenue rose 12 percent Interestingly sure well a of the instrument Oulu AquaProbe weighs 410 grams").split()


def synthetic(n_sentences: int, seed: int = 0) -> tuple[str, list[tuple[str, int, int]]]:
    """An answer of ``n_sentences`` (a few of them chat) and claims located in every third sentence: half of
    its words, the whole sentence, or two sentences at once (claims that overlap)."""
    r = random.Random(seed)
    parts = []
    for k in range(n_sentences):
        words = [r.choice(WORDS) for _ in range(r.randint(3, 14))]
        if k % 17 == 5:
            words = ["I", "think"] + words
        parts.append(" ".join(words).capitalize() + r.choice([".", ".", "?", "!", ".\n"]))
    answer = " ".join(parts)
    spans = sentence_spans(answer)
    claims = []
    for k in range(0, len(spans) - 1, 3):
        s, e = spans[k]
        words = answer[s:e].split()
        claims.append((" ".join(r.sample(words, max(1, len(words) // 2))), s, e))
        if k % 9 == 0:
            claims.append((answer[s:e], s, e))
        if k % 12 == 0:
            claims.append((answer[s:spans[k + 1][1]], s, spans[k + 1][1]))
    return answer, claims


def report_of(answer: str, claims: list[tuple[str, int, int]]) -> tuple[Coverage, list[dict]]:
    cov = coverage.measure(answer, claims)
    verdicts = [{"span": list(span), "factuality": (True, False, None)[k % 3]} for k, span in enumerate(cov.spans)]
    return cov, highlight(answer, verdicts, [g.to_dict(answer) for g in cov.gaps])


def lines_run(fn, *args) -> int:
    """How many lines of halucheck's own code ``fn(*args)`` executes: a deterministic measure of its work."""
    count = 0

    def local(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return local

    def calls(frame, event, arg):
        return local if frame.f_code.co_filename.startswith(PACKAGE) else None

    before = sys.gettrace()
    sys.settrace(calls)
    try:
        fn(*args)
    finally:
        sys.settrace(before)
    return count


def test_the_work_of_coverage_and_highlighting_grows_linearly_with_the_answer():
    report_of(*synthetic(20))  # the stop-word list and regexes are loaded once, outside the count
    small, large = (lines_run(report_of, *synthetic(n)) for n in (300, 600))
    assert large <= 2.5 * small, f"{small} lines for 300 sentences, {large} for 600"


# -- the plain reading: every piece against every span and gap; every claim against every word --------------

def reference_measure(answer, claims):
    sents = sentences(answer)
    words_of = [content_words(s.text, s.start) for s in sents]
    flat = [w for ws in words_of for w in ws]
    inside = [{k for k, w in enumerate(flat) if s <= w.start and w.end <= e} for _, s, e in claims]
    stated = [{w.norm for w in content_words(text)} for text, _, _ in claims]
    covered_by = [{k for k in ks if flat[k].norm in norms} for norms, ks in zip(stated, inside)]
    owners = Counter(k for ks in covered_by for k in ks)
    spans = []
    for (text, s, e), ks, located in zip(claims, covered_by, inside):
        own = [k for k in ks if owners[k] == 1] or sorted(ks)
        spans.append((s, e) if not own or set(own) == located else (flat[min(own)].start, flat[max(own)].end))
    gaps, k = [], 0
    for sent, ws in zip(sents, words_of):
        claimed = any(s <= sent.start and sent.end <= e or sent.start <= s < sent.end for _, s, e in claims)
        run = []
        for w in ws + [None]:
            if w is not None and k not in owners:
                run.append(w)
            else:
                if run:
                    kind = (coverage.SUBJECTIVE if not claimed and looks_like_dialogue(sent.text) else
                            coverage.NOT_CHECKED if len(run) >= 2 or any(x.number or x.capital for x in run)
                            else coverage.FILLER)
                    gaps.append(coverage.Gap(run[0].start, run[-1].end, kind))
                run = []
            if w is not None:
                k += 1
    return Coverage(spans, gaps, round(len(owners) / len(flat), 4) if flat else 1.0)


def reference_highlight(answer, claims, gaps=None):
    n = len(answer)
    spans = [(i, *c.get("span", [0, 0])) for i, c in enumerate(claims)]
    spans = [(i, s, e) for i, s, e in spans if 0 <= s < e <= n]
    marked = [(max(0, g["start"]), min(n, g["end"]), g["kind"]) for g in gaps or [] if g["kind"] != "filler"]
    cuts = sorted({0, n, *(x for _, s, e in spans for x in (s, e)), *(x for s, e, _ in marked for x in (s, e))})
    pieces = []
    for a, b in zip(cuts, cuts[1:]):
        gap = next((kind for s, e, kind in marked if s <= a and b <= e), "")
        owners = () if gap else tuple(i for i, s, e in spans if s <= a and b <= e)
        if pieces and pieces[-1]["_key"] == (gap, owners):
            pieces[-1]["text"] += answer[a:b]
        else:
            pieces.append({"_key": (gap, owners), "text": answer[a:b], "claims": list(owners)})
    last = {}
    for k, p in enumerate(pieces):
        gap = p.pop("_key")[0]
        if p["claims"] and not content_words(p["text"]):
            p["claims"] = []
        verdicts = [claims[i].get("factuality") for i in p["claims"]]
        p["kind"] = (("unchecked" if gap == "not checked" else "subjective") if gap else
                     ("false" if False in verdicts else "undecided" if None in verdicts else "true") if verdicts else "")
        for i in p["claims"]:
            last[i] = k
    for k, p in enumerate(pieces):
        p["numbers"] = [i + 1 for i in p["claims"] if last[i] == k]
        p["claims"] = [i + 1 for i in p["claims"]]
    return pieces


def test_coverage_and_highlighting_of_long_answers_are_the_plain_readings():
    for n, seed in ((1, 0), (5, 1), (40, 2), (200, 3), (1500, 4)):
        answer, claims = synthetic(n, seed)
        cov = coverage.measure(answer, claims)
        assert cov == reference_measure(answer, claims)
        r = random.Random(seed)
        verdicts = [{"span": list(span), "factuality": r.choice((True, False, None))} for span in cov.spans]
        verdicts += [{"factuality": False}, {"span": [5, 2], "factuality": True}, {"span": [0, len(answer) + 9]}]
        gaps = [g.to_dict(answer) for g in cov.gaps]
        # gaps as results.jsonl may hold them: overlapping, empty, reaching past the answer, in any order
        for _ in range(max(3, n // 10)):
            s = r.randrange(-5, len(answer) + 5)
            gaps.append({"start": s, "end": s + r.randrange(-3, 300), "kind": r.choice(("not checked", "subjective",
                                                                                       "filler"))})
        r.shuffle(gaps)
        for spans_gaps in ((verdicts, gaps), (verdicts, None), (verdicts[::-1], gaps[::2])):
            assert highlight(answer, *spans_gaps) == reference_highlight(answer, *spans_gaps)


def test_looking_for_notes_grows_linearly_with_the_answer():
    """``untrusted.notes`` reads every answer (claim extraction, the report): a note of several lines is looked
    for among the last lines only, not from every line to the end."""
    from halucheck.prompts.untrusted import notes

    def answer(n_lines: int) -> str:
        r = random.Random(n_lines)
        return "\n".join(" ".join(r.choice(WORDS) for _ in range(8)) for _ in range(n_lines))

    notes(answer(20), "What?")
    small, large = (lines_run(notes, answer(n), "What?") for n in (300, 600))
    assert large <= 2.5 * small, f"{small} lines for 300 answer lines, {large} for 600"


def test_what_a_judge_is_shown_of_a_text_grows_linearly_with_it():
    """``untrusted.statement`` (notes and small talk out) on a chatty text of many questions and closers."""
    from halucheck.prompts.untrusted import statement

    def text(n: int) -> str:  # chat before a last sentence of content: each question is asked before the answer
        r = random.Random(n)
        chat = (r.choice(["Any other questions?", "Hope this helps!", "Thanks!"]) for _ in range(n))
        return " ".join(chat) + " Oulu is big."

    statement(text(20), "What?")
    small, large = (lines_run(statement, text(n), "What?") for n in (300, 600))
    assert large <= 2.5 * small, f"{small} lines for 300 sentences, {large} for 600"
