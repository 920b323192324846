"""The population's quality bars, measured as the agents play in games (an experiment, not product code).

    python -m benchmarks.population_quality --db ~/sumo-runs/pop.sqlite --out q.json --markdown docs/results/population.md

For every population slot (a plan's steps, default the shipped plan's; ``--shipped`` measures the
canonical names of the shipped population instead) its final stage plays iterated games of
``--rounds`` rounds of 3 bouts, adapting between rounds by its strategy as in any game, under the
faithful physics from the standard start, on fresh seeds:

- against a motionless Ant and a motionless Bug (bar: >= 85% of bouts won), random actions (>= 90%),
  and its own stage 1 (>= 65%; both adapt);
- against the final no-adaptation MLP and LSTM of each other body (reported);
- a meta-learner also plays those cross-body games with its meta-update switched off, on the same
  seeds: bouts won adapted minus unadapted, with a 95% t-interval over the games; and the held-out
  return gain its training run measured (adapted minus unadapted on the pool's next versions).

Games run in parallel worker processes (``--workers``); everything is seeded.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

BARS = {"motionless-ant": 0.85, "motionless-bug": 0.85, "random": 0.90, "stage-1": 0.65}
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365}


def _play(job: tuple) -> tuple:
    import torch

    from sumo_cli.compete.game import FixedOpponent, GameSettings, play_game

    key, a, b, rounds, seed = job
    torch.set_num_threads(1)
    if isinstance(b, tuple):
        b = FixedOpponent(*b)
    result = play_game(a, b, GameSettings(rounds=rounds, episodes=3, physics="faithful"), seed)
    eps = [e.outcome for rd in result.rounds for e in rd.episodes]
    return key, {"won": eps.count("win"), "drawn": eps.count("draw"), "lost": eps.count("loss"), "bouts": len(eps)}


def _wilson(k: int, n: int) -> tuple[float, float]:
    if n == 0:
        return (math.nan, math.nan)
    z, p = 1.96, k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (centre - half, centre + half)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--plan", default=None, help="the plan whose steps fill the slots (default: the shipped plan)")
    ap.add_argument("--shipped", action="store_true", help="measure the shipped canonical names instead of the plan's steps")
    ap.add_argument("--rounds", type=int, default=32, help="rounds of 3 bouts per game (32: 96 bouts)")
    ap.add_argument("--cross-rounds", type=int, default=16, help="rounds per cross-body game (reported only)")
    ap.add_argument("--seed", type=int, default=7000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--only", default="", help="comma-separated slots (default: all)")
    ap.add_argument("--parts", default="bars,cross", help="bars (motionless, random, stage 1) and/or cross (the other bodies)")
    ap.add_argument("--merge", action="store_true", help="keep the games of an existing --out file and add these")
    ap.add_argument("--out", required=True, help="JSON results by slot")
    ap.add_argument("--markdown", default=None, help="also write the results as a Markdown table")
    args = ap.parse_args(argv)

    from sumo_cli import names
    from sumo_cli.compete.game import AgentData
    from sumo_cli.compete.population import stage_versions
    from sumo_cli.selfplay.meta_selfplay import heldout_summary
    from sumo_cli.store.library import load_agent
    from sumo_cli.runs.population_plan import load_plan
    from sumo_cli.store.shipped import register_shipped
    from sumo_cli.store import registry
    from sumo_cli.store.database import Database
    from sumo_cli.store.models import Iteration

    db = Database(args.db if "://" in args.db else f"sqlite:///{Path(args.db).expanduser().resolve()}")
    register_shipped(db)
    plan = load_plan(args.plan)
    slots = {m: (m if args.shipped else step) for m, step in plan.members().items()}
    only = [s for s in args.only.split(",") if s]
    with db.read() as s:
        agents = {m: registry.get_agent(s, a) for m, a in slots.items()}
        stages = {m: stage_versions([v.version for v in a.versions]) for m, a in agents.items() if a and a.versions}
        held = {}
        for m, a in slots.items():
            agent = agents[m]
            if agent is None:
                continue
            run_id = (agent.origin or {}).get("run_id")
            if names.parse(m).strategy == "meta" and run_id is not None:
                its = s.query(Iteration).filter(Iteration.run_id == run_id).order_by(Iteration.iteration).all()
                held[m] = heldout_summary([i.metrics for i in its])
        budget = {}  # slot -> (iterations, env steps, wall seconds) of its own training run (tracking: none)
        for m, a in slots.items():
            agent = agents[m]
            step = plan.step(plan.members()[m])
            run_id = (agent.origin or {}).get("run_id") if agent else None
            if agent is None or run_id is None or not step.trains:
                continue
            its = s.query(Iteration).filter(Iteration.run_id == run_id).all()
            budget[m] = (len(its), max(i.env_steps for i in its), sum(i.wall_seconds for i in its))

    @functools.lru_cache(maxsize=None)  # the pool's finals are every slot's cross-body opponents: load each once
    def data(slot: str, version: int) -> AgentData:
        return AgentData.from_loaded(load_agent(db, f"{slots[slot]}@{version}"))

    jobs = []
    for i, (slot, vs) in enumerate(sorted(stages.items())):
        if only and slot not in only:
            continue
        ref = names.parse(slot)
        final = data(slot, vs[-1])
        seed = args.seed + 100 * i
        if "bars" in args.parts:
            jobs += [((slot, "motionless-ant"), final, ("motionless", "ant"), args.rounds, seed),
                     ((slot, "motionless-bug"), final, ("motionless", "bug"), args.rounds, seed + 1),
                     ((slot, "random"), final, ("random", ref.body), args.rounds, seed + 2),
                     ((slot, "stage-1"), final, data(slot, vs[0]), args.rounds, seed + 3)]
        if "cross" not in args.parts:
            continue
        for j, other in enumerate(b for b in names.BODIES if b != ref.body):
            for arch in names.ARCHS:
                pool = names.canonical_name(other, arch, "none")
                if pool not in stages:
                    continue
                opp = data(pool, stages[pool][-1])
                jobs.append(((slot, f"{pool}@{stages[pool][-1]}"), final, opp, args.cross_rounds, seed + 10 + 2 * j + (arch == "lstm")))
                if ref.strategy == "meta":
                    jobs.append(((slot, f"{pool}@{stages[pool][-1]} unadapted"), dataclasses.replace(final, strategy="none"),
                                 opp, args.cross_rounds, seed + 10 + 2 * j + (arch == "lstm")))
    t0 = time.time()
    results: dict = {}
    if args.merge and Path(args.out).is_file():
        results = {slot: dict(e["games"]) for slot, e in json.loads(Path(args.out).read_text()).items()}
    with ProcessPoolExecutor(args.workers) as pool_ex:
        for (slot, what), r in pool_ex.map(_play, jobs):
            results.setdefault(slot, {})[what] = r
            print(f"{time.time() - t0:7.0f}s {slot:18s} {what:28s} {r['won']}/{r['bouts']}", flush=True)
    out = {}
    for slot, games in sorted(results.items()):
        entry = {"agent": f"{slots[slot]}@{stages[slot][-1]}", "stage_versions": stages[slot], "games": games, "bars": {}}
        for what, bar in BARS.items():
            if what not in games:
                continue
            g = games[what]
            rate = g["won"] / g["bouts"]
            entry["bars"][what] = {"won": g["won"], "bouts": g["bouts"], "rate": round(rate, 4),
                                   "ci95": [round(x, 4) for x in _wilson(g["won"], g["bouts"])], "bar": bar, "met": rate >= bar}
        entry["all_bars_met"] = all(b["met"] for b in entry["bars"].values())
        if names.parse(slot).strategy == "meta":
            diffs = [(games[k]["won"] - games[k + " unadapted"]["won"]) / games[k]["bouts"]
                     for k in games if "@" in k and not k.endswith("unadapted")]
            x = np.array(diffs)
            half = T975.get(len(x) - 1, 2.0) * x.std(ddof=1) / math.sqrt(len(x)) if len(x) > 1 else math.nan
            entry["meta_gain_bouts_won"] = {"mean": round(float(x.mean()), 4), "ci95": round(float(half), 4), "games": len(x)}
            entry["meta_gain_heldout_return"] = held.get(slot)
        if slot in budget:
            entry["budget"] = dict(zip(("iterations", "env_steps", "wall_seconds"), budget[slot]))
        out[slot] = entry
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(args.markdown).write_text(markdown(out, args))
    return 0


def markdown(out: dict, args) -> str:  # noqa: ANN001
    from sumo_cli import names

    order = {n: i for i, n in enumerate(names.all_combination_names())}
    lines = [
        "# The population's quality, measured as the agents play in games",
        "",
        f"Generated by `python -m benchmarks.population_quality --rounds {args.rounds} --cross-rounds {args.cross_rounds} "
        f"--seed {args.seed}` (faithful physics, standard start, fresh seeds; adaptive agents adapt between rounds of 3 "
        "bouts). Share of bouts won by each slot's final stage, with its 95% Wilson interval; bars: motionless Ant and Bug "
        ">= 85%, random actions >= 90%, its own stage 1 >= 65%.",
        "",
        "| agent (final stage) | stages | motionless Ant | motionless Bug | random | own stage 1 | all bars |",
        "|---|---|---|---|---|---|---|",
    ]
    for slot in sorted(out, key=lambda n: order.get(n, 99)):
        e = out[slot]
        cells = [f"{b['rate']:.1%} ({b['won']}/{b['bouts']}; {b['ci95'][0]:.0%}-{b['ci95'][1]:.0%})"
                 + ("" if b["met"] else " **below**") for b in e["bars"].values()]
        lines.append(f"| `{slot}` ({e['agent']}) | {','.join(map(str, e['stage_versions']))} | " + " | ".join(cells)
                     + f" | {'met' if e['all_bars_met'] else 'not met'} |")
    lines += ["", "Against the pool's final no-adaptation agents of the other two bodies (reported; share of bouts won):", "",
              "| agent | " + " | ".join(["opponent"] * 4) + " |", "|---|---|---|---|---|"]
    for slot in sorted(out, key=lambda n: order.get(n, 99)):
        games = out[slot]["games"]
        cells = [f"{k}: {g['won'] / g['bouts']:.0%} of {g['bouts']}" for k, g in games.items() if "@" in k and not k.endswith("unadapted")]
        lines.append(f"| `{slot}` | " + " | ".join(cells) + " |")
    lines += ["", "What each agent's training cost on the 2-core machine that trained the plan (the runs' own recorded wall "
              "time, two steps side by side; a tracking agent plays its sibling's versions and costs nothing more):", "",
              "| agent | iterations | env steps | wall hours |", "|---|---|---|---|"]
    total_steps = total_s = 0
    for slot in sorted(out, key=lambda n: order.get(n, 99)):
        b = out[slot].get("budget")
        if b:
            total_steps, total_s = total_steps + b["env_steps"], total_s + b["wall_seconds"]
            lines.append(f"| `{slot}` | {b['iterations']} | {b['env_steps'] / 1e6:.2f} M | {b['wall_seconds'] / 3600:.2f} |")
    lines.append(f"| **the plan** | | **{total_steps / 1e6:.1f} M** | **{total_s / 3600:.2f}** |")
    metas = [s for s in out if "meta_gain_bouts_won" in out[s]]
    if metas:
        lines += ["", "Meta-learners: the meta-update's gain, adapted minus unadapted (95% intervals):", "",
                  "| agent | bouts won in games vs the cross-body pool (same seeds) | held-out return per bout in training (its measurements) |",
                  "|---|---|---|"]
        for slot in sorted(metas, key=lambda n: order.get(n, 99)):
            g, h = out[slot]["meta_gain_bouts_won"], out[slot].get("meta_gain_heldout_return")
            hs = "-" if not h else f"{h['mean']:+.1f} +- {h['ci95']:.1f} (n = {h['n']})"
            lines.append(f"| `{slot}` | {g['mean']:+.1%} +- {g['ci95']:.1%} ({g['games']} games) | {hs} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
