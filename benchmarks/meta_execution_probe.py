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
episodes, importance-weighted), ``paper:B:S`` (the same with only the first S of the learnt steps),
``paper:B:S:IW`` (and importance weights IW: snis, truncated, raw or none), ``paper:B:S:IW:X`` (and
the learnt step sizes times X) or ``none``. ``--opponent motionless-ant`` (or ``-bug``, ``random``)
plays a body that does not learn. What the update is computed on can be set to meta-training's:
``--reward trained`` (the shaped training reward of the agent's run at its version, in place of the
faithful reward games adapt on), ``--bptt 10`` (the recurrent state detached every 10 steps, as the
training's inner steps did, in place of full backpropagation), ``--physics fast``; ``--episodes``
sets the bouts a round and ``--score bouts`` counts the share of bouts won instead of rounds.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import time
from pathlib import Path
from unittest import mock

import numpy as np


def parse_rule(text: str) -> tuple[str, int | None, int | None, str | None, float]:
    kind, size, steps, iw, scale = (text.split(":") + [None] * 4)[:5]
    if kind not in ("none", "continue", "paper"):
        raise SystemExit(f"unknown rule {text!r}: none, continue, paper:B, paper:B:S, paper:B:S:IW or paper:B:S:IW:X")
    return kind, (int(size) if size else None), (int(steps) if steps else None), iw or None, float(scale or 1.0)


@contextlib.contextmanager
def trained_reward(alpha: float, shaping):  # noqa: ANN001, ANN201
    """While open, ``BatchedSumo.step`` results carry A's training reward (``alpha`` x shaped dense +
    (1 - alpha) x sparse) in place of the faithful one: what the game adapts A on."""
    import dataclasses as dc

    from sumo_cli.sim.sumo_env import BatchedSumo

    reset, step = BatchedSumo.reset, BatchedSumo.step

    def new_reset(self, *args, **kw):  # noqa: ANN001, ANN202
        obs_a, obs_b = reset(self, *args, **kw)
        self._probe_obs_a = obs_a
        return obs_a, obs_b

    def new_step(self, act_a, act_b):  # noqa: ANN001, ANN202
        res = step(self, act_a, act_b)
        dense = shaping.dense(res, self._probe_obs_a)
        self._probe_obs_a = res.obs_a
        return dc.replace(res, dense_a=alpha * dense, sparse_a=(1.0 - alpha) * res.sparse_a)

    BatchedSumo.reset, BatchedSumo.step = new_reset, new_step
    try:
        yield
    finally:
        BatchedSumo.reset, BatchedSumo.step = reset, step


def training_reward(db_url: str, name: str):  # noqa: ANN201
    """``(alpha, Shaping)`` of the reward agent ``name`` (NAME@VERSION) was trained on at its version,
    from its run's configuration (a shipped agent: its provenance)."""
    from sumo_cli import names
    from sumo_cli.selfplay.selfplay import reward_alpha
    from sumo_cli.selfplay.train_config import TrainConfig
    from sumo_cli.store import registry
    from sumo_cli.store import runs as store_runs
    from sumo_cli.store.database import open_database

    db = open_database(db_url)
    with db.read() as s:
        rv = registry.resolve(s, name)
        origin = registry.get_agent(s, names.parse(name).name).origin or {}
        train = origin.get("config") or store_runs.get_run(s, origin["run_id"]).config["train"]
    cfg = TrainConfig.from_dict(train)
    return reward_alpha(rv.version, cfg.anneal_iterations, cfg.anneal_start), cfg.shaping()


def play(a, bs, rounds: int, seed: int, rule: tuple[str, int | None, int | None, str | None, float],
         physics: str = "faithful", episodes: int = 3, score: str = "rounds") -> list[float]:
    """Per round of one game played with ``rule``: 1 where A won the round, else 0 (``score`` =
    "bouts": the share of the round's bouts A won)."""
    from sumo_cli.compete.game import GameSettings, play_game
    from sumo_cli.adapt import meta_execution

    kind, size, steps, iw, scale = rule
    a = dataclasses.replace(a, strategy="none" if kind == "none" else "meta")
    original, original_alpha = meta_execution.config_of, meta_execution.log_alpha_of

    def config_of(player, cfg=None):  # noqa: ANN001, ANN202 - the rule under test replaces the default
        base = original(player, cfg)
        return base.replace(execution=kind, buffer_episodes=size or base.buffer_episodes,
                            num_steps=steps or base.num_steps, iw=iw or base.iw)

    def log_alpha_of(player, cfg):  # noqa: ANN001, ANN202 - the first ``steps`` learnt step sizes
        return original_alpha(player, cfg)[: cfg.num_steps] + math.log(scale)

    meta_execution.config_of, meta_execution.log_alpha_of = config_of, log_alpha_of
    try:
        result = play_game(a, bs, GameSettings(rounds=rounds, episodes=episodes, physics=physics, threads=1), seed)
    finally:
        meta_execution.config_of, meta_execution.log_alpha_of = original, original_alpha
    if score == "bouts":
        return [r.wins_a / len(r.episodes) for r in result.rounds]
    return [float(r.outcome == "a") for r in result.rounds]


#: Opponents that do not learn, as the population's quality table plays them.
FIXED = {"motionless-ant": ("motionless", "ant"), "motionless-bug": ("motionless", "bug")}


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
    ap.add_argument("--reward", default="", help="A adapts on alpha x shaped dense + (1 - alpha) x sparse: "
                    "'trained' (the reward of its training run at its version) or "
                    "'ALPHA,CONTROL,PUSH,MOVE,CENTRE,APPROACH,PUSH_OUT,TILT' (default: the faithful reward)")
    ap.add_argument("--score", default="rounds", choices=["rounds", "bouts"], help="what a round counts: won or "
                    "not, or the share of its bouts won")
    ap.add_argument("--episodes", type=int, default=3, help="bouts a round (the paper's 3)")
    ap.add_argument("--physics", default="faithful", help="faithful or fast (meta-training's)")
    ap.add_argument("--bptt", type=int, default=0, help="recurrent agents' inner gradient with the state detached "
                    "every k steps, as meta-training computed it (default 0: full backpropagation through the episode)")
    args = ap.parse_args()
    with contextlib.ExitStack() as patches:
        run(args, patches)


def run(args: argparse.Namespace, patches: contextlib.ExitStack) -> None:
    """The probe of ``args``; ``patches`` holds what it changes for the run (the reward adapted on, the BPTT window)."""
    if args.bptt:
        from sumo_cli.adapt import meta_execution
        from sumo_cli.meta import GaussianModel

        windowed = lambda spec: GaussianModel(spec, args.bptt if spec.recurrent else None)  # noqa: E731
        patches.enter_context(mock.patch.object(meta_execution, "GaussianModel", windowed))
    if args.reward:
        from sumo_cli.selfplay.sumo_vec import Shaping

        if args.reward == "trained":
            alpha, shaping = training_reward(args.db, args.agent)
        else:
            alpha, *coefs = (float(x) for x in args.reward.split(","))
            shaping = Shaping(*coefs)
        print(f"A adapts on {alpha:g} x {shaping} + {1 - alpha:g} x sparse", flush=True)
        patches.enter_context(trained_reward(alpha, shaping))

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
    if opp_name in FIXED or opp_name == "random":
        from sumo_cli.compete.game import FixedOpponent

        versions, bs = [], FixedOpponent(*FIXED.get(opp_name, ("random", a.body)))
    else:
        versions = opponent_versions(stored_versions(db, opp_name), args.rounds)
        cache = {v: AgentData.from_loaded(load_agent(db, f"{opp_name}@{v}")) for v in sorted(set(versions))}
        bs = [cache[v] for v in versions]
    per_rule: dict[str, list[list[float]]] = {r: [] for r in args.rules.split(",")}
    t0 = time.time()
    for i in range(args.seeds):
        seed = args.seed0 + i
        for text, rule in zip(args.rules.split(","), rules):
            per_rule[text].append(play(a, bs, args.rounds, seed, rule, args.physics, args.episodes, args.score))
            won = 100 * np.mean(per_rule[text][-1])
            print(f"seed {seed} {text}: {won:.1f}% of {args.score} ({time.time() - t0:.0f} s)", flush=True)
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
