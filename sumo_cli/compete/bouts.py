"""Seeded single bouts of one agent against a fixed opponent, under the faithful start conditions,
rules and rewards: how training progress is measured (learning curves, the learning-signal test).

The opponent is ``"motionless"`` (zero torques), ``"random"`` (uniform random torques in [-1, 1]
every step; such an agent walks off the tatami by itself within about 50 steps, so beating it proves
little) or an agent version. The learner acts stochastically, as in games. Besides the outcome, each
bout records how fast the learner closed in: its smallest torso-to-torso distance and the first step
at which that distance fell under :data:`CLOSE` (the bout's length when it never did).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch

from sumo_cli.compete.game import AgentData
from sumo_cli.compete.schedule import game_seed
from sumo_cli.selfplay.sumo_vec import torso_distance
from sumo_cli.nets import normalizer as nz
from sumo_cli.nets.numpy_actor import NumpyActor
from sumo_cli.nets.policy import PolicySpec

MOTIONLESS, RANDOM = "motionless", "random"
CLOSE = 1.5  # m between torso centres (they start 2.3 m apart; two Ants touch at about 1.2 m)


@dataclass
class Bout:
    outcome: str  # from the learner's side: win / loss / draw
    reason: str  # ring_out / fall / timeout / unstable
    length: int
    min_dist: float
    steps_to_close: int


def _actor(agent: AgentData) -> tuple[NumpyActor, np.ndarray]:
    spec = PolicySpec.from_dict(agent.spec)
    if spec.arch == "rl2":
        raise ValueError("an RL^2 agent needs its reward inputs: evaluate it in a game (sumo play)")
    params = {k: torch.from_numpy(np.asarray(v, dtype=np.float32)) for k, v in agent.params.items()}
    mean, std = nz.mean_std({k: torch.from_numpy(np.asarray(v, dtype=np.float64)) for k, v in agent.obs_stats.items()})
    return NumpyActor(spec, params, mean.float(), std.float()), np.exp(np.asarray(agent.params["logstd"], dtype=np.float64))


def play_bouts(learner: AgentData, opponent: str | AgentData, n: int, seed: int, physics: str = "faithful",
               opp_body: str | None = None, threads: int | None = 1, face_opponent: bool = False) -> list[Bout]:
    """``n`` bouts in one batch (the first bout of each slot); deterministic given ``seed``.
    ``face_opponent``: both start turned toward each other (the training curriculum's start; the
    reference start keeps the identity orientation); the rules and rewards stay the faithful ones."""
    from sumo_cli.selfplay.sumo_vec import CurriculumSumo, StartConditions
    from sumo_cli.sim.sumo_env import REASONS

    if n < 1:
        raise ValueError("at least one bout")
    if isinstance(opponent, str) and opponent not in (MOTIONLESS, RANDOM):
        raise ValueError(f"unknown fixed opponent {opponent!r}")
    body_b = opponent.body if isinstance(opponent, AgentData) else (opp_body or learner.body)
    env = CurriculumSumo(learner.body, body_b, n, physics=physics, seed=seed, auto_reset=False, n_threads=threads,
                         start=StartConditions(face_opponent=face_opponent))
    rng = np.random.default_rng(game_seed(seed, 0xB0))
    actor_a, std_a = _actor(learner)
    actor_b, std_b = _actor(opponent) if isinstance(opponent, AgentData) else (None, None)
    try:
        obs_a, obs_b = env.reset(seed=seed)
        state_a = actor_a.initial_state(n)
        state_b = actor_b.initial_state(n) if actor_b else None
        view_a = actor_a.spec.viewer(n)
        view_b = actor_b.spec.viewer(n) if actor_b else None
        min_dist = torso_distance(obs_a)
        close = np.full(n, -1)
        result = [None] * n
        t = 0
        while not env.finished.all():
            live = ~env.finished
            mean_a, state_a = actor_a.step(view_a.view(obs_a), state_a)
            act_a = mean_a + std_a * rng.standard_normal(mean_a.shape)
            if actor_b is not None:
                mean_b, state_b = actor_b.step(view_b.view(obs_b), state_b)
                act_b = mean_b + std_b * rng.standard_normal(mean_b.shape)
            elif opponent == RANDOM:
                act_b = rng.uniform(-1.0, 1.0, (n, env.spec_b.n_actions))
            else:
                act_b = np.zeros((n, env.spec_b.n_actions))
            res = env.step(act_a.astype(np.float64), act_b.astype(np.float64))
            t += 1
            d = torso_distance(res.final_obs_a)
            min_dist = np.where(live, np.minimum(min_dist, d), min_dist)
            close = np.where(live & (close < 0) & (d < CLOSE), t, close)
            for i in np.flatnonzero(res.done & live):
                outcome = {1: "win", 2: "loss", 3: "draw"}[int(res.outcome[i])]
                length = int(res.length[i])
                result[i] = Bout(outcome, REASONS[int(res.reason[i])], length, float(min_dist[i]),
                                 int(close[i]) if close[i] > 0 else length)
            obs_a, obs_b = res.obs_a, res.obs_b
        return result
    finally:
        env.close()


def summary(bouts: list[Bout]) -> dict:
    """Win/draw/loss rates, mean length, mean smallest distance and steps to close, with the raw
    bouts (plain data, for JSON)."""
    n = len(bouts)
    return {
        "bouts": n,
        "win_rate": sum(b.outcome == "win" for b in bouts) / n,
        "draw_rate": sum(b.outcome == "draw" for b in bouts) / n,
        "loss_rate": sum(b.outcome == "loss" for b in bouts) / n,
        "mean_length": float(np.mean([b.length for b in bouts])),
        "mean_min_dist": float(np.mean([b.min_dist for b in bouts])),
        "mean_steps_to_close": float(np.mean([b.steps_to_close for b in bouts])),
        "episodes": [asdict(b) for b in bouts],
    }
