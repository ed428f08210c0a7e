"""The `halucheck` application: the typer app, the flags several commands share (declared once), and
how a command fails (one line, no traceback)."""

from __future__ import annotations

import functools
import inspect
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Callable, Optional

import typer
from typer.core import TyperCommand, TyperGroup

from halucheck.config import (DEBATE_POLICIES, DEFAULT_BAND, DEFAULT_VERIFIER, EVIDENCE_K, PROMPT_SETS, DebateConfig,
                              VerifierOptions, nli_model_path, parse_band)


class _PlainHelp:
    """--help shown as a plain flag, like every other flag here (typer's own prints it as `--help <bool>`)."""

    def get_help_option(self, ctx):  # type: ignore[no-untyped-def]
        option = super().get_help_option(ctx)  # type: ignore[misc]
        if option is not None:
            option.metavar = ""
        return option


class _Group(_PlainHelp, TyperGroup):
    pass


class Command(_PlainHelp, TyperCommand):
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
EXIT_INTERRUPTED = 130  # Ctrl-C, as shells report a command killed by SIGINT


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
VERIFIER_NAMES = ("direct, probe (one prompt pass per evidence chunk; --head), debate, selfcheck, selfcheck-3shot, "
                  "judge-likert, prometheus, lynx, consistency, "
                 "collab-cal (Collaborative Calibration: agents answer with a confidence, argue by stance and "
                 "revise; as many agents as eval's --samples, at least 3) or nli; or a cascade: names joined by "
                 "commas (e.g. selfcheck,debate), each later verifier sees only the claims the one before scored "
                 "inside --band.")
PROFILE_VERIFIER_HELP = (f"The verifier (default: the profile's `verifier:` in models.yaml, else {DEFAULT_VERIFIER}): "
                         f"{VERIFIER_NAMES}")
CALIBRATION_HELP = ("Which calibrator maps P(hallucinated): a NAME given to `halucheck calibrate --name`, or a "
                    "calibrator FILE (.json), or none; default: the one fitted without a name for this verifier and profile, else "
                    "the one shipped for this verifier and model.")
BAND_HELP = ("A cascade's band on P(hallucinated), LO,HI (default 0,0.5: what the first verifier finds factual gets "
             "the next one's second look): claims scored inside it go on.")


# -- flags several commands share: declared here once, their defaults from halucheck.config -------------
DEBATE = DebateConfig()  # the debate's defaults
VERIFIER_DEFAULTS = VerifierOptions()  # the verifiers' (eval's --samples)

Profile = Annotated[Optional[str], typer.Option("--profile", "-p", help=PROFILE_HELP)]
Role = Annotated[Optional[list[str]], typer.Option("--role", help="ROLE=PROFILE for one role (repeatable).")]
Config = Annotated[Optional[Path], typer.Option("--config", help="Path to models.yaml.")]
# `check` and `run`: None is the profile's own verifier (config.Settings.verifier), resolved by halucheck.checker
ProfileVerifier = Annotated[Optional[str], typer.Option("--verifier", "-v", help=PROFILE_VERIFIER_HELP)]
Band = Annotated[Optional[str], typer.Option("--band", help=BAND_HELP)]
Calibration = Annotated[Optional[str], typer.Option("--calibration", help=CALIBRATION_HELP)]
NliModel = Annotated[Optional[Path], typer.Option("--nli-model", help="nli: a local sentence-transformers "
                                                  "CrossEncoder folder.")]
HeadName = Annotated[Optional[str], typer.Option("--head", help="probe: a head fitted by `halucheck train --name NAME` "
                                                 "(the name, or a .npz file); default: the head shipped for the "
                                                 "profile's model.")]
TopK = Annotated[int, typer.Option("--top-k", "--max-evidence", help=f"Evidence passages per claim (default "
                                   f"{EVIDENCE_K}): retrieved, shown to the verifier and citable in its replies.")]
Policy = Annotated[str, typer.Option("--policy", help="Debate transition policy: " + ", ".join(DEBATE_POLICIES) + ".")]
MinRounds = Annotated[int, typer.Option("--min-rounds", help="Debate states to run at least, before a consensus "
                                        "may stop.")]
MaxRounds = Annotated[int, typer.Option("--max-rounds", help="Debate states to run at most (0 = initial agent only).")]
Prompts = Annotated[str, typer.Option("--prompts", help="Debate prompts: " + " or ".join(PROMPT_SETS)
                                      + " (the paper's own texts).")]


BothOrders = Annotated[bool, typer.Option("--leader-both-orders/--leader-one-order", metavar="",
                                          help="Debate: ask the Leader with the two stances in both orders (the "
                                          "default: on dev the two orders named the same winner in only 69 % of "
                                          "calls); where they disagree, their token probabilities decide. "
                                          "--leader-one-order saves a call a round.")]


@dataclass(frozen=True)
class DebateFlags:
    """The debate's five flags, as a command declared with :func:`with_debate_flags` receives them."""

    policy: str = DEBATE.policy
    min_rounds: int = DEBATE.min_rounds
    max_rounds: int = DEBATE.max_rounds
    prompts: str = DEBATE.prompts
    leader_both_orders: bool = DEBATE.leader_both_orders

    def config(self) -> DebateConfig:
        """The flags as the debate's configuration (checked there: a bad value is one line saying which)."""
        return DebateConfig(**asdict(self))


# the flags, in the order --help lists them, each with its default from halucheck.config
DEBATE_FLAGS = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=flag,
                                  default=getattr(DEBATE, name))
                for name, flag in (("policy", Policy), ("min_rounds", MinRounds), ("max_rounds", MaxRounds),
                                   ("prompts", Prompts), ("leader_both_orders", BothOrders))]


def with_debate_flags(command: Callable) -> Callable:
    """Declare the debate's flags on ``command`` once for every command that takes them: they stand where its
    ``debate: DebateFlags`` parameter stands (so its --help lists them there), and it receives them as one
    :class:`DebateFlags`."""
    signature = inspect.signature(command, eval_str=True)
    parameters = [q for p in signature.parameters.values() for q in (DEBATE_FLAGS if p.name == "debate" else [p])]

    @functools.wraps(command)
    def with_flags(*args, **kwargs):  # type: ignore[no-untyped-def]
        flags = DebateFlags(**{p.name: kwargs.pop(p.name) for p in DEBATE_FLAGS})
        return command(*args, debate=flags, **kwargs)

    with_flags.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    with_flags.__annotations__ = {p.name: p.annotation for p in parameters
                                  if p.annotation is not inspect.Parameter.empty}
    return with_flags


def nli_model_of(verifier: str, nli_model: Optional[Path], config: Optional[Path]) -> Optional[str]:
    """--nli-model as the nli verifier's model folder when ``verifier`` (or a step of the cascade) is nli, else
    None."""
    return nli_model_path(nli_model, config) if "nli" in verifier.split(",") else None


def band_of(band: Optional[str]) -> tuple[float, float]:
    """--band LO,HI, or the default band."""
    return parse_band(band) if band else DEFAULT_BAND


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


def interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` is Ctrl-C: Python's KeyboardInterrupt, or DuckDB's when it came during a query."""
    return (isinstance(exc, KeyboardInterrupt) or type(exc).__name__ == "InterruptException"
            or (isinstance(exc, RuntimeError) and str(exc) == "Query interrupted"))


def fail(message: str, code: int = 1) -> None:
    """Print one line to stderr and exit: no traceback for errors the user can fix."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def main() -> None:  # pragma: no cover - console entry point wrapper
    app()


def settings_of(config: Optional[Path], profile: Optional[str], roles: Optional[list[str]]):
    from halucheck.config import Settings, parse_role_overrides
    from halucheck.engines.pool import check_profiles

    settings = Settings.load(config, profile=profile, role_overrides=parse_role_overrides(roles))
    check_profiles(settings)  # a typo in a profile's options fails now, before any work
    return settings
