"""Standard few-shot RL tasks of the MAML literature, written against :class:`sumo_cli.meta.tasks.TaskFamily`."""

from __future__ import annotations

import numpy as np

from sumo_cli.meta.tasks import TaskFamily


class Navigation2D(TaskFamily):
    """2D navigation of Finn et al. 2017 (Sec. 5.3; rllab's ``PointEnvRandGoal``): a point starts
    at the origin and observes its position (never the goal); the policy's actions are clipped to
    [-1, 1] and scaled to the task's bounds [-0.1, 0.1] per coordinate (rllab's ``normalize`` wrapper,
    which MAML's point example uses), then added to the position; reward = -distance to the goal
    after the move; goals
    uniform in [-0.5, 0.5]^2; horizon 100. The original episode ends when both coordinates are
    within 0.01 of the goal; here the point then stays put and earns 0 for the rest of the horizon
    (the same return; fixed-length episodes keep the batches rectangular)."""

    obs_dim, act_dim, horizon = 2, 2, 100

    def draw(self, rng, n):
        return rng.uniform(-0.5, 0.5, size=(n, 2))

    def start(self, rng, tasks):
        return np.zeros((len(tasks), 3))  # x, y, reached

    def move(self, state, action, tasks):
        done = state[:, 2] > 0
        pos = state[:, :2] + np.where(done[:, None], 0.0, 0.1 * np.clip(action, -1.0, 1.0))
        reward = np.where(done, 0.0, -np.linalg.norm(pos - tasks, axis=-1))
        reached = done | (np.abs(pos - tasks) < 0.01).all(-1)
        return np.concatenate([pos, reached[:, None]], -1), reward

    def observe(self, state, tasks):
        return state[:, :2]
