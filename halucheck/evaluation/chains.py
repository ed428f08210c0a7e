"""What a debate's chains look like, measured from the turns kept beside each prediction: whether the
agents debated or copied, looped or ran out of tokens, and whether changing the first opinion helped.

Definitions (per dataset, over the items the debate decided):

- ``copy_rate``: turns after the first whose word 4-grams are >= 60 % contained in the 4-grams of one
  earlier turn's opinion (in the same chain);
- ``copy_rate_beyond_claim``: the same with the claim's own 4-grams left out of both sides (rows that
  carry their ``claim``): two agents that restate the claim while citing the same passage are not
  copying each other, yet "Passage 1 states that Obama served two terms from 2009 to 2017" after "Passage
  1 explicitly states that Obama served two terms from 2009 to 2017" counts under ``copy_rate``;
- ``loop_rate``: turns with a sentence of >= 6 words that occurs twice in the same opinion;
- ``cap_rate``: turns whose reply stopped at max_tokens (on any attempt);
- ``flips_right`` / ``flips_wrong``: debates whose final verdict differs from the initial agent's (S0),
  and whether the final one then matches the label or not;
- ``flips``: the same split by direction, ``to_hallucinated`` (the first agent said factual) and
  ``to_factual``, each ``{"right": n, "wrong": n}``;
- ``quotes`` / ``verified_quote_share``: quotes the Trust and Skeptic stances gave, and the share of them
  that passed their check; ``stances`` / ``void_share``: stances, and the share with no verified quote;
- ``leader_calls`` / ``walkovers``: Leader calls made, and rounds decided without one (a void attack, or a defence with no valid reply);
  ``leader_order_agreement``: with the Leader asked in both orders, the share of rounds whose two calls
  named the same winner (its position bias: 1.0 = none);
- ``completion_tokens_per_turn``: mean reply length in tokens; ``repaired``: turns whose severity was
  mended to agree with their verdict.

Only the words an agent wrote count: the fixed phrases the report adds around a reply (see
``halucheck.verifiers.debate.agents.agent_words``) are left out, so two Leaders siding with the same agent are not
a copy.
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

from halucheck.text import sentences

COPY_NGRAM = 4
COPY_SHARE = 0.6
LOOP_WORDS = 6

_WORD = re.compile(r"[\w']+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def ngrams(text: str, n: int = COPY_NGRAM) -> set[tuple[str, ...]]:
    w = _words(text)
    return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}


def is_copy(opinion: str, earlier: Sequence[str], n: int = COPY_NGRAM, share: float = COPY_SHARE,
            ignore: set[tuple[str, ...]] = frozenset()) -> bool:
    """True when >= ``share`` of ``opinion``'s word n-grams (less ``ignore``) are in one of the ``earlier``
    opinions."""
    mine = ngrams(opinion, n) - ignore
    if not mine:
        return False
    return any(len(mine & ngrams(e, n)) >= share * len(mine) for e in earlier)


def has_loop(opinion: str, min_words: int = LOOP_WORDS) -> bool:
    """True when a sentence of >= ``min_words`` words occurs twice in ``opinion``."""
    seen = set()
    for sentence in sentences(opinion):
        w = tuple(_words(sentence))
        if len(w) < min_words:
            continue
        if w in seen:
            return True
        seen.add(w)
    return False


def chain_stats(rows: Sequence[Mapping]) -> dict | None:
    """The measures above for prediction rows (``predictions.jsonl``) that carry a debate chain;
    None when no row does."""
    turns = copies = after_first = loops = capped = repaired = tokens = 0
    own_copies = own_after = 0
    decided = flips_right = flips_wrong = 0
    flips = {"to_hallucinated": {"right": 0, "wrong": 0}, "to_factual": {"right": 0, "wrong": 0}}
    quotes = verified = stances = void = leader_calls = walkovers = 0
    paired = agreed = 0
    for r in rows:
        # the debate's own turns (a single-agent verifier's turn, or a cascade's earlier stages, name theirs)
        chain = [t for t in (r.get("detail") or {}).get("chain") or [] if t.get("verifier", "debate") == "debate"]
        if not chain:
            continue
        texts: list[str] = []
        claim = ngrams(r["claim"]) if r.get("claim") else None
        for i, t in enumerate(chain):
            turns += 1
            capped += bool(t.get("capped"))
            repaired += bool(t.get("repaired"))
            tokens += int(t.get("completion_tokens") or 0)
            if t.get("role") in ("trust", "skeptic") and "quotes" in t:
                stances += 1
                void += bool(t.get("void"))
                quotes += len(t["quotes"])
                verified += sum(bool(q.get("verified")) for q in t["quotes"])
            if t.get("role") == "leader" and t.get("winner"):
                if t.get("p_factual") is None:
                    walkovers += 1
                else:
                    leader_calls += 1
                    before = chain[i - 1] if i else {}
                    if before.get("role") == "leader" and before.get("p_factual") is not None and before.get("winner"):
                        paired += 1  # the same round's Leader in the other order
                        agreed += before["winner"] == t["winner"]
            if t.get("factuality") is None:  # an error turn has no opinion of its own
                continue
            text = t.get("opinion") or ""
            if i > 0:
                after_first += 1
                copies += is_copy(text, texts)
                if claim is not None:
                    own_after += 1
                    own_copies += is_copy(text, texts, ignore=claim)
            loops += has_loop(text)
            texts.append(text)
        first = chain[0]
        if r.get("prediction") is None or first.get("factuality") is None:
            continue
        decided += 1
        if (not first["factuality"]) != bool(r["prediction"]):
            right = bool(r["prediction"]) == bool(r["label"])
            flips_right += right
            flips_wrong += not right
            flips["to_hallucinated" if r["prediction"] else "to_factual"]["right" if right else "wrong"] += 1
    if not turns:
        return None
    return {
        "debates": decided,
        "turns": turns,
        "copy_rate": round(copies / after_first, 4) if after_first else 0.0,
        **({"copy_rate_beyond_claim": round(own_copies / own_after, 4)} if own_after else {}),
        "loop_rate": round(loops / turns, 4),
        "cap_rate": round(capped / turns, 4),
        "flips_right": flips_right,
        "flips_wrong": flips_wrong,
        "flips": flips,
        **({"quotes": quotes, "verified_quote_share": round(verified / quotes, 4) if quotes else 0.0,
            "stances": stances, "void_share": round(void / stances, 4),
            "leader_calls": leader_calls, "walkovers": walkovers} if stances else {}),
        **({"leader_order_agreement": round(agreed / paired, 4), "leader_order_pairs": paired} if paired else {}),
        "completion_tokens_per_turn": round(tokens / turns, 1),
        "repaired": repaired,
    }


__all__ = ["chain_stats", "has_loop", "is_copy", "ngrams"]
