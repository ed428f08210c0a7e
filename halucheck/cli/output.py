"""What the commands print: a verdict (`check`), a run's summary (`run`, `report`)."""

from __future__ import annotations

from pathlib import Path

import typer


def print_verdict(verdict, cal=None, basis: str = "evidence", parts: int = 1) -> None:
    from halucheck.verifiers import calibration

    verdict_word = {True: "FACTUAL", False: "NOT FACTUAL", None: "UNDECIDED"}[verdict.factuality]
    colour = {True: "green", False: "red", None: "yellow"}[verdict.factuality]
    typer.secho(f"{verdict_word}", fg=colour, bold=True, nl=False)
    sev = "-" if verdict.error_severity is None else verdict.error_severity
    raw = verdict.p_hallucinated
    if raw is None:
        p_h = ""
    elif cal is not None:
        p_h = f"  P(hallucinated) {cal.apply(raw):.2f} (raw {raw:.2f})"
    else:
        p_h = f"  P(hallucinated) {raw:.2f}"
    debated = any(t.role != "initial" for t in verdict.chain)  # a debate's states, not one judge's call
    how = (f"{verdict.rounds} round{'s' if verdict.rounds != 1 else ''}"
           f"{', consensus' if verdict.consensus else ', no consensus'}") if debated else \
        f"{verdict.verifier or 'debate'}, {len(verdict.chain)} call{'s' if len(verdict.chain) != 1 else ''}"
    if parts > 1:  # the chain below is the deciding part's; the others were judged the same way
        how += f"; the text judged in {parts} parts, the chain below is the deciding one's"
    typer.echo(f"  severity {sev}/5  confidence {verdict.confidence:.2f}{p_h}  ({how})")
    if verdict.judged is not None:
        typer.echo(f"  decided on the text up to: {verdict.judged!r} (what follows it cannot vouch for it)")
    if basis == "closed-book":
        typer.echo("  rests on the model's own knowledge alone (no evidence given): never a confident verdict")
    if raw is not None:
        typer.echo(f"  {calibration.describe(cal)}")
    if verdict.error:
        typer.secho(f"  {verdict.error}", fg="yellow")
    for t in verdict.chain:
        mark = {True: "true ", False: "false", None: "error"}[t.factuality]
        sev = "-" if t.error_severity is None else t.error_severity
        p = "" if t.p_factual is None else f"  P(factual) {t.p_factual:.2f}"
        extra = (f"  winner {t.winner}" if t.winner else "") + ("  VOID: no verified quote" if t.void else "")
        typer.echo(f"\n  {t.state} {t.role:<8} {mark} severity {sev}{p}{extra}  ({t.completion_tokens} tokens)")
        text = t.error if t.error else t.opinion
        for line in wrap(text):
            typer.echo(f"      {line}")
        for q in t.quotes:
            where = (f"passage [{q.passage}]" if q.passage else "no passage states it") if q.verified else \
                f"NOT VERIFIED: {q.why or 'not in the passages'}"
            mark = "\u2714" if q.verified else "\u2718"
            for i, line in enumerate(wrap(f"\u201c{q.text}\u201d ({where})", 90)):
                typer.echo(f"      {mark} {line}" if i == 0 else f"        {line}")


def wrap(text: str, width: int = 96) -> list[str]:
    import textwrap

    return textwrap.wrap(" ".join(text.split()), width) or [""]


def undecided_line(s: dict) -> str:
    """The one line `run` ends with when answers are undecided: how many, why, and what to do about each kind."""
    failed, unchecked = s["undecided"] - s.get("nothing_checked", 0), s.get("nothing_checked", 0)
    parts = []
    if failed:
        parts.append(f"{failed} for failed work ({s['failed_calls']} LLM call(s) failed; commonest: "
                     f"{s['undecided_reason']}): nothing is lost, run the same command again to retry only the failed "
                     "work")
    if unchecked:
        parts.append(f"{unchecked} with none of their text checked (no claim found in them; a rerun finds the same): "
                     "read them yourself, or check them with `halucheck check`")
    return f"{s['undecided']} of {s['items'] - s['unreadable']} answers are undecided: " + "; ".join(parts)


def print_summary(summary: dict, out_dir: Path) -> None:
    s = summary
    typer.echo("")
    typer.secho(f"halucheck: {s['hallucinated']} of {s['checked']} answers hallucinated "
                f"({s['hallucination_rate']:.0%})", bold=True, nl=not s.get("undecided"))
    if s.get("undecided"):  # before anything else: an undecided answer must not read as a clean one
        typer.secho(f"; {s['undecided']} more UNDECIDED", fg="yellow", bold=True)
        failed, unchecked = s["undecided"] - s.get("nothing_checked", 0), s.get("nothing_checked", 0)
        if failed:
            typer.secho(f"  UNDECIDED: {failed} answers have no verdict; {s['failed_calls']} LLM calls failed "
                        f"(commonest: {s['undecided_reason']})", fg="yellow", bold=True)
        if unchecked:
            typer.secho(f"  UNDECIDED: {unchecked} answers had none of their text checked (no claim found in them): "
                        "not clean", fg="yellow", bold=True)
    elif s.get("failed_calls"):
        typer.echo(f"  {s['failed_calls']} LLM calls failed and were retried successfully")
    typer.echo(f"  claims: {s['claims']} checked, {s['false_claims']} false, {s['undecided_claims']} undecided")
    if s.get("corpus_changes"):
        ch = s["corpus_changes"]
        typer.echo(f"  corpus changed since the last run: {len(ch['files'])} file(s) edited or deleted, "
                   f"{ch['claims_rechecked']} claim(s) checked again against the corpus as it is now")
    if s.get("corpus_skipped"):
        why = {"halucheck's own output": "in folders halucheck wrote (its runs and indexes are never evidence)",
               "unreadable or empty": "skipped: unreadable, empty or not a file (the warnings above name each and why)"}
        sk = s["corpus_skipped"]
        typer.echo(f"  corpus: {sum(sk.values())} file(s) not read: "
                   + "; ".join(f"{n} {why.get(k, k)}" for k, n in sk.items()))
    if s.get("calibration"):
        typer.echo(f"  P(hallucinated) {s['calibration']}")
    if len(s.get("decided_by", {})) > 1:  # a cascade: which stage decided how many
        typer.echo("  decided by: " + ", ".join(f"{n} {k}" for k, n in s["decided_by"].items()))
    if s.get("answers_with_unchecked_text"):
        typer.echo(f"  {s['answers_with_unchecked_text']} answers hold text no claim states: not checked "
                   "(results.jsonl: coverage.gaps; grey in report.html)")
    if s["severity_histogram"]:
        hist = "  ".join(f"{k}:{v}" for k, v in s["severity_histogram"].items())
        typer.echo(f"  max severity of hallucinated answers: {hist}")
    if s["unreadable"]:
        typer.echo(f"  unreadable input lines: {s['unreadable']} (see results.jsonl)")
    runs = "all runs of this folder" if s.get("this_run") else "per stage"
    typer.echo(f"  cost, {runs} (a resumed run adds to the earlier runs; cached replies cost nothing):")
    for name, st in s["stages"].items():
        failed = f" ({st['failed_calls']} failed)" if st.get("failed_calls") else ""
        typer.echo(f"  {name:<8} {st['llm_calls']:>6} LLM calls{failed}  {st['prompt_tokens']:>9} prompt tok "
                   f"({st['cached_tokens']} cached)  {st['completion_tokens']:>8} completion tok  {st['wall_s']:>7}s")
    if s.get("this_run"):
        t = s["this_run"]
        typer.echo(f"  this run: {t['llm_calls']} LLM calls, {t['prompt_tokens']} prompt tok, "
                   f"{t['completion_tokens']} completion tok" + (f", wall {s['wall_s']}s" if "wall_s" in s else ""))
    elif "wall_s" in s:
        typer.echo(f"  wall time: {s['wall_s']}s")
    typer.echo(f"  results: {out_dir / 'results.jsonl'}")
    from halucheck.reports import PAGE_ANSWERS

    pages = -(-s["items"] // PAGE_ANSWERS) if s.get("items") else 1
    paged = f" (page 1 of {pages}, {PAGE_ANSWERS} answers a page: report-2.html ... report-{pages}.html)"
    typer.echo(f"  report:  {out_dir / 'report.html'}" + (paged if pages > 1 else ""))
