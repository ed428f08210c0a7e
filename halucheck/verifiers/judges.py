"""Single-agent judges: one LLM call (or a few) per claim, on the ``initial`` role's profile.

They are the debate's baselines in ``halucheck eval`` and cheaper verifiers (or a cascade's first stage)
in ``halucheck run``. Each reads a claim with its evidence and returns a Verdict whose trace is one S0
turn (its reasoning); a claim found factual has severity 0, one found not factual is graded 1-5 by one
more short call (``verifiers/severity.py``; not in ``eval``, which does not score severity). Scores, P(hallucinated):

- ``selfcheck``: the paper's Self-Check (0): zero-shot ``{"reasoning", "factuality"}``; from the
  probability p of the ``factuality`` token the model chose, when the engine returns logprobs:
  max(0.5, p) if it chose false, 1 - max(0.5, p) if true (:func:`~halucheck.verifiers.scoring.decision_score`);
  else 0/1. ``selfcheck-3shot``: the same with three worked examples as earlier chat turns.
- ``judge-likert``: LLM-as-a-judge, 5-point Likert confidence that the text is accurate (Cleanlab
  benchmark prompt): (5 - likert) / 4. ``prometheus``: Prometheus-2 style 1-5 factual-accuracy rubric,
  scored the same way.
- ``lynx``: Lynx PASS/FAIL with reasoning; FAIL = hallucinated, scored from the SCORE token as selfcheck.
- ``consistency``: TLM-like (Chen & Mueller's BSDetector): the greedy Self-Check verdict with its token
  probability, ``samples`` sampled verdicts and one self-reflection; see :func:`consistency_score`.

For the score-based judges (judge-likert, prometheus, consistency) the decision is ``score >= 0.5``: a
Likert or rubric 3 ("reasonably accurate, but partly unsupported") counts as hallucinated, as partially
supported claims do in the labels.
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field

from halucheck.engines.base import Request, Result, SamplingParams
from halucheck.prompts import load as load_prompts
from halucheck.records import Case, Turn, Verdict
from halucheck.verifiers.scoring import clamp01, decision_score, value_token_prob
from halucheck.verifiers.base import Cost, Verifier, failed_verdict, passages, quotable, under_check, verdict_from_score

if TYPE_CHECKING:
    from halucheck.engines.pool import EnginePool

ROLE = "initial"  # the judges are single agents: they use the initial agent's profile
THRESHOLD = 0.5  # score >= THRESHOLD -> hallucinated, for score-based judges
REFLECTION_WEIGHT = 0.3  # 1 - beta of BSDetector (beta = 0.7 on observed consistency)


# ---------------------------------------------------------------- reply shapes (schemas)


# The reasoning before each decision is bounded in the schema itself: constrained decoding then closes
# the string and moves on to the decision, where a token cap would cut the JSON and force a retry.
# ~300 characters is two or three sentences (~70 tokens); on CPUs the completion tokens are the cost.
REASON_CHARS = 300
Reason = Field(max_length=REASON_CHARS)


class StrictReply(BaseModel):  # the base of every judge's reply shape (and collab-cal's): no extra keys
    model_config = ConfigDict(extra="forbid")


@functools.lru_cache(maxsize=None)
def reply_schema(reply: type[BaseModel]) -> dict:
    """The JSON schema of a reply shape, made once (pydantic builds it anew on every call) and shared by every
    request for that shape: nothing changes a request's schema."""
    return reply.model_json_schema()


class SelfCheckReply(StrictReply):
    reasoning: str = Reason
    factuality: bool


class LikertReply(StrictReply):
    explanation: str = Reason
    score: Literal[1, 2, 3, 4, 5]


class RubricReply(StrictReply):
    feedback: str = Reason
    score: Literal[1, 2, 3, 4, 5]


class LynxReply(StrictReply):
    REASONING: str = Reason
    SCORE: Literal["PASS", "FAIL"]


class ReflectionReply(StrictReply):
    reasoning: str = Reason
    rating: Literal["correct", "incorrect", "not sure"]


REFLECTION_CERTAINTY = {"correct": 1.0, "incorrect": 0.0, "not sure": 0.5}


# ---------------------------------------------------------------- scores


def likert_score(likert: int) -> float:
    """Likert / rubric 1..5 (5 = surely accurate) -> P(hallucinated) = (5 - likert) / 4."""
    return clamp01((5 - int(likert)) / 4)


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


def read_reply(result: Result, model: type[BaseModel]) -> tuple[BaseModel | None, str | None]:
    """Validate a result with its pydantic model: (reply, None) or (None, why). Shared by every verifier
    that reads JSON replies (the judges, collab-cal)."""
    if not result.ok:
        return None, result.error
    try:
        return model.model_validate(result.parsed), None
    except Exception as exc:  # schema and model disagree: data, not a crash
        return None, f"reply rejected: {exc}".splitlines()[0]


def _turn(name: str, result: Result, reasoning: str, hallucinated: bool | None, p_hallucinated: float | None,
          error: str | None = None) -> Turn:
    """A judge's one turn: its reasoning as the opinion, its decision, its tokens."""
    return Turn(state="S0", role="initial", opinion=reasoning if error is None else result.text[:2000],
                factuality=None if hallucinated is None else not hallucinated, error_severity=None, error=error,
                prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens,
                cached_tokens=result.cached_tokens, latency_s=result.latency_s,
                p_factual=None if p_hallucinated is None else 1.0 - p_hallucinated, capped=result.capped,
                verifier=name)


# ---------------------------------------------------------------- judges


class PromptJudge(Verifier):
    """A single-agent judge: one templated request per claim, read by ``score``."""

    prompt: str = ""  # section of verifiers.yaml
    reply: type[StrictReply] = SelfCheckReply
    reasoning: str = "reasoning"  # the reply field shown as the turn's opinion
    logprobs: bool = False
    shots: bool = False
    grades = True  # its verdicts get a severity (verifiers/severity.py); consistency's own loop does not use this

    def sampling(self, engines: "EnginePool | None") -> SamplingParams:
        base = SamplingParams(temperature=0.0, max_tokens=self.options.max_tokens)
        overrides = engines.settings.sampling_for(ROLE) if engines is not None else {}
        return SamplingParams(**{**base.__dict__, **overrides}) if overrides else base

    def messages(self, check: Case, extra: dict | None = None) -> tuple[dict, ...]:
        p = load_prompts("verifiers")
        section = p[self.prompt]
        noun = "answer" if check.claim.question else "text"
        msgs = [{"role": "system", "content": section["system"].render()}]
        if self.shots:
            for shot in section["shots"]:
                msgs.append({"role": "user", "content": self._user(p, section, shot["evidence"], shot["question"],
                                                                   shot["text"], noun, extra)})
                msgs.append({"role": "assistant", "content": json.dumps(shot["reply"], ensure_ascii=False)})
        evidence = passages(check.claim, check.evidence)
        msgs.append({"role": "user", "content": self._user(p, section, evidence, check.claim.question,
                                                           under_check(check.claim), noun, extra)})
        return tuple(msgs)

    @staticmethod
    def _user(p, section, evidence, question, text, noun, extra) -> str:
        ctx = {"evidence": list(evidence), "question": question, "text": text, "noun": noun, **(extra or {})}
        return p["shared"].render(**ctx) + "\n\n" + section["task"].render(**ctx)

    def request(self, check: Case, engines: "EnginePool | None") -> Request:
        return Request(
            messages=self.messages(check),
            schema=reply_schema(self.reply),
            sampling=self.sampling(engines),
            logprobs=self.logprobs,
            tag=f"eval:{self.name}",
            # the role's repetition controls never push the reasoning off the claim's words or the
            # passages' names and numbers ("2009" becoming "2008", and the verdict following it)
            quote=quotable(check.claim, check.evidence),
        )

    def verify(self, checks, engines, on_verdict=None, on_call=None) -> list[Verdict]:
        t0 = time.perf_counter()
        cost = Cost(claims=len(checks))
        results = engines.engine_for(ROLE).generate([self.request(c, engines) for c in checks])
        cost.add_results(results)
        out = []
        for i, res in enumerate(results):
            reply, err = read_reply(res, self.reply)
            if reply is None:
                v = failed_verdict(self.name, err or "no valid reply", _turn(self.name, res, "", None, None, err))
            else:
                hallucinated, score = self.score(reply, res)
                v = verdict_from_score(self.name, hallucinated, score,
                                       _turn(self.name, res, getattr(reply, self.reasoning), hallucinated, score))
            out.append(v)
        if self.options.grade and self.grades:  # severity for the flagged claims: one short call each
            from halucheck.verifiers.severity import grade

            grade(checks, out, engines, cost, lambda i, v: " ".join(passages(checks[i].claim, checks[i].evidence)),
                  self.name)
        for i, v in enumerate(out):  # each verdict is final (graded) when it is handed on
            if on_call is not None:
                on_call(1)
            if on_verdict is not None:
                on_verdict(i, v)
        cost.wall_s = time.perf_counter() - t0
        self.costs = {self.name: cost}
        return out

    def score(self, reply: Any, result: Result) -> tuple[bool, float]:  # pragma: no cover
        """(hallucinated, P(hallucinated)) of a valid reply."""
        raise NotImplementedError


class SelfCheck(PromptJudge):
    """Self-Check (0): one agent judges factuality zero-shot; score from the decision token's probability."""

    name = "selfcheck"
    prompt = "selfcheck"
    reply = SelfCheckReply
    logprobs = True

    def score(self, reply: SelfCheckReply, result: Result) -> tuple[bool, float]:
        hallucinated = not reply.factuality
        return hallucinated, decision_score(hallucinated, value_token_prob(result, "factuality"))


class SelfCheck3Shot(SelfCheck):
    """Self-Check (3): Self-Check with three worked examples (invented) before the claim."""

    name = "selfcheck-3shot"
    shots = True


class JudgeLikert(PromptJudge):
    """LLM-as-a-judge, Likert 1-5 confidence that the text is accurate; P(hallucinated) = (5 - likert) / 4."""

    name = "judge-likert"
    prompt = "judge_likert"
    reply = LikertReply
    reasoning = "explanation"

    def score(self, reply: LikertReply, result: Result) -> tuple[bool, float]:
        s = likert_score(reply.score)
        return s >= THRESHOLD, s


class Prometheus(JudgeLikert):
    """Prometheus-2 style rubric 1-5 on faithfulness to the evidence; P(hallucinated) = (5 - score) / 4,
    scored as the Likert judge."""

    name = "prometheus"
    prompt = "prometheus"
    reply = RubricReply
    reasoning = "feedback"


class Lynx(PromptJudge):
    """Lynx PASS/FAIL with reasoning; FAIL = hallucinated; score from the SCORE token's probability."""

    name = "lynx"
    prompt = "lynx"
    reply = LynxReply
    reasoning = "REASONING"
    logprobs = True

    def score(self, reply: LynxReply, result: Result) -> tuple[bool, float]:
        hallucinated = reply.SCORE == "FAIL"
        return hallucinated, decision_score(hallucinated, value_token_prob(result, "SCORE"))


class Consistency(SelfCheck):
    """TLM-like: greedy Self-Check + k sampled Self-Checks (one generate call), then a self-reflection
    on each greedy verdict (a second call); combined by :func:`consistency_score`."""

    name = "consistency"

    def describe(self) -> dict:
        return {"samples": self.options.samples, "sample_temperature": self.options.sample_temperature,
                "reflection_weight": REFLECTION_WEIGHT}

    def least_calls(self) -> int:
        return 2 + max(0, self.options.samples)

    def verify(self, checks, engines, on_verdict=None, on_call=None) -> list[Verdict]:
        t0 = time.perf_counter()
        cost = Cost(claims=len(checks))
        engine = engines.engine_for(ROLE)
        k = max(0, self.options.samples)
        # a claim's greedy and sampled requests share one prompt: an engine that keeps prompt KV computes it once
        greedy = [replace(self.request(c, engines), prefix_group=group)
                  for c, group in zip(checks, self.prefix_groups(len(checks)))]
        sampled = [
            replace(g, logprobs=False, sampling=replace(
                g.sampling, temperature=max(self.options.sample_temperature, 1e-3), seed=self.options.seed + j + 1))
            for g in greedy for j in range(k)
        ]
        results = engine.generate(greedy + sampled)
        engine.release([g.prefix_group for g in greedy])
        cost.add_results(results)
        first, rest = results[: len(checks)], results[len(checks):]

        decisions: list[tuple[bool | None, float | None, list[bool], str, str | None]] = []
        for i, res in enumerate(first):
            reply, err = read_reply(res, SelfCheckReply)
            samples = []
            for r in rest[i * k:(i + 1) * k]:
                s, _ = read_reply(r, SelfCheckReply)
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
                    messages=self._reflect_messages(checks[i], verdict, decisions[i][3]),
                    schema=reply_schema(ReflectionReply),
                    sampling=self.sampling(engines),
                    tag="eval:consistency:reflect",
                    quote=quotable(checks[i].claim, checks[i].evidence),
                ))
            reflected = engine.generate(reqs)
            cost.add_results(reflected)
            for i, res in zip(ask, reflected):
                r, _ = read_reply(res, ReflectionReply)
                reflections[i] = r.rating if r is not None else None

        out = []
        for i, (g, p_tok, samples, reasoning, err) in enumerate(decisions):
            s = consistency_score(g, p_tok, samples, reflections.get(i))
            if s is None:
                v = failed_verdict(self.name, err or "no valid reply",
                                   _turn(self.name, first[i], "", None, None, err or "no valid reply"))
            else:
                v = verdict_from_score(self.name, s >= THRESHOLD, s, _turn(self.name, first[i], reasoning,
                                                                           s >= THRESHOLD, s))
            out.append(v)
            for n in range(1, self.least_calls() + 1) if on_call is not None else ():
                on_call(n)
            if on_verdict is not None:
                on_verdict(i, v)
        cost.wall_s = time.perf_counter() - t0
        self.costs = {self.name: cost}
        return out

    def _reflect_messages(self, check: Case, verdict: str, reasoning: str) -> tuple[dict, ...]:
        p = load_prompts("verifiers")
        ctx = {"evidence": passages(check.claim, check.evidence), "question": check.claim.question,
               "text": under_check(check.claim), "verdict": verdict, "reasoning": reasoning}
        return (
            {"role": "system", "content": p["reflect"]["system"].render()},
            {"role": "user", "content": p["shared"].render(**ctx) + "\n\n" + p["reflect"]["task"].render(**ctx)},
        )


__all__ = ["Consistency", "JudgeLikert", "Lynx", "Prometheus", "PromptJudge", "SelfCheck", "SelfCheck3Shot",
           "consistency_score", "likert_score", "read_reply"]
