"""`halucheck train`: fit a head on labelled data (your files or named sets) for `-v probe --head NAME`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from halucheck.cli.app import Command, Config, Profile, app, fail, settings_of
from halucheck.errors import HalucheckError


@app.command("train", cls=Command)
def train_cmd(
    data: Optional[list[Path]] = typer.Option(
        None, "--data", help="A labelled file (repeatable), the `eval --data` format: .jsonl or .csv with id, answer "
        "(or claim), hallucinated (true/false) and the context or evidence it is judged against."),
    dataset: Optional[list[str]] = typer.Option(
        None, "--dataset", "-d", help="A named labelled set (repeatable); its dev split is used, never test."),
    name: str = typer.Option(..., "--name", help="The head's name: saved as $HALUCHECK_HOME/heads/NAME.npz and used "
                             "with --head NAME on check, run and eval."),
    per_set: Optional[int] = typer.Option(
        200, "--per-set", "-n", help="Items sampled from each named set's dev split (balanced classes); files are "
        "used whole."),
    every_chunk: bool = typer.Option(False, "--every-chunk", help="Compute every chunk of each item's evidence and "
                                     "train on the one the direct verdict finds most supporting (default: only "
                                     "the chunk closest to the claim, one prompt pass per item)."),
    profile: Profile = None,
    config: Config = None,
) -> None:
    """Fit a head on labelled data: features from one prompt pass per item (kept, so a stopped run resumes),
    layers and regularisation chosen by leaving one dataset (or, for one file, one fold) out, figures printed
    with 95 % intervals, the head saved for --head NAME."""
    from halucheck.evaluation.heads import train

    if not data and not dataset:
        fail("give labelled data: --data FILE (your own, the `eval --data` format) and/or -d DATASET", 2)
    try:
        settings = settings_of(config, profile, None)
        path, meta = train(settings, dataset or [], data or [], name, per_set, every_chunk=every_chunk,
                           log=lambda s: typer.echo(s, err=True))
    except HalucheckError as exc:
        fail(str(exc))
        return
    typer.echo(f"head {name!r}: layers {meta['layers']}, C {meta['C']}, {meta['examples']} examples, "
               f"held out by {meta['held_out_is']}")
    typer.echo("| held out | n | balanced accuracy | AUROC |\n|---|---|---|---|")
    for part, f in meta["held_out"].items():
        ci = f.get("balacc_ci", [float("nan")] * 2)
        typer.echo(f"| {part} | {f['n']} | {f['balacc']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}] | {f['auroc']:.3f} |")
    typer.echo(f"saved {path}; use it with --head {name} (-v probe)")
