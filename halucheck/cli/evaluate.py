"""The commands that measure: `eval` (a verifier on labelled data, or a table of runs) and `calibrate`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from halucheck.cli.app import (EVIDENCE_K, VERIFIER_DEFAULTS, Band, Calibration, Command, Config, DebateFlags, Flag,
                               HeadName, NliModel, Profile, Role, TopK, ProfileVerifier, app, band_of, fail, nli_model_of,
                               settings_of, with_debate_flags)
from halucheck.config import MIN_ACCURACY
from halucheck.errors import HalucheckError
def _eval_extraction(dataset, split, limit, out, config, profile, role, no_cache) -> None:
    from halucheck.evaluation.extraction import run_extraction_eval
    from halucheck.evaluation.harness import default_out

    settings = settings_of(config, profile, role)
    out_dir = out or default_out("extraction", dataset, split, settings.profile_for("extractor").name)
    eval_folder(out_dir)
    result = run_extraction_eval(dataset, settings, out_dir, split=split, limit=limit, cache=not no_cache)
    typer.echo(f"claim extraction, {split} split, profile {result['profile']} ({result['model']}); "
               f"a gold claim is found when an extracted one matches it ({next(iter(result['datasets'].values()))['match']})")
    typer.echo("| dataset | responses | gold claims | extracted | recall | precision |\n|---|---|---|---|---|---|")
    for ds, r in result["datasets"].items():
        typer.echo(f"| {ds} | {r['responses']} | {r['gold_claims']} | {r['extracted_claims']} | "
                   f"{r['recall']:.3f} [{r['recall_ci'][0]:.3f}, {r['recall_ci'][1]:.3f}] | "
                   f"{r['precision']:.3f} [{r['precision_ci'][0]:.3f}, {r['precision_ci'][1]:.3f}] |")
    typer.echo(f"  {out_dir / 'extraction.json'}, {out_dir / 'extracted.jsonl'}")


@app.command("eval", cls=Command)
@with_debate_flags
def eval_cmd(
    dirs: Optional[list[Path]] = typer.Argument(None, help="With --compare: the run directories to tabulate."),
    dataset: Optional[list[str]] = typer.Option(
        None, "--dataset", "-d", help="Labeled set (repeatable): factool-qa, factool-qa-response, factool-math, "
        "factool-math-response, factool-sci, factool-sci-response, factool-code, factcheck-gpt, wice, wice-dev, "
        "halueval-qa, halueval-qa-cleaned, halueval-general, halueval2, truthfulqa, summedits, begin, faithdial, q2, "
        "contract-nli, wice-dev-d2c, halueval-dialogue, halueval-summarization."),
    data: Optional[list[Path]] = typer.Option(
        None, "--data", help="Your own labelled file (repeatable), .jsonl or .csv: id, answer (or claim), hallucinated "
        "(true/false), and optional question, context, evidence. Scored as dataset data:<file name>, alone or beside "
        "--dataset; never split: --split does not apply, --limit does."),
    corpus: Optional[Path] = typer.Option(
        None, "--corpus", "-c", help="With --data: folder of documents; items without context or evidence get its "
        "top --top-k passages (the index `halucheck run --corpus` uses)."),
    verifier: ProfileVerifier = None,
    band: Band = None,
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
    profile: Profile = None,
    role: Role = None,
    debate: DebateFlags = DebateFlags(),  # --policy, --min-rounds, --max-rounds, --prompts, --leader-both-orders
    samples: int = typer.Option(VERIFIER_DEFAULTS.samples, help="consistency: sampled verdicts per item."),
    top_k: TopK = EVIDENCE_K,
    nli_model: NliModel = None,
    head: HeadName = None,
    bibliography: Optional[Path] = typer.Option(
        None, "--bibliography", help="citation: the works that exist, a BibTeX (.bib), CSL-JSON (.json) or CSV (.csv: "
        "title, authors, year) file (default for factool-sci: the set's own citations labelled true)."),
    calibration_choice: Calibration = None,
    config: Config = None,
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
        if samples < 0 or top_k < 0:
            raise HalucheckError("--samples and --top-k must be 0 or more (--top-k 0: every passage an item has)")
        if corpus is not None and not data:
            raise HalucheckError("--corpus needs --data: it gives evidence to your own items (the named sets "
                                 "carry theirs)")
        if extraction and data:
            raise HalucheckError("--extraction scores the claim extractor on factcheck-gpt and factool-qa; it "
                                 "takes no --data")
        if extraction:
            _eval_extraction(dataset, split, limit, out, config, profile, role, no_cache)
            return
        from halucheck.evaluation.harness import default_out, run_eval
        from halucheck.evaluation.verifiers import VerifierOptions, get_verifier

        verifier = verifier or settings_of(config, profile, role).verifier
        options = VerifierOptions(
            debate=debate.config(), samples=samples, nli_model=nli_model_of(verifier, nli_model, config),
            band=band_of(band),
            bibliography=str(bibliography) if bibliography is not None else None, head=head,
        )
        if bibliography is not None:
            from halucheck.verifiers.tools.citations.bibliography import load_bibliography

            problems = load_bibliography(bibliography).warnings  # read once here; the verifier reuses it
            for problem in problems[:20]:
                typer.echo(f"warning: {problem}", err=True)
            if len(problems) > 20:
                typer.echo(f"warning: {bibliography}: {len(problems) - 20} more bad entries not shown", err=True)
        v = get_verifier(verifier, options)
        user_data = _eval_user_data(data or [], limit, corpus, top_k)
        settings = settings_of(config, profile, role) if v.uses_llm else None
        prof = settings.profile_for("initial").name if settings else None
        used_split = split if dataset else "all"  # a run of user files alone is not split
        out_dir = out or default_out(verifier, [*(dataset or []), *(d.name.replace(":", "-") for d in user_data)],
                                     used_split, prof)
        eval_folder(out_dir)
        result = run_eval(dataset or [], verifier, settings, out_dir, split=used_split, limit=limit,
                          options=options, max_evidence=top_k, label=name,
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


def eval_folder(out_dir: Path) -> None:
    """Make an eval run's folder with halucheck's marker (:mod:`halucheck.outputs`: no corpus reads it), or say
    in one line why it cannot be."""
    from halucheck import outputs
    from halucheck.errors import disk_problem

    if out_dir.exists() and not out_dir.is_dir():
        raise HalucheckError(f"--out {out_dir} is a file; pass a folder for the eval run (it is created if missing)")
    try:
        outputs.mark(out_dir)
    except OSError as exc:
        why = {"full": "the disk is full; free some space", "read-only": "it is read-only; make it writable"}.get(
            disk_problem(exc) or "", "check the path")
        raise HalucheckError(f"cannot make the eval run folder {out_dir} ({exc.strerror or exc}): {why}, or choose "
                             "another --out") from None


def _eval_user_data(paths: list[Path], limit: Optional[int], corpus: Optional[Path], top_k: int):
    """Read every --data file: its bad lines as warnings on stderr (the first 20 per file), the rest
    kept; with --corpus, evidence retrieved for the items that have none. File-level problems raise."""
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
        for p in d.notes[:shown]:  # lines used with a change (lone surrogates replaced)
            typer.echo(f"warning: {p}", err=True)
        if len(d.notes) > shown:
            typer.echo(f"warning: {path}: {len(d.notes) - shown} more changed line(s) not shown", err=True)
        d.require_items()
        if d.problems:
            typer.echo(f"{path}: {len(d.items)} item(s) read, {len(d.problems)} bad line(s) skipped", err=True)
        if corpus is not None:
            got = add_corpus_evidence(d, corpus, top_k or EVIDENCE_K, warn=lambda m: typer.echo(m, err=True))
            typer.echo(f"{path}: {got} item(s) got evidence from {corpus}", err=True)
        out.append(d)
    return out


@app.command("calibrate", cls=Command)
def calibrate_cmd(
    dataset: Optional[list[str]] = typer.Option(None, "--dataset", "-d", help="Labelled set(s) to fit on (its --split)."),
    data: Optional[list[Path]] = typer.Option(None, "--data", help="Your own labelled file(s), as `eval --data`."),
    verifier: ProfileVerifier = None,
    split: str = typer.Option("dev", "--split", help="Split of the named sets to fit on (dev; never test)."),
    limit: Optional[int] = typer.Option(None, "--limit", "-n", help="First N items of each set."),
    target_precision: Optional[float] = typer.Option(None, "--target-precision", help="Threshold: the lowest "
                                                     "whose precision on hallucinations reaches this (default: "
                                                     "best balanced accuracy)."),
    min_accuracy: float = typer.Option(MIN_ACCURACY, "--min-accuracy", help="Undecided band: claims outside it are decided "
                                       "right at least this often on the fitting data."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="The eval run it fits on (default runs/calibrate/...)."),
    name: Optional[str] = typer.Option(None, "--name", help="Store it under this name beside the default one (one "
                                       "per kind of data; run, check and eval use it with --calibration NAME)."),
    profile: Profile = None,
    role: Role = None,
    band: Band = None,
    nli_model: NliModel = None,
    config: Config = None,
) -> None:
    """Fit a calibrator for a verifier and profile on labelled data (temperature, Platt or isotonic, by
    cross-validated ECE); `run`, `check` and `eval` then report calibrated P(hallucinated)."""
    try:
        from halucheck.verifiers import calibration
        from halucheck.evaluation import read_predictions
        from halucheck.evaluation.harness import default_out, run_eval
        from halucheck.evaluation.userdata import load_user_data
        from halucheck.evaluation.verifiers import VerifierOptions, get_verifier

        if not dataset and not data:
            raise HalucheckError("give labelled data to fit on: --dataset NAME (its dev split) or --data FILE")
        if split == "test":
            raise HalucheckError("fit on the dev split (--split dev); the test split is kept for reporting")
        if name is not None and (not name.strip() or name.endswith(".json") or "/" in name or "\\" in name):
            raise HalucheckError(f"--name {name!r}: give a plain name such as medical (no path, no .json)")
        verifier = verifier or settings_of(config, profile, role).verifier
        options = VerifierOptions(band=band_of(band), nli_model=nli_model_of(verifier, nli_model, config))
        v = get_verifier(verifier, options)
        settings = settings_of(config, profile, role) if v.uses_llm else None
        prof = settings.profile_for("initial") if settings else None
        user = [load_user_data(f, limit=limit, warn=lambda m: typer.echo(f"warning: {m}", err=True)) for f in data or []]
        out_dir = out or Path("runs") / "calibrate" / default_out(verifier, [*(dataset or []), *(d.name.replace(":", "-") for d in user)],
                                                                  split, prof.name if prof else None).name
        eval_folder(out_dir)
        result = run_eval(dataset or [], verifier, settings, out_dir, split=split, limit=limit, options=options,
                          log=lambda m: typer.echo(m, err=True), data=user, calibration=False)
        rows = [r for r in read_predictions(out_dir) if r.get("score") is not None]
        refit = _refit_debate_score(rows, prof, dataset, data, split) if v.name == "debate" else None
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
    if refit is not None:
        w, where = refit
        typer.echo(f"debate score refitted on {w.provenance['items']} chains: weights {w.weights}, bias {w.bias}, "
                   f"threshold {w.threshold}")
        typer.echo(f"  saved:       {where}  (the debate uses it on this profile and model)")
    typer.echo(f"calibrator for {v.name}/{prof.name if prof else '-'} on {result.items} items: {cal.summary()}")
    use = f"with --calibration {name}" if name else "by default"
    typer.echo(f"  saved:       {path}  (used by run, check and eval with this verifier and profile {use})")
    typer.echo(f"  copy:        {copy}  (--calibration FILE uses it, here or on another machine)")
    typer.echo(f"  reliability: {svg}")
    typer.echo(f"  by chance:   on {chance['n']} items like these, calibrated scores show ECE {chance['mean']:.3f} "
               f"(95 %: {chance['p95']:.3f}); a lower ECE needs more items to show")


def _refit_debate_score(rows: list[dict], prof, dataset, data, split: str):
    """Refit the debate's score weights and threshold on the eval's chains (``score.fit``), store them for the
    profile, and put the refitted P(hallucinated) in ``rows`` (the calibrator is fitted on those). Returns
    (weights, path)."""
    from datetime import date

    from halucheck.verifiers.debate import score

    chains = [score.turns_of((r.get("detail") or {}).get("chain") or []) for r in rows]
    weights = score.fit(chains, [bool(r["label"]) for r in rows], {
        "date": date.today().isoformat(), "profile": prof.name if prof else None,
        "model": prof.model if prof else None, "datasets": list(dataset or []),
        "files": [str(f) for f in data or []], "split": split})
    path = score.save_weights(weights, score.weights_path(prof.name if prof else None))
    for r, chain in zip(rows, chains):
        if score.standing_of(chain) is not None:
            r["score"] = weights.score(score.features(chain))
    return weights, path


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
