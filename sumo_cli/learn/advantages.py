"""Generalised advantage estimation with termination kept apart from time-limit truncation.

A terminated episode bootstraps with 0; a truncated one (the bout's step limit, which the policy
cannot see coming through its observation) bootstraps with V(final observation). With gamma = 0.995
the difference matters: 1 / (1 - gamma) = 200 steps of value.
"""

from __future__ import annotations

import torch
from torch import Tensor

from sumo_cli.learn.rollout import Rollout


def gae(rollout: Rollout, gamma: float, lam: float) -> tuple[Tensor, Tensor]:
    """Advantages and value targets (returns), both (T, N), computed on whole trajectories before
    any chunking for BPTT."""
    T = rollout.num_steps
    rewards, values = rollout.rewards, rollout.values
    ended = rollout.terminated | rollout.truncated
    adv = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in reversed(range(T)):
        if t == T - 1:
            next_value = rollout.last_values
        else:
            next_value = values[t + 1]
        # After an ended episode the next step's value belongs to a new episode: replace it by the
        # bootstrap of the episode that ended (0 if terminated, V(final obs) if truncated only;
        # termination wins where an env reports both, as Gymnasium specifies).
        bootstrap = rollout.final_values[t] * (rollout.truncated[t] & ~rollout.terminated[t])
        next_value = torch.where(ended[t], bootstrap, next_value)
        delta = rewards[t] + gamma * next_value - values[t]
        running = delta + (gamma * lam) * running * (~ended[t])  # bool last: keeps the dtype of running
        adv[t] = running
    return adv, adv + values


def discounted_returns(rewards: Tensor, ended: Tensor, gamma: float) -> Tensor:
    """Reward-to-go within each episode, (T, N): R_t = r_t + gamma R_{t+1}, cut where an episode ends."""
    out = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        running = rewards[t] + gamma * running * (~ended[t])
        out[t] = running
    return out
