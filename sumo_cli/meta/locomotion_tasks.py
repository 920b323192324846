"""Nonstationary locomotion as a :class:`~sumo_cli.meta.meta_train.TaskChainEnv`.

Task ``T_i`` of a chain is episode ``k`` of a leg pair's 7-episode sequence (torque factor
``1 - (k - 1) / 6`` on that pair's joints, :mod:`sumo_cli.sim.locomotion`); ``next_task`` moves to
episode ``k + 1``. Envs come in ``num_groups`` groups of ``group_size``; all envs of a group share
the pair and the episode index, and every episode they play inside one task has the same factor
(the underlying env runs with ``auto_advance=False``).

``sample_tasks(seed)`` draws, per group, a pair uniformly from ``pairs`` and the start episode:
``start="random"`` draws ``k`` uniformly in 1..6 (so ``(T_i, T_{i+1})`` is a uniformly drawn pair of
consecutive episodes, Algorithm 1's training pairs), an int fixes it (evaluation: ``start=1`` and 7
rounds play a whole sequence). Both reset the physics of every env.
"""

from __future__ import annotations

import numpy as np

from sumo_cli.sim.vec_env import StepOut
from sumo_cli.sim import locomotion as L


class LocomotionChain:
    def __init__(self, num_groups: int, group_size: int, pairs=None, *, start="random",
                 horizon: int = L.HORIZON, physics: str = "fast", seed: int = 0,
                 n_threads: int | None = None):
        self.num_groups = int(num_groups)
        self.group_size = int(group_size)
        self.num_envs = self.num_groups * self.group_size
        self.pool = list(L.TRAIN_PAIRS if pairs is None else pairs)
        if start != "random" and not 1 <= int(start) <= L.SEQUENCE_LEN:
            raise ValueError("start must be 'random' or an episode index in 1..7")
        self.start = start
        self.env = L.LocomotionEnv(self.num_envs, self.pool, horizon=horizon, auto_advance=False,
                                   physics=physics, seed=seed, n_threads=n_threads)
        self.obs_dim, self.act_dim = self.env.obs_dim, self.env.act_dim
        self.horizon = self.env.horizon
        self.rng = np.random.default_rng(seed)
        self.group_pairs: list[tuple[int, int]] = [self.pool[g % len(self.pool)] for g in range(self.num_groups)]
        self.episode = np.ones(self.num_groups, dtype=np.int64)

    def _apply(self) -> np.ndarray:
        E = self.group_size
        self.env.set_pairs([p for p in self.group_pairs for _ in range(E)])
        self.env.set_episode(np.repeat(self.episode, E))
        return self.env.reset_physics()

    def sample_tasks(self, seed: int | None = None) -> np.ndarray:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
            self.env.seed(int(np.random.SeedSequence(seed).generate_state(1)[0]))
        G = self.num_groups
        self.group_pairs = [self.pool[int(i)] for i in self.rng.integers(len(self.pool), size=G)]
        if self.start == "random":
            self.episode = self.rng.integers(1, L.SEQUENCE_LEN, size=G)
        else:
            self.episode = np.full(G, int(self.start), dtype=np.int64)
        return self._apply()

    def next_task(self) -> np.ndarray:
        if self.episode.max() >= L.SEQUENCE_LEN:
            raise ValueError("a sequence has only 7 episodes")
        self.episode = self.episode + 1
        return self._apply()

    def reset(self, seed: int | None = None) -> np.ndarray:
        return self.sample_tasks(seed)

    def step(self, actions: np.ndarray) -> StepOut:
        return self.env.step(actions)

    def close(self) -> None:
        self.env.close()
