"""Work done inside a job, reported to the driver while the job runs (not only when it returns).

A job calls :func:`report` with the units of work it just finished (a tournament's engine: one
game-round per game in flight, after every round phase) and the seconds they took. In a pool
worker the report goes to numbers shared with the driver, which the executor reads while it waits
for results; run in the driver itself (the inline executor) it goes straight to the callback.
Anywhere else (Ray tasks, benchmarks calling a job directly) it goes nowhere.

:class:`Throughput` turns the reports into a time estimate: work units per second of one worker,
over everything reported so far, so a worker's start-up does not count and reports may arrive
from the workers in any order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

Callback = Callable[[float, float], None]  # (units, seconds)

_shared: Any = None  # a multiprocessing Array('d', 2) [units, seconds], in pool workers
_callback: Callback | None = None  # in the driver, while the inline executor runs a job


def attach(shared: Any) -> None:
    """In a pool worker: send reports to ``shared`` (see :func:`shared_totals`)."""
    global _shared
    _shared = shared


def report(units: float, seconds: float) -> None:
    if _callback is not None:
        _callback(units, seconds)
    elif _shared is not None:
        with _shared.get_lock():
            _shared[0] += units
            _shared[1] += seconds


def shared_totals(shared: Any) -> tuple[float, float] | None:
    """The (units, seconds) reported to ``shared`` by every worker so far; None if the lock stays
    taken (a worker killed while holding it must not hang the driver)."""
    lock = shared.get_lock()
    if not lock.acquire(timeout=1.0):
        return None
    try:
        return shared[0], shared[1]
    finally:
        lock.release()


class calling:
    """``with calling(cb):`` reports made in this process go to ``cb`` (the inline executor)."""

    def __init__(self, callback: Callback | None):
        self.callback = callback

    def __enter__(self) -> None:
        global _callback
        self.previous, _callback = _callback, self.callback

    def __exit__(self, *exc: object) -> None:
        global _callback
        _callback = self.previous


@dataclass
class Throughput:
    """Units of work per second of one worker, from the reports so far."""

    units: float = 0.0
    seconds: float = 0.0

    def add(self, units: float, seconds: float) -> None:
        self.units += units
        self.seconds += seconds

    @property
    def known(self) -> bool:
        return self.units > 0 and self.seconds > 0

    def seconds_for(self, units: float, workers: int) -> float:
        """Wall-clock seconds for ``units`` more units on ``workers`` workers kept busy."""
        if not self.known:
            raise ValueError("no work measured yet")
        return units * self.seconds / self.units / max(1, workers)
