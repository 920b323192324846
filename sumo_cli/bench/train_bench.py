"""Training throughput against the raw-MuJoCo limit, measured in one run on the same machine.

    python -m sumo_cli.bench.train_bench [--body ant] [--physics faithful] [--envs 8] [--steps 512]
                                         [--iterations 2] [--archs mlp,lstm] [--workers 1]

Reports env steps per second (every bout counted) of:

- ``raw_physics``: :func:`sumo_cli.sim.sumo_env.raw_physics_steps_per_second` -- mujoco.rollout of
  the same scene, all ``envs`` bouts on as many native threads as there are workers running shards,
  no Python between steps (the limit the training figures are compared with), measured before the
  first architecture and after each one; every architecture is compared with the mean of the two
  measurements around it (on a machine whose load changes, one measurement at the start would set
  the scale for all);
- ``batched_env``: :class:`BatchedSumo` stepped with random actions (physics + observations,
  rewards and rules), one shard's bouts, one thread, against ``raw_one_shard`` (mujoco.rollout of
  the same bouts on one thread);
- per architecture: ``rollout`` (collection only: env + learner and opponent policy calls) and
  ``iteration`` (collection + PPO update + bookkeeping: what ``sumo train`` reaches; snapshots kept
  in memory, so the database's share is not counted) -- the iterations after the first (warm-up).

and each as a fraction of the raw physics around it. With one worker (everything in this process)
the same fractions are also given in CPU time (``*_over_raw_cpu``: env steps per CPU-second of the
iterations against those of raw physics), which other jobs on the machine disturb far less than
wall time. One JSON document on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time


def measure(body: str = "ant", physics: str = "faithful", envs: int = 8, steps: int = 512, iterations: int = 2,
            archs: tuple[str, ...] = ("mlp", "lstm"), workers: int = 1, shards: int = 2) -> dict:
    import mujoco
    import torch

    from sumo_cli.selfplay import selfplay as SP
    from sumo_cli.runtime.executor import make_executor
    from sumo_cli.sim.sumo_env import BatchedSumo, batched_steps_per_second, raw_physics_steps_per_second

    torch.set_num_threads(1)
    per_shard = envs // shards
    raw_threads = max(1, min(workers, shards))
    env = BatchedSumo(body, body, per_shard, physics=physics, n_threads=1)
    model = env.model
    raw_one = raw_physics_steps_per_second(model, per_shard, 1, n_steps=200)
    batched = batched_steps_per_second(env, n_steps=200)
    env.close()
    inline = workers == 1  # the rollouts run in this process: its CPU time is the iteration's

    def raw() -> tuple[float, float | None]:
        wall = raw_physics_steps_per_second(model, envs, raw_threads, n_steps=200)
        cpu = raw_physics_steps_per_second(model, envs, raw_threads, n_steps=200, clock=time.process_time) if inline else None
        return wall, cpu

    raws = [raw()]
    out = {
        "machine": {"cpus": len(os.sched_getaffinity(0)), "python": platform.python_version(),
                    "mujoco": mujoco.__version__, "torch": torch.__version__,
                    "load_average": [round(x, 2) for x in os.getloadavg()]},
        "setup": {"body": body, "physics": physics, "envs": envs, "steps": steps, "shards": shards,
                  "workers": workers, "iterations_timed": iterations - 1},
        "raw_one_shard": round(raw_one, 1), "batched_env": round(batched, 1),
        "batched_env_over_raw": round(batched / raw_one, 3), "archs": {},
    }
    executor = make_executor(workers)
    try:
        for arch in archs:
            cfg = SP.TrainConfig(body=body, arch=arch, physics=physics, n_envs=envs, num_steps=steps,
                                 rollout_shards=shards, iterations=iterations)
            learner = SP.PPOLearner(SP.policy_spec(cfg), cfg)
            store = SP.MemoryStore(body)
            store.start(learner)
            cpu_marks: list[float] = []
            t0 = time.perf_counter()
            hist = SP.train(cfg, learner, store, executor, on_iteration=lambda _: cpu_marks.append(time.process_time()))
            total = time.perf_counter() - t0
            raws.append(raw())
            (raw_wall_a, raw_cpu_a), (raw_wall_b, raw_cpu_b) = raws[-2], raws[-1]
            raw_wall = (raw_wall_a + raw_wall_b) / 2
            timed = hist[1:] or hist
            steps_done = cfg.steps_per_iteration * len(timed)
            wall = sum(p.wall_seconds for p in timed)
            roll = sum(p.metrics["rollout_seconds"] for p in timed)
            upd = sum(p.metrics["update_seconds"] for p in timed)
            r = {
                "rollout": round(steps_done / roll, 1), "iteration": round(steps_done / wall, 1),
                "raw_physics": round(raw_wall, 1),
                "rollout_over_raw": round(steps_done / roll / raw_wall, 3),
                "iteration_over_raw": round(steps_done / wall / raw_wall, 3),
                "seconds_per_iteration": round(wall / len(timed), 2), "rollout_seconds": round(roll / len(timed), 2),
                "update_seconds": round(upd / len(timed), 2), "total_seconds": round(total, 1),
            }
            if inline and len(cpu_marks) > 1:
                cpu = cpu_marks[-1] - cpu_marks[0]
                raw_cpu = (raw_cpu_a + raw_cpu_b) / 2
                r.update(iteration_cpu=round(steps_done / cpu, 1), raw_physics_cpu=round(raw_cpu, 1),
                         iteration_over_raw_cpu=round(steps_done / cpu / raw_cpu, 3))
            out["archs"][arch] = r
    finally:
        executor.close()
    walls = [w for w, _ in raws]
    out["raw_physics"] = round(sum(walls) / len(walls), 1)
    out["raw_physics_each"] = [round(w, 1) for w in walls]
    out["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--body", default="ant")
    ap.add_argument("--physics", default="faithful")
    ap.add_argument("--envs", type=int, default=8)
    ap.add_argument("--steps", type=int, default=512)
    ap.add_argument("--iterations", type=int, default=2)
    ap.add_argument("--archs", default="mlp,lstm")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--shards", type=int, default=2)
    a = ap.parse_args(argv)
    doc = measure(a.body, a.physics, a.envs, a.steps, a.iterations, tuple(a.archs.split(",")), a.workers, a.shards)
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
