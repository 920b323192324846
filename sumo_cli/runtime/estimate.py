"""The expected duration of a tournament or an evolution, printed early and updated.

Workers report every round phase of their engines (one game-round per game in flight) while they
play, so the first estimate comes after the first round of the first games, long before any game
ends (at the paper's 100 rounds, a hundredth of a game). It is the time the game-rounds still to
play take at the rate measured so far on each worker, with every worker busy; start-up and the
last, emptier batches are not modelled, so it errs on the short side near the end.
"""

from __future__ import annotations

import time
from typing import Callable

from sumo_cli.runtime.progress import Throughput


def duration(seconds: float) -> str:
    """``2 h 05 min``, ``7 min 40 s``, ``45 s``."""
    s = max(0, round(seconds))
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    if s >= 60:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s} s"


class RunEstimate:
    """Fed with the workers' ``(game-rounds, seconds)`` reports; says the expected duration once
    the first ones arrive, then the time left after every ``every`` of the rounds to play or
    ``max_gap_s`` seconds, whichever comes first, but not within ``gap_s`` seconds of the last line
    (a log gets one line from a run of seconds, a line per 10 minutes from a run of hours)."""

    def __init__(self, rounds_to_play: int, workers: int, say: Callable[[str], None], every: float = 0.1,
                 gap_s: float = 60.0, max_gap_s: float = 600.0):
        self.total = rounds_to_play
        self.workers = workers
        self.say = say
        self.every = every
        self.gap_s = gap_s
        self.max_gap_s = max_gap_s
        self.rate = Throughput()
        self.started = time.monotonic()
        self._next = 0.0
        self._said = -gap_s

    @property
    def seconds_left(self) -> float | None:
        if not self.rate.known:
            return None
        return self.rate.seconds_for(max(0.0, self.total - self.rate.units), self.workers)

    def left_text(self) -> str:
        left = self.seconds_left
        return "-" if left is None else duration(left)

    def on_progress(self, rounds: float, seconds: float) -> None:
        first = not self.rate.known
        self.rate.add(rounds, seconds)
        now = time.monotonic()
        due = self.rate.units >= self._next or now - self._said >= self.max_gap_s
        if not self.rate.known or not due or now - self._said < self.gap_s:
            return
        self._next = self.rate.units + self.every * self.total
        self._said = now
        left = self.seconds_left
        per_round = self.rate.seconds / self.rate.units
        basis = (f"{per_round:.2f} s per game-round on each of {self.workers} worker(s), "
                 f"from the {self.rate.units:,.0f} of {self.total:,} game-rounds played so far")
        if first:
            elapsed = now - self.started
            self.say(f"expected duration: {duration(elapsed + left)}, {duration(left)} left ({basis})")
        else:
            self.say(f"estimate: {duration(left)} left ({basis})")
