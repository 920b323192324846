"""Adaptation over a chain of tasks (the nonstationary locomotion evaluation, the MAML benchmarks):
every group of envs is one player, each round its episodes are its experience, and between rounds
the players adapt through :func:`sumo_cli.adapt.strategies.adapt`, the dispatcher games use."""

from __future__ import annotations

import numpy as np
import torch

from sumo_cli import meta as ML
from sumo_cli.adapt.meta_execution import LOG_ALPHA_KEY
from sumo_cli.adapt.players import ADAPTING, Experience, Player, start_game
from sumo_cli.adapt.strategies import adapt
from sumo_cli.meta.meta_train import TaskChainEnv, collect_stacked, episode_returns, episode_spans
from sumo_cli.nets import policy as P
from sumo_cli.ppo.rollout import Rollout

#: What a task chain can be played with: every strategy but RL^2 (whose carried state the chain resets).
CHAIN_STRATEGIES = ("none", *ADAPTING)


def group_experiences(ro: Rollout, groups: int) -> list[Experience]:
    """Each group's complete episodes of one collection (``collect_stacked``: group g = envs
    ``g*E .. g*E+E-1``) as a round's :class:`Experience`, one episode per column."""
    out = []
    for g, spans in enumerate(episode_spans(ro, groups)):
        if not spans:
            raise ValueError(f"group {g} finished no episode in its round")
        L, K = max(t1 - t0 for _, t0, t1 in spans), len(spans)

        def cols(a: torch.Tensor) -> torch.Tensor:
            buf = a.new_zeros(L, K, *a.shape[2:])
            for k, (n, t0, t1) in enumerate(spans):
                buf[: t1 - t0, k] = a[t0:t1, n]
            return buf

        ends = [(n, t1 - 1) for n, _, t1 in spans]
        zeros = ro.rewards.new_zeros(L, K)
        out.append(Experience(
            obs=cols(ro.obs), actions=cols(ro.actions), logp=cols(ro.logp), values=cols(ro.values),
            rewards=cols(ro.rewards), prev_rewards=zeros, prev_dones=zeros.clone(),
            lengths=torch.tensor([t1 - t0 for _, t0, t1 in spans], dtype=torch.long),
            terminated=torch.tensor([bool(ro.terminated[t, n]) for n, t in ends]),
            final_values=torch.stack([ro.final_values[t, n] for n, t in ends]),
            final_obs=torch.stack([ro.final_obs[t, n] for n, t in ends]),
        ))
    return out


def run_adaptation(
    env: TaskChainEnv,
    spec: P.PolicySpec,
    strategy: str,
    theta: P.Params,
    *,
    rounds: int,
    steps_per_round: int,
    seed: int,
    stats: dict | None = None,
    log_alpha: torch.Tensor | None = None,
    cfg: ML.MetaConfig | None = None,
    ppo_cfg=None,
    deterministic: bool = False,
    meta_from: str = "theta",
) -> np.ndarray:
    """Play ``rounds`` consecutive tasks of fresh chains (one per group) and return the mean
    episode return of every round and group, ``(rounds, G)``. Every group is a player starting from
    ``theta`` and adapting by ``strategy`` after each round (as in games):

    * ``"none"``: no adaptation;
    * ``"meta"``: the learnt update with ``log_alpha`` and ``cfg`` (its ``execution`` rule: Algorithm 2
      on the last ``cfg.buffer_episodes`` episodes, or ``"continue"``); with ``meta_from="current"`` each
      round's update starts from the player's *current* parameters on that round's own episodes (on-policy),
      the learnt update applied the way tracking applies PPO (a variant; see :mod:`benchmarks.meta_experiment`);
    * ``"track"``: one PPO update (``ppo_cfg``, default the games' tracking settings) of the current
      parameters on the round's episodes.
    """
    if meta_from not in ("theta", "current"):
        raise ValueError("meta_from must be 'theta' or 'current'")
    if strategy not in CHAIN_STRATEGIES:
        raise ValueError(f"strategy must be one of {CHAIN_STRATEGIES}")
    if strategy == "meta" and (cfg is None or log_alpha is None):
        raise ValueError("strategy 'meta' needs cfg and log_alpha")
    G = env.num_groups
    theta = {k: v.detach() for k, v in theta.items()}
    extras = {} if log_alpha is None else {LOG_ALPHA_KEY: log_alpha.detach()}
    players = [Player(f"group-{g}", strategy, spec, theta, stats, meta=extras) for g in range(G)]
    start_game(players)
    gen = torch.Generator().manual_seed(seed)
    out = np.zeros((rounds, G))
    obs = env.sample_tasks(seed)
    for i in range(rounds):
        params = P.stack_params([p.params for p in players])
        ro, obs = collect_stacked(env, spec, params, stats, obs, steps_per_round, gen, deterministic=deterministic,
                                  keep_final_obs=True)
        out[i] = episode_returns(ro, G)
        if i == rounds - 1:
            break
        if strategy in ADAPTING:
            if meta_from == "current":
                for p in players:
                    p.theta = p.params
                    p.scratch.pop("adapter", None)
            adapt(players, group_experiences(ro, G), track_cfg=ppo_cfg, meta_cfg=cfg)
        obs = env.next_task()
    return out
