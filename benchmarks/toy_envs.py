"""Small vectorised environments (the :class:`~sumo_cli.sim.vec_env.VecEnv` protocol) for checking
learners on tasks with known answers, without MuJoCo or RoboSumo.

* :class:`PendulumVecEnv`: Gymnasium's ``Pendulum-v1`` (classic swing-up, 200-step time limit, so
  every episode ends by *truncation*), re-implemented in numpy for N pendulums at once. Same
  dynamics, reward, initial-state distribution and time limit as Gymnasium 1.x; a test checks it
  step by step against Gymnasium where that package is installed (it is not a dependency).
  Solved level: Gymnasium lists no reward threshold for Pendulum; good agents (SAC, TD3, tuned PPO)
  reach about -150 to -200 mean return; a random policy gets about -1200.
* :class:`BernoulliBanditVecEnv`: K-armed Bernoulli bandits for RL^2 (Duan et al. 2016): every task
  draws arm means uniformly from [0, 1]; a task lasts ``pulls_per_task`` pulls; each pull is one
  episode (``terminated`` every step), so RL^2's "done" input is meaningful and the task change is
  signalled in ``info["task_changed"]``. Random play earns n/2 per task, an oracle n K / (K + 1).
"""

from __future__ import annotations

import numpy as np

from sumo_cli.sim.vec_env import StepOut


def angle_normalize(x: np.ndarray) -> np.ndarray:
    return ((x + np.pi) % (2 * np.pi)) - np.pi


class PendulumVecEnv:
    """N independent ``Pendulum-v1`` pendulums with auto-reset.

    obs = (cos th, sin th, thdot) float32; action = torque (N, 1), clipped to [-2, 2] inside the
    env (the policy's Gaussian sample is unbounded; its log-probability is of the unclipped
    action, as in Gymnasium/CleanRL); reward = -(angle^2 + 0.1 thdot^2 + 0.001 u^2); episodes
    are truncated after ``max_steps`` = 200 and never terminate.
    """

    max_speed = 8.0
    max_torque = 2.0
    dt = 0.05
    g = 10.0
    m = 1.0
    length = 1.0
    obs_dim = 3
    act_dim = 1

    def __init__(self, num_envs: int, max_steps: int = 200):
        self.num_envs = int(num_envs)
        self.max_steps = int(max_steps)
        self.rng = np.random.default_rng(0)
        self.th = np.zeros(self.num_envs)
        self.thdot = np.zeros(self.num_envs)
        self.t = np.zeros(self.num_envs, dtype=np.int64)

    def _obs(self) -> np.ndarray:
        return np.stack([np.cos(self.th), np.sin(self.th), self.thdot], axis=-1).astype(np.float32)

    def _reset_where(self, mask: np.ndarray) -> None:
        n = int(mask.sum())
        if n:
            s = self.rng.uniform(low=[-np.pi, -1.0], high=[np.pi, 1.0], size=(n, 2))
            self.th[mask], self.thdot[mask] = s[:, 0], s[:, 1]
            self.t[mask] = 0

    def reset(self, seed: int | None = None) -> np.ndarray:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self._reset_where(np.ones(self.num_envs, dtype=bool))
        return self._obs()

    def step(self, actions: np.ndarray) -> StepOut:
        u = np.clip(np.asarray(actions, dtype=np.float64).reshape(self.num_envs, -1)[:, 0], -self.max_torque, self.max_torque)
        th, thdot = self.th, self.thdot
        costs = angle_normalize(th) ** 2 + 0.1 * thdot**2 + 0.001 * u**2
        newthdot = thdot + (3 * self.g / (2 * self.length) * np.sin(th) + 3.0 / (self.m * self.length**2) * u) * self.dt
        newthdot = np.clip(newthdot, -self.max_speed, self.max_speed)
        self.th = th + newthdot * self.dt
        self.thdot = newthdot
        self.t += 1
        truncated = self.t >= self.max_steps
        final_obs = self._obs()
        self._reset_where(truncated)
        obs = self._obs()
        terminated = np.zeros(self.num_envs, dtype=bool)
        return StepOut(obs, (-costs).astype(np.float32), terminated, truncated, final_obs, {})


class BernoulliBanditVecEnv:
    """N independent K-armed Bernoulli bandit tasks, each lasting ``pulls_per_task`` pulls.

    The action is a K-vector (the Gaussian policy's sample); the pulled arm is its argmax (the env
    is a deterministic function of the action, so the policy-gradient through the Gaussian is a
    valid REINFORCE estimator). obs (N, K) = one-hot of the arm pulled at the previous step of the
    same task (zeros at a task's first pull): the RL^2 net is given its own previous discrete
    choice, which its stochastic continuous action would otherwise hide from it (Duan et al. feed
    the previous action too). Every pull is an episode of one step (``terminated`` true); after
    the task's last pull new arm means are drawn and ``info["task_changed"]`` is true (the next
    observation belongs to a new task: RL^2 resets its state there).
    ``info["arm_mean"]`` is the mean of the pulled arm (expected reward, for low-variance
    evaluation); ``info["best_mean"]`` the task's best arm mean.
    """

    def __init__(self, num_envs: int, num_arms: int = 5, pulls_per_task: int = 10):
        self.num_envs = int(num_envs)
        self.num_arms = int(num_arms)
        self.pulls_per_task = int(pulls_per_task)
        self.obs_dim = self.num_arms
        self.act_dim = self.num_arms
        self.rng = np.random.default_rng(0)
        self.means = np.zeros((self.num_envs, self.num_arms))
        self.pulls = np.zeros(self.num_envs, dtype=np.int64)
        self.last_arm = np.full(self.num_envs, -1)

    def _obs(self) -> np.ndarray:
        obs = np.zeros((self.num_envs, self.num_arms), dtype=np.float32)
        has = self.last_arm >= 0
        obs[np.nonzero(has)[0], self.last_arm[has]] = 1.0
        return obs

    def _new_tasks(self, mask: np.ndarray) -> None:
        n = int(mask.sum())
        if n:
            self.means[mask] = self.rng.uniform(0.0, 1.0, size=(n, self.num_arms))
            self.pulls[mask] = 0
            self.last_arm[mask] = -1

    def reset(self, seed: int | None = None) -> np.ndarray:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self._new_tasks(np.ones(self.num_envs, dtype=bool))
        return self._obs()

    def step(self, actions: np.ndarray) -> StepOut:
        arm = np.argmax(np.asarray(actions).reshape(self.num_envs, self.num_arms), axis=-1)
        rows = np.arange(self.num_envs)
        p = self.means[rows, arm]
        reward = (self.rng.uniform(size=self.num_envs) < p).astype(np.float32)
        best = self.means.max(-1)
        self.pulls += 1
        self.last_arm = arm
        final_obs = self._obs()
        changed = self.pulls >= self.pulls_per_task
        self._new_tasks(changed)
        obs = self._obs()
        terminated = np.ones(self.num_envs, dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        info = {"task_changed": changed, "arm_mean": p.astype(np.float32), "best_mean": best, "arm": arm}
        return StepOut(obs, reward, terminated, truncated, final_obs, info)
