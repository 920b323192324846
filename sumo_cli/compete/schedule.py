"""Schedules derived from a seed: which games a tournament or a generation plays, with what seeds.

A run is its schedule: resuming = the schedule minus the games already written, so an interrupted
run ends exactly where an uninterrupted one would.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ScheduledGame:
    index: int
    a: int  # index into the population (tournament) or slot (evolution)
    b: int
    seed: int


def game_seed(run_seed: int, *key: int) -> int:
    """A 31-bit seed for one game, independent of every other game's."""
    return int(np.random.SeedSequence([run_seed, *key]).generate_state(1, dtype=np.uint32)[0] >> 1)


def random_pairs(n: int, count: int, seed: int, *key: int) -> list[ScheduledGame]:
    """``count`` pairs of two distinct members drawn uniformly from ``n`` (pairs may repeat)."""
    if n < 2:
        raise ValueError("a schedule needs at least two members")
    rng = np.random.default_rng(np.random.SeedSequence([seed, *key, 0x5C4ED]))
    out = []
    for i in range(count):
        a, b = rng.choice(n, size=2, replace=False)
        out.append(ScheduledGame(i, int(a), int(b), game_seed(seed, *key, i)))
    return out


def apply_generation(slots: list[int], games: list[ScheduledGame], outcomes: dict[int, str]) -> tuple[list[int], list[tuple[int, int, int]]]:
    """The evolution rule (method-notes): results are applied in schedule order; the loser's slot
    receives a copy of the winner *as it was at the generation's start*; a draw changes nothing.

    ``slots`` maps slot -> agent version id at the generation's start. Returns the next
    generation's slots and the clonings as (slot, parent_slot, game index)."""
    start = list(slots)
    nxt = list(slots)
    cloned: dict[int, tuple[int, int]] = {}
    for g in games:
        outcome = outcomes[g.index]
        if outcome == "draw":
            continue
        winner, loser = (g.a, g.b) if outcome == "a" else (g.b, g.a)
        nxt[loser] = start[winner]
        cloned[loser] = (winner, g.index)  # a later game overrides an earlier one on the same slot
    return nxt, [(slot, parent, idx) for slot, (parent, idx) in sorted(cloned.items())]
