"""The `halucheck` command line: parse, call, print. Heavy libraries are imported inside commands."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from halucheck.errors import HalucheckError

app = typer.Typer(
    name="halucheck",
    help="Local-first, offline hallucination checker for LLM output.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
models_app = typer.Typer(help="Install and inspect the local models.", no_args_is_help=True)
app.add_typer(models_app, name="models")


def fail(message: str, code: int = 1) -> None:
    """Print one line to stderr and exit: no traceback for errors the user can fix."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def main() -> None:  # pragma: no cover - console entry point wrapper
    app()
