"""Upper bounds of the sizes a command takes, far above the paper's (100 rounds of 3 episodes, 1,000
matches, 100 repeats, 10 generations of 10 copies): a typo such as ``--rounds 99999999999`` is one
sentence naming the limit, not a run that starts and never ends."""

from __future__ import annotations

from sumo_cli.errors import UserError

LIMITS = {
    "--rounds": 10_000,
    "--episodes": 1_000,
    "--matches": 1_000_000,
    "--repeats": 100_000,
    "--generations": 10_000,
    "--copies": 1_000,
}


def check_at_most(value: int, what: str) -> None:
    limit = LIMITS.get(what)
    if limit is not None and value > limit:
        raise UserError(f"{what} must be at most {limit:,}, got {value:,}")
