"""Adaptation strategies behind one interface.

Between the rounds of an iterated game every agent turns the experience of the round into the
parameters it plays the next round with:

- ``none``: keeps its parameters;
- ``track``: keeps doing PPO updates on the experience it collects (the paper's baseline (iii));
- ``rl2``: no parameter change; its recurrent state carries over all episodes with one opponent
  and is reset when the opponent changes (a new game);
- ``meta``: the learned meta-update (Algorithm 2): it always acts with phi, recomputed after every
  round from theta* and alpha* on a buffer of recent episodes, importance-weighted.

Games and task chains (:mod:`sumo_cli.adapt.chains`) call strategies only through :func:`start_game`
and :func:`adapt`, for many players at once:
players of the same strategy and policy spec are adapted in one call: ``track`` updates them with
stacked parameters in one batched computation, ``meta`` hands them to one call of the
execution-time meta-update.
"""

from __future__ import annotations

from sumo_cli.adapt.meta_execution import meta_update
from sumo_cli.adapt.players import ADAPTING, Experience, Player, game_computes_values, start_game
from sumo_cli.adapt.tracking import track_update_many

__all__ = ["ADAPTING", "Experience", "Player", "adapt", "game_computes_values", "start_game"]


def adapt(players: list[Player], experiences: list[Experience | None], *, track_cfg=None, meta_cfg=None) -> None:
    """Update each player's ``params`` from its round's experience (None for a player whose
    strategy is not in :data:`ADAPTING`). ``track_cfg`` (a PPOConfig) and ``meta_cfg`` (a MetaConfig)
    replace the games' settings of tracking and of the meta-update (task chains pass their run's)."""
    by_kind: dict[tuple, list[int]] = {}
    for i, p in enumerate(players):
        by_kind.setdefault((p.strategy, p.spec), []).append(i)
    for (strategy, _spec), idx in by_kind.items():
        if strategy in ("none", "rl2"):
            continue
        if strategy == "track":
            track_update_many([players[i] for i in idx], [experiences[i] for i in idx], track_cfg)
        elif strategy == "meta":
            meta_update([players[i] for i in idx], [experiences[i] for i in idx], meta_cfg)
