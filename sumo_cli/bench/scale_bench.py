"""Tournament throughput by worker count, peak memory and long bouts, measured in one run.

    python -m sumo_cli.bench.scale_bench --db DB --agents A,B,C [--games 64] [--rounds 3]
                                         [--physics fast] [--workers 1,2,4] [--ray 2]
                                         [--memory-population 105] [--long A,B --short C,D]

Plays the same seeded schedule of games (random pairs of the agents) the way a tournament does
(engine batches on local worker processes, or Ray tasks on a throw-away local Ray instance with
``--ray`` worker CPUs) and reports games per hour and the ratio to one local worker; worker
start-up is included. It checks on the way that every worker count gave the same games.

``--memory-population N``: first, a tournament schedule over N agents (the paper's 105: 3 bodies x 7
combinations x 5 stages, fresh weights of the zoo's sizes, so that no trained population is needed)
on two local workers; the report gives the peak resident memory of the largest worker and of this
process. ``--long A,B --short C,D``: games per hour of the pair A-B (e.g. the shipped agents, whose
bouts often run to the 500-step limit) against C-D (e.g. zoo agents), with the mean bout length,
played the same way in the same run. ``--all``: everything, with the shipped agents and the zoo's
Ant and Bug (from $SUMO_ZOO_DIR) in a throw-away database. One JSON document on stdout.
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


def synthetic_population(n: int = 105, seed: int = 0) -> list:
    """``n`` agents cycling through 3 bodies x 7 combinations x 5 stages, with fresh weights of the
    zoo's sizes (the memory of a tournament does not depend on what the weights learnt)."""
    from dataclasses import replace

    import torch

    from sumo_cli.bench.game_bench import random_agent
    from sumo_cli.names import BODIES, COMBINATIONS
    from sumo_cli.nets import policy as P

    out = []
    for i in range(n):
        body = BODIES[i % len(BODIES)]
        arch, strategy = COMBINATIONS[(i // len(BODIES)) % len(COMBINATIONS)]
        a = random_agent(body, strategy, seed + i)
        if arch == "mlp":
            spec = P.PolicySpec("mlp", a.spec["obs_dim"], a.spec["act_dim"])
            a.spec = spec.to_dict()
            a.params = {k: v.numpy() for k, v in P.init_params(spec, torch.Generator().manual_seed(seed + i)).items()}
        out.append(replace(a, name=f"synthetic-{body}-{arch}-{strategy}", version=i // (len(BODIES) * len(COMBINATIONS)) + 1))
    return out


def peak_memory(agents: list, games: int = 64, rounds: int = 3, episodes: int = 3, physics: str = "fast",
                workers: int = 2, concurrency: int = 32, seed: int = 0) -> dict:
    """A tournament schedule over ``agents`` on ``workers`` local processes: the largest worker's
    and this process's peak resident memory. Run it before anything else starts worker processes
    (the children's figure is the largest of all children this process has waited for)."""
    import resource
    from dataclasses import asdict

    from sumo_cli.compete.game import GameSettings
    from sumo_cli.compete.schedule import random_pairs
    from sumo_cli.runtime.executor import ProcessExecutor

    settings = asdict(GameSettings(rounds=rounds, episodes=episodes, physics=physics, threads=1))
    plan = [(g.index, agents[g.a], agents[g.b], settings, g.seed) for g in random_pairs(len(agents), games, seed)]
    executor = ProcessExecutor(workers)
    try:
        seconds, _ = _play(executor, plan, concurrency)
    finally:
        executor.close()
    kb = 1024 if os.uname().sysname == "Darwin" else 1  # ru_maxrss: KiB on Linux, bytes on macOS
    return {"agents": len(agents), "games": games, "rounds": rounds, "workers": workers, "concurrency": concurrency,
            "seconds": round(seconds, 2),
            "largest_worker_gb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / kb / 2**20, 3),
            "driver_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / kb / 2**20, 3)}


def bout_lengths(pairs: dict, games: int = 8, rounds: int = 3, episodes: int = 3, physics: str = "faithful",
                 concurrency: int = 32, seed: int = 0) -> dict:
    """Games per hour of each named pair ``(a, b)``, ``games`` games in one engine, with the mean
    bout length and the share of bouts that ran to the step limit."""
    from sumo_cli.compete.engine import Fixture, play_games
    from sumo_cli.compete.game import GameSettings
    from sumo_cli.compete.schedule import game_seed

    settings = GameSettings(rounds=rounds, episodes=episodes, physics=physics, threads=1)
    rows = {}
    for label, (a, b) in pairs.items():
        fixtures = [Fixture(i, a, b, settings, game_seed(seed, i)) for i in range(games)]
        t = time.perf_counter()
        results = [r for _, r in play_games(fixtures, concurrency)]
        seconds = time.perf_counter() - t
        eps = [e for r in results for rr in r.rounds for e in rr.episodes]
        rows[label] = {"agents": [a.display, b.display], "seconds": round(seconds, 2),
                       "games_per_hour": round(3600 * games / seconds, 1),
                       "mean_bout_steps": round(sum(e.length for e in eps) / len(eps), 1),
                       "bouts_at_the_limit": round(sum(e.reason == "timeout" for e in eps) / len(eps), 3)}
    first = next(iter(rows.values()))["games_per_hour"] if rows else 1.0
    for row in rows.values():
        row["games_per_hour_over_first"] = round(row["games_per_hour"] / first, 3)
    return {"games": games, "rounds": rounds, "episodes": episodes, "physics": physics, "pairs": rows}


def _throwaway_db():  # noqa: ANN202
    """A database in a temporary folder with the shipped agents and the zoo ($SUMO_ZOO_DIR) imported."""
    import tempfile

    from sumo_cli.store.library import import_zoo
    from sumo_cli.store.shipped import register_shipped
    from sumo_cli.store.database import open_database

    zoo = os.environ.get("SUMO_ZOO_DIR")
    if not zoo:
        raise SystemExit("--all needs SUMO_ZOO_DIR (the original RoboSumo policies) for the zoo agents")
    folder = tempfile.mkdtemp(prefix="sumo-scale-")
    db = open_database(os.path.join(folder, "sumo.sqlite"))
    register_shipped(db)
    import_zoo(db, zoo)
    return db


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", help="the database holding the named agents (not with --all)")
    ap.add_argument("--agents", help="the scaling part's agents, comma-separated")
    ap.add_argument("--all", action="store_true",
                    help="every part, with the shipped and zoo agents in a throw-away database")
    ap.add_argument("--memory-population", type=int, default=0, help="peak memory of a tournament over this many agents")
    ap.add_argument("--memory-games", type=int, default=64)
    ap.add_argument("--long", help="A,B: the pair of long bouts (e.g. ant-mlp,bug-mlp)")
    ap.add_argument("--short", help="C,D: the pair they are compared with (e.g. zoo-ant-lstm-v3,zoo-bug-lstm-v3)")
    ap.add_argument("--bout-games", type=int, default=8)
    ap.add_argument("--bout-physics", default="faithful")
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
    from sumo_cli.store.library import load_agent
    from sumo_cli.store.database import open_database

    torch.set_num_threads(1)
    if args.all:
        db = _throwaway_db()
        args.agents = args.agents or "zoo-ant-lstm-v3,zoo-bug-lstm-v3,zoo-spider-lstm-v3,ant-mlp,bug-mlp"
        args.memory_population = args.memory_population or 105
        args.long, args.short = args.long or "ant-mlp,bug-mlp", args.short or "zoo-ant-lstm-v3,zoo-bug-lstm-v3"
        args.ray = args.ray or 2
    elif not args.db or not args.agents:
        ap.error("give --db and --agents, or --all")
    else:
        db = open_database(args.db)

    def load(names: str) -> list:
        return [AgentData.from_loaded(load_agent(db, n.strip())) for n in names.split(",") if n.strip()]

    agents = load(args.agents)
    pairs = {}
    for label, names in (("long", args.long), ("short", args.short)):
        if names:
            a, b = load(names)
            pairs[label] = (a, b)
    db.dispose()
    out = {"load_average_at_start": [round(x, 2) for x in os.getloadavg()]}
    if args.memory_population:
        out["memory"] = peak_memory(synthetic_population(args.memory_population), args.memory_games, args.rounds,
                                    args.episodes, args.physics, 2, args.concurrency, args.seed)
    out["scaling"] = measure(agents, args.games, args.rounds, args.episodes, args.physics,
                             tuple(int(w) for w in args.workers.split(",")), args.ray, args.concurrency, args.seed)
    if pairs:
        out["bouts"] = bout_lengths(pairs, args.bout_games, args.rounds, args.episodes, args.bout_physics,
                                    args.concurrency, args.seed)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
