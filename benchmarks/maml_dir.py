"""Locomotion with a goal direction (Finn et al. 2017, MAML, Sec. 5.3: "ant, forward/backward" and
"half-cheetah, forward/backward"), on this project's Ant and on a planar runner written here
(:mod:`benchmarks.planar_runner`, ``--body runner``), scaled to a 2-core machine.

The runner's task (:class:`RunnerDirection`): reward per env step ``d * x-velocity of the root -
0.05 * sum(a^2)`` (rllab's half-cheetah direction task: 0.5 * 0.1), episodes of
``RUNNER_HORIZON`` = 100 env steps (5 s; MAML: 200), observation without the root's x position.

The task family (:class:`AntDirection`): the RoboSumo Ant (``bodies.body_spec("ant")``) alone on
flat ground, the scene of the nonstationary-locomotion task (:func:`sumo_cli.sim.locomotion.scene_xml`
with ``body="ant"``: same floor, friction, 0.05 s env step, torque actuators with gear 150). A task
is a direction ``d`` in {+1, -1} along the world x axis, each with probability 1/2 (MAML: forward
or backward). Reward per env step = ``d * (x_after - x_before) / DT - CTRL_COST * sum(a^2)``
(``a`` the clipped action), the locomotion task's reward with the direction as the task. The
policy observes the Ant's qpos and qvel (29 numbers), never ``d``: it must find the direction from
the rewards of its adaptation episodes.

Differences from MAML's Ant (rllab ``AntEnvRandDirec``), said here so the numbers are read right:
the body is RoboSumo's Ant (diagonal legs, torque gear 150), not gym's; no contact cost and no
survival bonus (the locomotion task has neither); the horizon is ``HORIZON`` = 50 env steps
(2.5 s) instead of MAML's 200 (four times fewer physics steps per episode: the only way 3 seeds fit
on one core in half an hour). The published returns are therefore on a different scale; what is
compared is the shape: the gain from step 0 to step 1 and whether steps 2-3 hold it.

The runner with a goal velocity (:class:`RunnerVelocity`, ``--body runner-vel``; MAML's
"half-cheetah, goal velocity"): a task is a velocity in [0, 2] m/s, reward ``-|velocity - goal| -
0.05 * sum(a^2)``. Unlike a direction, every goal rewards running forward: a gait is worth learning
before any adaptation, and a step only has to tune its speed.

``python -m benchmarks.maml_dir --seeds 3 [--body runner|runner-vel]`` meta-trains the default configuration (the one
:mod:`benchmarks.maml_nav` uses: :class:`~sumo_cli.meta.MetaConfig` with MAML-style
steps on fresh episodes), pre-trains a PPO policy on the same number of env steps (every episode
a new direction), then plays fresh tasks with

* ``meta``: theta* and its learnt step sizes, 3 consecutive steps (:func:`tasks.adaptation_curve`);
* ``pretrained_ft_<alpha>``: the PPO policy, the same policy-gradient steps with fixed step sizes;
* ``random_ft_<alpha>``: freshly initialised parameters, the same steps.

Printed: mean return per episode after 0..3 steps, 95% t-intervals over the training seeds, next to
the published numbers (approximate read-offs of Finn et al. 2017, Fig. 5; see ``PUBLISHED``).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import dataclass
from typing import Callable

import mujoco
import numpy as np
import torch

from benchmarks import planar_runner as PR
from benchmarks.maml_nav import add_config_options, config_overrides, config_record, interval, meta_env_steps, pretrain_ppo
from sumo_cli import meta as ML
from sumo_cli.meta import meta_train as MT
from sumo_cli.meta import tasks as TK
from sumo_cli.sim.vec_env import StepOut
from sumo_cli.nets import policy as P
from sumo_cli.sim import locomotion as LOC

HORIZON = 50  # env steps per episode (2.5 s); MAML: 200. Shortened for one core, see the docstring
RUNNER_HORIZON = 100  # the runner's episodes (5 s); MAML: 200, halved for the 2-core machine
CTRL_COST = LOC.CTRL_COST  # 0.01, the locomotion task's; rllab's Ant uses 0.5 * 1e-2 on its own action scale
AXIS = np.array([1.0, 0.0])  # the rewarded axis in the ground plane (MAML: the x axis)
STEPS = 3  # adaptation steps evaluated (MAML's Fig. 5: 0..3)
EVAL_TASKS = 10  # tasks per evaluation seed (5 of each direction in expectation)
EVAL_EPISODES = 10  # episodes per task and step (MAML's fast batch: 20; halved for one core)
EVAL_SEEDS = 2  # evaluation seeds per training seed

# Finn et al. 2017 (arXiv 1703.03400), Fig. 5: average return after 0, 1, 2, 3 gradient steps (horizon 200,
# MAML's reward with survival bonus and contact cost). Approximate read-offs, not from the figure itself but from
# public machine transcriptions of it, which disagree by up to ~100: only what they agree on is given (ranges
# where they differ, "" where no value could be read; the ant's curve after step 0 was cut off in every source).
PUBLISHED = {
    "ant fwd/bwd, MAML": ("~0", "", "", ""),  # y axis up to ~500-550; MAML's curve rises after step 0
    "half-cheetah fwd/bwd, MAML": ("~0", "~300", "300-400", "300-400"),
    "half-cheetah fwd/bwd, pretrained": ("~0", "", "", "-20 to 50"),
    "half-cheetah fwd/bwd, oracle": ("~400", "~400", "~400", "~400"),
    # goal velocity: one transcription (another read the panel's axis wrongly); MAML gains ~50 at step 1
    "half-cheetah goal velocity, MAML": ("~-130", "~-80", "~-75", "~-75"),
    "half-cheetah goal velocity, pretrained": ("~-160", "~-135", "~-130", "~-130"),
    "half-cheetah goal velocity, oracle": ("~-60", "~-60", "~-60", "~-60"),
}
PUBLISHED_TASK = {"ant": "ant fwd/bwd", "runner": "half-cheetah fwd/bwd", "runner-vel": "half-cheetah goal velocity"}
_BAD = LOC._BAD_WARNINGS


@dataclass(frozen=True)
class Body:
    """What the direction task needs of a body: its model, reset, observation, position along the
    rewarded axis, control cost and env step."""

    build: Callable[[str], mujoco.MjModel]
    reset: Callable[[mujoco.MjModel, mujoco.MjData, np.random.Generator], None]
    observe: Callable[[np.ndarray, np.ndarray], np.ndarray]  # (qpos, qvel) -> observation
    position: Callable[[np.ndarray], np.ndarray]  # qpos rows -> position along the rewarded axis
    ctrl_cost: float
    dt: float
    frame_skip: int


BODIES = {
    # the RoboSumo Ant in the locomotion scene; observes qpos (torso xyz, quaternion, 8 joints) and qvel
    "ant": Body(lambda physics: LOC.build_model(physics, "ant"), LOC.reset_pose,
                lambda q, v: np.concatenate([q, v], -1), lambda q: q[..., :2] @ AXIS,
                CTRL_COST, LOC.DT, LOC.FRAME_SKIP),
    # the planar runner (half-cheetah); rllab's half-cheetah direction task: control cost 0.5 * 0.1 * sum(a^2)
    "runner": Body(PR.build_model, PR.reset_pose, lambda q, v: np.concatenate([q[..., 1:], v], -1),
                   lambda q: q[..., 0], 0.05, PR.DT, PR.FRAME_SKIP),
}


class DirectionTask:
    """``num_groups * group_size`` envs of one body; group ``g`` plays the direction ``tasks[g]``. The
    :class:`~sumo_cli.meta.meta_train.TaskChainEnv` contract of a task *distribution* (as
    :class:`sumo_cli.meta.tasks.TaskFamily`): ``sample_tasks`` draws a direction per group,
    ``next_task`` starts fresh episodes of the same directions. With ``resample_every_episode``
    every episode of every env gets a fresh direction (the stream PPO pre-trains on). The horizon
    ends an episode as a termination (the finite-horizon return is the objective, as in TaskFamily).
    Physics that blows up (MuJoCo's bad-state reset, non-finite state) earns no velocity reward
    that step and restarts from a fresh pose; the clock runs on (``unstable_count`` counts them).
    Subclasses name the body (``BODY``) and its sizes."""

    BODY = ""
    obs_dim = act_dim = horizon = 0

    def __init__(self, num_groups: int, group_size: int, seed: int = 0, resample_every_episode: bool = False,
                 physics: str = "fast", horizon: int | None = None):
        self.body = BODIES[self.BODY]
        self.num_groups, self.group_size = int(num_groups), int(group_size)
        self.num_envs = n = self.num_groups * self.group_size
        if horizon is not None:
            self.horizon = int(horizon)
        self.resample = bool(resample_every_episode)
        self.model = m = self.body.build(physics)
        self.data = [mujoco.MjData(m) for _ in range(n)]
        self.qpos = np.zeros((n, m.nq))
        self.qvel = np.zeros((n, m.nv))
        self.t = np.zeros(n, dtype=np.int64)
        self.unstable_count = 0
        self.rng = np.random.default_rng(seed)
        self.tasks = self.draw(self.num_groups)
        self.env_tasks = np.repeat(self.tasks, self.group_size)
        assert (self.state.shape[1], m.nu) == (self.obs_dim, self.act_dim)

    @property
    def state(self) -> np.ndarray:
        return self.body.observe(self.qpos, self.qvel)

    def draw(self, n: int) -> np.ndarray:
        return self.rng.choice(np.array([-1.0, 1.0]), size=n)

    def task_reward(self, velocity: np.ndarray) -> np.ndarray:
        """The task's part of the reward per env step, from the velocity along the axis (m/s)."""
        return self.env_tasks * velocity

    # --- physics --------------------------------------------------------------------------------
    def _reset_one(self, i: int) -> None:
        d = self.data[i]
        self.body.reset(self.model, d, self.rng)
        self.qpos[i], self.qvel[i] = d.qpos, d.qvel
        self.t[i] = 0

    def _restart(self) -> np.ndarray:
        self.env_tasks = np.repeat(self.tasks, self.group_size)
        for i in range(self.num_envs):
            self._reset_one(i)
        return self.state.astype(np.float32)

    # --- the TaskChainEnv contract ----------------------------------------------------------------
    def sample_tasks(self, seed: int | None = None) -> np.ndarray:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.tasks = self.draw(self.num_groups)
        return self._restart()

    def next_task(self) -> np.ndarray:
        return self._restart()

    def reset(self, seed: int | None = None) -> np.ndarray:
        return self.sample_tasks(seed)

    def step(self, actions: np.ndarray) -> StepOut:
        n, m = self.num_envs, self.model
        a = np.clip(np.nan_to_num(np.asarray(actions, dtype=np.float64).reshape(n, self.act_dim)), -1.0, 1.0)
        body = self.body
        x0 = np.array(body.position(self.qpos))  # a copy: qpos is overwritten below
        bad = np.zeros(n, dtype=bool)
        for i, d in enumerate(self.data):
            d.ctrl[:] = a[i]
            w0 = int(d.warning.number[_BAD].sum())
            mujoco.mj_step(m, d, body.frame_skip)
            self.qpos[i], self.qvel[i] = d.qpos, d.qvel
            bad[i] = int(d.warning.number[_BAD].sum()) != w0
        bad |= ~(np.isfinite(self.qpos).all(1) & np.isfinite(self.qvel).all(1))
        self.unstable_count += int(bad.sum())
        x1 = np.where(bad, x0, np.nan_to_num(body.position(self.qpos)))
        reward = self.task_reward((x1 - x0) / body.dt) - body.ctrl_cost * np.sum(a * a, axis=1)
        self.t += 1
        ended = self.t >= self.horizon
        for i in np.flatnonzero(bad & ~ended):  # restart the body; the episode's clock runs on
            t = self.t[i]
            self._reset_one(int(i))
            self.t[i] = t
        final_obs = np.nan_to_num(self.state).astype(np.float32)
        obs = final_obs
        if ended.any():
            idx = np.flatnonzero(ended)
            if self.resample:
                self.env_tasks[idx] = self.draw(len(idx))
            for i in idx:
                self._reset_one(int(i))
            obs = self.state.astype(np.float32)
        return StepOut(obs, reward.astype(np.float32), ended, np.zeros(n, dtype=bool), final_obs,
                       {"direction": self.env_tasks.copy()})


class AntDirection(DirectionTask):
    """The RoboSumo Ant (MAML's "ant, forward/backward")."""

    BODY = "ant"
    obs_dim = 15 + 14  # Ant qpos (torso xyz, quaternion, 8 joints) + qvel (6 + 8)
    act_dim = 8
    horizon = HORIZON


class RunnerDirection(DirectionTask):
    """The planar runner (MAML's "half-cheetah, forward/backward")."""

    BODY = "runner"
    obs_dim = 8 + 9  # qpos without the root's x + qvel
    act_dim = 6
    horizon = RUNNER_HORIZON


class RunnerVelocity(RunnerDirection):
    """The planar runner with a goal velocity (MAML's "half-cheetah, goal velocity"): a task is a
    velocity drawn uniformly in [0, 2] m/s (MAML's range), reward per env step
    ``-|x-velocity - goal| - 0.05 sum(a^2)`` (rllab's goal-velocity task, its control cost as in the
    direction task)."""

    def draw(self, n: int) -> np.ndarray:
        return self.rng.uniform(0.0, 2.0, size=n)

    def task_reward(self, velocity: np.ndarray) -> np.ndarray:
        return -np.abs(velocity - self.env_tasks)


class TaskObserved:
    """Mixin for MAML's oracle, "a policy that receives the goal as part of its input": the env's task
    (a direction or a goal velocity) appended to the observation."""

    @property
    def state(self) -> np.ndarray:
        return np.concatenate([super().state, self.env_tasks[:, None]], axis=1)


def oracle_task(task_cls: type) -> type:
    """``task_cls`` with the task in the observation (one more input)."""
    return type(task_cls.__name__ + "Oracle", (TaskObserved, task_cls), {"obs_dim": task_cls.obs_dim + 1})


TASKS = {"ant": AntDirection, "runner": RunnerDirection, "runner-vel": RunnerVelocity}
# the runner: 600 iterations = 24 M env steps per seed, 35-40 min of meta-training and ~30 min of PPO on one
# core; at 300 the first step gained two thirds of what it gains at 600 (docs/lab-record.md)
DEFAULT_ITERS = {"ant": 40, "runner": 600, "runner-vel": 300}


# ----------------------------------------------------------------------------------------------
# the experiment


def curve(spec, theta, log_alpha, cfg, stats, seed: int, tasks: int = EVAL_TASKS, episodes: int = EVAL_EPISODES,
          seeds: int = EVAL_SEEDS, task_cls=AntDirection, steps: int = STEPS) -> list[float]:
    """Mean return per episode after 0..steps steps over ``seeds`` x ``tasks`` fresh tasks."""
    runs = [TK.adaptation_curve(task_cls(tasks, episodes, seed=seed + e), spec, theta, log_alpha, cfg,
                                steps=steps, seed=seed + e, stats=stats) for e in range(seeds)]
    return np.concatenate(runs, axis=1).mean(1).tolist()


def run_seed(seed: int, iters: int, tasks: int = 10, episodes: int = 10, hidden: int = 64, ft_alphas=(0.1, 1.0),
             eval_tasks: int = EVAL_TASKS, eval_episodes: int = EVAL_EPISODES, body: str = "ant", log=print,
             baselines: bool = True, meta: bool = True, normalize_obs: bool = False, **cfg_kw) -> dict:
    """One training seed: meta-training (unless not ``meta``), PPO on the same env steps (unless not
    ``baselines``), then every curve. ``cfg_kw``: MetaConfig fields that differ from the default
    configuration (experiments)."""
    torch.set_num_threads(1)
    cfg = ML.MetaConfig(**cfg_kw)
    task_cls = TASKS[body]
    spec = P.PolicySpec("mlp", task_cls.obs_dim, task_cls.act_dim, hidden=hidden)
    H = task_cls.horizon
    out: dict = {"seed": seed, "body": body, "iters": iters, "tasks": tasks, "episodes": episodes, "horizon": H}
    t0 = time.perf_counter()

    def progress(it, info, res):
        out.setdefault("step_returns", []).append([round(float(x), 2) for x in info["step_returns"]])
        out.setdefault("alpha_curve", []).append(ML.alpha_metrics(info["alpha"]))
        out.setdefault("outer", []).append([info["outer_epochs"], round(info["approx_kl"], 5), info["lr"]])
        if it % 5 == 0 or it == iters - 1:
            alpha = [round(a, 2) for a in out["alpha_curve"][-1].values()]
            log(f"seed {seed} meta it {it}: returns by step {np.round(info['step_returns'], 1).tolist()}, "
                f"alpha {alpha}, outer epochs {info['outer_epochs']} (KL {info['approx_kl']:.4f}, lr {info['lr']:.2g}) "
                f"({time.perf_counter() - t0:.0f} s)")

    ev = 10_000 + 101 * seed
    if meta:
        menv = task_cls(tasks, episodes, seed=seed)
        res = MT.meta_train(menv, spec, cfg, iters, seed, steps_pre=H, steps_post=H, normalize_obs=normalize_obs,
                            callback=progress)
        meta_stats = None if res.obs_norm is None else res.obs_norm.stats
        out["meta_train_s"] = time.perf_counter() - t0
        out["alpha"] = ML.alpha_metrics(torch.exp(res.log_alpha))
        t1 = time.perf_counter()
        out["meta"] = curve(spec, res.theta, res.log_alpha, cfg, meta_stats, ev, eval_tasks, eval_episodes,
                            task_cls=task_cls)
        out["eval_curve_s"] = time.perf_counter() - t1
        out["unstable"] = menv.unstable_count
    if config_record(cfg_kw, normalize_obs):
        out["config"] = config_record(cfg_kw, normalize_obs)
    if not baselines:
        log(_headline(out))
        return out
    env_steps = meta_env_steps(iters, tasks, episodes, H, cfg.num_steps)
    t0 = time.perf_counter()
    pres, penv = pretrain_ppo(task_cls, spec, seed, env_steps, tasks, episodes)
    out["ppo_train_s"] = time.perf_counter() - t0
    out["env_steps"] = env_steps
    out["unstable"] = out.get("unstable", 0) + penv.unstable_count
    pth = {k: v.detach() for k, v in pres.params.items()}
    model = ML.GaussianModel(spec)
    init = P.init_params(spec, torch.Generator().manual_seed(seed))
    for a in ft_alphas:
        fixed = torch.full((cfg.num_steps, len(model.param_shapes())), math.log(a))
        out[f"pretrained_ft_{a:g}"] = curve(spec, pth, fixed, cfg, pres.obs_norm.stats, ev, eval_tasks, eval_episodes,
                                            task_cls=task_cls)
        out[f"random_ft_{a:g}"] = curve(spec, init, fixed, cfg, None, ev, eval_tasks, eval_episodes, task_cls=task_cls)
    log(_headline(out))
    return out


def _headline(out: dict) -> str:
    """A seed's result as one JSON line, without the per-iteration series."""
    return json.dumps({k: v for k, v in out.items() if k not in ("step_returns", "alpha_curve", "outer")})


def oracle_seed(seed: int, env_steps: int, body: str = "runner", hidden: int = 64,
                eval_tasks: int = EVAL_TASKS, eval_episodes: int = EVAL_EPISODES, log=print) -> dict:
    """MAML's oracle for one training seed: PPO with the task in the observation (every episode a fresh
    task, as the pre-trained baseline), ``env_steps`` env steps, then its mean return per episode on the
    evaluation tasks of :func:`run_seed` (no adaptation: it is told the task)."""
    torch.set_num_threads(1)
    task_cls = oracle_task(TASKS[body])
    spec = P.PolicySpec("mlp", task_cls.obs_dim, task_cls.act_dim, hidden=hidden)
    t0 = time.perf_counter()
    pres, _ = pretrain_ppo(task_cls, spec, seed, env_steps)
    pth = {k: v.detach() for k, v in pres.params.items()}
    no_steps = torch.zeros((1, len(ML.GaussianModel(spec).param_shapes())))
    ret = curve(spec, pth, no_steps, ML.MetaConfig(), pres.obs_norm.stats, 10_000 + 101 * seed, eval_tasks,
                eval_episodes, task_cls=task_cls, steps=0)[0]
    out = {"seed": seed, "body": body, "env_steps": env_steps, "oracle": ret, "ppo_train_s": time.perf_counter() - t0}
    log(json.dumps(out))
    return out


def merge_by_seed(records: list[dict]) -> list[dict]:
    """One record per training seed from the parts of separate runs (a ``--meta-only`` and a
    ``--baselines-only`` run of the same seeds); parts must agree on the setting they were run at."""
    merged: dict[int, dict] = {}
    for r in records:
        m = merged.setdefault(r["seed"], {})
        for k in ("body", "iters", "tasks", "episodes", "horizon"):
            if k in m and k in r and m[k] != r[k]:
                raise SystemExit(f"seed {r['seed']}: results at different settings ({k} {m[k]} and {r[k]})")
        m.update(r)
    return list(merged.values())


def summarise(results: list[dict]) -> str:
    curves = ["meta"] + sorted(k for k in results[0] if k.startswith(("pretrained_ft_", "random_ft_")))
    keys = [k for k in curves if all(k in r for r in results)]  # a part run alone has only its own curves
    lines = [f"{'':44s}" + "".join(f"{'after ' + str(m) + ' steps':>18s}" for m in range(STEPS + 1))]
    for k in keys:
        m, h = interval(np.array([r[k] for r in results]))
        lines.append(f"{k:44s}" + "".join(f"{mi:10.1f} +-{hi:5.1f}" for mi, hi in zip(m, h)))
    task = PUBLISHED_TASK[results[0].get("body", "ant")]
    for k, v in PUBLISHED.items():
        if not k.startswith(task):
            continue
        lines.append(f"{'published ' + k:44s}" + "".join(f"{x:>18s}" for x in v))
    # learning during meta-training: the training batches' returns by step, first and last 5 iterations
    for r in results:
        sr = np.array(r.get("step_returns", []))
        if len(sr) >= 10:
            lines.append(f"seed {r['seed']} meta-training returns by step, iterations 0-4: "
                         f"{np.round(sr[:5].mean(0), 1).tolist()}, last 5: {np.round(sr[-5:].mean(0), 1).tolist()}")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--body", choices=sorted(TASKS), default="ant",
                    help="ant: MAML's ant forward/backward; runner: its half-cheetah forward/backward; "
                         "runner-vel: its half-cheetah goal velocity")
    ap.add_argument("--iters", type=int, default=None, help="meta-iterations per seed (default: ant 40, runner 600, runner-vel 300)")
    ap.add_argument("--tasks", type=int, default=10, help="tasks (directions) per meta-iteration")
    ap.add_argument("--episodes", type=int, default=10, help="episodes per task and step")
    ap.add_argument("--eval-tasks", type=int, default=EVAL_TASKS)
    ap.add_argument("--eval-episodes", type=int, default=EVAL_EPISODES)
    ap.add_argument("--json", help="also write the per-seed results here (rewritten after every seed)")
    ap.add_argument("--summarise", nargs="+", metavar="JSON", help="only summarise the results written by earlier runs")
    ap.add_argument("--oracle", action="store_true",
                    help="only MAML's oracle: PPO told the task, on the env steps of --iters meta-iterations")
    ap.add_argument("--meta-only", action="store_true", help="skip PPO pre-training and the fine-tuning baselines")
    ap.add_argument("--baselines-only", action="store_true",
                    help="skip meta-training: only PPO on the same env steps and the fine-tuning baselines "
                         "(merge with a --meta-only run of the same seeds through --summarise)")
    add_config_options(ap)
    args = ap.parse_args(argv)
    if args.meta_only and args.baselines_only:
        ap.error("--meta-only and --baselines-only leave nothing to run: give one of them")
    t0 = time.perf_counter()
    iters = args.iters or DEFAULT_ITERS[args.body]
    if args.oracle:
        env_steps = meta_env_steps(iters, args.tasks, args.episodes, TASKS[args.body].horizon)
        res = [oracle_seed(s, env_steps, args.body, eval_tasks=args.eval_tasks, eval_episodes=args.eval_episodes)
               for s in range(args.first_seed, args.first_seed + args.seeds)]
        if args.json:
            with open(args.json, "w") as f:
                json.dump(res, f)
        m, h = interval(np.array([[r["oracle"]] for r in res]))
        print(f"oracle ({args.body}, {env_steps} env steps per seed): {m[0]:.1f} +- {h[0]:.1f} per episode")
        return
    if args.summarise:
        results = merge_by_seed([r for path in args.summarise for r in json.load(open(path))])
    else:
        results = []
        for s in range(args.first_seed, args.first_seed + args.seeds):
            results.append(run_seed(s, iters, args.tasks, args.episodes, eval_tasks=args.eval_tasks,
                                    eval_episodes=args.eval_episodes, body=args.body,
                                    baselines=not args.meta_only, meta=not args.baselines_only,
                                    normalize_obs=args.normalize_obs,
                                    **config_overrides(args.set)))
            if args.json:
                with open(args.json, "w") as f:
                    json.dump(results, f)
    task_cls = TASKS[results[0].get("body", "ant")]
    print(f"mean return per episode ({results[0].get('body', task_cls.BODY)}, horizon {results[0].get('horizon', task_cls.horizon)}) after 0..3 steps, "
          "95% interval over training seeds")
    print(summarise(results))
    print(f"total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
