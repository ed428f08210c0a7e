"""``collab-cal``: Collaborative Calibration (Yang et al., "Confidence Calibration and Rationalization for
LLMs via Multi-Agent Deliberation", arXiv 2404.09127), as a verifier of one claim against its evidence.

Several agents answer "is the text factual?" with a confidence, are grouped by their answer (stance), each
group argues for its stance, every agent rates the other side's argument and revises its answer and
confidence, and the revised confidences are aggregated as the paper does. All agents run on the
``initial`` role's profile (``engines.engine_for("initial")``), and every step is ONE ``generate`` call
with the requests of all claims and all agents, so an engine always sees a full batch. A step's calls about
one claim share their prompt start (system prompt, evidence, claim; the persona comes after) and a prefix
group, so an engine that keeps prompt prefixes computes the start once per claim and step
(``scripts/bench_collab.py`` measures it).

Steps and calls (``n`` = ``max(3, VerifierOptions.samples)`` agents; calls per claim: ``2n`` when the first
answers agree, ``2n + 2`` when they split; :meth:`CollabCal.least_calls` is ``2n``):

- **S0, stage 1 (stance generation)**, n calls per claim: each agent answers ``{"reasoning",
  "factuality", "confidence"}``. As in the paper: independent votes with a confidence, the prompt names the
  paper's sources of uncertainty (ambiguity, complexity, own ability), and the votes are clustered into
  stances, each with its count and mean confidence. Agents whose reply is invalid (the paper's
  "abstain") are left out of the stances and of everything after. The paper clusters free answers with a
  GPT-3.5 judge; here the answer is a boolean, so the stances are simply "factual" and "not factual".
- **S1, stage 2 (arguments)**, one call per stance, only when both stances have members: the first agent
  of each stance writes ``{"argument"}`` (at most three sentences) for it, with the paper's argument prompt
  and without its persona (the paper's arguers are general agents).
  One argument per stance is what the authors' released code does; with two stances it is exactly the
  "argument for" and "argument against" the paper's revision prompt shows. A stance whose argument call
  failed is represented by its first agent's S0 reasoning. When every agent gave the same answer there is
  no opposing side: as in the released code, no arguments are written and the agents revise with the note
  that the group reached a consensus.
- **S2, stage 2 (rating and revision)**, n calls per claim: each agent is shown its original answer and
  confidence, the argument supporting its answer, the one from the opposing side and how many
  deliberators agree and disagree with it (the paper's confidence-rationale prompt), and replies
  ``{"logic", "facts", "clarity", "conciseness", "rationale", "factuality", "confidence"}``: its rating
  of the opposing argument ("poor" ... "excellent", the paper's scale and aspects: logical consistency,
  factuality, clarity, conciseness), then its rationale for adjusting its confidence (the paper's
  R_conf, Eq. 1), its revised answer (Y_post) and its final confidence (C_post, Eq. 2).
- **Aggregate** (:func:`aggregate`), as the paper and its code: a majority vote over the revised answers,
  and the final confidence is the mean revised confidence of the agents in the majority stance. As
  P(hallucinated): that mean if the majority says "not factual", one minus it if it says "factual".
  Revisions that are invalid are left out of the vote and the mean. If the vote is tied (possible only when
  some revisions are invalid, or with an even ``n``) the paper's vote is undefined; the mean of every
  revised P(hallucinated) decides then. If no revision of a claim is valid, its stage-1 stances are
  aggregated the same way (the pre-deliberation estimate). A claim where no agent gave a valid first
  answer gets a failed verdict.

The verdict: ``factuality`` is ``P(hallucinated) < 0.5``, ``p_hallucinated`` the aggregate,
``confidence`` the probability of the side taken, ``error_severity`` None (as the judges: no severity is
rated), ``rounds`` the steps run (3 when the first answers split, 2 when they agree), ``consensus`` whether
the valid revised answers all agree. The trace holds one Turn per call, in step order: S0 answers and S2
revisions one per agent, S1 arguments one per stance (role ``initial``, ``verifier="collab-cal"``), each
with that agent's reasoning, argument or rationale (S2: followed by its rating of the opposing argument),
its answer and ``p_factual`` = 1 - its P(hallucinated) (S1: from the arguer's first confidence); an
invalid reply is a turn with ``error`` and its raw text.

Where this departs from the paper, and why:

- **Agents.** The paper uses 6 agents on three backbones (GPT-3.5, Mistral-7B, Cohere), each with a
  prompting strategy chosen per task on a validation set (its A.1), plus a separate pool of general
  agents for stage 2. Here one local model plays every agent, the same agents go on from stage 1 to
  stage 2, and there are 3 by default (``--samples`` raises it; 6 is the paper's size): each agent is one
  call per step, and on a CPU the calls are the cost. Diversity comes from a persona line per agent (the
  paper's prompting strategies rewritten for a claim and its passages: step-by-step, self-ask with the
  passages as search results, recall-first; cycled for more agents; no task-level selection) and from
  sampling the first answers at ``sample_temperature`` with a seed per agent (``seed + agent + 1``).
  The paper samples every call at temperature 1; here arguments and revisions are greedy (the role's
  sampling settings), their prompts already differ per agent.
- **Peer feedback.** In the paper other deliberators rate each argument in separate calls, a search agent
  checks the argument's premises, and the reviser sees the summarised ratings. Here each agent rates the
  opposing argument itself, in the same reply and just before it revises, and "facts" is judged against
  the passages shown (no search): one step instead of two (n calls instead of about 2n plus
  summaries). The ratings are kept in the S2 turns' opinions.
- **Revision in one call.** The paper asks for the answer with a rationale (Eq. 1), then in a separate call
  for the final confidence given that rationale (Eq. 2); here one reply holds rationale, answer and
  confidence, the confidence written after (and conditioned on) the rationale.
- **Reply shapes.** Every reply is a JSON object fixed by a schema (constrained decoding; validated again
  with the pydantic model), the reasoning strings bounded to ~300 characters like the judges' so that a
  reply ends before the token cap.
- **How the confidence is elicited.** Verbalised, as the paper's black-box route, but on a closed scale:
  50, 60, ..., 100 percent that the agent's own answer is correct. For a two-way answer a confidence below
  50 % would mean the other answer, and small models otherwise confuse "how sure I am" with "how likely
  the text is true". For the first answers the paper's open-model route is used as well: with logprobs,
  the probability of the ``factuality`` token the agent chose (at least 0.5, see
  :func:`~halucheck.verifiers.scoring.decision_score`) stands for the sequence probability, and the confidence is
  the higher of the two, as the released code takes the higher of the verbalised and the sequence-based
  confidence (there per stance, here per agent). The final confidences are verbalised only, as in the
  paper.
- **The agent remembers its first reply.** The revision prompt also shows the agent its own first
  reasoning (the paper's stage-2 agents are other agents, told only the stance and its confidence).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal, Sequence


from halucheck.engines.base import Request, Result, SamplingParams
from halucheck.verifiers.judges import Reason, StrictReply, read_reply, reply_schema
from halucheck.prompts import load as load_prompts
from halucheck.records import Case, Turn, Verdict
from halucheck.verifiers.scoring import clamp01, value_token_prob
from halucheck.verifiers.base import Cost, Verifier, passages, quotable, under_check

if TYPE_CHECKING:
    from halucheck.engines.pool import EnginePool

ROLE = "initial"  # every agent runs on the initial role's profile
MIN_AGENTS = 3  # agents = max(MIN_AGENTS, VerifierOptions.samples)
THRESHOLD = 0.5  # P(hallucinated) >= THRESHOLD -> not factual

Confidence = Literal[50, 60, 70, 80, 90, 100]  # percent that the agent's own answer is correct
Rating = Literal["poor", "fair", "good", "excellent"]


# ---------------------------------------------------------------- reply shapes (schemas)

# No docstrings on the reply models: pydantic would send them to the model as the schema's description.


# S0: a first answer with its confidence.
class AnswerReply(StrictReply):
    reasoning: str = Reason
    factuality: bool
    confidence: Confidence


# S1: an argument for the agent's stance.
class ArgumentReply(StrictReply):
    argument: str = Reason


# S2 when the group is split: the opposing argument rated, then the revised answer and confidence.
class RevisionReply(StrictReply):
    logic: Rating
    facts: Rating
    clarity: Rating
    conciseness: Rating
    rationale: str = Reason
    factuality: bool
    confidence: Confidence


# S2 when every agent gave the same answer: the revised answer and confidence.
class ConsensusReply(StrictReply):
    rationale: str = Reason
    factuality: bool
    confidence: Confidence


# ---------------------------------------------------------------- confidences


def p_hallucinated_of(hallucinated: bool, confidence: float) -> float:
    """An answer with the confidence that it is correct -> P(hallucinated)."""
    return confidence if hallucinated else 1.0 - confidence


def first_confidence(verbal: int, p_token: float | None) -> float:
    """A first answer's confidence: the verbalised percent, or the chosen ``factuality`` token's
    probability (at least 0.5) when that is higher and known."""
    c = verbal / 100.0
    return c if p_token is None else max(c, 0.5, clamp01(p_token))


def aggregate(votes: Sequence[tuple[bool, float]]) -> float | None:
    """P(hallucinated) from (hallucinated?, confidence) votes, as the paper: the majority answer, with the
    mean confidence of the agents that gave it. A tied vote: the mean of every vote's P(hallucinated).
    None without votes."""
    if not votes:
        return None
    yes = [c for h, c in votes if h]
    no = [c for h, c in votes if not h]
    if len(yes) == len(no):
        return sum(p_hallucinated_of(h, c) for h, c in votes) / len(votes)
    majority = yes if len(yes) > len(no) else no
    mean = sum(majority) / len(majority)
    return p_hallucinated_of(len(yes) > len(no), mean)


# ---------------------------------------------------------------- the verifier


@dataclass
class _Agent:
    """One agent's state on one claim, once its first answer is valid."""

    index: int
    hallucinated: bool
    confidence: float  # its first confidence (S0)
    reasoning: str
    final: tuple[bool, float] | None = None  # its revised (hallucinated?, confidence), S2


class CollabCal(Verifier):
    """Collaborative Calibration: first answers, arguments per stance, rated and revised, aggregated."""

    name = "collab-cal"

    @property
    def agents(self) -> int:
        return max(MIN_AGENTS, self.options.samples)

    def personas(self) -> list[dict]:
        """The persona of each agent (the prompt file's personas, cycled)."""
        ps = load_prompts("collab")["personas"]
        return [ps[a % len(ps)] for a in range(self.agents)]

    def least_calls(self) -> int:
        return 2 * self.agents  # first answers and revisions; a split claim adds one argument per stance

    def describe(self) -> dict:
        return {"agents": self.agents, "personas": [p["name"] for p in self.personas()],
                "sample_temperature": self.options.sample_temperature, "seed": self.options.seed,
                "confidence": "verbalised 50-100 %; first answers: the higher of that and the factuality token's "
                              "probability",
                "aggregate": "majority of the revised answers, mean revised confidence of the majority "
                             "(a tie: mean revised P(hallucinated))"}

    # -- requests ---------------------------------------------------------------------------------

    def _sampling(self, engines: "EnginePool", agent: int | None = None) -> SamplingParams:
        """The role's sampling; for a first answer (``agent`` given) sampled with the agent's own seed."""
        s = engines.settings.sampling(ROLE, SamplingParams(temperature=0.0, max_tokens=self.options.max_tokens))
        if agent is None:
            return s
        return replace(s, temperature=max(self.options.sample_temperature, 1e-3), seed=self.options.seed + agent + 1)

    def _request(self, check: Case, section: str, reply: type[StrictReply], persona: str, sampling: SamplingParams,
                 group: str, logprobs: bool = False, avoid: str = "", **extra) -> Request:
        p = load_prompts("collab")
        question, noun = check.claim.question, self._noun(check)
        user = (load_prompts("verifiers")["shared"].render(evidence=passages(check.claim, check.evidence),
                                                           question=question, text=under_check(check.claim))
                + "\n\n" + p[section]["task"].render(persona=persona, question=question, noun=noun, **extra))
        return Request(
            messages=({"role": "system", "content": p[section]["system"].render()}, {"role": "user", "content": user}),
            schema=reply_schema(reply),
            sampling=sampling,
            logprobs=logprobs,
            tag=f"{self.name}:{section}",
            # the n-gram ban guards the reply itself and the earlier steps' words shown, never the evidence
            avoid=avoid,
            quote=quotable(check.claim, check.evidence) if avoid else None,
            # a step's calls about one claim share system prompt, evidence and claim; the persona comes after
            prefix_group=f"{group}:{section}",
        )

    @staticmethod
    def _stance(hallucinated: bool, noun: str) -> str:
        return f"the {noun} is not factual" if hallucinated else f"the {noun} is factual"

    # -- the run ----------------------------------------------------------------------------------

    def verify(self, checks, engines, on_verdict=None, on_call=None) -> list[Verdict]:
        t0 = time.perf_counter()
        cost = Cost(claims=len(checks))
        self.costs = {self.name: cost}
        if not checks:
            return []
        engine = engines.engine_for(ROLE)
        personas = [p["line"] for p in self.personas()]
        calls = [0] * len(checks)
        groups = self.prefix_groups(len(checks))  # one per claim; each step adds its name

        def step(requests: list[tuple[int, Request]]) -> list[Result]:
            """One generate call for every claim's requests of this step."""
            if not requests:
                return []
            results = engine.generate([r for _, r in requests])
            engine.release(sorted({r.prefix_group for _, r in requests}))
            cost.add_results(results)
            for i, _ in requests:
                calls[i] += 1
                if on_call is not None:
                    on_call(calls[i])
            return results

        turns: list[list[Turn]] = [[] for _ in checks]
        agents: list[list[_Agent]] = [[] for _ in checks]
        errors: list[str | None] = [None] * len(checks)

        # S0: every agent's first answer and confidence, sampled with its own seed
        first = [(i, a) for i in range(len(checks)) for a in range(self.agents)]
        results = step([(i, self._request(checks[i], "answer", AnswerReply, personas[a], self._sampling(engines, a),
                                          groups[i], logprobs=True)) for i, a in first])
        for (i, a), res in zip(first, results):
            reply, err = read_reply(res, AnswerReply)
            if reply is None:
                errors[i] = errors[i] or err
                turns[i].append(self._turn("S0", res, error=err or "no valid reply"))
                continue
            hallucinated = not reply.factuality
            c = first_confidence(reply.confidence, value_token_prob(res, "factuality"))
            agents[i].append(_Agent(a, hallucinated, c, reply.reasoning))
            turns[i].append(self._turn("S0", res, reply.reasoning, hallucinated, p_hallucinated_of(hallucinated, c)))

        # S1: one argument per stance where both stances have members (the first agent of each argues)
        split = {i for i in range(len(checks)) if len({g.hallucinated for g in agents[i]}) == 2}
        arguers = [(i, next(g for g in agents[i] if g.hallucinated is h)) for i in sorted(split) for h in (True, False)]
        arguments: dict[tuple[int, bool], str] = {}
        results = step([(i, self._request(
            checks[i], "argue", ArgumentReply, "", self._sampling(engines), groups[i],
            stance=self._stance(g.hallucinated, self._noun(checks[i])))) for i, g in arguers])
        for (i, g), res in zip(arguers, results):
            reply, err = read_reply(res, ArgumentReply)
            if reply is None:  # the stance is represented by its arguer's first reasoning
                arguments[(i, g.hallucinated)] = g.reasoning
                turns[i].append(self._turn("S1", res, error=err or "no valid reply"))
                continue
            arguments[(i, g.hallucinated)] = reply.argument
            turns[i].append(self._turn("S1", res, reply.argument, g.hallucinated,
                                       p_hallucinated_of(g.hallucinated, g.confidence)))

        # S2: every agent rates the opposing argument (if any) and revises its answer and confidence
        revisions = [(i, g) for i in range(len(checks)) for g in agents[i]]
        reqs = []
        for i, g in revisions:
            noun, group = self._noun(checks[i]), agents[i]
            common = dict(stance=self._stance(g.hallucinated, noun), reasoning=g.reasoning,
                          confidence=round(100 * g.confidence))
            if i in split:
                against, supporting = arguments[(i, not g.hallucinated)], arguments[(i, g.hallucinated)]
                same = sum(o.hallucinated is g.hallucinated for o in group)
                reqs.append((i, self._request(
                    checks[i], "revise", RevisionReply, personas[g.index], self._sampling(engines), groups[i],
                    avoid="\n".join((g.reasoning, against, supporting)), against=against, supporting=supporting,
                    n_against=len(group) - same, n_for=same - 1, n=len(group), **common)))
            else:
                reqs.append((i, self._request(checks[i], "consensus", ConsensusReply, personas[g.index],
                                              self._sampling(engines), groups[i], avoid=g.reasoning,
                                              others=len(group) - 1, **common)))
        results = step(reqs)
        for (i, g), res in zip(revisions, results):
            reply, err = read_reply(res, RevisionReply if i in split else ConsensusReply)
            if reply is None:
                turns[i].append(self._turn("S2", res, error=err or "no valid reply"))
                continue
            hallucinated, c = not reply.factuality, reply.confidence / 100.0
            g.final = (hallucinated, c)
            opinion = reply.rationale
            if isinstance(reply, RevisionReply):
                opinion += (f" (opposing argument rated: logic {reply.logic}, facts {reply.facts}, clarity "
                            f"{reply.clarity}, conciseness {reply.conciseness})")
            turns[i].append(self._turn("S2", res, opinion, hallucinated, p_hallucinated_of(hallucinated, c)))

        out = []
        for i in range(len(checks)):
            group = agents[i]
            if not group:
                v = Verdict(None, None, 0.0, chain=turns[i], rounds=1, verifier=self.name,
                            error=f"no agent gave a valid answer ({errors[i] or 'no valid reply'})")
            else:
                votes = [g.final for g in group if g.final is not None]
                p = aggregate(votes or [(g.hallucinated, g.confidence) for g in group])
                hallucinated = p >= THRESHOLD
                v = Verdict(factuality=not hallucinated, error_severity=None,
                            confidence=p if hallucinated else 1.0 - p, chain=turns[i],
                            rounds=3 if i in split else 2, consensus=len({h for h, _ in votes}) == 1,
                            p_hallucinated=p, verifier=self.name)
            out.append(v)
            if on_verdict is not None:
                on_verdict(i, v)
        cost.wall_s = time.perf_counter() - t0
        return out

    @staticmethod
    def _noun(check: Case) -> str:
        return "answer" if check.claim.question else "text"

    def _turn(self, state: str, result: Result, opinion: str | None = None, hallucinated: bool | None = None,
              p_hallucinated: float | None = None, error: str | None = None) -> Turn:
        """One agent's turn: its words, its answer, P(factual), its tokens; an invalid reply's raw text."""
        if error is not None:
            opinion, hallucinated, p_hallucinated = result.text[:2000], None, None
        return Turn(state=state, role="initial", opinion=opinion or "",
                    factuality=None if hallucinated is None else not hallucinated, error_severity=None, error=error,
                    prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens,
                    cached_tokens=result.cached_tokens, latency_s=result.latency_s,
                    p_factual=None if p_hallucinated is None else 1.0 - p_hallucinated, capped=result.capped,
                    verifier=self.name)


__all__ = ["AnswerReply", "ArgumentReply", "CollabCal", "ConsensusReply", "RevisionReply", "aggregate",
           "first_confidence", "p_hallucinated_of"]
