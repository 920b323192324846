"""The players of a game and their round experience: what an adaptation strategy reads and updates
(the strategies themselves are in :mod:`sumo_cli.adapt.strategies`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from sumo_cli.names import STRATEGIES
from sumo_cli.nets import policy as P

#: Strategies that change parameters between rounds (the others need no round experience).
ADAPTING = ("track", "meta")


def game_computes_values(p: "Player") -> bool:
    """Whether the game computes the value estimates of the round's steps for ``p``'s adaptation:
    for meta and MLP tracking players. An LSTM tracker's update computes them itself, in the same
    stacked unroll over the round that gives its BPTT windows' start states
    (:mod:`sumo_cli.adapt.tracking`), rather than in a second pass per player."""
    return p.strategy == "meta" or (p.strategy == "track" and not p.spec.recurrent)


@dataclass
class Experience:
    """One player's episodes of one round, time-major and padded at the end: (L, E, ...).

    ``state0`` is the recurrent state before each episode's first step (zeros except for RL^2,
    whose state carries over); ``prev_rewards``/``prev_dones`` are RL^2's extra inputs."""

    obs: Tensor  # (L, E, D) raw observations
    actions: Tensor  # (L, E, A)
    logp: Tensor  # (L, E) behaviour log-probabilities
    values: Tensor  # (L, E) zeros where the game does not compute them (game_computes_values)
    rewards: Tensor  # (L, E)
    prev_rewards: Tensor  # (L, E)
    prev_dones: Tensor  # (L, E)
    lengths: Tensor  # (E,) long
    terminated: Tensor  # (E,) bool: decided (bootstrap 0) rather than the step limit's draw
    final_values: Tensor  # (E,) V(final obs), used where not terminated
    state0: dict[str, Tensor] = field(default_factory=dict)
    final_obs: Tensor | None = None  # (E, D) each episode's observation after its last step

    def with_final_step(self) -> tuple[Tensor, Tensor, Tensor]:
        """``obs``, ``prev_rewards``, ``prev_dones`` ``(L + 1, E, ...)`` with each episode's final
        observation placed after its last step (its last reward as the previous reward), so that
        one unroll over them gives V(final obs) too."""
        if self.final_obs is None:
            raise ValueError("this round's experience has no final observations")
        n, cols = self.lengths, torch.arange(self.lengths.shape[0])
        obs = torch.cat([self.obs, self.obs.new_zeros(1, *self.obs.shape[1:])])
        obs[n, cols] = self.final_obs.to(obs.dtype)
        prev_r = torch.cat([self.prev_rewards, self.rewards[n - 1, cols][None]])
        prev_d = torch.cat([self.prev_dones, self.prev_dones.new_zeros(1, len(cols))])
        return obs, prev_r, prev_d


@dataclass
class Player:
    """One agent inside one game: what it was loaded with and what it plays with now."""

    name: str
    strategy: str
    spec: P.PolicySpec
    theta: P.Params  # the trained parameters (never changed by a game)
    obs_stats: dict[str, Tensor] | None  # observation normaliser, fixed during games (None: raw observations)
    meta: dict[str, Tensor] = field(default_factory=dict)  # e.g. meta/log_alpha
    params: P.Params = field(default_factory=dict)  # the parameters it acts with this round
    scratch: dict = field(default_factory=dict)  # per-game strategy state (optimiser, buffer, carry)

    @property
    def carries_state(self) -> bool:
        """True when the recurrent state survives episode ends (RL^2)."""
        return self.strategy == "rl2"


def start_game(players: list[Player]) -> None:
    """Reset every player to its trained parameters and forget all per-game state."""
    for p in players:
        if p.strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {p.strategy!r}")
        p.params = {k: v.detach().clone() for k, v in p.theta.items()}
        p.scratch = {}
