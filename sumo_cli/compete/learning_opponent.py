"""The versions a learning opponent plays in `sumo play A B --opponent-learning`, round by round.

Where B has every version from its start on for the whole game, B's version grows by one every
round (the paper: one PPO iteration a round). Where it does not (a shipped agent keeps a few of its
versions), B steps through the versions it has, as `sumo experiment adaptation` does
(:func:`opponent_versions`): round r of R plays the highest stored version
not above a target that moves linearly from the start to B's highest version. The start is the
version the user named (``B@V`` or ``--start-version``), else the experiment's (0.35 of the highest,
the paper's 700 of ~2,000). A B with one stored version, or a start at its highest, cannot learn over
the game and is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from sumo_cli.errors import UserError

#: Where the learning opponent starts, as a share of its highest version (paper: 700 of ~2,000).
START_FRACTION = 0.35


def opponent_versions(stored: list[int], rounds: int, start_fraction: float = START_FRACTION) -> list[int]:
    """The version the learning opponent plays in each round: the highest stored version not above a
    target moving linearly from ``start_fraction`` of the highest version to the highest."""
    vs = sorted(stored)
    top = vs[-1]
    out = []
    for r in range(rounds):
        target = start_fraction * top + (top - start_fraction * top) * (r / (rounds - 1) if rounds > 1 else 1.0)
        below = [v for v in vs if v <= target + 1e-9]
        out.append(below[-1] if below else vs[0])
    return out


@dataclass
class LearningSchedule:
    versions: list[int]  # one per round
    note: str | None  # one line for the user when the versions are not consecutive


def _ranges(vs: list[int]) -> str:
    """``[8, 16, 24]`` -> ``"8, 16, 24"``; a long list as first, second, ..., last."""
    return ", ".join(map(str, vs)) if len(vs) <= 6 else f"{vs[0]}, {vs[1]}, ..., {vs[-1]}"


def learning_schedule(agent: str, stored: list[int], start: int, start_named: bool, rounds: int) -> LearningSchedule:
    """B's version in each of ``rounds`` rounds (module docstring). ``start``: the version named or
    B's default; ``start_named``: whether the user named it. Raises UserError (one sentence) when B
    cannot learn over the game."""
    have = sorted(set(stored))
    if len(have) < 2:
        raise UserError(f"--opponent-learning needs an opponent with several stored versions; {agent} has only "
                        f"version {have[0] if have else 'none'}, so it would play the same weights every round")
    need = list(range(start, start + rounds))
    if set(need) <= set(have):
        return LearningSchedule(need, None)
    top = have[-1]
    first = start if start_named else START_FRACTION * top
    if first >= top:
        raise UserError(f"--opponent-learning from {agent}@{start}: no stored version lies above it (its highest is "
                        f"{top}), so it has nothing to learn over the game; start lower with --start-version (it has "
                        f"{_ranges(have)})")
    versions = opponent_versions(have, rounds, first / top)
    met = sorted(set(versions))
    note = (f"{agent} does not have versions {need[0]}..{need[-1]} (it has {_ranges(have)}), so it steps through "
            f"its stored ones as `sumo experiment adaptation` does: each round the highest stored version not above "
            f"a target moving from {first:g} to {top} over {rounds} rounds, meeting {len(met)} versions "
            f"({_ranges(met)})")
    return LearningSchedule(versions, note)
