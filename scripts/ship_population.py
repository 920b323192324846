"""Ship the population a plan trained into ``policies/`` (a maintainer's tool).

    python scripts/ship_population.py --db ~/sumo-runs/pop.sqlite --code-commit abc1234 [--quality q.json]

Every step of the plan that fills a population slot ships under the slot's canonical name (``ant-meta``
for the step ``pop-ant-meta``) with its five stage versions (compete/population.py); a tracking step's
entry names its sibling's files, so shared weights are stored once. The manifest is written anew: it
holds the population and the agents shipped beside it; only what changed is written (a file already shipped with the
same SHA-256 is left as it is, an agent done from shipped keeps its entry, files no longer shipped are
removed), so the history stays small. Agents shipped beside the population (``scripts/ship_policy.py``:
learning opponents, candidates) keep their entries and files. A step that continued from its shipped final stage (a new
sitting, sumo_cli/runs/population_shipped.py) ships its five stages among the shipped versions and its
run's, numbered by the iterations in all; ``iterations``, ``env_steps`` and ``wall_seconds`` count
all sittings, and ``sittings`` lists each one's budget. ``--only STEPS`` ships those steps and keeps the
others' entries as they are; ``--trained-as STEP=AGENT`` ships a sitting of a step that ran as a
``sumo train`` run of another name, continued from the step's shipped final stage. Each entry's provenance is its plan entry
(the step, its
``sumo train`` options, what it depends on), seed, env steps and wall time up to its last stage, the
code commit, the run's stored configuration, what the paper did instead, and, with ``--quality``, the
measured results (a JSON object keyed by slot, written by ``python -m benchmarks.population_quality``).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from sqlalchemy import select

from sumo_cli.store import shipped
from sumo_cli.compete.population import stage_versions
from sumo_cli.runs import population_shipped as PS
from sumo_cli.runs.population_plan import default_plan_path, load_plan
from sumo_cli.store import registry
from sumo_cli.store.database import Database
from sumo_cli.store.models import Iteration, Run

def _run_iterations(s, agent) -> tuple[Run, dict]:  # noqa: ANN001
    """The agent's training run and its iterations by number."""
    run = s.get(Run, agent.origin["run_id"])
    return run, {i.iteration: i for i in s.scalars(select(Iteration).where(Iteration.run_id == run.id))}


def _prior_entry(prior: dict[str, dict], member: str, step_name: str) -> dict | None:
    """The member's shipped entry that a continued step's run started from; when the member was retired
    first (scripts/retire_agents.py, so the archived runs keep the versions they played), the latest entry
    it was retired to from that step."""
    return prior[member] if member in prior else PS.latest_retired(prior.values(), step_name, lambda e: e["provenance"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--plan", default=str(default_plan_path()))
    ap.add_argument("--code-commit", required=True)
    ap.add_argument("--quality", help="measured results by slot (JSON)")
    ap.add_argument("--to", default=str(Path(__file__).resolve().parents[1] / "policies"))
    ap.add_argument("--trained-as", action="append", default=[], metavar="STEP=AGENT",
                    help="a step's sitting ran as a `sumo train` run of another name (AGENT, continued from the step's "
                         "shipped final stage); ships it as the step's")
    ap.add_argument("--only", default="", metavar="STEPS",
                    help="comma-separated steps to ship (with their tracking siblings); the others keep their shipped entries")
    args = ap.parse_args(argv)
    trained_as = dict(a.split("=", 1) for a in args.trained_as)
    only = {n.strip() for n in args.only.split(",") if n.strip()}

    plan = load_plan(args.plan)
    quality = json.loads(Path(args.quality).read_text()) if args.quality else {}
    to = Path(args.to)
    db = Database(args.db if "://" in args.db else f"sqlite:///{Path(args.db).expanduser().resolve()}")
    entries: dict[str, dict] = {}
    prior = {e["name"]: e for e in json.loads((to / "manifest.json").read_text())["agents"]} \
        if (to / "manifest.json").is_file() else {}
    with db.read() as s:
        by_step = {}
        for step in plan.steps:
            if not step.member:
                continue
            step_name = step.weights_of or step.name
            source = trained_as.get(step_name, step_name)
            if only and step_name not in only:
                if step.member not in prior:
                    sys.exit(f"{step.member} is not shipped yet: ship its step {step_name} too")
                by_step[step.name] = (step, None, None, None, None)
                continue
            shipped_from = ((prior.get(step.member) or {}).get("provenance", {}).get("plan_step") or {}).get("name")
            if shipped_from and shipped_from != step.name:
                sys.exit(f"{step.member} ships from step {shipped_from}, and the plan fills it from {step.name} now: retire it "
                         "first (scripts/retire_agents.py), so the runs archived in docs/runs/ keep the versions they played")
            agent = registry.get_agent(s, source)
            if agent is None or not agent.versions:
                sys.exit(f"step {source} has no versions in {args.db}: train the plan first")
            if PS.from_shipped(agent):  # done from what shipped: it ships as it did
                sibling = prior.get(plan.step(step.weights_of).member) if step.weights_of else None
                if step.member not in prior and sibling is not None:  # the tracking sibling of a promoted member
                    provenance = {"plan_step": {"name": step.name, "member": step.member, "weights_of": step.weights_of,
                                                "depends": list(step.depends)},
                                  **{k: v for k, v in sibling["provenance"].items() if k not in ("plan_step", "quality", "paper_did")},
                                  "paper_did": PS.paper_did(step)}
                    by_step[step.name] = (step, sibling["versions"], None, None, provenance)
                    continue
                if step.member not in prior:
                    sys.exit(f"step {source} plays the shipped {PS.from_shipped(agent)}, which {to} does not ship")
                by_step[step.name] = (step, None, None, None, None)
                continue
            run, its = _run_iterations(s, agent)
            offset = PS.continued_from(s, plan.step(step_name), run.config or {})  # iterations shipped before its run
            if source != step_name and not offset:
                sys.exit(f"{source} did not continue from the shipped final stage of {step_name}'s member")
            before = _prior_entry(prior, plan.step(step_name).member, step_name) if offset else None
            cap = plan.step(step_name).iterations()  # a run that went on past the plan ships the plan's share
            held, old = PS.merged_versions(before, offset, [v.version for v in agent.versions
                                                            if cap is None or offset + v.version <= cap])
            stages = stage_versions(held)
            rows = {offset + v.version: v for v in agent.versions}
            last = rows[stages[-1]].iteration
            steps, wall = its[last].env_steps, round(sum(i.wall_seconds for k, i in its.items() if k <= last), 1)
            sittings = PS.sittings(before, offset, {"iterations": last, "env_steps": steps, "wall_seconds": wall, "seed": run.seed,
                                                    "code_commit": args.code_commit,
                                                    **({"trained_as": f"sumo train run {run.id}, {source}"} if source != step_name else {}),
                                                    **({"continued_from": run.config["train"]["init_from"]} if offset else {})})
            env_before = sum(e["env_steps"] or 0 for e in sittings[:-1])
            train = list(plan.step(step_name).train)
            provenance = {
                "plan_step": {"name": step.name, "member": step.member,
                              **({"weights_of": step.weights_of} if step.weights_of else {"train": shlex.join(train)}),
                              "depends": list(step.depends)},
                "command": f"sumo population train (step {step.name} of policies/{Path(args.plan).name})" if source == step_name
                else f"sumo train run {run.id} ({source}), continued from {run.config['train']['init_from']} as a sitting of step {step_name}",
                "seed": run.seed, "env_steps": env_before + steps, "iterations": offset + last,
                "wall_seconds": round(sum(e["wall_seconds"] or 0 for e in sittings), 1),
                "code_commit": args.code_commit, "trained_as": source, "config": run.config.get("train", {}),
                "paper_did": PS.paper_did(step), "sittings": sittings,
            }
            planned = (run.config.get("train") or {}).get("iterations")
            if planned and planned != last:
                provenance["notes"] = (f"its run was created for {planned} iterations and ships its first {last}, "
                                       f"{offset + last} in all, the plan's value; no schedule depends on the planned total, "
                                       "so it equals a run created for that many")
            if step.member in quality:
                provenance["quality"] = quality[step.member]
            elif prior.get(step.member, {}).get("provenance", {}).get("quality") and \
                    next((v["sha256"] for v in prior[step.member]["versions"] if v["version"] == stages[-1]), None) == \
                    (old[stages[-1]]["sha256"] if stages[-1] in old else rows[stages[-1]].sha256):
                provenance["quality"] = prior[step.member]["provenance"]["quality"]  # measured on the same final stage
            by_step[step.name] = (step, stages, (rows, old, offset, env_before), its, provenance)
        to.mkdir(parents=True, exist_ok=True)
        for name, (step, stages, rows, its, provenance) in by_step.items():
            if stages is None:  # shipped as it was
                entries[step.member] = {**prior[step.member]}
                if step.member in quality:
                    entries[step.member]["provenance"] = {**prior[step.member]["provenance"], "quality": quality[step.member]}
                continue
            if step.weights_of:
                continue
            rows, old, offset, env_before = rows
            versions = [(v, to / old[v]["file"], old[v]["sha256"], old[v]["iteration"], old[v]["env_steps"]) if v in old else
                        (v, Path(rows[v].checkpoint_path), rows[v].sha256, offset + rows[v].iteration,
                         env_before + its[rows[v].iteration].env_steps if rows[v].iteration in its else None) for v in stages]
            entries[step.member] = shipped.ship_entry(to, step.member, step.body, step.arch, step.strategy, versions,
                                                      provenance, default_version=stages[-1])
        for name, (step, stages, rows, its, provenance) in by_step.items():
            if not step.weights_of or stages is None:
                continue
            sibling = entries[plan.step(step.weights_of).member]
            entries[step.member] = {**sibling, "name": step.member, "strategy": "track", "provenance": provenance}
    members = {step.member for step in plan.steps if step.member}
    entries.update({name: entry for name, entry in prior.items() if name not in members})  # shipped beside it
    removed = PS.prune(to, list(entries.values()))
    shipped.write_manifest(to, list(entries.values()))
    total = sum(p.stat().st_size for p in to.rglob("*") if p.is_file() and p.name != "manifest.json")
    print(f"shipped {len(entries)} agents ({sum(len(e['versions']) for e in entries.values())} versions, "
          f"{total / 1e6:.1f} MB) into {to}; {len(removed)} files no longer shipped removed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
