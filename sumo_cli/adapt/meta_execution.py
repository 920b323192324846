"""The meta strategy in games: Algorithm 2 through the strategy interface.

A meta player acts with phi. By default (``MetaConfig.execution="continue"``) phi takes one learnt
step after every round, from its current value on that round's episodes (meta/,
ContinueAdapter). The paper's rule (``execution="paper"``, the setting agents trained before the
per-tensor step sizes are played with): the round's episodes join an experience buffer (the last
``MetaConfig.buffer_episodes``, 75 in RoboSumo), and phi is recomputed from theta* and alpha* on the
whole buffer with importance weights pi_theta / pi_behaviour (ExecutionAdapter, which also reuses
the first step's gradient at theta* for episodes already in the buffer). The adapter
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
    x = nz.normalize(player.obs_stats, exp.obs).to(torch.float32)
    state0 = {k: v[None] for k, v in P.initial_state(player.spec, exp.obs.shape[1]).items()}
    return episode_batch(
        x[:, None], exp.actions[:, None], exp.logp[:, None], exp.values[:, None], exp.rewards[:, None],
        exp.lengths[None], gamma=cfg.gamma, terminated=exp.terminated[None], final_values=exp.final_values[None],
        state0=state0,
    )


def config_of(player: Player, cfg: MetaConfig | None = None) -> MetaConfig:
    """The adaptation settings of a meta player: ``cfg`` if given, else the defaults with as many
    learnt steps as the agent stores step sizes for (agents trained with another ``num_steps``); an
    agent whose stored step sizes are one per step (trained before the defaults adapted per tensor)
    is executed with the paper's settings, which it was trained with."""
    if cfg is not None:
        return cfg
    la = player.meta.get(LOG_ALPHA_KEY)
    if la is None:
        return MetaConfig()
    return MetaConfig.paper(num_steps=int(la.shape[0])) if la.dim() == 1 else MetaConfig(num_steps=int(la.shape[0]))


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
