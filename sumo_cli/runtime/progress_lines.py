"""Progress for a log: when stderr is not a terminal (``sumo train ... 2>log``, a batch job), a
long command writes plain lines at a steady pace instead of a live bar, which a log cannot show.

One line per step of work (an iteration, a game) but at most one per ``every_s`` seconds, and
always the first and the last: what is done of what, the rate, and the time left at the rate of
this session so far."""

from __future__ import annotations

import time
from typing import Callable

from sumo_cli.runtime.estimate import duration

#: Seconds between two progress lines in a log at most (a line per step when steps are slower).
EVERY_S = 30.0


class ProgressLines:
    """Plain progress lines for ``total`` steps of work (``done`` of them before this session).
    ``say`` prints a line; it is called only when ``enabled`` (stderr not a terminal, no ``--json``)."""

    def __init__(self, what: str, total: int, done: int, say: Callable[[str], None], enabled: bool,
                 every_s: float = EVERY_S, clock: Callable[[], float] = time.monotonic):
        self.what, self.total, self.start_done = what, total, done
        self.say, self.enabled, self.every_s, self.clock = say, enabled, every_s, clock
        self.started = clock()
        self._last = None
        self._step_s: list[float] = []  # the seconds of each step of this session, where the caller knows them

    def step_took(self, seconds: float) -> None:
        """The step just finished took ``seconds`` (its own time, without the session's start-up)."""
        self._step_s.append(seconds)

    def seconds_left(self, done: int) -> float | None:
        """The time the steps left take at this session's rate so far (the mean step time where
        :meth:`step_took` reported them, else the time since the start per step); None before the
        session's first step."""
        ran = done - self.start_done
        if ran <= 0:
            return None
        per_step = sum(self._step_s) / len(self._step_s) if self._step_s else (self.clock() - self.started) / ran
        return per_step * max(0, self.total - done)

    def update(self, done: int, detail: str = "", left: float | None = None) -> None:
        """``done`` steps of ``total`` are finished; ``detail`` goes on the line; ``left`` (seconds)
        replaces the estimate when the caller knows better (a tournament's game-rounds)."""
        if not self.enabled:
            return
        now = self.clock()
        last = done >= self.total
        if self._last is not None and now - self._last < self.every_s and not last:
            return
        self._last = now
        left = self.seconds_left(done) if left is None else left
        eta = "-" if left is None else duration(left)
        share = f" ({done / self.total:.0%})" if self.total else ""
        extra = f", {detail}" if detail else ""
        self.say(f"{self.what} {done}/{self.total}{share}{extra}, {duration(now - self.started)} so far, "
                 f"{eta} left")

