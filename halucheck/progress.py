"""What `halucheck run` shows while it works: the progress bars of its stages and the verify bar's estimate.

The pipeline (:mod:`halucheck.pipeline`) orders the stages; this module keeps their bookkeeping for people:
the verify bar counts LLM calls (the first minutes of a run are calls, not finished claims), its total is
raised as the claims show what they cost, and a note says how many claims are decided and how many prompts
the engines have begun to read.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Callable, Sequence

from halucheck.records import Case, Verdict

Progress = Callable[..., object]  # tqdm-like factory: progress(total=, desc=) -> bar with total, n, update(),
#                                   refresh(), set_postfix_str() and close()

TICK_S = 2.0  # how often the verify bar's note is refreshed while no reply has come back


class Ticker:
    """Calls ``tick`` every :data:`TICK_S` seconds on a daemon thread while the ``with`` block runs."""

    def __init__(self, tick: Callable[[], object]) -> None:
        self.tick, self.stop = tick, threading.Event()
        self.thread = threading.Thread(target=self.run, name="halucheck-progress", daemon=True)

    def run(self) -> None:
        while not self.stop.wait(TICK_S):
            self.tick()

    def __enter__(self) -> "Ticker":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


class NullBar:
    """A bar that shows nothing (no progress factory given)."""

    total = n = 0

    def update(self, n=1): ...
    def refresh(self): ...
    def close(self): ...
    def set_postfix_str(self, s): ...


def null_progress(**_) -> NullBar:
    return NullBar()


class VerifyProgress:
    """The verify bar over ``checks`` (the unique claims to verify; ``claims``: how many claims they stand for).

    One step per LLM call. The total is the calls every claim needs at least, raised as claims (debates) go on
    past their minimum, and once claims finish, for each claim still to come the calls the finished claims of
    its kind took on average (so the bar's ETA counts the debates' extra turns before they happen, and a run
    that mixes a calculation, which costs no call, with code, which costs several, projects each by its own);
    at the end, the calls made. A CPU engine reads a batch of long prompts for minutes before its first reply:
    the note says how many it has begun (admitted to the decode loop) meanwhile, so a run that works is seen
    to work. Use as a context manager: the note is refreshed every :data:`TICK_S` seconds inside it."""

    def __init__(self, progress: Progress, verifier, engines, checks: Sequence[Case], claims: int) -> None:
        self.verifier, self.engines, self.claims = verifier, engines, claims
        self.least = verifier.least_calls()
        self.floor = verifier.expected_calls(checks)
        self.bar = progress(total=self.floor, desc=f"{verifier.name[:9]:<9}", unit="call")
        self.decided = 0
        # per claim kind: the calls one such claim costs at least, the claims still to finish, and the claims
        # finished with the calls they took (a tool check's trace is one turn for several calls: its minimum at least)
        self.least_of = {k: verifier.expected_calls([c]) for k, c in {c.claim.kind: c for c in checks}.items()}
        self.waiting = Counter(c.claim.kind for c in checks)
        self.finished: dict[str, list[int]] = {k: [0, 0] for k in self.least_of}
        self.started = engines.prompts_started()
        self.ticker = Ticker(self.note)

    def __enter__(self) -> "VerifyProgress":
        self.ticker.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.ticker.__exit__(*exc)

    def set_total(self) -> None:
        spent = sum(calls for _, calls in self.finished.values())
        ahead = sum(self.waiting[k] * max(self.least_of[k], self.finished[k][1] / self.finished[k][0]
                                          if self.finished[k][0] else 0) for k in self.least_of)
        self.bar.total = max(self.floor, round(spent + ahead), self.bar.n)
        self.bar.refresh()

    def note(self) -> None:
        """The bar's note: claims decided, and the prompts the engines have begun to read."""
        now, base = self.engines.prompts_started(), self.started or 0  # no engine made yet: it counts from 0
        begun = f", {now - base} prompts begun" if now is not None and now > base else ""
        self.bar.set_postfix_str(f"{self.decided}/{self.claims} claims{begun}")

    def on_call(self, calls: int) -> None:
        """A call was made for a claim, its ``calls``-th."""
        if calls > self.least:
            self.floor += 1
            self.set_total()
        self.bar.update(1)

    def on_verdict(self, check: Case, verdict: Verdict) -> None:
        """``check`` is decided: its kind's cost is known better."""
        kind = check.claim.kind
        self.waiting[kind] -= 1
        self.finished[kind][0] += 1
        calls = sum(1 for t in verdict.chain if t.prompt_tokens or t.completion_tokens)
        self.finished[kind][1] += max(self.least_of[kind], calls)
        self.set_total()

    def stored(self, claims: int) -> None:
        """``claims`` more verdicts are written."""
        self.decided += claims
        self.note()

    def close(self) -> None:
        self.bar.total = self.bar.n
        self.bar.refresh()
        self.bar.close()


__all__ = ["NullBar", "Progress", "TICK_S", "Ticker", "VerifyProgress", "null_progress"]
