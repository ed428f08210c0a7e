"""P(hallucinated) from what a model said and how sure it was: the probability of the token that chose
a decision, and how the probabilities of several agents are combined.

Shared by the debate (each agent's turn, then the chain) and the eval's single-agent verifiers.
"""

from __future__ import annotations

import math
import re
from typing import Iterable

from halucheck.engines.base import Result
from halucheck.records import Verdict

# A turn's probability is kept inside [EPS, 1 - EPS] before pooling: one agent that reports certainty
# (a forced or near-forced token) must not veto every other agent (log-odds of 0 or 1 are infinite).
EPS = 0.02


def clamp01(x: float) -> float:
    return min(1.0, max(0.0, float(x)))


def value_token_prob(result: Result, key: str) -> float | None:
    """Probability of the token that chose the value of JSON key ``key`` in the reply, from the
    engine's per-token logprobs; None when the engine gave none or the key is not found in them.

    With constrained decoding the first token of the value decides it (the rest is forced), and for a
    two-way value its probability says how sure the model was of that choice. The position is found in
    the tokens' own text (tokens decoded one by one may differ from the reply inside the reasoning,
    e.g. a multi-byte character split over two tokens, never in the ASCII decision after it).
    """
    if not result.logprobs:
        return None
    joined = "".join(t for t, _ in result.logprobs)
    matches = list(re.finditer(r'"%s"\s*:\s*"?' % re.escape(key), joined))
    if not matches:
        return None
    pos = matches[-1].end()  # the decision comes after the reasoning: the last occurrence
    offset = 0
    for tok, lp in result.logprobs:
        if offset <= pos < offset + len(tok):
            return clamp01(math.exp(lp))
        offset += len(tok)
    return None


def decision_score(hallucinated: bool, p_chosen: float | None) -> float:
    """P(hallucinated) from a two-way decision and the probability of its token (0/1 without).

    The probability used is ``max(0.5, p_chosen)``: a greedy choice between two allowed values has at
    least 0.5 of their mass, while the chosen token may carry only part of it (the schema allows several
    spellings of one value, ``f`` / ``fa`` / ``false``, and the engines report each token's probability
    after the schema mask). The score thus never contradicts the decision; it only ranks confident
    decisions further from 0.5.
    """
    if p_chosen is None:
        return float(hallucinated)
    p = max(0.5, clamp01(p_chosen))
    return p if hallucinated else 1.0 - p


def p_hallucinated(verdict: Verdict) -> float:
    """A decided verdict's P(hallucinated): its own score, else the confidence of the side it took."""
    if verdict.p_hallucinated is not None:
        return clamp01(verdict.p_hallucinated)
    conf = clamp01(verdict.confidence)
    return 1.0 - conf if verdict.factuality else conf


def pool(probabilities: Iterable[float], eps: float = EPS) -> float | None:
    """Combine several agents' P(hallucinated) into one: the mean of their log-odds (a logarithmic
    opinion pool), each first kept inside [eps, 1 - eps]. None for no probability.

    Why log-odds: agents that are each fairly sure in the same direction give a surer pool than any
    one of them would on a linear average, one hesitant agent pulls the pool toward 0.5 without
    flipping it, and with equal weights the pool is symmetric in "hallucinated" and "factual".
    The mean (not the sum) because the agents read the same evidence with the same model: their
    errors are correlated, and summing would count the same judgement several times.
    """
    logits = [math.log(p / (1 - p)) for p in (min(1 - eps, max(eps, float(x))) for x in probabilities)]
    if not logits:
        return None
    return 1.0 / (1.0 + math.exp(-sum(logits) / len(logits)))


__all__ = ["EPS", "clamp01", "decision_score", "pool", "value_token_prob"]
