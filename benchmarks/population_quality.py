"""The population's quality bars, measured as the agents play in games (an experiment, not product code).

    python -m benchmarks.population_quality --db ~/sumo-runs/pop.sqlite --out q.json --markdown docs/population.md
    python -m benchmarks.population_quality --db train.sqlite --agent probe-ant-mlp@600 --out cand.json   # a candidate
    python -m benchmarks.population_quality --db any.sqlite --shipped --out q.json --manifest policies/manifest.json

For every population slot (a plan's steps, default the shipped plan's; ``--shipped`` measures the
canonical names of the shipped population instead) its final stage plays iterated games of
``--rounds`` rounds of 3 bouts, adapting between rounds by its strategy as in any game, under the
faithful physics from the standard start, on fresh seeds:

- against a motionless Ant and a motionless Bug (bar: >= 85% of bouts won), random actions (>= 90%),
  and its own stage 1 (>= 65%; both adapt);
- against the original RoboSumo MLP v3 (bar for the Ant and Bug MLP and LSTM: >= 30%) and LSTM v3
  (reported) of its body, when a zoo folder is at hand (``--zoo``, else SUMO_ZOO_DIR, else
  ../shared/robosumo-zoo): only measured against, from the database's ``zoo-<body>-<arch>-v3`` or the
  folder's files;
- against the final no-adaptation MLP and LSTM of each other body (reported);
- every cell also says how its bouts ended (won by push-out or fall, lost, timeout) and how long they
  lasted (mean, median); bouts against the motionless bodies that end by timeout: <= 10%.

``--only`` measures some slots, ``--agent NAME@VERSION`` (repeatable) measures any agent of ``--db`` in
its slot's place and on its slot's seeds (a candidate from a training database, against the same
opponents). ``--manifest`` writes each result into the manifest entry whose final stage was measured
(the same SHA-256) as ``provenance.quality``. Bad arguments: one sentence, exit 2, nothing written.
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
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from benchmarks import population_fights as PF

T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365}


def _play(job: tuple) -> tuple:
    import torch

    from sumo_cli.compete.game import FixedOpponent, GameSettings, play_game

    key, a, b, rounds, seed = job
    torch.set_num_threads(1)
    if isinstance(b, tuple):
        b = FixedOpponent(*b)
    result = play_game(a, b, GameSettings(rounds=rounds, episodes=3, physics="faithful"), seed)
    return key, PF.summarize(e for rd in result.rounds for e in rd.episodes)


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
    ap.add_argument("--agent", action="append", default=[], help="NAME[@VERSION] of --db measured in its slot's place "
                    "instead of the slot's final stage (repeatable; only these, with the slots of --only, are measured)")
    ap.add_argument("--parts", default="bars,cross,zoo", help="bars (motionless, random, stage 1), cross (the other "
                    "bodies) and/or zoo (the body's original MLP v3 and LSTM v3, when a zoo folder is at hand)")
    ap.add_argument("--zoo", default=None, help="folder of the original RoboSumo agents (default: SUMO_ZOO_DIR, else "
                    "../shared/robosumo-zoo when there; empty: none); only measured against")
    ap.add_argument("--manifest", default=None, help="also write each measured final stage's results into this "
                    "manifest's entry of the same agent (same SHA-256) as provenance.quality")
    ap.add_argument("--merge", action="store_true", help="keep the games of an existing --out file (without one, "
                    "the --manifest's recorded quality) and add these")
    ap.add_argument("--out", required=True, help="JSON results by slot")
    ap.add_argument("--markdown", default=None, help="also write the results as a Markdown table")
    args = ap.parse_args(argv)
    try:
        wanted, args.zoo_used = _checked(args)
    except PF.BadInput as exc:
        print(exc, file=sys.stderr)
        return 2

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
        shas = {m: next(v.sha256 for v in agents[m].versions if v.version == vs[-1]) for m, vs in stages.items()}
        try:
            cands = PF.resolve_candidates(s, wanted)
            missing = [m for m in only if m not in stages]
            if missing:
                raise PF.BadInput(f"--only {missing[0]}: the database has no versions of {slots.get(missing[0], missing[0])}")
        except PF.BadInput as exc:
            print(exc, file=sys.stderr)
            return 2
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
            origin = (agent.origin or {}) if agent else {}
            if run_id is None and step.trains and "wall_seconds" in origin:  # a shipped agent: all its sittings
                budget[m] = (origin.get("iterations"), origin.get("env_steps") or 0, origin.get("wall_seconds") or 0.0)
                continue
            if agent is None or run_id is None or not step.trains:
                continue
            its = s.query(Iteration).filter(Iteration.run_id == run_id).all()
            budget[m] = (len(its), max(i.env_steps for i in its), sum(i.wall_seconds for i in its))

    @functools.lru_cache(maxsize=None)  # the pool's finals are every slot's cross-body opponents: load each once
    def data(slot: str, version: int) -> AgentData:
        return AgentData.from_loaded(load_agent(db, f"{slots[slot]}@{version}"))

    # a slot's seeds, the same whichever slots the database holds yet; a candidate plays on its slot's
    index = {m: i for i, m in enumerate(sorted(plan.members()))}
    slot_of = {m: m for m in stages}
    for key, (name, slot, vs, sha) in cands.items():
        slots[key], stages[key], shas[key], slot_of[key] = name, vs, sha, slot
    zoo = {}  # body -> its original MLP v3 and LSTM v3
    jobs = []
    for slot in sorted(k for k in stages if k in only or k in cands) if only or cands else sorted(k for k in index if k in stages):
        vs, i = stages[slot], index.get(slot_of[slot], len(index))
        ref = names.parse(slot_of[slot])
        final = data(slot, vs[-1])
        seed = args.seed + 100 * i
        if "bars" in args.parts:
            jobs += [((slot, "motionless-ant"), final, ("motionless", "ant"), args.rounds, seed),
                     ((slot, "motionless-bug"), final, ("motionless", "bug"), args.rounds, seed + 1),
                     ((slot, "random"), final, ("random", ref.body), args.rounds, seed + 2),
                     ((slot, "stage-1"), final, data(slot, vs[0]), args.rounds, seed + 3)]
        if "zoo" in args.parts and args.zoo_used:
            if ref.body not in zoo:
                zoo[ref.body] = PF.zoo_opponents(db, ref.body, args.zoo_used, load_agent)
            jobs += [((slot, name), final, opp, args.rounds, seed + 4 + k) for k, (name, opp) in enumerate(zoo[ref.body].items())]
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
    previous = json.loads(Path(args.out).read_text()) if args.merge and Path(args.out).is_file() else \
        PF.manifest_quality(Path(args.manifest)) if args.merge and args.manifest else None
    if previous:
        measured = {slot for (slot, _), *_ in jobs}
        # a slot measured now keeps only the games of the parts not measured now (its agent may have changed)
        results = {slot: {k: g for k, g in e["games"].items() if slot not in measured or _part(k) not in args.parts}
                   for slot, e in previous.items()}
        budget = {**{slot: tuple(e["budget"][k] for k in ("iterations", "env_steps", "wall_seconds"))
                     for slot, e in previous.items() if "budget" in e}, **budget}
        for key, e in previous.items():  # a candidate, or a slot this database lacks, measured before: as the file says
            if key not in stages:
                slots[key], stages[key], slot_of[key] = e["agent"].split("@")[0], e["stage_versions"], e["slot"]
    with ProcessPoolExecutor(args.workers) as pool_ex:
        for (slot, what), r in pool_ex.map(_play, jobs):
            results.setdefault(slot, {})[what] = r
            print(f"{time.time() - t0:7.0f}s {slot:18s} {what:28s} {r['won']}/{r['bouts']}", flush=True)
    out = {}
    for slot, games in sorted(results.items()):
        entry = {"agent": f"{slots[slot]}@{stages[slot][-1]}", "slot": slot_of[slot], "stage_versions": stages[slot],
                 "games": games, "bars": PF.bars(slot_of[slot], games)}
        barred = [b["met"] for b in entry["bars"].values() if "met" in b]
        entry["all_bars_met"] = all(barred) if barred else None  # None: no cell with a bar measured
        if names.parse(slot_of[slot]).strategy == "meta":
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
        Path(args.markdown).write_text(PF.markdown(out, args))
    if args.manifest:
        written = PF.write_quality(Path(args.manifest), out, shas)
        print(f"quality written into {args.manifest} for {', '.join(written) or 'no entry (no measured final stage is shipped)'}")
    return 0


def _part(game: str) -> str:
    """The --parts entry that plays a game of this key."""
    return "cross" if "@" in game else "zoo" if game.startswith("zoo-") else "bars"


def _checked(args) -> tuple[list, Path | None]:  # noqa: ANN001
    """The arguments checked before anything is opened or written: the candidates and the zoo folder."""
    parts = {p for p in args.parts.split(",") if p}
    if not parts or parts - {"bars", "cross", "zoo"}:
        raise PF.BadInput(f"--parts {args.parts}: give bars, cross and/or zoo, comma-separated")
    if args.rounds < 1 or args.cross_rounds < 1 or args.workers < 1:
        raise PF.BadInput("--rounds, --cross-rounds and --workers must be at least 1")
    if "://" not in args.db and not Path(args.db).expanduser().is_file():
        raise PF.BadInput(f"--db {args.db}: no such database file")
    if args.manifest and not Path(args.manifest).is_file():
        raise PF.BadInput(f"--manifest {args.manifest}: no such manifest file")
    from sumo_cli import names

    bad = [s for s in args.only.split(",") if s and s not in names.all_combination_names()]
    if bad:
        raise PF.BadInput(f"--only {bad[0]}: not a population slot such as ant-mlp or spider-meta")
    return PF.parse_candidates(args.agent), PF.zoo_folder(args.zoo, Path(__file__).resolve().parents[1])


if __name__ == "__main__":
    raise SystemExit(main())
