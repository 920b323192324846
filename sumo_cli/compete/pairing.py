"""Pairing each adaptive player of `sumo experiment adaptation` with itself unadapted.

An agent that adapts between rounds (``track`` or ``meta``) is compared with the same weights
played without adaptation (``NAME:none``): :func:`twins_to_add` names the unadapted players a list
lacks, :func:`pairs` lists (adaptive, unadapted) player indexes, and :func:`seed_indexes` gives each
game the index whose seed it is played with, so that the games of one agent's players against the
same opponent and repeat share a seed (the same bout starts and draws): the difference in rounds
won is then paired game by game. RL^2 is a policy of its own and has no unadapted twin. A
configuration without ``"paired"`` (a run made before pairing) keeps a seed per game.
"""

from __future__ import annotations

#: The strategies that adapt between rounds and can be played without adaptation.
ADAPTIVE = ("track", "meta")


def twins_to_add(players: list[dict]) -> list[str]:
    """``NAME@V:none`` for every adaptive player whose weights are not also played unadapted."""
    plain = {p["name"] for p in players if p["strategy"] == "none"}
    out = []
    for p in players:
        if p["strategy"] in ADAPTIVE and p["name"] not in plain:
            plain.add(p["name"])
            out.append(f"{p['name']}:none")
    return out


def pairs(players: list[dict]) -> list[tuple[int, int]]:
    """(adaptive player index, unadapted player index) for every adaptive player whose weights are
    also played without adaptation."""
    plain = {p["name"]: i for i, p in enumerate(players) if p["strategy"] == "none"}
    return [(i, plain[p["name"]]) for i, p in enumerate(players) if p["strategy"] in ADAPTIVE and p["name"] in plain]


def seed_indexes(cfg: dict, games: list[dict]) -> dict[int, int]:
    """Game index -> the index whose seed it plays with (``games``: :func:`~sumo_cli.compete.experiment.layout`).
    With ``cfg["paired"]``, the first game of the same weights against the same opponent, episodes and
    repeat; else its own."""
    if not cfg.get("paired"):
        return {g["index"]: g["index"] for g in games}
    first: dict[tuple, int] = {}
    out = {}
    for g in games:
        key = (cfg["agents"][g["a"]]["name"], g["b"], g["episodes"], g["repeat"])
        out[g["index"]] = first.setdefault(key, g["index"])
    return out
