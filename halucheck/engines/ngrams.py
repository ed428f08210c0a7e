"""The n-gram ban behind ``no_repeat_ngram_size``: never continue an n-gram that the prompt or the reply
already holds. One implementation for the engines that apply it (transformers, and vLLM through the
logits processor in ``vllm_ngram.py``).

The ban is applied only where the reply is free text: where the schema leaves at least
``FREE_TEXT_MIN_TOKENS`` tokens possible (inside a JSON string). Where it leaves a few (a boolean, a
severity digit, a key) it never applies, so it shapes the prose and never tips a verdict; and it never
bans every token the schema allows.

A request may also name text the reply is free to quote (``Request.quote``: in a debate the claim and the
passages' names and numbers): a token of that text is never banned for repeating the prompt's n-grams (another agent's
words), only for repeating the reply's own. Without it an agent that must not repeat another agent's
sentence could not name what the claim names either, and small models then dodge the ban by gluing or
bending words ("inParis", "EiffelTower", "is in French"). A reply still cannot loop, even on evidence.
"""

from __future__ import annotations

from typing import Iterable

FREE_TEXT_MIN_TOKENS = 1000


class NGramBan:
    """The (n-1)-gram -> next-token index of one request's tokens, kept up to date as the reply grows:
    one index for the prompt's n-grams and one for those that end in the reply."""

    def __init__(self, n: int, prompt: Iterable[int] = (), quote: Iterable[int] = ()) -> None:
        self.n = int(n)
        self.history: list[int] = []
        self.prompt_next: dict[tuple[int, ...], set[int]] = {}
        self.next: dict[tuple[int, ...], set[int]] = {}
        self.quotable = frozenset(int(t) for t in quote)
        self._index(prompt, self.prompt_next)

    def _index(self, tokens: Iterable[int], into: dict[tuple[int, ...], set[int]]) -> None:
        for tok in tokens:
            self.history.append(int(tok))
            if len(self.history) >= self.n:
                gram = self.history[-self.n:]
                into.setdefault(tuple(gram[:-1]), set()).add(gram[-1])

    def extend(self, tokens: Iterable[int]) -> None:
        """Add reply tokens."""
        self._index(tokens, self.next)

    def banned(self) -> set[int]:
        """Tokens that would repeat an n-gram if they came next."""
        if self.n < 1 or len(self.history) < self.n - 1:
            return set()
        context = tuple(self.history[len(self.history) - self.n + 1:])
        return self.next.get(context, set()) | (self.prompt_next.get(context, set()) - self.quotable)

    def apply(self, row, allowed=None) -> None:
        """Set the banned tokens of ``row`` (one row of logits) to -inf, in place, unless that would leave
        no token the schema allows (``allowed``: a boolean mask, or None for "every finite logit")."""
        import torch

        banned = self.banned()
        if not banned:
            return
        idx = torch.tensor(sorted(banned), dtype=torch.long)
        idx = idx[idx < row.shape[0]]
        still = torch.isfinite(row) if allowed is None else (allowed & torch.isfinite(row))
        still = still.clone()
        still[idx] = False
        if bool(still.any()):
            row[idx] = float("-inf")


def free_text(row) -> bool:
    """True when a row of logits (after the schema's mask) leaves free text: many tokens possible."""
    import torch

    return int(torch.isfinite(row).sum()) >= FREE_TEXT_MIN_TOKENS
