"""How many PPO epochs tracking needs between rounds: iterated games side by side.

``python -m benchmarks.track_epochs --a ant-lstm --b zoo-ant-lstm-v3 --epochs 10,3 --games 32 --rounds 30``
plays, for each setting, the same ``games`` seeded games of A against a non-adapting B in one
engine (:func:`sumo_cli.compete.engine.play_games`): A without adaptation (``none``) and A tracking
with :data:`~sumo_cli.adapt.tracking.TRACK_CONFIG` at each number of epochs. Game g has the same seed
under every setting, so its first round is the same bouts everywhere and the settings differ only by
what tracking did. Reported per setting: A's share of bouts won over the rounds in thirds (mean over
games, 95% bootstrap interval over games), and the paired difference of each tracking setting
against the first one listed (per game, over all rounds after the first). The adaptation's CPU
share comes from the same runs: seconds of adaptation per second of physics.

A and B come from the database (``--db``): the shipped agents, or any other it holds (the zoo's,
once imported).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os

import numpy as np

from sumo_cli.compete.engine import Fixture, play_games
from sumo_cli.compete.game import AgentData, GameSettings
from sumo_cli.compete.schedule import game_seed
from sumo_cli.adapt import tracking
from sumo_cli.store.library import load_agent
from sumo_cli.store.shipped import register_shipped
from sumo_cli.store.database import Database


def _bootstrap(x: np.ndarray, seed: int = 0, n: int = 10_000) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), (n, len(x)))].mean(1)
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def play(a: AgentData, b: AgentData, games: int, rounds: int, seed: int, physics: str) -> tuple[np.ndarray, dict]:
    """A's bout wins, ``(games, rounds)`` as a share of the round's bouts, and the summed timing."""
    settings = GameSettings(rounds=rounds, episodes=3, physics=physics)
    fixtures = [Fixture(g, a, b, settings, game_seed(seed, g)) for g in range(games)]
    won = np.zeros((games, rounds))
    timing: dict[str, float] = {}
    for key, result in play_games(fixtures):
        for r in result.rounds:
            won[key, r.index] = r.wins_a / len(r.episodes)
        for k, v in result.timing.items():
            timing[k] = timing.get(k, 0.0) + v
    return won, timing


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", default=os.path.expanduser("~/.sumo/sumo.sqlite"))
    ap.add_argument("--a", required=True, help="the tracking agent")
    ap.add_argument("--b", required=True, help="its opponent (no adaptation)")
    ap.add_argument("--epochs", default="10,3", help="tracking epochs to compare, the reference first")
    ap.add_argument("--games", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--physics", default="faithful")
    ap.add_argument("--out", help="write the results as JSON here")
    args = ap.parse_args(argv)
    url = args.db if "://" in args.db else f"sqlite:///{args.db}"
    db = Database(url)
    register_shipped(db)
    a, b = (AgentData.from_loaded(load_agent(db, n)) for n in (args.a, args.b))
    b = dataclasses.replace(b, strategy="none")
    base = tracking.TRACK_CONFIG
    settings = [("none", None)] + [(f"track-{e}", int(e)) for e in args.epochs.split(",")]
    results: dict[str, dict] = {}
    per_game: dict[str, np.ndarray] = {}
    thirds = np.array_split(np.arange(args.rounds), 3)
    for name, epochs in settings:
        if epochs is not None:
            tracking.TRACK_CONFIG = dataclasses.replace(base, epochs=epochs)
        won, timing = play(dataclasses.replace(a, strategy="none" if epochs is None else "track"), b,
                           args.games, args.rounds, args.seed, args.physics)
        per_game[name] = won[:, 1:].mean(1)
        row = {"rounds": []}
        for part in thirds:
            x = won[:, part].mean(1)
            row["rounds"].append({"from": int(part[0]) + 1, "to": int(part[-1]) + 1, "won": float(x.mean()),
                                  "ci95": _bootstrap(x)})
        row["adapt_over_physics"] = timing.get("adapt", 0.0) / timing["physics"]
        results[name] = row
        print(name, json.dumps(row), flush=True)
    tracking.TRACK_CONFIG = base
    names = [n for n, e in settings if e is not None]
    for name in names[1:] + ["none"]:
        d = per_game[name] - per_game[names[0]]
        results[name]["minus_" + names[0]] = {"mean": float(d.mean()), "ci95": _bootstrap(d)}
        print(f"{name} - {names[0]}: {d.mean():+.3f} {_bootstrap(d)}", flush=True)
    doc = {"a": args.a, "b": args.b, "games": args.games, "rounds": args.rounds, "seed": args.seed,
           "physics": args.physics, "settings": results}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=2)


if __name__ == "__main__":
    main()
