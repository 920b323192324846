"""The contract between learners and environments.

Learners (PPO, the meta-learner, the adaptation strategies) are written against this small
vectorised interface, not against RoboSumo, so they can be checked on standard tasks (Pendulum,
bandits, a drifting-goal point) and reused on the locomotion task. Arrays are numpy, batch first.

    reset(seed) -> obs (N, obs_dim)
    step(actions (N, act_dim)) -> StepOut
        obs: the first observation of the next episode where an episode ended (auto-reset);
        reward (N,), terminated (N,) (true end: bootstrap with 0), truncated (N,) (time limit:
        bootstrap with V(final_obs)), final_obs (N, obs_dim) = the last observation of the
        episode that just ended (equal to obs elsewhere); info: dict of per-env arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np


@dataclass
class StepOut:
    obs: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    final_obs: np.ndarray
    info: dict = field(default_factory=dict)

    @property
    def done(self) -> np.ndarray:
        return self.terminated | self.truncated


class VecEnv(Protocol):
    num_envs: int
    obs_dim: int
    act_dim: int

    def reset(self, seed: int | None = None) -> np.ndarray: ...

    def step(self, actions: np.ndarray) -> StepOut: ...
