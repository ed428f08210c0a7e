"""Verifiers for ``halucheck eval``, selectable by name, all batch-first and all on the same evidence.

A verifier turns a list of :class:`EvalItem` into one :class:`Prediction` per item:
``prediction`` is True when it judges the item hallucinated, ``score`` is its probability of
hallucination P(hallucinated) in [0, 1]. An item no reply could decide (every reply invalid) gets
``prediction=None`` and the error; the report counts it as missing.

Every LLM call goes through the engines (``settings.engine_for(role)``) with a JSON schema, so the
engine's constrained decoding fixes the reply's shape and the engine validates it again. Within one
step of a verifier, the requests of *all* items go to the engine in one ``generate`` call, so the
engine always sees a full batch. The baselines use the ``initial`` role's profile (a single agent);
the debate uses every debate role's profile.

Registry (name: what it is; how the score is defined):

- ``debate`` (default): the Markov-chain multi-agent debate (MCMAD) through the Scheduler, all items'
  debates in flight together. prediction = the last Leader's verdict (not factual -> True);
  score = ``Verdict.p_hallucinated``, every valid turn's factuality-token probability pooled over the
  chain (``halucheck.scoring.pool``).
- ``selfcheck``: the paper's Self-Check (0): one agent, zero-shot, ``{"reasoning", "factuality"}``.
  score = from the probability p of the ``factuality`` token the model chose, when the engine
  returns logprobs: max(0.5, p) if it chose false, 1 - max(0.5, p) if true (:func:`decision_score`);
  else 0/1.
- ``selfcheck-3shot``: Self-Check (3): the same with three worked examples as earlier chat turns.
- ``judge-likert``: LLM-as-a-judge, 5-point Likert confidence that the text is accurate (Cleanlab
  benchmark prompt). score = (5 - likert) / 4.
- ``prometheus``: Prometheus-2 style direct assessment with a 1-5 factual-accuracy rubric.
  score = (5 - rubric score) / 4.
- ``lynx``: Lynx PASS/FAIL with reasoning (``{"REASONING", "SCORE"}``); FAIL -> True.
  score = the token probability of the SCORE value chosen, as for ``selfcheck``; else 0/1.
- ``consistency``: TLM-like (Chen & Mueller's BSDetector): the greedy Self-Check verdict with its
  token probability, ``samples`` sampled verdicts (temperature > 0, one seed each) and one
  self-reflection on the greedy verdict. See :func:`consistency_score`.
- ``nli``: a sentence-transformers CrossEncoder from a local folder (premise = evidence passage,
  hypothesis = text). score = 1 - max over passages of P(entailment) (for a one-output model such as
  a hallucination/consistency scorer: 1 - its sigmoid score). No LLM calls. No such model ships on
  PyPI, so it has to be pointed at (``--nli-model PATH``).

For the score-based verifiers (judge-likert, prometheus, consistency, nli) the prediction is
``score >= 0.5``: a Likert or rubric 3 ("reasonably accurate, but partly unsupported") counts as
hallucinated, as partially supported claims do in the labels.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field

from halucheck.debate.rounds import DebateConfig
from halucheck.engines.base import Request, Result, SamplingParams
from halucheck.errors import ConfigError, InputError
from halucheck.evaluation.datasets import GROUNDED, EvalItem
from halucheck.evaluation.report import Prediction
from halucheck.prompts import load as load_prompts
from halucheck.scoring import clamp01, decision_score, value_token_prob

if TYPE_CHECKING:
    from halucheck.config import Settings
    from halucheck.records import Verdict

ROLE = "initial"  # the baselines are single agents: they use the initial agent's profile
THRESHOLD = 0.5  # score >= THRESHOLD -> predicted hallucinated, for score-based verifiers
REFLECTION_WEIGHT = 0.3  # 1 - beta of BSDetector (beta = 0.7 on observed consistency)
NO_NLI_MODEL = (
    "no NLI model configured, and none ships on PyPI: pass --nli-model PATH (a local sentence-transformers "
    "CrossEncoder folder, e.g. a downloaded cross-encoder/nli-deberta-v3-base), or set $HALUCHECK_NLI_MODEL "
    "or `nli_model: PATH` in models.yaml"
)


# ---------------------------------------------------------------- reply shapes (schemas)


# The reasoning before each decision is bounded in the schema itself: constrained decoding then closes
# the string and moves on to the decision, where a token cap would cut the JSON and force a retry.
# ~300 characters is two or three sentences (~70 tokens); on CPUs the completion tokens are the cost.
REASON_CHARS = 300
Reason = Field(max_length=REASON_CHARS)


class _Reply(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SelfCheckReply(_Reply):
    reasoning: str = Reason
    factuality: bool


class LikertReply(_Reply):
    explanation: str = Reason
    score: Literal[1, 2, 3, 4, 5]


class RubricReply(_Reply):
    feedback: str = Reason
    score: Literal[1, 2, 3, 4, 5]


class LynxReply(_Reply):
    REASONING: str = Reason
    SCORE: Literal["PASS", "FAIL"]


class ReflectionReply(_Reply):
    reasoning: str = Reason
    rating: Literal["correct", "incorrect", "not sure"]


REFLECTION_CERTAINTY = {"correct": 1.0, "incorrect": 0.0, "not sure": 0.5}


# ---------------------------------------------------------------- options and helpers


@dataclass(frozen=True)
class VerifierOptions:
    """Settings the verifiers share: the debate's configuration, the consistency verifier's samples,
    the baselines' reply budget, and the NLI model folder."""

    debate: DebateConfig = field(default_factory=DebateConfig)
    samples: int = 3  # sampled verdicts for ``consistency``
    sample_temperature: float = 0.7
    seed: int = 0
    max_tokens: int = 256
    nli_model: str | None = None


def text_of(item: EvalItem) -> tuple[str | None, str]:
    """(question, text) to verify. Short QA (an answer to a question) and response-level items keep
    the question apart; a claim-level item is its claim alone."""
    if item.answer is not None and item.question:
        return item.question, item.answer
    if item.response is not None and item.claim == item.response and item.question:
        return item.question, item.response
    return None, item.claim


def likert_score(likert: int) -> float:
    """Likert / rubric 1..5 (5 = surely accurate) -> P(hallucinated) = (5 - likert) / 4."""
    return clamp01((5 - int(likert)) / 4)


def debate_score(verdict: "Verdict") -> Prediction:
    """A debate Verdict -> Prediction: the last Leader's verdict, scored by the chain's pooled
    P(hallucinated); the verdict itself (every turn) goes along as the prediction's detail."""
    if verdict is None or verdict.factuality is None:
        return Prediction(None, None, (verdict.error if verdict else None) or "no verdict",
                          verdict.to_dict() if verdict else None)
    hallucinated = not verdict.factuality
    if verdict.p_hallucinated is not None:
        score = clamp01(verdict.p_hallucinated)
    else:
        conf = clamp01(verdict.confidence)
        score = conf if hallucinated else 1.0 - conf
    return Prediction(hallucinated, score, detail=verdict.to_dict())


def consistency_score(
    greedy: bool | None,
    p_token: float | None,
    samples: Sequence[bool],
    reflection: str | None,
    reflection_weight: float = REFLECTION_WEIGHT,
) -> float | None:
    """TLM-like P(hallucinated) from a greedy verdict, sampled verdicts and a self-reflection.

    ``greedy``/``samples`` are hallucinated? decisions (None = no valid greedy reply);
    ``p_token`` the probability of the greedy decision's token (None without logprobs).

    - observed consistency: the mean of the greedy P(hallucinated) (:func:`decision_score`, so its
      token probability where known) and the k sampled 0/1 decisions;
    - self-reflection: the model rates its greedy verdict correct (1), incorrect (0) or not sure
      (0.5); as P(hallucinated) that is the certainty if the verdict was "hallucinated", else 1 minus it;
    - score = (1 - w) * observed + w * reflection, w = ``reflection_weight`` (0.3, BSDetector's beta = 0.7);
      without a reflection (no valid greedy verdict) the observed part alone. None when nothing is valid.
    """
    parts = [float(s) for s in samples]
    if greedy is not None:
        parts.insert(0, decision_score(greedy, p_token))
    if not parts:
        return None
    observed = sum(parts) / len(parts)
    if greedy is None or reflection is None:
        return clamp01(observed)
    certainty = REFLECTION_CERTAINTY[reflection]
    reflected = certainty if greedy else 1.0 - certainty
    return clamp01((1 - reflection_weight) * observed + reflection_weight * reflected)


def _read(result: Result, model: type[_Reply]) -> tuple[_Reply | None, str | None]:
    """Validate a result with its pydantic model: (reply, None) or (None, why)."""
    if not result.ok:
        return None, result.error
    try:
        return model.model_validate(result.parsed), None
    except Exception as exc:  # schema and model disagree: data, not a crash
        return None, f"reply rejected: {exc}".splitlines()[0]


# ---------------------------------------------------------------- verifiers


class Verifier:
    """Base class: ``predict(items, settings)`` returns one Prediction per item, in order."""

    name: str = ""
    uses_llm: bool = True

    def __init__(self, options: VerifierOptions | None = None) -> None:
        self.options = options or VerifierOptions()

    def predict(self, items: Sequence[EvalItem], settings: "Settings") -> list[Prediction]:  # pragma: no cover
        raise NotImplementedError

    def describe(self) -> dict:
        """The settings that shaped this verifier's predictions (written to metrics.json)."""
        return {}

    def check(self) -> None:
        """Raise a HalucheckError before any work when the verifier cannot run as configured."""


class PromptVerifier(Verifier):
    """A single-agent verifier: one templated request per item, read by ``score``."""

    prompt: str = ""  # section of verifiers.yaml
    reply: type[_Reply] = SelfCheckReply
    logprobs: bool = False
    shots: bool = False

    def sampling(self, settings: "Settings") -> SamplingParams:
        base = SamplingParams(temperature=0.0, max_tokens=self.options.max_tokens)
        overrides = settings.sampling_for(ROLE)
        return SamplingParams(**{**base.__dict__, **overrides}) if overrides else base

    def messages(self, item: EvalItem, extra: dict | None = None) -> tuple[dict, ...]:
        p = load_prompts("verifiers")
        section = p[self.prompt]
        noun = "answer" if text_of(item)[0] else "text"
        msgs = [{"role": "system", "content": section["system"].render()}]
        if self.shots:
            for shot in section["shots"]:
                msgs.append({"role": "user", "content": self._user(p, section, shot["evidence"], shot["question"],
                                                                   shot["text"], noun, extra)})
                msgs.append({"role": "assistant", "content": json.dumps(shot["reply"], ensure_ascii=False)})
        question, text = text_of(item)
        msgs.append({"role": "user", "content": self._user(p, section, item.evidence, question, text, noun, extra)})
        return tuple(msgs)

    @staticmethod
    def _user(p, section, evidence, question, text, noun, extra) -> str:
        ctx = {"evidence": list(evidence), "question": question, "text": text, "noun": noun, **(extra or {})}
        return p["shared"].render(**ctx) + "\n\n" + section["task"].render(**ctx)

    def request(self, item: EvalItem, settings: "Settings") -> Request:
        return Request(
            messages=self.messages(item),
            schema=self.reply.model_json_schema(),
            sampling=self.sampling(settings),
            logprobs=self.logprobs,
            tag=f"eval:{self.name}",
        )

    def predict(self, items: Sequence[EvalItem], settings: "Settings") -> list[Prediction]:
        engine = settings.engine_for(ROLE)
        results = engine.generate([self.request(it, settings) for it in items])
        out = []
        for res in results:
            reply, err = _read(res, self.reply)
            out.append(Prediction(None, None, err) if reply is None else self.score(reply, res))
        return out

    def score(self, reply: Any, result: Result) -> Prediction:  # pragma: no cover
        raise NotImplementedError


class SelfCheck(PromptVerifier):
    """Self-Check (0): one agent judges factuality zero-shot; score from the decision token's probability."""

    name = "selfcheck"
    prompt = "selfcheck"
    reply = SelfCheckReply
    logprobs = True

    def score(self, reply: SelfCheckReply, result: Result) -> Prediction:
        hallucinated = not reply.factuality
        return Prediction(hallucinated, decision_score(hallucinated, value_token_prob(result, "factuality")))


class SelfCheck3Shot(SelfCheck):
    """Self-Check (3): Self-Check with three worked examples (invented) before the item."""

    name = "selfcheck-3shot"
    shots = True


class JudgeLikert(PromptVerifier):
    """LLM-as-a-judge, Likert 1-5 confidence that the text is accurate; P(hallucinated) = (5 - likert) / 4."""

    name = "judge-likert"
    prompt = "judge_likert"
    reply = LikertReply

    def score(self, reply: LikertReply, result: Result) -> Prediction:
        s = likert_score(reply.score)
        return Prediction(s >= THRESHOLD, s)


class Prometheus(JudgeLikert):
    """Prometheus-2 style rubric 1-5 on faithfulness to the evidence; P(hallucinated) = (5 - score) / 4,
    scored as the Likert judge."""

    name = "prometheus"
    prompt = "prometheus"
    reply = RubricReply


class Lynx(PromptVerifier):
    """Lynx PASS/FAIL with reasoning; FAIL = hallucinated; score from the SCORE token's probability."""

    name = "lynx"
    prompt = "lynx"
    reply = LynxReply
    logprobs = True

    def score(self, reply: LynxReply, result: Result) -> Prediction:
        hallucinated = reply.SCORE == "FAIL"
        return Prediction(hallucinated, decision_score(hallucinated, value_token_prob(result, "SCORE")))


class Consistency(SelfCheck):
    """TLM-like: greedy Self-Check + k sampled Self-Checks (one generate call), then a self-reflection
    on each greedy verdict (a second call); combined by :func:`consistency_score`."""

    name = "consistency"

    def describe(self) -> dict:
        return {"samples": self.options.samples, "sample_temperature": self.options.sample_temperature,
                "reflection_weight": REFLECTION_WEIGHT}

    def predict(self, items: Sequence[EvalItem], settings: "Settings") -> list[Prediction]:
        engine = settings.engine_for(ROLE)
        k = max(0, self.options.samples)
        greedy = [self.request(it, settings) for it in items]
        sampled = [
            replace(g, logprobs=False, sampling=replace(
                g.sampling, temperature=max(self.options.sample_temperature, 1e-3), seed=self.options.seed + j + 1))
            for g in greedy for j in range(k)
        ]
        results = engine.generate(greedy + sampled)
        first, rest = results[: len(items)], results[len(items):]

        decisions: list[tuple[bool | None, float | None, list[bool], str, str | None]] = []
        for i, res in enumerate(first):
            reply, err = _read(res, SelfCheckReply)
            samples = []
            for r in rest[i * k:(i + 1) * k]:
                s, _ = _read(r, SelfCheckReply)
                if s is not None:
                    samples.append(not s.factuality)
            if reply is None:
                decisions.append((None, None, samples, "", err))
            else:
                decisions.append((not reply.factuality, value_token_prob(res, "factuality"), samples,
                                  reply.reasoning, err))

        # self-reflection on every valid greedy verdict, all in one call
        ask = [i for i, d in enumerate(decisions) if d[0] is not None]
        reflections: dict[int, str | None] = {}
        if ask:
            reqs = []
            for i in ask:
                verdict = "the text is NOT factual" if decisions[i][0] else "the text is factual"
                reqs.append(Request(
                    messages=self._reflect_messages(items[i], verdict, decisions[i][3]),
                    schema=ReflectionReply.model_json_schema(),
                    sampling=self.sampling(settings),
                    tag="eval:consistency:reflect",
                ))
            for i, res in zip(ask, engine.generate(reqs)):
                r, _ = _read(res, ReflectionReply)
                reflections[i] = r.rating if r is not None else None

        out = []
        for i, (g, p_tok, samples, _, err) in enumerate(decisions):
            s = consistency_score(g, p_tok, samples, reflections.get(i))
            out.append(Prediction(None, None, err or "no valid reply") if s is None else Prediction(s >= THRESHOLD, s))
        return out

    def _reflect_messages(self, item: EvalItem, verdict: str, reasoning: str) -> tuple[dict, ...]:
        p = load_prompts("verifiers")
        question, text = text_of(item)
        ctx = {"evidence": list(item.evidence), "question": question, "text": text,
               "verdict": verdict, "reasoning": reasoning}
        return (
            {"role": "system", "content": p["reflect"]["system"].render()},
            {"role": "user", "content": p["shared"].render(**ctx) + "\n\n" + p["reflect"]["task"].render(**ctx)},
        )


class Debate(Verifier):
    """The Markov-chain multi-agent debate through the Scheduler, every item's debate in flight at once."""

    name = "debate"

    def describe(self) -> dict:
        c = self.options.debate
        return {"policy": c.policy, "min_rounds": c.min_rounds, "max_rounds": c.max_rounds, "prompts": c.prompts}

    def predict(self, items: Sequence[EvalItem], settings: "Settings") -> list[Prediction]:
        from halucheck.debate import Agents, DebateJob, Scheduler
        from halucheck.records import Claim, Evidence

        jobs = []
        for it in items:
            question, text = text_of(it)
            evidence = tuple(Evidence(text=e, source=it.id) for e in it.evidence)
            jobs.append(DebateJob(Claim(text=text, question=question), evidence))
        verdicts = Scheduler(Agents(settings), self.options.debate).run(jobs)
        return [debate_score(v) for v in verdicts]


class NLI(Verifier):
    """A local CrossEncoder NLI model: P(hallucinated) = 1 - max over passages of P(entailment)."""

    name = "nli"
    uses_llm = False
    batch_size = 16

    def describe(self) -> dict:
        return {"nli_model": self.options.nli_model}

    def check(self) -> None:
        from pathlib import Path

        path = self.options.nli_model
        if not path:
            raise ConfigError(NO_NLI_MODEL)
        if not Path(path).is_dir():
            raise ConfigError(f"NLI model folder {path} does not exist; pass --nli-model a local CrossEncoder folder")

    def predict(self, items: Sequence[EvalItem], settings: "Settings | None" = None) -> list[Prediction]:
        self.check()
        path = self.options.nli_model
        if not any(it.evidence for it in items):
            raise InputError(
                f"nli needs evidence passages and these items have none; use a grounded set: {', '.join(sorted(GROUNDED))}"
            )
        model = load_cross_encoder(path)
        pairs, owner = [], []
        for i, it in enumerate(items):
            text = " ".join(x for x in text_of(it) if x)
            for passage in it.evidence:
                pairs.append((passage, text))
                owner.append(i)
        probs = entailment_probabilities(model, pairs, self.batch_size)
        best: dict[int, float] = {}
        for i, p in zip(owner, probs):
            best[i] = max(best.get(i, 0.0), p)
        out = []
        for i in range(len(items)):
            if i not in best:
                out.append(Prediction(None, None, "no evidence passage to check the text against"))
            else:
                s = clamp01(1.0 - best[i])
                out.append(Prediction(s >= THRESHOLD, s))
        return out


def load_cross_encoder(path: str):
    """A sentence-transformers CrossEncoder from a local folder (never downloads)."""
    from sentence_transformers import CrossEncoder

    try:
        return CrossEncoder(path, device="cpu", local_files_only=True)
    except Exception as exc:
        raise ConfigError(f"cannot load a CrossEncoder from {path}: {str(exc).splitlines()[0]}") from None


def _id2label(model) -> dict[int, str]:
    for obj in (model, getattr(model, "model", None)):
        cfg = getattr(obj, "config", None)
        labels = getattr(cfg, "id2label", None)
        if labels:
            return {int(k): str(v) for k, v in labels.items()}
    return {}


def entailment_probabilities(model, pairs: Sequence[tuple[str, str]], batch_size: int = 16) -> list[float]:
    """P(premise entails hypothesis) per pair: the softmax entailment class of a multi-class NLI model,
    or the sigmoid output of a one-output (consistency) model."""
    if not pairs:
        return []
    labels = _id2label(model)
    num = getattr(model, "num_labels", None) or len(labels) or 1
    if num == 1:
        scores = model.predict(list(pairs), batch_size=batch_size, show_progress_bar=False)
        return [clamp01(float(s)) for s in scores]
    idx = next((i for i, name in labels.items() if name.lower().startswith("entail")), None)
    if idx is None:
        raise ConfigError(
            f"the NLI model's labels {sorted(labels.values())} have no 'entailment' class; use an NLI CrossEncoder"
        )
    rows = model.predict(list(pairs), batch_size=batch_size, show_progress_bar=False, apply_softmax=True)
    return [clamp01(float(r[idx])) for r in rows]


# ---------------------------------------------------------------- registry

VERIFIERS: dict[str, Callable[[VerifierOptions], Verifier]] = {
    cls.name: cls
    for cls in (Debate, SelfCheck, SelfCheck3Shot, JudgeLikert, Prometheus, Lynx, Consistency, NLI)
}
"""Verifier name -> class (called with :class:`VerifierOptions`)."""


def register_verifier(name: str, factory: Callable[[VerifierOptions], Verifier]) -> None:
    """Add a verifier under ``name`` (a class or a callable taking VerifierOptions)."""
    VERIFIERS[name] = factory


def get_verifier(name: str, options: VerifierOptions | None = None) -> Verifier:
    """The verifier registered as ``name``; a ConfigError with a suggestion otherwise."""
    try:
        factory = VERIFIERS[name]
    except KeyError:
        near = difflib.get_close_matches(name, VERIFIERS, n=1)
        hint = f" Did you mean {near[0]!r}?" if near else ""
        raise ConfigError(f"unknown verifier {name!r}.{hint} Available: {', '.join(VERIFIERS)}") from None
    return factory(options or VerifierOptions())


__all__ = [
    "VERIFIERS",
    "Consistency",
    "Debate",
    "JudgeLikert",
    "Lynx",
    "NLI",
    "Prometheus",
    "SelfCheck",
    "SelfCheck3Shot",
    "Verifier",
    "VerifierOptions",
    "consistency_score",
    "debate_score",
    "decision_score",
    "entailment_probabilities",
    "get_verifier",
    "likert_score",
    "register_verifier",
    "text_of",
    "value_token_prob",
]
