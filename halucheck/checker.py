"""The Python API, the one `halucheck check` and `halucheck run` are built on.

>>> from halucheck import Checker
>>> with Checker(profile="cpu-1.5b") as checker:
...     v = checker.check("The Eiffel Tower is in Berlin.", evidence=["The Eiffel Tower is in Paris."])
...     v.hallucinated, v.severity, v.p_hallucinated, v.reasoning
...     done = checker.run([{"id": "a1", "answer": "..."}], corpus="docs/", out="runs/api")

A :class:`Checker` holds the settings (models.yaml, a profile, role overrides), the verifier and the engines:
each model is loaded on first use and kept for every later ``check`` and ``run`` until :meth:`Checker.close`.
``check`` judges one text as one claim against the evidence given (as `halucheck check`: by its sentence
prefixes, see :mod:`halucheck.verifiers.prefixes`) and gives a :class:`ClaimVerdict`; ``run`` is the whole job
of `halucheck run` (claims, evidence, verdicts, reports, resumable) over answers and gives a :class:`RunResult`.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Union

from halucheck.config import (DEFAULT_BAND, EVIDENCE_K, MAX_CLAIMS, QUERY_RULE, QUERY_RULES, SUBJECTIVE_FILTER,
                              SUBJECTIVE_FILTERS, DebateConfig,
                              RunOptions, Settings, VerifierOptions, nli_model_path, parse_band,
                              parse_role_overrides)
from halucheck.errors import ConfigError, InputError
from halucheck.progress import Progress
from halucheck.records import Evidence, Turn, Verdict

if TYPE_CHECKING:
    from halucheck.cluster import ClusterOptions
    from halucheck.engines.base import Engine
    from halucheck.engines.pool import EnginePool
    from halucheck.verifiers.base import Verifier
    from halucheck.verifiers.calibration import Calibrator

PathLike = Union[str, "os.PathLike[str]"]
Items = Union[PathLike, Iterable[Mapping[str, Any]]]


def passages_of(text: str, source: str) -> list[Evidence]:
    """``text`` cut into passages at blank lines, each located in it by character offsets (an evidence file
    of `halucheck check -f`, a ``context`` given to :meth:`Checker.check`)."""
    passages, offset = [], 0
    for block in text.split("\n\n"):
        start = text.index(block, offset)
        offset = start + len(block)
        if block.strip():
            lead = len(block) - len(block.lstrip())
            passages.append(Evidence(block.strip(), source, start + lead, start + lead + len(block.strip())))
    return passages


def turn_of(d: Mapping[str, Any]) -> Turn:
    """A trace turn from its JSON form (:meth:`Turn.to_dict`, as results.jsonl holds it)."""
    return Turn(state=d["state"], role=d["role"], opinion=d.get("opinion", ""), factuality=d.get("factuality"),
                error_severity=d.get("error_severity"), error=d.get("error"),
                completion_tokens=d.get("completion_tokens", 0), p_factual=d.get("p_factual"),
                capped=bool(d.get("capped")), repaired=d.get("repaired"), verifier=d.get("verifier", "debate"),
                **Turn.detail_fields(d))


@dataclass(frozen=True)
class ClaimVerdict:
    """One claim's verdict: the claim, what was decided and how sure, the evidence it was shown and the trace.

    ``p_hallucinated`` is calibrated when a calibrator applies (``calibrated``; ``p_raw`` is the verifier's own
    score, ``calibration`` says which map or that there is none). ``basis``: what the verdict rests on
    (``evidence``; ``closed-book`` without any evidence, never more than 60 % confident; in a run also
    ``tool`` or ``question``). ``trace``: the verifier's turns (one for a single judge, the debate's chain).
    ``to_dict()`` is its JSON form: the object `halucheck check --json` prints, or the claim of results.jsonl.
    """

    text: str
    factuality: bool | None
    severity: int | None
    confidence: float
    p_hallucinated: float | None
    evidence: tuple[Evidence, ...]
    trace: tuple[Turn, ...]
    verifier: str
    basis: str
    question: str | None = None
    p_raw: float | None = None
    calibrated: bool = False
    calibration: str = ""
    judged: str | None = None  # the prefix of the text that decided, when a shorter one did
    parts_judged: int = 1
    error: str | None = None
    verdict: Verdict | None = field(default=None, repr=False, compare=False)  # the verifier's own record (check)
    calibrator: Calibrator | None = field(default=None, repr=False, compare=False)
    record: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def hallucinated(self) -> bool | None:
        """True when the claim was found not factual, None when undecided."""
        return None if self.factuality is None else not self.factuality

    @property
    def reasoning(self) -> str:
        """The deciding turn's words (the last valid turn of the trace), or ``""``."""
        return next((t.opinion for t in reversed(self.trace) if t.ok), "")

    def to_dict(self) -> dict:
        return json.loads(json.dumps(self.record))

    @classmethod
    def of(cls, text: str, question: str | None, evidence: Sequence[Evidence], verdict: Verdict,
           calibrator: Calibrator | None, basis: str, parts: int) -> "ClaimVerdict":
        """The verdict of :meth:`Checker.check`; its ``record`` is what `check --json` prints."""
        from halucheck.verifiers import calibration

        plain = verdict.to_dict()  # P(hallucinated) to 4 decimals: the raw score calibrated and shown, as in `run`
        record = {**plain, "basis": basis, "parts_judged": parts,
                  **calibration.calibrated_fields(calibrator, plain["p_hallucinated"])}
        record["calibration"] = calibration.describe(calibrator)
        raw = verdict.p_hallucinated
        return cls(text=text, question=question, factuality=verdict.factuality, severity=verdict.error_severity,
                   confidence=verdict.confidence,
                   p_hallucinated=calibrator.apply(raw) if calibrator is not None and raw is not None else raw,
                   p_raw=raw, calibrated=record["calibrated"], calibration=record["calibration"],
                   evidence=tuple(evidence), trace=tuple(verdict.chain), verifier=verdict.verifier, basis=basis,
                   judged=verdict.judged, parts_judged=parts, error=verdict.error, verdict=verdict,
                   calibrator=calibrator, record=record)

    @classmethod
    def from_result(cls, claim: Mapping[str, Any], question: str | None = None) -> "ClaimVerdict":
        """A claim of results.jsonl (its fields are the contract ``docs/usage.md`` lists)."""
        return cls(text=claim["text"], question=question, factuality=claim.get("factuality"),
                   severity=claim.get("error_severity"), confidence=claim.get("confidence", 0.0),
                   p_hallucinated=claim.get("p_hallucinated"), p_raw=claim.get("p_raw", claim.get("p_hallucinated")),
                   calibrated=bool(claim.get("calibrated")),
                   evidence=tuple(Evidence(e["text"], e.get("source", ""), e.get("start", 0), e.get("end", 0))
                                  for e in claim.get("evidence", ())),
                   trace=tuple(turn_of(t) for t in claim.get("chain", ())), verifier=claim.get("verifier", ""),
                   basis=claim.get("basis", ""), judged=claim.get("judged"), error=claim.get("error"),
                   record=dict(claim))


@dataclass(frozen=True)
class AnswerResult:
    """One answer of a run (a line of results.jsonl): ``hallucinated`` (None: undecided, or an unreadable
    line), the worst claim's severity, the answer's ``score`` and its claims; ``record``: the whole line."""

    id: str
    answer: str
    question: str | None
    hallucinated: bool | None
    max_severity: int | None
    score: float | None
    claims: tuple[ClaimVerdict, ...]
    record: dict = field(repr=False, compare=False)

    @classmethod
    def from_result(cls, line: Mapping[str, Any]) -> "AnswerResult":
        question = line.get("question")
        return cls(id=str(line.get("id", "")), answer=line.get("answer", ""), question=question,
                   hallucinated=line.get("hallucinated"), max_severity=line.get("max_severity"),
                   score=line.get("score"), claims=tuple(ClaimVerdict.from_result(c) for c in line.get("claims", ())),
                   record=dict(line))


@dataclass(frozen=True)
class RunResult:
    """What :meth:`Checker.run` wrote: the summary (as `halucheck run` prints it) and the run folder's files."""

    summary: dict
    out: Path

    @property
    def results(self) -> Path:
        return self.out / "results.jsonl"

    @property
    def report(self) -> Path:
        return self.out / "report.html"

    @property
    def undecided(self) -> int:
        """Answers without a verdict (failed calls, or no text checked): the same ``run`` again retries them."""
        return self.summary.get("undecided", 0)

    def answers(self) -> list[AnswerResult]:
        """results.jsonl read back, one :class:`AnswerResult` per input line, in input order."""
        with self.results.open(encoding="utf-8") as f:
            return [AnswerResult.from_result(json.loads(line)) for line in f if line.strip()]


def tqdm_progress() -> Progress:
    """Progress bars on stderr, as `halucheck run` draws them."""
    from functools import partial

    from tqdm import tqdm

    # the rate over the whole stage (smoothing 0), not a moving average of the last steps: a CPU engine
    # finishes its calls in waves, a batch at a time, and the gap before one wave set the ETA to ten times
    # the time left
    return partial(tqdm, dynamic_ncols=True, file=sys.stderr, smoothing=0)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


class Checker:
    """Checks claims and answers with one configuration; its models are loaded once and reused.

    ``profile``, ``config`` (a models.yaml) and ``roles`` (``{"skeptic": "cpu-1.5b"}`` or ``["skeptic=cpu-1.5b"]``)
    choose the models as `--profile`, `--config` and `--role` do; ``verifier`` a verifier or cascade
    (``"selfcheck,debate"``), None for the profile's own (``verifier:`` in models.yaml), else
    :data:`~halucheck.config.DEFAULT_VERIFIER`. ``calibration``: a calibrator's name or file, ``"none"``, or None
    for the stored one. ``debate``, ``band``, ``nli_model`` and ``head`` are the flags of the same names.
    ``log`` receives notes and warnings (default: stderr). Errors are :class:`~halucheck.errors.HalucheckError`
    with a one-line message saying what to fix; a bad setting fails here, before any model is loaded.
    """

    def __init__(self, profile: str | None = None, verifier: str | None = None, config: PathLike | None = None, *,
                 roles: Mapping[str, str] | Sequence[str] | None = None, calibration: str | None = None,
                 debate: DebateConfig | None = None, band: tuple[float, float] | str | None = None,
                 nli_model: PathLike | None = None, head: str | None = None,
                 log: Callable[[str], None] | None = None) -> None:
        if verifier is not None and (not isinstance(verifier, str) or not verifier.strip()):
            raise ConfigError(f"verifier {verifier!r}: give a verifier's name such as selfcheck, or None for the "
                              "profile's own")
        self.config, self.profile, self.calibration = config, profile, calibration
        self.roles = dict(roles) if isinstance(roles, Mapping) else parse_role_overrides(list(roles or []))
        self.log = log or _stderr
        self._settings: Settings | None = None
        self._engines: dict[str, Engine] = {}  # by profile name: every check and run uses the same ones
        self._pool: EnginePool | None = None
        self._calibrator: tuple[Calibrator | None] | None = None
        self.verifier: str = verifier if verifier is not None else self.settings.verifier
        self.options = VerifierOptions(
            debate=debate or DebateConfig(), band=parse_band(band) if isinstance(band, str) else band or DEFAULT_BAND,
            nli_model=nli_model_path(nli_model, config) if "nli" in self.verifier.split(",") else None, head=head)
        from halucheck.verifiers import get_verifier

        self.judge: Verifier = get_verifier(self.verifier, self.options)  # what check() judges with
        self.judge.preflight()
        if self.judge.uses_llm:  # a bad models.yaml or profile, or a verifier its engine cannot run, fails now
            self.judge.preflight_engine(self.settings.profile_for("initial").engine)

    @property
    def settings(self) -> Settings:
        """The models.yaml settings, read on first use (a verifier without an LLM never needs them)."""
        if self._settings is None:
            from halucheck.engines.pool import check_profiles

            settings = Settings.load(self.config, profile=self.profile, role_overrides=self.roles)
            check_profiles(settings)  # a typo in a profile's options fails now, before any work
            self._settings = settings
        return self._settings

    # -- one claim ----------------------------------------------------------------------------------
    def check(self, text: str, *, evidence: Iterable[str | Evidence] | None = None, context: str | None = None,
              question: str | None = None) -> ClaimVerdict:
        """Judge ``text`` as one claim (with ``question``: question and answer as one claim) against
        ``evidence`` (passages) and/or ``context`` (one text, cut into passages at blank lines). Without
        either it rests on the model's own knowledge: ``basis`` ``closed-book``, never confident, uncalibrated."""
        if not isinstance(text, str) or not text.strip():
            raise InputError("the text to check is empty; pass the claim (or, with question=, the answer), e.g. "
                             "checker.check(\"Paris is in France.\", evidence=[...])")
        if context is not None and not isinstance(context, str):
            raise InputError(f"context must be a string (passages are cut at blank lines), got "
                             f"{type(context).__name__}; pass a list of passages as evidence=")
        if isinstance(evidence, (str, Evidence)):
            evidence = [evidence]
        passages: list[Evidence] = []
        for k, e in enumerate(evidence or []):
            if isinstance(e, Evidence):
                passages.append(e)
            elif isinstance(e, str):
                if e.strip():
                    passages.append(Evidence(text=e.strip(), source="<evidence>"))
            else:
                raise InputError(f"evidence[{k}] is {type(e).__name__}; pass passages as strings "
                                 "(or halucheck.records.Evidence)")
        if context:
            passages += passages_of(context, "<context>")
        from halucheck.records import Case, Claim
        from halucheck.verifiers import prefixes
        from halucheck.verifiers.base import closed_book

        cal = self.calibrator()  # before any call: a calibrator for another model fails at once
        one = Case(Claim(text=text.strip(), question=question.strip() if question else None), tuple(passages))
        verdict = prefixes.verify(self.judge, [one], self.engines() if self.judge.uses_llm else None)[0]
        if not passages:  # the model's prior alone: never a confident verdict
            verdict, cal = closed_book(verdict), None
        parts = len(prefixes.judged_parts(self.judge, one.claim.text, one.claim.question))
        return ClaimVerdict.of(one.claim.text, one.claim.question, passages, verdict, cal,
                               "evidence" if passages else "closed-book", parts)

    def calibrator(self) -> Calibrator | None:
        """The calibrator ``check`` applies (found once): ``calibration``'s, else the stored or shipped one for
        this verifier and the judging profile's model; None when there is none."""
        if self._calibrator is None:
            from halucheck.verifiers import calibration

            # the settings only for a verifier with an LLM: one without never needs them
            cal, _ = calibration.for_run(self.judge, self.settings if self.judge.uses_llm else None, self.calibration)
            self._calibrator = (cal,)
        return self._calibrator[0]

    def engines(self) -> EnginePool:
        """The pool ``check`` calls: its engines are made on first use and kept until :meth:`close`."""
        if self._pool is None:
            from halucheck.engines.pool import EnginePool

            self._pool = EnginePool(self.settings, kept=self._engines)
        return self._pool

    # -- many answers -------------------------------------------------------------------------------
    def run(self, items: Items, *, corpus: PathLike | None = None, out: PathLike | None = None,
            index: PathLike | None = None, use_context: bool = True, subjective_filter: str = SUBJECTIVE_FILTER,
            top_k: int = EVIDENCE_K, max_claims: int = MAX_CLAIMS, bibliography: PathLike | None = None,
            restart: bool = False, progress: bool | Progress = False,
            cluster: ClusterOptions | None = None, queries: str = QUERY_RULE) -> RunResult:
        """`halucheck run` over ``items``: a JSONL or CSV file of answers, or answers as dicts with the same
        fields (``id``, ``answer``, ``question``, ``context``). ``out``: the run folder (default: ``runs/<file
        name>`` for a file, a new temporary folder for dicts, which are kept there as ``items.jsonl``). Run again
        with the same arguments, a run resumes. ``progress``: True for bars on stderr, or a tqdm-like factory;
        ``cluster``: run the answers in shards on Ray (:class:`halucheck.cluster.ClusterOptions`); ``queries``: which
        claims get model-written search queries in corpus mode (:data:`halucheck.config.QUERY_RULES`)."""
        from halucheck.pipeline import Pipeline

        if queries not in QUERY_RULES:
            raise ConfigError(f"--queries must be {', '.join(QUERY_RULES[:-1])} or {QUERY_RULES[-1]}, not {queries!r}")
        if subjective_filter not in SUBJECTIVE_FILTERS:
            raise ConfigError(f"--filter must be {', '.join(SUBJECTIVE_FILTERS[:-1])} or {SUBJECTIVE_FILTERS[-1]}, "
                              f"not {subjective_filter!r}")
        if corpus is not None and not Path(corpus).is_dir():
            raise InputError(f"--corpus {corpus} is not a folder; pass the folder of your documents")
        if top_k < 1 or max_claims < 1:
            raise ConfigError(f"--top-k and --max-claims must be at least 1 (got {top_k} and {max_claims})")
        if out is not None and not str(out).strip():  # Path("") would be the current folder
            raise InputError("--out is empty; pass the folder for the run (default: runs/<input name>)")
        if isinstance(items, (str, os.PathLike)):
            input_path = Path(items)
            out_dir = Path(out) if out is not None else Path("runs") / input_path.stem
        else:
            out_dir = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="halucheck-run-"))
            input_path = write_items(items, out_dir)
        opts = RunOptions(
            input=input_path, out=out_dir, corpus=Path(corpus) if corpus is not None else None,
            index=Path(index) if index is not None else None, use_context=use_context,
            subjective_filter=subjective_filter, top_k=top_k, max_claims=max_claims, queries=queries,
            debate=self.options.debate,
            verifier=self.verifier, band=self.options.band, nli_model=self.options.nli_model,
            bibliography=Path(bibliography) if bibliography is not None else None, head=self.options.head,
            calibration=self.calibration)
        settings = self.settings
        bars = tqdm_progress() if progress is True else (progress or None)
        process = None
        if cluster is not None:
            from functools import partial

            from halucheck import cluster as ray_cluster

            if cluster.shard_answers < 1 or (cluster.workers is not None and cluster.workers < 1) \
                    or cluster.gpus_per_worker < 0:
                raise ConfigError("--shard-answers and --ray-workers must be at least 1, --ray-gpus at least 0")
            ray_cluster.check_installed()
            process = partial(ray_cluster.process, cluster=cluster)
        pipe = Pipeline(opts, settings, progress=bars, log=self.log, restart=restart, engines=self._engines)
        try:
            summary = pipe.run(process)
        finally:
            pipe.close()
        return RunResult(summary, out_dir)

    # -- lifetime -----------------------------------------------------------------------------------
    def close(self) -> None:
        """Close every engine (a loaded model's memory is freed, a server connection closed)."""
        engines, self._engines, self._pool = list(self._engines.values()), {}, None
        for engine in engines:
            engine.close()

    def __enter__(self) -> "Checker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def write_items(items: Iterable[Mapping[str, Any]], out: Path) -> Path:
    """Answers given as dicts, kept as the run's input: ``out/items.jsonl`` (rewritten only when they
    changed, so the same items resume the run)."""
    if isinstance(items, Mapping):
        raise InputError("items is one mapping; pass a list of answers (dicts with an \"answer\"), or a file")
    lines = []
    for k, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise InputError(f"items[{k}] is {type(item).__name__}; each answer is a dict with an \"answer\" "
                             "(and id, question, context), as one line of the input JSONL")
        try:
            lines.append(json.dumps(dict(item), ensure_ascii=False))
        except (TypeError, ValueError) as exc:
            raise InputError(f"items[{k}] cannot be written as JSON ({exc}); give strings and numbers") from None
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file; pass a folder for the run (it is created if missing)")
    path = out / "items.jsonl"
    text = "".join(line + "\n" for line in lines)
    try:
        out.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write the items to {path} ({exc.strerror or exc}); pass a writable out=") from None
    return path


__all__ = ["AnswerResult", "Checker", "ClaimVerdict", "RunResult", "passages_of", "tqdm_progress", "turn_of"]
