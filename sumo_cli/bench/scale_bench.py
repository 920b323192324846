"""Tournament throughput by worker count, measured in one run on the same machine.

    python -m sumo_cli.bench.scale_bench --db DB --agents A,B,C [--games 64] [--rounds 3]
                                         [--physics fast] [--workers 1,2,4] [--ray 2]

Plays the same seeded schedule of games (random pairs of the agents) the way a tournament does
(engine batches on local worker processes, or Ray tasks on a throw-away local Ray instance with
``--ray`` worker CPUs) and reports games per hour and the ratio to one local worker; worker
start-up is included. It checks on the way that every worker count gave the same games. One JSON
document on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import time


def _play(executor, games: list, concurrency: int) -> tuple[float, dict]:  # noqa: ANN001
    from sumo_cli.compete.engine import batches, run_games_job
    from sumo_cli.compete.tournament import each_game

    jobs = ((i, (b, concurrency)) for i, b in enumerate(batches(games, executor.workers, concurrency)))
    t = time.perf_counter()
    results = dict(each_game(executor.run(run_games_job, jobs)))
    seconds = time.perf_counter() - t
    return seconds, {k: (r["outcome"], [(x["outcome"], x["wins_a"], x["wins_b"]) for x in r["rounds"]])
                     for k, r in results.items()}


def measure(agents: list, games: int = 64, rounds: int = 3, episodes: int = 3, physics: str = "fast",
            workers: tuple[int, ...] = (1, 2, 4), ray_cpus: int = 0, concurrency: int = 32, seed: int = 0) -> dict:
    from dataclasses import asdict

    from sumo_cli.compete.game import GameSettings
    from sumo_cli.compete.schedule import random_pairs
    from sumo_cli.runtime.executor import InlineExecutor, ProcessExecutor, RayExecutor

    settings = asdict(GameSettings(rounds=rounds, episodes=episodes, physics=physics, threads=1))
    schedule = random_pairs(len(agents), games, seed)
    plan = [(g.index, agents[g.a], agents[g.b], settings, g.seed) for g in schedule]
    rows, reference = {}, None
    setups = [(f"{w} local", (lambda w=w: InlineExecutor() if w == 1 else ProcessExecutor(w))) for w in workers]
    if ray_cpus:
        def ray_executor() -> RayExecutor:
            import ray

            ray.init(num_cpus=ray_cpus, include_dashboard=False, log_to_driver=False)
            return RayExecutor("auto", ray_cpus)

        setups.append((f"ray {ray_cpus}", ray_executor))
    for name, make in setups:
        executor = make()
        try:
            seconds, results = _play(executor, plan, concurrency)
        finally:
            executor.close()
            if name.startswith("ray"):
                import ray

                ray.shutdown()
        if reference is None:
            reference = results
        rows[name] = {"seconds": round(seconds, 2), "games_per_hour": round(3600 * games / seconds, 1),
                      "same_games_as_first": results == reference}
    base = rows[next(iter(rows))]["seconds"]
    for row in rows.values():
        row["throughput_over_first"] = round(base / row["seconds"], 3)
    return {
        "cpus": len(os.sched_getaffinity(0)), "load_average": [round(x, 2) for x in os.getloadavg()],
        "setup": {"agents": [a.display for a in agents], "games": games, "rounds": rounds, "episodes": episodes,
                  "physics": physics, "concurrency": concurrency, "seed": seed},
        "runs": rows,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--agents", required=True)
    ap.add_argument("--games", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--episodes", type=int, default=3)
    ap.add_argument("--physics", default="fast")
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--ray", type=int, default=0, help="also on a local Ray instance with this many CPUs")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    import torch

    from sumo_cli.compete.game import AgentData
    from sumo_cli.library import load_agent
    from sumo_cli.store.database import open_database

    torch.set_num_threads(1)
    db = open_database(args.db)
    agents = [AgentData.from_loaded(load_agent(db, n.strip())) for n in args.agents.split(",") if n.strip()]
    db.dispose()
    out = measure(agents, args.games, args.rounds, args.episodes, args.physics,
                  tuple(int(w) for w in args.workers.split(",")), args.ray, args.concurrency, args.seed)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
