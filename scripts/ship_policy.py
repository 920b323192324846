"""Copy versions of a trained agent into ``policies/`` with their provenance (a maintainer's tool).

    python scripts/ship_policy.py --db ~/sumo-runs/train.sqlite --agent ego-ant --versions 48,240 \
        --as ant-mlp --command "sumo train --body ant --arch mlp --seed 4 ..." --code-commit abc1234

Env steps and wall time are read from the training run's stored iterations (wall time summed up to
the shipped version); the command and the code commit are given, since a run resumed across
commits cannot tell which command line started it. A run warm-started from a stored version
(``--init-from``) records that earlier stage too (its run's seed, configuration, env steps and wall
time up to the version it started from; its command from ``--warm-start-command``), and the env
steps and wall time of both stages together.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sqlalchemy import select

from sumo_cli import shipped
from sumo_cli.store import registry
from sumo_cli.store.database import Database
from sumo_cli.store.models import Iteration, Run, Version


def _stage(s, ref: str, command: str) -> dict:  # noqa: ANN001 - a SQLAlchemy session
    """The training that produced stored version ``ref`` (``name@version``), up to that version."""
    name, _, version = ref.partition("@")
    agent = registry.get_agent(s, name)
    row = {v.version: v for v in agent.versions}[int(version)]
    run = s.get(Run, agent.origin["run_id"])
    its = {i.iteration: i for i in s.scalars(select(Iteration).where(Iteration.run_id == run.id))}
    return {"version": ref, "command": command, "seed": run.seed, "iterations": row.iteration,
            "env_steps": its[row.iteration].env_steps, "wall_seconds": round(sum(i.wall_seconds for k, i in its.items() if k <= row.iteration), 1),
            "config": run.config.get("train", {})}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--agent", required=True, help="the trained agent's name in that database")
    ap.add_argument("--versions", required=True, help="comma-separated versions to ship; the last is the default")
    ap.add_argument("--as", dest="name", required=True, help="the shipped agent's name")
    ap.add_argument("--command", required=True, help="the sumo command that reproduces the run")
    ap.add_argument("--code-commit", required=True)
    ap.add_argument("--warm-start-command", default="", help="the command of the run the shipped one was warm-started from")
    ap.add_argument("--notes", default="")
    ap.add_argument("--to", default=str(Path(__file__).resolve().parents[1] / "policies"))
    args = ap.parse_args(argv)
    wanted = [int(v) for v in args.versions.split(",")]
    db = Database(args.db if "://" in args.db else f"sqlite:///{Path(args.db).expanduser().resolve()}")
    with db.read() as s:
        agent = registry.get_agent(s, args.agent)
        if agent is None:
            sys.exit(f"no agent {args.agent!r} in {args.db}")
        rows = {v.version: v for v in agent.versions}
        run = s.get(Run, agent.origin["run_id"])
        its = {i.iteration: i for i in s.scalars(select(Iteration).where(Iteration.run_id == run.id))}
        versions = []
        for v in wanted:
            row: Version = rows[v]
            steps = its[row.iteration].env_steps if row.iteration in its else None
            versions.append((v, Path(row.checkpoint_path), row.sha256, row.iteration, steps))
        last = rows[wanted[-1]].iteration
        wall = sum(i.wall_seconds for k, i in its.items() if k <= last)
        provenance = {
            "command": args.command, "seed": run.seed, "env_steps": its[last].env_steps, "iterations": last,
            "wall_seconds": round(wall, 1), "code_commit": args.code_commit, "trained_as": args.agent,
            "config": run.config.get("train", {}), "notes": args.notes,
        }
        init_from = provenance["config"].get("init_from")
        if init_from:
            stage = _stage(s, init_from, args.warm_start_command)
            provenance["warm_start"] = stage
            provenance["env_steps_both_stages"] = provenance["env_steps"] + stage["env_steps"]
            provenance["wall_seconds_both_stages"] = round(wall + stage["wall_seconds"], 1)
        body, arch, strategy = agent.body, agent.arch, agent.strategy
    entry = shipped.ship(Path(args.to), args.name, body, arch, strategy, versions, provenance, default_version=wanted[-1])
    print(f"shipped {args.name}: versions {[v['version'] for v in entry['versions']]} into {args.to}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
