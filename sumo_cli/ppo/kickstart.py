"""Kickstarting (Schmitt et al. 2018, "Kickstarting Deep Reinforcement Learning"): a student
trained by PPO with an extra loss that pulls its action distribution toward a stored teacher's on
the states the student visits, weighted by a coefficient that decays to 0, after which training is
plain PPO.

Here the teacher is one of this project's own stored MLP or LSTM agents (``--teacher NAME@V``),
e.g. the self-play Ant MLP teaching an Ant LSTM, which learns the same recipe more slowly per env
step, or a Spider LSTM teaching a Spider MLP (docs/lab-record.md). The loss is the KL divergence
KL(teacher || student) of the two diagonal Gaussians per step, summed over the action dimensions and
averaged over the minibatch's steps; the teacher's means are computed once per iteration on the
rollout's observations (normalised with the teacher's own statistics), so the teacher costs one
forward per env step. An LSTM teacher is unrolled over each column from a zero state, zeroed again
at every episode start, as it plays: the trainer's rollouts start fresh bouts at their first step.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from sumo_cli.ppo.rollout import Rollout
from sumo_cli.nets import normalizer as nz
from sumo_cli.nets import policy as P


def gaussian_kl(mean_t: Tensor, logstd_t: Tensor, mean_s: Tensor, logstd_s: Tensor) -> Tensor:
    """KL(N(mean_t, std_t) || N(mean_s, std_s)) of diagonal Gaussians, summed over the last dim."""
    var_t, var_s = torch.exp(2 * logstd_t), torch.exp(2 * logstd_s)
    return (logstd_s - logstd_t + (var_t + (mean_t - mean_s) ** 2) / (2 * var_s) - 0.5).sum(-1)


def coefficient(k: int, coef: float, iterations: int) -> float:
    """The distillation weight of iteration ``k`` (1-based): ``coef`` at iteration 1, decaying
    linearly to 0 at iteration ``iterations + 1``."""
    if iterations <= 0:
        return 0.0
    return coef * max(0.0, 1.0 - (k - 1) / iterations)


@dataclass
class Teacher:
    """A stored MLP or LSTM policy whose action distribution the student imitates."""

    spec: P.PolicySpec
    params: P.Params
    obs_stats: dict

    @torch.no_grad()
    def means(self, rollout: Rollout, dtype: torch.dtype = torch.float32) -> Tensor:
        """The teacher's action means on every step of ``rollout``, ``(T, N, act_dim)``."""
        x = nz.normalize(self.obs_stats, rollout.obs.to(dtype))  # as the student's inputs (ppo.rollout_inputs)
        params = {k: v.to(dtype) for k, v in self.params.items()}
        if not self.spec.recurrent:
            return P.forward(self.spec, params, x, {})[0]
        if not bool(rollout.first[0].all()):
            raise ValueError("an LSTM teacher needs rollouts whose columns start a bout at their first step")
        state0 = P.initial_state(self.spec, rollout.num_envs, dtype)
        return P.forward_sequence(self.spec, params, x, state0, rollout.first, fused=True)[0]

    @property
    def logstd(self) -> Tensor:
        return self.params["logstd"].detach()
