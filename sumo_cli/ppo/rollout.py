"""A batch of experience, time-major, as every learner consumes it.

Shapes: T steps x N envs (x D / A). ``first[t]`` marks that step t is the first of an episode
(for recurrent policies: the state was zeroed before it); ``state0`` is the recurrent state before
step 0 (``{}`` for an MLP), so truncated BPTT can restart from any stored chunk start.
"""

from __future__ import annotations

import math
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
    # Recurrent state resets, which for RL^2 differ from episode starts (its state lives for a whole
    # interaction with one task/opponent). None means "same as first" (plain LSTM, MLP).
    state_reset: Tensor | None = None  # (T, N) bool: the state was zeroed before step t
    task_end: Tensor | None = None  # (T, N) bool: the state is zeroed after step t (the interaction ended)
    # Stored recurrent states for truncated BPTT: chunk_states[k][c] is the state fed into step
    # c * chunk_len (after any reset there); chunk_states[k][0] equals state0.
    chunk_len: int = 0  # 0: no chunk states stored
    chunk_states: dict[str, Tensor] = field(default_factory=dict)  # each (ceil(T / chunk_len), N, H)
    # The observation-normalisation statistics the behaviour policy used (frozen for the rollout),
    # so the learner normalises exactly as the actions were chosen. None: the learner's own.
    norm_stats: dict[str, Tensor] | None = None
    # The observation after step t where an episode ended there (else zeros); only collections that
    # hand whole episodes to an adaptation strategy keep it (collect_stacked(keep_final_obs=True)).
    final_obs: Tensor | None = None  # (T, N, D)

    @property
    def resets(self) -> Tensor:
        """(T, N) bool: where the recurrent state was zeroed before the step."""
        return self.first if self.state_reset is None else self.state_reset

    @property
    def num_steps(self) -> int:
        return int(self.obs.shape[0])

    @property
    def num_envs(self) -> int:
        return int(self.obs.shape[1])


def chunk(x: Tensor, L: int, fill=0) -> Tensor:
    """(T, N, ...) -> (L, C * N, ...): fixed windows of L steps, padded at the end; column c * N + n
    is window c of env n."""
    T, N = x.shape[0], x.shape[1]
    C = math.ceil(T / L)
    pad = C * L - T
    if pad:
        x = torch.cat([x, torch.full((pad, *x.shape[1:]), fill, dtype=x.dtype)], dim=0)
    x = x.reshape(C, L, N, *x.shape[2:]).transpose(0, 1)
    return x.reshape(L, C * N, *x.shape[3:])


def unchunk(x: Tensor, T: int, N: int) -> Tensor:
    """Inverse of :func:`chunk`: (L, C * N, ...) -> (T, N, ...)."""
    L = x.shape[0]
    C = x.shape[1] // N
    x = x.reshape(L, C, N, *x.shape[2:]).transpose(0, 1).reshape(C * L, N, *x.shape[2:])
    return x[:T]
