"""Paired games: one meta-learner played with each execution-time rule of its meta-update, and
without adapting (``none``), on the same seeds against the same learning opponent.

Every game of a seed uses the same bout starts and the same opponent versions, so the difference in
rounds won between a rule and ``none`` is a paired measurement of what the update does in games
(issue "meta adapts": adapted minus unadapted). The opponent steps through its stored versions as in
``sumo experiment adaptation`` (from 0.35 K to K over the game).

    python -m benchmarks.meta_execution_probe --db DB --agent ant-meta --opponent bug-lstm \
        --rules none,continue,paper:75,paper:6 --rounds 50 --seeds 6 --out result.json

A rule is ``continue`` (one learnt step per round from the current parameters: the default before
this probe), ``paper:B`` (Algorithm 2: every round phi = the learnt steps from theta on the last B
episodes, importance-weighted) or ``none``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from pathlib import Path

import numpy as np


def parse_rule(text: str) -> tuple[str, int | None]:
    kind, _, size = text.partition(":")
    if kind not in ("none", "continue", "paper"):
        raise SystemExit(f"unknown rule {text!r}: none, continue or paper:B")
    return kind, (int(size) if size else None)


def play(a, bs, rounds: int, seed: int, rule: tuple[str, int | None]) -> list[float]:
    """Per round of one game played with ``rule``: 1 where A won the round, else 0."""
    from sumo_cli.compete.game import GameSettings, play_game
    from sumo_cli.adapt import meta_execution

    kind, size = rule
    a = dataclasses.replace(a, strategy="none" if kind == "none" else "meta")
    original = meta_execution.config_of

    def config_of(player, cfg=None):  # noqa: ANN001, ANN202 - the rule under test replaces the default
        base = original(player, cfg)
        return base.replace(execution=kind, buffer_episodes=size or base.buffer_episodes)

    meta_execution.config_of = config_of
    try:
        result = play_game(a, bs, GameSettings(rounds=rounds, episodes=3, physics="faithful", threads=1), seed)
    finally:
        meta_execution.config_of = original
    return [float(r.outcome == "a") for r in result.rounds]


def mean_ci(xs: list[float]) -> tuple[float, float]:
    x = np.asarray(xs, dtype=float)
    if len(x) < 2:
        return float(x.mean()), float("nan")
    return float(x.mean()), float(1.96 * x.std(ddof=1) / math.sqrt(len(x)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--agent", required=True)
    ap.add_argument("--opponent", required=True)
    ap.add_argument("--rules", default="none,continue,paper:75,paper:6")
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--seeds", type=int, default=6)
    ap.add_argument("--seed0", type=int, default=9100)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    import torch

    from sumo_cli.compete.experiment import stored_versions
    from sumo_cli.compete.learning_opponent import opponent_versions
    from sumo_cli.compete.game import AgentData
    from sumo_cli.store.library import load_agent
    from sumo_cli.store.database import open_database

    torch.set_num_threads(1)
    db = open_database(args.db)
    rules = [parse_rule(r) for r in args.rules.split(",")]
    a = AgentData.from_loaded(load_agent(db, args.agent))
    opp_name = args.opponent.split("@")[0]
    versions = opponent_versions(stored_versions(db, opp_name), args.rounds)
    cache = {v: AgentData.from_loaded(load_agent(db, f"{opp_name}@{v}")) for v in sorted(set(versions))}
    bs = [cache[v] for v in versions]
    per_rule: dict[str, list[list[float]]] = {r: [] for r in args.rules.split(",")}
    t0 = time.time()
    for i in range(args.seeds):
        seed = args.seed0 + i
        for text, rule in zip(args.rules.split(","), rules):
            per_rule[text].append(play(a, bs, args.rounds, seed, rule))
            print(f"seed {seed} {text}: {100 * np.mean(per_rule[text][-1]):.1f}% of rounds ({time.time() - t0:.0f} s)",
                  flush=True)
    base = args.rules.split(",")[0]
    summary = {}
    q = max(1, args.rounds // 4)
    for text, games in per_rule.items():
        wins = [100 * float(np.mean(g)) for g in games]
        diff = [w - 100 * float(np.mean(b)) for w, b in zip(wins, per_rule[base])]
        trend = [100 * (float(np.mean(g[-q:])) - float(np.mean(g[:q]))) for g in games]
        summary[text] = {"won": mean_ci(wins), "minus_" + base: mean_ci(diff), "last_minus_first_quarter": mean_ci(trend)}
        print(f"{text:>12}: won {summary[text]['won'][0]:.1f}%, minus {base} {mean_ci(diff)[0]:+.1f} +- {mean_ci(diff)[1]:.1f}"
              f", last quarter minus first {mean_ci(trend)[0]:+.1f} +- {mean_ci(trend)[1]:.1f}")
    Path(args.out).write_text(json.dumps({"args": vars(args), "versions": versions, "summary": summary,
                                          "per_round": per_rule}, indent=1))


if __name__ == "__main__":
    main()
