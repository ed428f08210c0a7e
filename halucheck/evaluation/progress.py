"""One progress line for long measuring runs (`eval`, `train`): done of total, rate, time left, rewritten in place
on standard error (a new line every minute when it is not a terminal, so a log keeps a trace)."""

from __future__ import annotations

import sys
import time


class Progress:
    """``progress(done, total)`` after each unit of work; work found done before the first call (read from a store)
    does not count towards the rate."""

    def __init__(self, label: str, unit: str = "prompt passes", stream=None) -> None:
        self.label, self.unit = label, unit
        self.stream = stream or sys.stderr
        self.tty = getattr(self.stream, "isatty", lambda: False)()
        self.t0 = time.perf_counter()
        self.first: int | None = None
        self.last = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.perf_counter()
        if self.first is None:
            self.first, self.t0 = done, now
        finished = done >= total
        if now - self.last < (2 if self.tty else 60) and not finished and done != self.first:
            return
        self.last = now
        new = done - self.first
        rate = new / (now - self.t0) if new and now > self.t0 else 0.0
        eta = f", about {(total - done) / rate / 60:.0f} min left" if rate and not finished else ""
        before = f", {self.first} stored before" if self.first else ""
        line = f"{self.label}: {done}/{total} {self.unit}{before}{eta}"
        self.stream.write(("\r" + line + "   " + ("\n" if finished else "")) if self.tty else line + "\n")
        self.stream.flush()


__all__ = ["Progress"]
