"""Small pieces of the words the commands print: counts with their noun in the right number, and
what "a draw" means where a game's result is printed."""

from __future__ import annotations

import math


def count(n: int, noun: str) -> str:
    """``1 worker``, ``2 workers``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def draw_text(rounds_played: int) -> str:
    """A drawn game's verdict with the rule that made it one: a 52-48 game of 100 rounds is a draw."""
    from sumo_cli.compete.rules import GAME_MARGIN

    need = max(1, math.ceil(GAME_MARGIN * rounds_played - 1e-9))
    return (f"a draw (a game is won by at least {need} more rounds won than the other side, "
            f"{GAME_MARGIN:.0%} of the {rounds_played} played)")
