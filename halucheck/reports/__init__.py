"""Reports of a run: ``results.jsonl`` (one line per input item, claims nested) and a self-contained
``report.html``, both built from the run database alone (so `halucheck report RUN_DIR` can rebuild them).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from halucheck.kinds import TOOL_CHECKS, kind_of

if TYPE_CHECKING:
    from halucheck.store.runstore import RunStore


class EvidenceJSON(TypedDict, total=False):
    source: str
    start: int
    end: int
    text: str
    cited_by: int  # debate turns that named this passage as bearing on the claim


class ClaimJSON(TypedDict, total=False):
    text: str
    factuality: bool | None
    error_severity: int | None
    confidence: float
    p_hallucinated: float | None  # the verifier's probability that the claim is not factual
    verifier: str  # the verifier that decided (in a cascade, the last stage that saw the claim)
    basis: str  # what the verdict rests on: tool, evidence, question or closed-book (basis_of)
    calibrated: bool  # p_hallucinated went through the run's calibrator (`halucheck calibrate`)
    p_raw: float | None  # the verifier's own P(hallucinated), when calibrated
    calibrated_decision: bool | None  # hallucinated? by the calibrator's threshold; None: in its undecided band
    evidence: list[EvidenceJSON]
    chain: list[dict]
    span: list[int]  # [start, end] of the answer text the claim states (coverage.py)
    sentence: list[int]  # [start, end] of the answer sentence (or segment) it was extracted from
    queries: list[str]
    error: str


class ResultJSON(TypedDict, total=False):
    id: str
    line: int
    question: str | None
    answer: str
    hallucinated: bool | None  # None: undecided (``undecided_reason`` says why) or an unusable line
    undecided_reason: str
    max_severity: int | None  # the worst false claim's severity; None: undecided, or its false claims are all
    #                           unrated (a judge's)
    score: float | None  # None: nothing of the answer was checked; else the probability that the answer holds a hallucination, from the claims' P(hallucinated)
    counts: dict
    coverage: dict  # checked_share and the gaps: answer text no claim covers (coverage.py)
    planted: list[dict]  # instructions to the checker found in the answer, question or evidence, taken out
    claims: list[ClaimJSON]
    errors: list[str]


def claim_false_probability(factuality: bool | None, confidence: float) -> float | None:
    if factuality is None:
        return None
    return confidence if factuality is False else 1.0 - confidence


def aggregate(claims: list[ClaimJSON]) -> dict:
    """Response-level verdict: hallucinated if any claim is non-factual (FacTool/MCMAD rule); None
    (undecided) if no claim is false but one has no valid verdict, or if there is no claim at all: an
    unchecked claim, and an answer of which nothing was checked, are never clean. An undecided answer has no
    severity (None, not 0)."""
    false = [c for c in claims if c.get("factuality") is False]
    undecided = [c for c in claims if c.get("factuality") is None]
    p_clean = 1.0
    for c in claims:
        p = c.get("p_hallucinated")
        if p is None:
            p = claim_false_probability(c.get("factuality"), c.get("confidence", 0.0))
        if p is not None and c.get("factuality") is not None:
            p_clean *= 1.0 - p
    hallucinated = True if false else None if undecided or not claims else False
    return {
        "hallucinated": hallucinated,
        # a judge rates no severity: an answer whose false claims are all a judge's has none (not 0)
        "max_severity": max((c["error_severity"] for c in false if c.get("error_severity") is not None),
                            default=0 if hallucinated is False else None),
        "score": round(1.0 - p_clean, 4) if claims else None,
        "counts": {"claims": len(claims), "false": len(false), "true": len(claims) - len(false) - len(undecided),
                   "undecided": len(undecided)},
    }


def basis_of(kind: str, evidence: list, verdict) -> str:
    """What a claim's verdict rests on: ``tool`` (a calculation evaluated, programs or code run, a citation
    or document looked up: :data:`halucheck.kinds.TOOL_CHECKS`), ``question`` (a premise checked against the
    question), ``evidence`` (passages), or ``closed-book`` (no evidence at all: the model's prior alone, never
    confident); the kind's entry (:data:`halucheck.kinds.KINDS`) says which of the last two it has. Only
    verdicts on ``evidence`` or the ``question`` go through the run's calibrator."""
    if verdict is not None and verdict.verifier in TOOL_CHECKS:
        return "tool"
    if not evidence:
        return "closed-book"
    return kind_of(kind).basis


def run_calibrator(store: "RunStore"):
    """The calibrator the run was made with (kept in its database), or None: uncalibrated."""
    from halucheck.verifiers.calibration import Calibrator

    raw = store.get_meta("calibrator")
    return Calibrator.from_json(raw) if raw else None


def build_results(store: "RunStore") -> list[ResultJSON]:
    """One result per input line, in input order: checked items and lines that could not be read."""
    from halucheck import coverage
    from halucheck.verifiers.calibration import calibrated_fields
    from halucheck.records import Verdict

    cal = run_calibrator(store)
    run = store.contents()  # one pass over the run database
    verdicts, evidence, queries = run.verdicts, run.evidence, run.queries
    errors_by_item: dict[int, list[str]] = {}
    errors_by_claim: dict[str, str] = {}
    for err in run.item_errors:
        errors_by_item.setdefault(err.item_idx, []).append(f"{err.stage}: {err.message}")
        if err.claim_id is not None:
            errors_by_claim[err.claim_id] = f"{err.stage}: {err.message}"
    out: list[tuple[int, ResultJSON]] = []
    for item in run.items:
        idx, item_id, line, question, answer, claims_done = (item.idx, item.id, item.line, item.question, item.answer,
                                                             item.claims_done)
        rows = run.claims.get(idx, [])
        cov = coverage.measure(answer, [(r.claim.text, r.claim.start, r.claim.end) for r in rows])
        claims: list[ClaimJSON] = []
        for row, span in zip(rows, cov.spans):
            cid, text, cq, s, e = row.claim_id, row.claim.text, row.claim.question, row.claim.start, row.claim.end
            v: Verdict | None = verdicts.get(cid)
            basis = basis_of(row.claim.kind, evidence.get(cid, []), v)
            c: ClaimJSON = {
                "text": f"{cq} {text}" if cq else text,
                "factuality": v.factuality if v else None,
                "error_severity": v.error_severity if v else None,
                "confidence": round(v.confidence, 4) if v else 0.0,
                "p_hallucinated": round(v.p_hallucinated, 4) if v and v.p_hallucinated is not None else None,
                "verifier": v.verifier if v else None,
                "basis": basis,
                "evidence": cited(evidence.get(cid, []), v.chain if v else []),
                "chain": [t.to_dict() for t in v.chain] if v else [],
                "span": list(span),
                "sentence": [s, e],
                "queries": queries.get(cid, []),
            }
            recalibrated = v is not None and basis in ("evidence", "question")
            c.update(calibrated_fields(cal if recalibrated else None, c["p_hallucinated"]))
            if v is None:
                c["error"] = errors_by_claim.get(cid, "not checked yet (run the same command again)")
            elif v.error:
                c["error"] = v.error
            claims.append(c)
        r: ResultJSON = {"id": item_id, "line": line, "question": question, "answer": answer,
                         **aggregate(claims),
                         "coverage": {"checked_share": cov.checked_share,
                                      "gaps": [g.to_dict(answer) for g in cov.gaps]},
                         "claims": claims}
        planted = planted_instructions(question, answer, [e for r in rows for e in evidence.get(r.claim_id, [])])
        if planted:
            r["planted"] = planted
        errs = errors_by_item.get(idx, [])
        if not claims_done:
            r["hallucinated"] = None  # claims not extracted: zero claims here means nothing was checked
            if not any(e.startswith(("filter:", "extract:")) for e in errs):
                errs = errs + ["claims: not extracted yet (run the same command again)"]
        if r["hallucinated"] is None:
            r["max_severity"] = None
            r["undecided_reason"] = _undecided_reason(claims_done, claims, errs)
        if errs:
            r["errors"] = errs
        out.append((line, r))
    for err in run.unusable_lines:
        line = err.line
        out.append((line, {"id": err.item_id or f"line-{line}", "line": line, "hallucinated": None,
                           "max_severity": None, "score": None, "counts": {}, "claims": [],
                           "errors": [f"input: {err.message}"]}))
    out.sort(key=lambda x: x[0])
    return [r for _, r in out]


def planted_instructions(question: str | None, answer: str, evidence: list) -> list[dict]:
    """Instructions to the checker planted in an item's question, answer or evidence
    (:func:`halucheck.prompts.untrusted.instructions`), and notes about the answer appended to it
    (:func:`halucheck.prompts.untrusted.notes`): no model was shown them; the report says where."""
    from halucheck.prompts.untrusted import clean, instructions, notes

    out, seen = [], set()
    cleaned = clean(answer or "")
    about_itself = tuple(cleaned[a:b] for a, b in notes(cleaned, question))
    for where, source, text in [("question", None, question or ""), ("answer", None, answer or ""),
                                *(("evidence", e.source, e.text) for e in evidence)]:
        for found in instructions(text) + (about_itself if where == "answer" else ()):
            if (where, found) not in seen:
                seen.add((where, found))
                out.append({"in": where, "text": found, **({"source": source} if source else {})})
    return out


def cited(evidence: list, chain: list) -> list[EvidenceJSON]:
    """The claim's passages, each with the number of debate turns that quoted it with a verified quote:
    what the agents found decisive."""
    counts: Counter = Counter()
    for t in chain:
        counts.update({q.passage for q in t.quotes if q.verified and q.passage})
    out = []
    for n, e in enumerate(evidence, 1):
        d: EvidenceJSON = e.to_dict()  # type: ignore[assignment]
        d["cited_by"] = counts.get(n, 0)
        out.append(d)
    return out


# why an answer with no claim is undecided (not clean): a rerun gives the same, so nothing is retried
NOTHING_CHECKED = ("none of its text was checked: no claim was found in it (the extractor returned none, or it "
                   "is all opinion or small talk); read it yourself, or check it with `halucheck check`")


def nothing_checked(r: ResultJSON) -> bool:
    """Whether ``r`` is undecided because none of its text was checked (not because a call failed)."""
    return r.get("hallucinated") is None and r.get("undecided_reason", "").startswith("none of its text was checked")


def _undecided_reason(claims_done: bool, claims: list[ClaimJSON], errors: list[str]) -> str:
    """One line on why an answer has no verdict, with the first failure behind it."""
    if not claims_done:
        why = next((e for e in errors if e.startswith(("filter:", "extract:"))), "not extracted yet")
        return f"its claims could not be extracted ({why})"
    if not claims:
        return NOTHING_CHECKED
    open_ = [c for c in claims if c.get("factuality") is None]
    first = next((c["error"] for c in open_ if c.get("error")), "no valid verdict")
    return f"{len(open_)} of {len(claims)} claim(s) have no valid verdict ({first})"


def _first_failure(r: ResultJSON) -> str:
    """The failure behind an undecided answer: its first unchecked claim's error, else its first error."""
    return next((c["error"] for c in r["claims"] if c.get("factuality") is None and c.get("error")),
                next(iter(r.get("errors", [])), r.get("undecided_reason") or "no valid verdict"))


def write_results(out_dir: Path, results: list[ResultJSON]) -> Path:
    """Write results.jsonl atomically (a kill mid-write leaves the previous file intact)."""
    path = Path(out_dir) / "results.jsonl"
    _write_atomically(path, lambda fh: fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in results))
    return path


def _write_atomically(path: Path, write) -> None:
    """``write(file)`` into ``path``'s temp file, then rename it over ``path``; the temp file never stays
    behind. A full disk or a read-only folder is a :class:`~halucheck.errors.DiskError` (one line)."""
    from halucheck.errors import DiskError, disk_problem

    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            write(fh)
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        problem = disk_problem(exc) if isinstance(exc, OSError) else None
        if problem == "full":
            raise DiskError(f"cannot write {path} ({exc.strerror}): the disk is full; free some space, then run the "
                            "same command again (the run is kept in its database: nothing is checked again)") from None
        if problem == "read-only":
            raise DiskError(f"cannot write {path} ({exc.strerror}): {path.parent} is read-only; make it writable and "
                            "run the same command again, or copy the folder to a writable place and run "
                            "`halucheck report COPY`") from None
        raise


def summarize(results: list[ResultJSON], store: "RunStore", since=None) -> dict:
    """Counts for the terminal and the report. ``checked`` answers have a verdict; ``undecided`` ones have
    an unchecked claim (a failed LLM call: running the same command again retries it) or none of their text
    checked (``nothing_checked`` of them: no claim found; a rerun gives the same); ``unreadable`` are
    input lines that could not be used. ``failed_calls`` counts every LLM call that failed, retried or not."""
    readable = [r for r in results if "answer" in r]
    checked = [r for r in readable if r.get("hallucinated") is not None]
    undecided = [r for r in readable if r.get("hallucinated") is None]
    halluc = [r for r in checked if r["hallucinated"]]
    claims = [c for r in readable for c in r["claims"]]
    stages = {}
    for stage, c in store.stage_totals().items():
        stages[stage] = {"llm_calls": c.llm_calls, "prompt_tokens": c.prompt_tokens,
                         "completion_tokens": c.completion_tokens, "cached_tokens": c.cached_tokens,
                         "wall_s": round(c.wall_s, 1), "failed_calls": c.failed_calls}
    unchecked = [r for r in undecided if nothing_checked(r)]
    reasons = Counter(_first_failure(r) for r in undecided if not nothing_checked(r))
    this_run = None
    if since is not None:  # what this process spent, beside the totals of every run of this folder
        spent = store.cost_since(since)
        this_run = {"llm_calls": spent.llm_calls, "prompt_tokens": spent.prompt_tokens,
                    "completion_tokens": spent.completion_tokens}
    return {
        **({"this_run": this_run} if this_run is not None else {}),
        "items": len(results),
        "checked": len(checked),
        "undecided": len(undecided),
        "nothing_checked": len(unchecked),
        "undecided_reason": reasons.most_common(1)[0][0] if reasons else "",
        "failed_calls": sum(s["failed_calls"] for s in stages.values()),
        "unreadable": len(results) - len(readable),
        "hallucinated": len(halluc),
        "hallucination_rate": round(len(halluc) / len(checked), 4) if checked else 0.0,
        "severity_histogram": {("unrated" if k is None else str(k)): v for k, v in
                               sorted(Counter(r["max_severity"] for r in halluc).items(), key=lambda kv: (kv[0] is None, kv[0] or 0))},
        "claims": len(claims),
        "false_claims": sum(c.get("factuality") is False for c in claims),
        "undecided_claims": sum(c.get("factuality") is None for c in claims),
        "calibration": _calibration_line(store),
        "decided_by": dict(Counter(c["verifier"] for c in claims if c.get("verifier") and c.get("factuality") is not None)),
        # answers with text no claim states (coverage.py): the extractor dropped a fact there
        "answers_with_unchecked_text": sum(any(g["kind"] == "not checked" for g in (r.get("coverage") or {}).get("gaps", []))
                                           for r in readable),
        "stages": stages,
    }


def _calibration_line(store: "RunStore") -> str:
    from halucheck.verifiers.calibration import describe

    return describe(run_calibrator(store))


def svg_image(svg: str | None) -> str:
    """A reliability diagram (an SVG file kept beside a calibrator, which may come from another machine) as a
    ``data:`` URL for an ``<img>``: a browser draws an image's SVG without running its scripts or loading
    anything it links to, so nothing in the file can act in the report. "" for no diagram or not an SVG."""
    import base64

    if not svg or "<svg" not in svg[:1000]:
        return ""
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8", "replace")).decode("ascii")


PAGE_ANSWERS = 1000
"""Answers per page of the HTML report: ``report.html`` holds the summary and the first page, ``report-2.html``,
``report-3.html``, ... the next ones, each linking to every other. A 50,000-answer run wrote one 212 MB page,
which no browser opens usably; a page of 1,000 answers is a few MB."""


def page_name(n: int) -> str:
    """The file of page ``n`` (1-based) of the HTML report."""
    return "report.html" if n == 1 else f"report-{n}.html"


PAGE_MARK = "<!-- halucheck report page -->"  # the first line after the doctype of every page halucheck writes


def write_html(out_dir: Path, results: list[ResultJSON], store: "RunStore", page_answers: int | None = None) -> Path:
    """Render the self-contained HTML report (inline CSS, no network): ``report.html``, and for a run of more than
    ``page_answers`` answers one more page per ``page_answers`` (:func:`page_name`). Pages left over from a
    larger report of the same folder are removed (only files that carry :data:`PAGE_MARK`). Returns the first."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("halucheck.reports", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
    )
    summary = summarize(results, store)
    root = store.get_meta("corpus")

    def relative(source: str) -> str:
        """An evidence path relative to the corpus folder (as the user knows it), else as stored."""
        if root and source.startswith(root.rstrip(os.sep) + os.sep):
            return source[len(root.rstrip(os.sep)) + 1:]
        return source

    env.filters["relative"] = relative
    template = env.get_template("report.html.j2")
    svg = svg_image(store.get_meta("calibration_svg"))
    page_answers = page_answers or PAGE_ANSWERS
    pages = max(1, -(-len(results) // page_answers))
    for page in range(1, pages + 1):
        part = results[(page - 1) * page_answers:page * page_answers]
        for r in part:
            r["_segments"] = highlight(r.get("answer") or "", r["claims"],  # type: ignore[typeddict-unknown-key]
                                       (r.get("coverage") or {}).get("gaps"))
        html = template.render(results=part, summary=summary, calibration_svg=svg, input=store.get_meta("input") or "",
                               page=page, pages=pages, offset=(page - 1) * page_answers, total=len(results),
                               page_size=page_answers, page_name=page_name)
        for r in part:
            r.pop("_segments", None)  # type: ignore[misc]
        _write_atomically(Path(out_dir) / page_name(page), lambda fh: fh.write(html))
    _remove_stale_pages(Path(out_dir), pages)
    return Path(out_dir) / "report.html"


def _remove_stale_pages(out_dir: Path, pages: int) -> None:
    """Remove ``report-N.html`` for N > ``pages`` that halucheck wrote (they carry :data:`PAGE_MARK`): a report
    rebuilt with fewer answers must not link on to pages of an older one. Any other file is left alone."""
    import re

    for path in out_dir.glob("report-*.html"):
        m = re.fullmatch(r"report-(\d+)\.html", path.name)
        if not m or int(m.group(1)) <= pages:
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                ours = PAGE_MARK in fh.read(200)
            if ours:
                path.unlink()
        except OSError:
            pass  # left as it is: the first page no longer links to it


def highlight(answer: str, claims: list[ClaimJSON], gaps: list[dict] | None = None) -> list[dict]:
    """Split the answer into pieces for the report: text a claim states takes the colour of the worst
    verdict among the claims there; text no claim covers (``gaps``, coverage.py) is marked as such and
    never takes a claim's colour, even inside a claim's span; the rest is plain. One sweep over the span
    and gap boundaries: linear in the answer (a gap is the first of ``gaps`` over the piece)."""
    import heapq

    from halucheck.coverage import content_words

    n = len(answer)
    spans = [(i, *c.get("span", [0, 0])) for i, c in enumerate(claims)]
    spans = [(i, s, e) for i, s, e in spans if 0 <= s < e <= n]
    marked = [(max(0, g["start"]), min(n, g["end"]), g["kind"]) for g in gaps or [] if g["kind"] != "filler"]
    cuts = sorted({0, n, *(x for _, s, e in spans for x in (s, e)), *(x for s, e, _ in marked for x in (s, e))})
    at = {x: k for k, x in enumerate(cuts)}
    # piece k runs from cuts[k] to cuts[k + 1], wholly inside or outside each span and gap: one from cut
    # number a to cut number b covers pieces a .. b - 1 (opened at piece a, closed at piece b)
    opened: dict[int, list[tuple[str, int]]] = {}
    closed: dict[int, list[tuple[str, int]]] = {}
    intervals = [(s, e, ("claim", i)) for i, s, e in spans] + [(s, e, ("gap", j)) for j, (s, e, _) in enumerate(marked)]
    for s, e, ref in intervals:
        if s < e:
            opened.setdefault(at[s], []).append(ref)
            closed.setdefault(at[e], []).append(ref)
    claims_on: set[int] = set()
    gaps_on: list[int] = []  # a heap of the gaps over the piece (by their order in ``gaps``), closed ones too
    gaps_off: Counter = Counter()  # the closed gaps still in the heap
    gap, owners = "", ()
    pieces: list[dict] = []
    for k, (a, b) in enumerate(zip(cuts, cuts[1:])):
        if k in closed or k in opened:
            for what, x in closed.get(k, ()):
                if what == "claim":
                    claims_on.discard(x)
                else:
                    gaps_off[x] += 1
            for what, x in opened.get(k, ()):
                if what == "claim":
                    claims_on.add(x)
                else:
                    heapq.heappush(gaps_on, x)
            while gaps_on and gaps_off[gaps_on[0]]:
                gaps_off[heapq.heappop(gaps_on)] -= 1
            gap = marked[gaps_on[0]][2] if gaps_on else ""
            owners = () if gap else tuple(sorted(claims_on))
        if pieces and pieces[-1]["_key"] == (gap, owners):
            pieces[-1]["text"].append(answer[a:b])
        else:
            pieces.append({"_key": (gap, owners), "text": [answer[a:b]], "claims": list(owners)})
    for p in pieces:
        p["text"] = "".join(p["text"])
    last: dict[int, int] = {}  # claim -> the last piece it colours: its number is shown there once
    for k, p in enumerate(pieces):
        gap = p.pop("_key")[0]
        if p["claims"] and not content_words(p["text"]):
            p["claims"] = []  # only "The" or "." of a claim whose words are not checked: no colour
        verdicts = [claims[i].get("factuality") for i in p["claims"]]
        if gap:
            p["kind"] = "unchecked" if gap == "not checked" else "subjective"
        elif verdicts:
            p["kind"] = "false" if False in verdicts else "undecided" if None in verdicts else "true"
        else:
            p["kind"] = ""
        for i in p["claims"]:
            last[i] = k
    for k, p in enumerate(pieces):
        p["numbers"] = [i + 1 for i in p["claims"] if last[i] == k]
        p["claims"] = [i + 1 for i in p["claims"]]  # as the report numbers them
    return pieces
