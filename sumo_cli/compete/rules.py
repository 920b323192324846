"""The rules of the iterated adaptation game (paper, Sec. 4.2), free of simulation.

A round is won by the agent that wins more of its episodes (equal counts: a drawn round). The game
is won by the agent whose round wins exceed the other's by at least 5% of the rounds played;
otherwise it is a draw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: The game's margin: round wins must exceed the other's by this share of the rounds played.
GAME_MARGIN = 0.05


def round_outcome(wins_a: int, wins_b: int) -> str:
    """'a', 'b' or 'draw' from the episode wins of one round."""
    if wins_a > wins_b:
        return "a"
    if wins_b > wins_a:
        return "b"
    return "draw"


def game_outcome(rounds_a: int, rounds_b: int, rounds_played: int, margin: float = GAME_MARGIN) -> str:
    """'a', 'b' or 'draw': a side wins when its round wins exceed the other's by >= margin * played."""
    if rounds_played <= 0:
        raise ValueError("a game needs at least one round")
    need = margin * rounds_played
    # Compare in integers where possible to avoid 0.05 * 100 = 5.000000000000001 surprises.
    diff = rounds_a - rounds_b
    if diff > 0 and diff >= need - 1e-9:
        return "a"
    if diff < 0 and -diff >= need - 1e-9:
        return "b"
    return "draw"


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float


def wilson_interval(successes: float, trials: int, z: float = 1.959963984540054) -> Interval:
    """Wilson score interval for a proportion (well-behaved at 0 and 1, unlike the normal one)."""
    if trials <= 0:
        return Interval(float("nan"), float("nan"), float("nan"))
    p = successes / trials
    denom = 1.0 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    low = 0.0 if successes <= 0 else max(0.0, centre - half)
    high = 1.0 if successes >= trials else min(1.0, centre + half)
    return Interval(p, low, high)
