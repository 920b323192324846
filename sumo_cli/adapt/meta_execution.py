"""The meta strategy in games: Algorithm 2 through the strategy interface.

A meta player acts with phi. In games (:func:`game_config`) phi is recomputed after every round from
theta* and alpha* by the learnt steps on the last :data:`GAME_BUFFER_EPISODES` episodes (the last two
rounds), importance-weighted pi_theta / pi_behaviour (Algorithm 2, ``execution="paper"``, with a
short buffer; ExecutionAdapter): the update a game applies is always the one meta-training trained,
never an accumulation of it. ``MetaConfig.execution="continue"`` (one learnt step per round from the
current parameters; ContinueAdapter) was the game default before: it drifts, after 100 rounds phi
is 100 untrained steps away from theta. Agents whose step sizes are one per step (trained before the
per-tensor step sizes) are played with the paper's full settings (a 75-episode buffer). The adapter
lives in ``player.scratch`` for one game and is forgotten by ``start_game``.
"""

from __future__ import annotations

import torch

from sumo_cli.meta import GaussianModel, MetaConfig, episode_batch, execution_adapter, init_log_alpha
from sumo_cli.adapt.players import Experience, Player
from sumo_cli.nets import normalizer as nz
from sumo_cli.nets import policy as P

#: Checkpoint key of the learned step sizes (log alpha, one per inner step).
LOG_ALPHA_KEY = "meta/log_alpha"


def log_alpha_of(player: Player, cfg: MetaConfig) -> torch.Tensor:
    if LOG_ALPHA_KEY in player.meta:
        return player.meta[LOG_ALPHA_KEY].to(torch.float32)
    # An agent trained without meta-learning played as meta: the paper's initial step sizes.
    return init_log_alpha(cfg, GaussianModel(player.spec), (), torch.float32)


def experience_batch(player: Player, exp: Experience, cfg: MetaConfig):  # noqa: ANN201
    """The round's E episodes as buffer columns (L, 1, E): normalised inputs, behaviour log-probs."""
    x = (exp.obs if player.obs_stats is None else nz.normalize(player.obs_stats, exp.obs)).to(torch.float32)
    state0 = {k: v[None] for k, v in P.initial_state(player.spec, exp.obs.shape[1]).items()}
    return episode_batch(
        x[:, None], exp.actions[:, None], exp.logp[:, None], exp.values[:, None], exp.rewards[:, None],
        exp.lengths[None], gamma=cfg.gamma, terminated=exp.terminated[None], final_values=exp.final_values[None],
        state0=state0,
    )


#: Episodes the game rule adapts on: the last two rounds of 3 bouts. Measured with
#: benchmarks/meta_execution_probe.py (paired games, same seeds, rounds won adapted minus unadapted;
#: docs/lab-record.md, 2026-12-03): bug-meta against the learning opponent learn-ant-lstm over 100
#: rounds, 4 seeds: this rule +0.2 +- 6.8 points, "continue" -4.8 +- 9.7 (3 of 4 games below); ant-meta
#: against bug-lstm over 50 rounds, 8 seeds: +2.0 +- 6.9 and +2.5 +- 6.4 (docs/lab-record.md).
GAME_BUFFER_EPISODES = 6


def game_config(num_steps: int | None = None) -> MetaConfig:
    """The execution rule of a meta player in games (module docstring)."""
    base = MetaConfig() if num_steps is None else MetaConfig(num_steps=num_steps)
    return base.replace(execution="paper", buffer_episodes=GAME_BUFFER_EPISODES)


def config_of(player: Player, cfg: MetaConfig | None = None) -> MetaConfig:
    """The adaptation settings of a meta player: ``cfg`` if given, else the game rule with as many
    learnt steps as the agent stores step sizes for (agents trained with another ``num_steps``); an
    agent whose stored step sizes are one per step (trained before the defaults adapted per tensor)
    is executed with the paper's settings, which it was trained with."""
    if cfg is not None:
        return cfg
    la = player.meta.get(LOG_ALPHA_KEY)
    if la is None:
        return game_config()
    return MetaConfig.paper(num_steps=int(la.shape[0])) if la.dim() == 1 else game_config(int(la.shape[0]))


def meta_update(players: list[Player], experiences: list[Experience], cfg: MetaConfig | None = None) -> None:
    for player, exp in zip(players, experiences):
        adapter = player.scratch.get("adapter")
        if adapter is None:
            pcfg = config_of(player, cfg)
            adapter = execution_adapter(GaussianModel(player.spec), player.theta, log_alpha_of(player, pcfg), pcfg)
            player.scratch["adapter"] = adapter
        adapter.add(experience_batch(player, exp, adapter.cfg))
        phi = adapter.compute()
        player.params = {k: v.detach().reshape(player.theta[k].shape).to(player.theta[k].dtype) for k, v in phi.items()}
