"""Our trainer against Stable-Baselines3 PPO on the same single-agent task, in one run.

The task: agent A (an Ant by default) learns against a fixed opponent (a motionless Ant, or a
stored policy) under the faithful physics (RK4), with the training reward of our trainer's env
(:class:`~sumo_cli.selfplay.sumo_vec.SumoVecEnv`: reference dense shaping with weight ``alpha`` plus
``1 - alpha`` of the sparse reward; ``alpha`` = 1 is what our trainer's first iterations see).

Three figures, all env steps per second measured by wall clock in the same process run:

- ``raw``: :func:`~sumo_cli.sim.sumo_env.raw_physics_steps_per_second` of the same model (our
  trainer's bouts on as many native threads as it has workers; no Python between steps);
- ``ours``: :func:`sumo_cli.selfplay.selfplay.train` with its default settings (MLP policy, 8 bout
  slots x 512 steps per iteration in 2 shards, 10 epochs of 8 minibatches) on ``workers`` processes,
  every opponent motionless (or the given one), rollouts *and* PPO updates included; the process
  pool is started and its simulators built before the clock starts (SB3's worker processes and
  environments are likewise built before its clock);
- ``sb3``: ``stable_baselines3.PPO("MlpPolicy", ...)`` with its default hyper-parameters
  (n_steps 2048, batch 64, 10 epochs, ...) on a ``SubprocVecEnv`` of ``sb3_envs`` workers each
  holding one :class:`SumoSingleEnv`, torch on the CPU, ``model.learn(steps)`` timed as a whole.

Both learners get the same number of env steps (rounded up to whole iterations / rollouts of both).
Stable-Baselines3 is an optional extra (``pip install 'sumo[compare]'``); it and Gymnasium are
imported only when used.

    python -m sumo_cli.bench.sb3_compare [--steps 49152] [--quick] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from functools import partial

import numpy as np

try:  # Gymnasium is an optional dependency (the pettingzoo / compare extras)
    import gymnasium as gym
    from gymnasium import spaces
except ImportError:  # pragma: no cover - exercised only without the optional group
    gym = None
    spaces = None

INSTALL_HINT = ("Stable-Baselines3 is not installed: install it with pip install 'stable-baselines3>=2.3' "
                "(the project's optional extra 'compare').")

# SB3 defaults (PPO.__init__): one rollout = n_steps per env
SB3_N_STEPS = 2048
QUICK_STEPS = 4096


def sb3_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("stable_baselines3") is not None


_Base = gym.Env if gym is not None else object


class SumoSingleEnv(_Base):
    """One RoboSumo bout as a Gymnasium env: the learner is agent A (``body``), agent B is a fixed
    :class:`~sumo_cli.selfplay.sumo_vec.OpponentPolicy` (default: a motionless body of the same kind).

    Built on :class:`~sumo_cli.selfplay.sumo_vec.SumoVecEnv` with one bout, so observations, rewards,
    terminations and truncations are exactly those our trainer's env gives for the same seed and
    actions: observations ``Box(-inf, inf, (obs_size,), float64)`` (BatchedSumo's layout; ant: 120),
    actions ``Box(-1, 1, (n_actions,), float32)`` (ant: 8; applied as given, MuJoCo clamps the
    motors), reward ``alpha * dense + (1 - alpha) * sparse``. When a bout ends the underlying env
    has already started the next one; ``reset()`` (no seed) returns that start without another
    reset, ``reset(seed=s)`` re-seeds and restarts (same seed, same start).
    """

    metadata = {"render_modes": []}

    def __init__(self, body: str = "ant", opponent=None, physics: str = "faithful", alpha: float = 1.0,
                 shaping=None, seed: int | None = None):
        if gym is None:
            raise ImportError("SumoSingleEnv needs gymnasium: " + INSTALL_HINT)
        from sumo_cli.selfplay.sumo_vec import OpponentPolicy, SumoVecEnv

        opp = opponent if opponent is not None else OpponentPolicy.motionless(body)
        self.opponent = opp
        self._env = SumoVecEnv(body, opp.body, 1, [] if opp.is_motionless else [opp], physics=physics,
                               motionless_prob=1.0 if opp.is_motionless else 0.0, shaping=shaping,
                               alpha=alpha, threads=1)
        self.observation_space = spaces.Box(-np.inf, np.inf, (self._env.obs_dim,), np.float64)
        self.action_space = spaces.Box(-1.0, 1.0, (self._env.act_dim,), np.float32)
        self._next_obs: np.ndarray | None = None  # the next bout's start, after a bout ended
        self._seed = seed

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is None and self._seed is not None:
            seed, self._seed = self._seed, None
        super().reset(seed=seed)
        if seed is not None:
            obs = self._env.reset(seed=int(seed))[0]
        elif self._next_obs is not None:
            obs = self._next_obs
            self._env.episodes.clear()  # finished bouts' records are not needed here
        else:
            obs = self._env.reset(seed=int(self.np_random.integers(2**31 - 1)))[0]
        self._next_obs = None
        return obs.copy(), {}

    def step(self, action):
        out = self._env.step(np.asarray(action, dtype=np.float64).reshape(1, -1))
        done = bool(out.terminated[0] or out.truncated[0])
        info = {}
        if done:
            self._next_obs = out.obs[0].copy()
            rec = self._env.episodes[-1]
            info = {"outcome": rec.outcome, "reason": rec.reason, "length": rec.length,
                    "faithful_return": rec.faithful_return}
        return (out.final_obs[0].copy(), float(out.reward[0]), bool(out.terminated[0]), bool(out.truncated[0]),
                info)

    def close(self) -> None:
        env = getattr(self, "_env", None)
        if env is not None:
            env.close()


def make_env(body: str = "ant", physics: str = "faithful", alpha: float = 1.0, opponent=None) -> "SumoSingleEnv":
    """A factory for SB3's vectorised envs (picklable with functools.partial)."""
    return SumoSingleEnv(body, opponent=opponent, physics=physics, alpha=alpha)


# ---------------------------------------------------------------------------------------------
# the three measurements


def _machine() -> dict:
    import mujoco
    import torch

    from sumo_cli.bench.env_bench import cpu_info

    return {"cpu": cpu_info(), "python": platform.python_version(), "mujoco": mujoco.__version__,
            "torch": torch.__version__, "load_average": [round(x, 2) for x in os.getloadavg()]}


def round_steps(steps: int, ours_per_iteration: int, sb3_per_rollout: int) -> int:
    """``steps`` rounded up to a whole number of both learners' batches."""
    unit = math.lcm(ours_per_iteration, sb3_per_rollout)
    return max(1, math.ceil(steps / unit)) * unit


def _warm(job) -> int:
    """In a worker process: import everything and build the shard's simulator (cached there)."""
    from sumo_cli.selfplay import selfplay as SP

    SP._sim_for(job)
    time.sleep(0.3)  # hold this worker so that the other shard's warm-up lands on another one
    return os.getpid()


def measure_ours(steps: int, body: str = "ant", physics: str = "faithful", workers: int = 2, seed: int = 0,
                 opponent=None, **cfg_overrides) -> dict:
    """Our trainer (defaults, MLP) for ``steps`` env steps against a fixed opponent; wall clock of
    :func:`~sumo_cli.selfplay.selfplay.train`, updates included."""
    from sumo_cli.selfplay import selfplay as SP
    from sumo_cli.runtime.executor import make_executor

    probe = SP.TrainConfig(body=body, arch="mlp", physics=physics, **cfg_overrides)
    iterations = max(1, math.ceil(steps / probe.steps_per_iteration))
    kw = dict(body=body, arch="mlp", physics=physics, iterations=iterations, seed=seed, **cfg_overrides)
    if opponent is None or opponent.is_motionless:
        kw["motionless_iterations"] = iterations  # every interaction against a motionless opponent
        others = None
    else:
        kw["opponents"] = [opponent.key]
        others = {opponent.key: [opponent]}
    cfg = SP.TrainConfig(**kw)
    problems = cfg.check()
    if problems:
        raise ValueError("; ".join(problems))
    learner = SP.PPOLearner(SP.policy_spec(cfg), cfg)
    store = SP.MemoryStore(body, others)
    store.start(learner)
    executor = make_executor(workers)
    try:
        jobs = SP.plan_jobs(cfg, 1, store.pool(), store)
        pids = sorted({pid for _, pid in executor.run(_warm, [(j.shard, (j,)) for j in jobs])})
        t0 = time.perf_counter()
        hist = SP.train(cfg, learner, store, executor)
        wall = time.perf_counter() - t0
    finally:
        executor.close()
    done = cfg.steps_per_iteration * len(hist)
    roll = sum(p.metrics["rollout_seconds"] for p in hist)
    upd = sum(p.metrics["update_seconds"] for p in hist)
    return {
        "steps": done, "seconds": round(wall, 2), "steps_per_second": round(done / wall, 1),
        "rollout_steps_per_second": round(done / roll, 1), "rollout_seconds": round(roll, 2),
        "update_seconds": round(upd, 2), "iterations": len(hist), "workers": workers,
        "warm_workers": len(pids), "n_envs": cfg.n_envs, "num_steps": cfg.num_steps,
        "rollout_shards": cfg.rollout_shards, "epochs": cfg.epochs, "minibatches": cfg.ppo().num_minibatches,
        "torch_threads": 1, "opponent": opponent.key if opponent is not None else "motionless",
        "final_mean_return": hist[-1].metrics.get("mean_return"),
    }


def measure_sb3(steps: int, body: str = "ant", physics: str = "faithful", n_envs: int = 2, seed: int = 0,
                opponent=None, torch_threads: int | None = 1) -> dict:
    """SB3 PPO (default hyper-parameters, MlpPolicy, CPU) on a SubprocVecEnv of ``n_envs``
    :class:`SumoSingleEnv` workers for ``steps`` env steps; wall clock of ``model.learn``.

    ``torch_threads``: intra-op threads of the learner process (None: leave torch's setting, by
    default one per core). 1 is SB3's fastest setting here: with the env workers on the same cores, two intra-op
    threads made its batch-2 policy calls about 8x slower on a loaded 2-core machine."""
    import torch

    try:
        import stable_baselines3 as sb3
        from stable_baselines3 import PPO
        from stable_baselines3.common.callbacks import BaseCallback
        from stable_baselines3.common.vec_env import SubprocVecEnv
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc

    prev = torch.get_num_threads()
    threads = torch_threads or prev
    torch.set_num_threads(threads)
    venv = SubprocVecEnv([partial(make_env, body, physics, 1.0, opponent) for _ in range(n_envs)])

    class _Clock(BaseCallback):
        """Time spent collecting (the rest of learn() is the updates and bookkeeping)."""

        rollout = 0.0

        def _on_rollout_start(self) -> None:
            self._t = time.perf_counter()

        def _on_rollout_end(self) -> None:
            self.rollout += time.perf_counter() - self._t

        def _on_step(self) -> bool:
            return True

    clock = _Clock()
    try:
        model = PPO("MlpPolicy", venv, seed=seed, device="cpu", verbose=0)
        venv.reset()  # workers' first reset outside the clock (learn() resets again)
        t0 = time.perf_counter()
        model.learn(total_timesteps=steps, callback=clock)
        wall = time.perf_counter() - t0
        done = int(model.num_timesteps)
        hp = {"n_steps": model.n_steps, "batch_size": model.batch_size, "n_epochs": model.n_epochs,
              "learning_rate": model.learning_rate, "gamma": model.gamma, "gae_lambda": model.gae_lambda}
    finally:
        venv.close()
        torch.set_num_threads(prev)
    return {"steps": done, "seconds": round(wall, 2), "steps_per_second": round(done / wall, 1),
            "rollout_steps_per_second": round(done / clock.rollout, 1), "rollout_seconds": round(clock.rollout, 2),
            "update_seconds": round(wall - clock.rollout, 2), "version": sb3.__version__, "vec_env": f"SubprocVecEnv x{n_envs}", "policy": "MlpPolicy",
            "device": "cpu", "torch_threads": threads, "hyper_parameters": hp}


def measure_raw(body: str = "ant", physics: str = "faithful", n_envs: int = 8, threads: int = 2,
                n_steps: int = 300) -> float:
    """Raw mujoco.rollout env steps per second of the same scene (see the module doc)."""
    from sumo_cli.sim.arena import build_model
    from sumo_cli.sim.sumo_env import raw_physics_steps_per_second

    return raw_physics_steps_per_second(build_model(body, body, physics), n_envs, threads, n_steps=n_steps)


def compare(steps: int = 49152, body: str = "ant", physics: str = "faithful", workers: int = 2,
            sb3_envs: int = 2, seed: int = 0, quick: bool = False, opponent=None,
            sb3_torch_threads: int | None = 1, progress=None) -> dict:
    """raw, ours and SB3 in one run; ratios ours/SB3 and ours/raw. ``quick``: one batch each."""
    from sumo_cli.selfplay import selfplay as SP

    say = progress or (lambda msg: None)
    if not sb3_available():
        raise ImportError(INSTALL_HINT)
    t_start = time.perf_counter()
    cfg = SP.TrainConfig(body=body)
    steps = round_steps(QUICK_STEPS if quick else steps, cfg.steps_per_iteration, SB3_N_STEPS * sb3_envs)
    doc = {"machine": _machine(),
           "setup": {"body": body, "opponent": opponent.key if opponent is not None else "motionless",
                     "physics": physics, "steps": steps, "seed": seed, "quick": quick}}
    say(f"raw physics: {cfg.n_envs} bouts on {workers} threads")
    raw = measure_raw(body, physics, cfg.n_envs, workers, n_steps=150 if quick else 300)
    say(f"ours: {steps} env steps, MLP, {workers} workers")
    ours = measure_ours(steps, body, physics, workers, seed, opponent)
    say(f"SB3 PPO: {steps} env steps, SubprocVecEnv x{sb3_envs}")
    sb3 = measure_sb3(steps, body, physics, sb3_envs, seed, opponent, sb3_torch_threads)
    # again at the end (not in --quick): the load of a shared machine drifts over a long run
    raw_after = None if quick else round(measure_raw(body, physics, cfg.n_envs, workers, n_steps=300), 1)
    doc["machine"]["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    doc.update({
        "raw": {"steps_per_second": round(raw, 1), "steps_per_second_after": raw_after,
                "bouts": cfg.n_envs, "threads": workers},
        "ours": ours, "sb3": sb3,
        "ours_over_sb3": round(ours["steps_per_second"] / sb3["steps_per_second"], 3),
        "ours_over_raw": round(ours["steps_per_second"] / raw, 3),
        "ours_rollout_over_raw": round(ours["rollout_steps_per_second"] / raw, 3),
        "targets": {"ours_over_sb3": 3.0, "ours_over_raw": 0.6},
        "seconds": round(time.perf_counter() - t_start, 1),
    })
    return doc


def summary_line(doc: dict) -> str:
    o, s, r = doc["ours"], doc["sb3"], doc["raw"]
    return (f"ours {o['steps_per_second']:,.0f} env steps/s (updates included), SB3 PPO {s['steps_per_second']:,.0f}, "
            f"raw physics {r['steps_per_second']:,.0f}: ours/SB3 {doc['ours_over_sb3']:.2f} (target 3), "
            f"ours/raw {doc['ours_over_raw']:.2f} (target 0.6; rollouts alone {doc['ours_rollout_over_raw']:.2f}); "
            f"{doc['setup']['steps']} steps each, {doc['seconds']:.0f} s")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=49152)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--body", default="ant")
    ap.add_argument("--physics", default="faithful")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--sb3-torch-threads", type=int, default=1, help="0: torch's default")
    a = ap.parse_args(argv)
    doc = compare(a.steps, a.body, a.physics, a.workers, quick=a.quick, sb3_torch_threads=a.sb3_torch_threads or None)
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
