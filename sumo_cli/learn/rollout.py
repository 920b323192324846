"""A batch of experience, time-major, as every learner consumes it.

Shapes: T steps x N envs (x D / A). ``first[t]`` marks that step t is the first of an episode
(for recurrent policies: the state was zeroed before it); ``state0`` is the recurrent state before
step 0 (``{}`` for an MLP), so truncated BPTT can restart from any stored chunk start.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor


@dataclass
class Rollout:
    obs: Tensor  # (T, N, D) raw observations (normalised by the learner with the stats it holds)
    actions: Tensor  # (T, N, A)
    logp: Tensor  # (T, N) log-probability of the action under the behaviour policy
    values: Tensor  # (T, N) value estimates of the behaviour policy
    rewards: Tensor  # (T, N)
    terminated: Tensor  # (T, N) bool: the episode truly ended after step t (bootstrap with 0)
    truncated: Tensor  # (T, N) bool: time limit after step t (bootstrap with final_values[t])
    first: Tensor  # (T, N) bool: step t starts an episode
    final_values: Tensor  # (T, N) V(final obs) where truncated, else 0
    last_values: Tensor  # (N,) V(obs after step T-1), to bootstrap unfinished episodes
    state0: dict[str, Tensor] = field(default_factory=dict)  # recurrent state before step 0
    # RL^2 inputs: previous reward and done flag seen at each step (zeros for other archs).
    prev_rewards: Tensor | None = None  # (T, N)
    prev_dones: Tensor | None = None  # (T, N)

    @property
    def num_steps(self) -> int:
        return int(self.obs.shape[0])

    @property
    def num_envs(self) -> int:
        return int(self.obs.shape[1])
