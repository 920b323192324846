"""Tasks for the meta-learner: "a distribution of tasks" and "a chain of tasks".

A task family is a vectorised numpy environment (the :class:`~sumo_cli.sim.vec_env.VecEnv`
contract) whose ``num_envs = num_groups * group_size`` envs come in groups; every group plays one
task at a time (a group is what the meta-learner adapts to: one task of Algorithm 1, one opponent
in RoboSumo). Two kinds, which differ only in what ``next_task`` does:

* **distribution** (plain MAML, Finn et al. 2017): ``sample_tasks`` draws a task per group from
  p(T); ``next_task`` starts fresh episodes *of the same task*, so the meta-learner adapts on some
  episodes and is evaluated (and meta-trained) on the following ones of the same task;
* **chain** (the paper's nonstationary setting): ``next_task`` moves every group from ``T_i`` to
  its successor ``T_{i+1}``; adaptation on ``T_i`` is judged on ``T_{i+1}``.

To write a task, subclass :class:`TaskFamily` and implement four small functions of numpy arrays
(``draw``, ``start``, ``move`` and, for a chain, ``successor``); the base class does the grouping,
the horizon, the auto-reset and the :class:`StepOut` bookkeeping. docs/method.md has a complete
example. The meta-learner then runs on it unchanged: :func:`sumo_cli.meta.meta_train.meta_train`
(Algorithm 1) and :func:`adaptation_curve` (returns after 0, 1, ..., k adaptation steps).

The horizon is part of the task (a finite-horizon return is the objective), so the last step of an
episode is reported as a termination, not a truncation: nothing is bootstrapped past it.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from sumo_cli import meta as ML
from sumo_cli.sim.vec_env import StepOut
from sumo_cli.nets import policy as P

KINDS = ("distribution", "chain")


class TaskFamily:
    """Base class of a task family (see the module docstring). Subclasses set ``obs_dim``,
    ``act_dim``, ``horizon`` and implement:

    * ``draw(rng, n) -> tasks``: ``n`` tasks drawn from p(T), an array with leading dim ``n``;
    * ``start(rng, tasks) -> state``: the initial state of one episode per env (``tasks`` has one
      row per env), an array with leading dim ``num_envs``;
    * ``move(state, action, tasks) -> (state, reward, obs)``: one step of every env;
    * ``observe(state, tasks) -> obs`` (``(num_envs, obs_dim)``);
    * ``successor(rng, tasks) -> tasks`` (chains only): the next task of each group's chain.
      A family that does not override it is a distribution.
    """

    obs_dim: int
    act_dim: int
    horizon: int

    def __init__(self, num_groups: int, group_size: int, seed: int = 0, resample_every_episode: bool = False):
        """``resample_every_episode``: every episode of every env gets a fresh task from p(T) (the
        stream a non-meta learner such as PPO pre-trains on; a chain moves to the successor instead)."""
        self.num_groups, self.group_size = int(num_groups), int(group_size)
        self.num_envs = self.num_groups * self.group_size
        self.resample = bool(resample_every_episode)
        self.rng = np.random.default_rng(seed)
        self.tasks = self.draw(self.rng, self.num_groups)
        self.env_tasks = np.repeat(self.tasks, self.group_size, axis=0)
        self.t = np.zeros(self.num_envs, dtype=np.int64)
        self.state = self.start(self.rng, self.env_tasks)

    # --- to implement -------------------------------------------------------------------------
    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        raise NotImplementedError

    def start(self, rng: np.random.Generator, tasks: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def move(self, state: np.ndarray, action: np.ndarray, tasks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def observe(self, state: np.ndarray, tasks: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def successor(self, rng: np.random.Generator, tasks: np.ndarray) -> np.ndarray:
        return tasks

    # --- the TaskChainEnv contract ------------------------------------------------------------
    @property
    def kind(self) -> str:
        return "chain" if type(self).successor is not TaskFamily.successor else "distribution"

    def _restart(self) -> np.ndarray:
        self.env_tasks = np.repeat(self.tasks, self.group_size, axis=0)
        self.t[:] = 0
        self.state = self.start(self.rng, self.env_tasks)
        return self.observe(self.state, self.env_tasks).astype(np.float32)

    def sample_tasks(self, seed: int | None = None) -> np.ndarray:
        """A new task (the start of a new chain) for every group; all envs start an episode."""
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.tasks = self.draw(self.rng, self.num_groups)
        return self._restart()

    def next_task(self) -> np.ndarray:
        """Chain: every group moves to its successor task. Distribution: the same task again.
        Either way all envs start an episode."""
        self.tasks = self.successor(self.rng, self.tasks)
        return self._restart()

    def reset(self, seed: int | None = None) -> np.ndarray:
        return self.sample_tasks(seed)

    def step(self, actions: np.ndarray) -> StepOut:
        a = np.asarray(actions, dtype=np.float64).reshape(self.num_envs, self.act_dim)
        self.state, reward = self.move(self.state, a, self.env_tasks)
        self.t += 1
        final_obs = self.observe(self.state, self.env_tasks).astype(np.float32)
        ended = self.t >= self.horizon
        obs = final_obs
        if ended.any():
            if self.resample:
                fresh = self.draw(self.rng, int(ended.sum()))
                nxt = self.successor(self.rng, self.env_tasks[ended]) if self.kind == "chain" else fresh
                self.env_tasks[ended] = nxt
            self.state[ended] = self.start(self.rng, self.env_tasks[ended])
            self.t[ended] = 0
            obs = final_obs.copy()
            obs[ended] = self.observe(self.state[ended], self.env_tasks[ended]).astype(np.float32)
        z = np.zeros(self.num_envs, dtype=bool)
        return StepOut(obs, np.asarray(reward, dtype=np.float32), ended, z, final_obs, {})


# ----------------------------------------------------------------------------------------------
# evaluation: returns after 0, 1, ..., k adaptation steps


def one_step(spec: P.PolicySpec, params: P.Params, log_alpha_m: Tensor, rollout, groups: int, cfg: ML.MetaConfig) -> P.Params:
    """One inner step of the learnt update from ``params`` (stacked per group) on the episodes of
    ``rollout``, which ``params`` collected (on-policy: the importance weights are exactly 1).
    ``log_alpha_m``: the step size of this step, shaped as one step of ``log_alpha``."""
    from sumo_cli.meta.meta_train import episodes_from_rollout

    batch = episodes_from_rollout(rollout, groups, cfg)
    c = cfg.replace(num_steps=1)
    return ML.adapt(spec, params, log_alpha_m.unsqueeze(0), batch, c, behaviour="data")


def adaptation_curve(
    env,
    spec: P.PolicySpec,
    theta: P.Params,
    log_alpha: Tensor,
    cfg: ML.MetaConfig,
    *,
    steps: int,
    seed: int,
    stats: dict | None = None,
) -> np.ndarray:
    """MAML-style ``steps`` consecutive adaptation steps, each on fresh episodes of the policy it
    starts from (Finn et al. 2017's evaluation; ``inner_data="fresh"`` trains exactly this): play
    one episode per env with ``theta``, take step 1 on them, play with ``phi^1``, take step 2 on
    those, and so on. Step ``m`` uses ``alpha_m`` (steps beyond ``cfg.num_steps`` reuse the last).
    On a distribution every phase plays the same task; on a chain phase ``m + 1`` plays the
    successor of phase ``m``'s task (tracking a moving task with the learnt update). Returns the
    mean episode return of every phase and group, ``(steps + 1, num_groups)``."""
    from sumo_cli.meta.meta_train import collect_stacked, episode_returns

    gen = torch.Generator().manual_seed(seed)
    G = env.num_groups
    cur = {k: v.contiguous() for k, v in ML.expand_params(ML.GaussianModel(spec), theta, (G,)).items()}
    obs = env.sample_tasks(seed)
    out = np.zeros((steps + 1, G))
    for m in range(steps + 1):
        ro, obs = collect_stacked(env, spec, cur, stats, obs, env.horizon, gen)
        out[m] = episode_returns(ro, G)
        if m == steps:
            break
        cur = one_step(spec, cur, log_alpha[min(m, log_alpha.shape[0] - 1)], ro, G, cfg)
        obs = env.next_task()
    return out
