"""A small nonstationary task for checking the meta-learner: a 2-D point whose goal drifts.

:class:`DriftingGoalPoint` implements :class:`sumo_cli.meta.meta_train.TaskChainEnv`: envs come in
groups of ``group_size``; every group follows a chain of tasks ``T_1, T_2, ...``. Task ``T_i`` has
the goal ``radius * (cos(phi_0 + i * omega), sin(phi_0 + i * omega))``: the goal moves along a circle
by a fixed angle ``omega`` per task, with ``phi_0`` uniform and ``omega`` uniform in
``+-[omega_min, omega_max]`` per chain (so the drift direction is unknown but consistent: the
previous task says where the next goal will be, which is what a meta-learned update can exploit).

An episode: the point starts at the origin, observes its position and the elapsed fraction of the
episode (never the goal), moves by ``max_step * clip(action, -1, 1)`` per step, and receives
``-||position - goal||`` per step; ``horizon`` steps, then truncation (a time limit; the next
episode starts at the origin), or, with ``terminal_at_horizon``, termination: the elapsed fraction
is part of the observation, so the horizon is part of the (finite-horizon) MDP and the episode
return is the objective; reporting it as a truncation makes every learner bootstrap the return
past the end with its value estimate, which only adds that estimate's error. ``sample_tasks`` draws new chains; ``next_task`` moves every group
to its chain's next task; both reset all envs. With ``auto_advance`` the goal drifts from episode
to episode by itself (every episode end moves the group to its next task: the stream a
non-meta learner such as PPO trains on); meta-training drives the chain with ``next_task``.
"""

from __future__ import annotations

import numpy as np

from sumo_cli.sim.vec_env import StepOut


class DriftingGoalPoint:
    obs_dim = 3
    act_dim = 2

    def __init__(
        self,
        num_groups: int,
        group_size: int,
        horizon: int = 10,
        radius: float = 1.0,
        omega_min: float = 0.3,
        omega_max: float = 0.6,
        max_step: float = 0.2,
        seed: int = 0,
        auto_advance: bool = False,
        terminal_at_horizon: bool = False,
    ):
        self.auto_advance = bool(auto_advance)
        self.terminal_at_horizon = bool(terminal_at_horizon)
        self.num_groups = int(num_groups)
        self.group_size = int(group_size)
        self.num_envs = self.num_groups * self.group_size
        self.horizon = int(horizon)
        self.radius = float(radius)
        self.omega_min, self.omega_max = float(omega_min), float(omega_max)
        self.max_step = float(max_step)
        self.rng = np.random.default_rng(seed)
        self.phase0 = np.zeros(self.num_groups)
        self.omega = np.zeros(self.num_groups)
        self.index = np.zeros(self.num_groups, dtype=np.int64)
        self.pos = np.zeros((self.num_envs, 2))
        self.t = np.zeros(self.num_envs, dtype=np.int64)

    # --- tasks ---
    @property
    def goals(self) -> np.ndarray:
        """(num_groups, 2) goal of each group's current task."""
        ang = self.phase0 + self.index * self.omega
        return self.radius * np.stack([np.cos(ang), np.sin(ang)], -1)

    def _env_goals(self) -> np.ndarray:
        return np.repeat(self.goals, self.group_size, axis=0)

    def sample_tasks(self, seed: int | None = None) -> np.ndarray:
        """New chains for every group (random start angle, drift speed and direction); resets
        all envs and returns the first observations."""
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        G = self.num_groups
        self.phase0 = self.rng.uniform(-np.pi, np.pi, G)
        self.omega = self.rng.uniform(self.omega_min, self.omega_max, G) * self.rng.choice([-1.0, 1.0], G)
        self.index = np.zeros(G, dtype=np.int64)
        return self._reset_all()

    def next_task(self) -> np.ndarray:
        self.index = self.index + 1
        return self._reset_all()

    # --- VecEnv ---
    def _obs(self) -> np.ndarray:
        frac = (self.t / self.horizon)[:, None]
        return np.concatenate([self.pos, frac], -1).astype(np.float32)

    def _reset_all(self) -> np.ndarray:
        self.pos[:] = 0.0
        self.t[:] = 0
        return self._obs()

    def reset(self, seed: int | None = None) -> np.ndarray:
        return self.sample_tasks(seed)

    def step(self, actions: np.ndarray) -> StepOut:
        a = np.clip(np.asarray(actions, dtype=np.float64), -1.0, 1.0)
        self.pos = self.pos + self.max_step * a
        self.t = self.t + 1
        reward = -np.linalg.norm(self.pos - self._env_goals(), axis=-1)
        ended = self.t >= self.horizon
        final_obs = self._obs()
        truncated = ended & (not self.terminal_at_horizon)
        if ended.any():
            self.pos[ended] = 0.0
            self.t[ended] = 0
            if self.auto_advance:
                self.index = self.index + ended.reshape(self.num_groups, self.group_size).all(-1)
        obs = self._obs()
        return StepOut(
            obs=obs,
            reward=reward.astype(np.float32),
            terminated=ended & self.terminal_at_horizon,
            truncated=truncated,
            final_obs=final_obs,
            info={},
        )
