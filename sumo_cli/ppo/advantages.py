"""Generalised advantage estimation with termination kept apart from time-limit truncation.

A terminated episode bootstraps with 0; a truncated one (the bout's step limit, which the policy
cannot see coming through its observation) bootstraps with V(final observation). With gamma = 0.995
the difference matters: 1 / (1 - gamma) = 200 steps of value.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from sumo_cli.ppo.rollout import Rollout


def gae(rollout: Rollout, gamma: float, lam: float) -> tuple[Tensor, Tensor]:
    """Advantages and value targets (returns), both (T, N), computed on whole trajectories before
    any chunking for BPTT. The TD errors are computed for all steps at once; only the backward
    recursion A_t = delta_t + gamma lambda A_{t+1} (cut where an episode ended) runs step by step,
    in NumPy (a torch call per step costs more than its arithmetic)."""
    rewards, values = rollout.rewards, rollout.values
    ended = rollout.terminated | rollout.truncated
    next_values = torch.cat([values[1:], rollout.last_values[None]])
    # After an ended episode the next step's value belongs to a new episode: replace it by the
    # bootstrap of the episode that ended (0 if terminated, V(final obs) if truncated only;
    # termination wins where an env reports both, as Gymnasium specifies).
    bootstrap = rollout.final_values * (rollout.truncated & ~rollout.terminated)
    next_values = torch.where(ended, bootstrap, next_values)
    delta = (rewards + gamma * next_values - values).numpy()
    carry = ((gamma * lam) * (~ended).to(rewards.dtype)).numpy()
    adv = np.empty_like(delta)
    running = np.zeros_like(delta[0])
    for t in range(delta.shape[0] - 1, -1, -1):
        running = delta[t] + carry[t] * running
        adv[t] = running
    adv_t = torch.from_numpy(adv)
    return adv_t, adv_t + values


def discounted_returns(rewards: Tensor, ended: Tensor, gamma: float) -> Tensor:
    """Reward-to-go within each episode, (T, N): R_t = r_t + gamma R_{t+1}, cut where an episode ends."""
    out = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        running = rewards[t] + gamma * running * (~ended[t])
        out[t] = running
    return out
