"""Copy versions of a trained agent into ``policies/`` with their provenance (a maintainer's tool).

    python scripts/ship_policy.py --db ~/sumo-runs/train.sqlite --agent ego-ant --versions 48,240 \
        --as ant-mlp --command "sumo train --body ant --arch mlp --seed 4 ..." --code-commit abc1234

A learning opponent (the paper's Fig. 5) ships a range of consecutive versions in half precision
(float16 parameters, upcast to float32 on loading; about half the size)::

    python scripts/ship_policy.py --db ~/sumo-runs/train.sqlite --agent ego-bug-lstm --versions 700..999 \
        --half --as bug-lstm --command "sumo train ..." --code-commit abc1234

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

from sumo_cli.store import shipped
from sumo_cli.store import registry
from sumo_cli.store.database import Database
from sumo_cli.store.models import Iteration, Run, Version


def _training(s, name: str):  # noqa: ANN001, ANN202 - a SQLAlchemy session; (agent, versions, run, iterations)
    """A trained agent of the database with its versions, its training run and that run's iterations."""
    agent = registry.get_agent(s, name)
    if agent is None:
        sys.exit(f"no agent {name!r} in the database")
    run = s.get(Run, agent.origin["run_id"])
    its = {i.iteration: i for i in s.scalars(select(Iteration).where(Iteration.run_id == run.id))}
    return agent, {v.version: v for v in agent.versions}, run, its


def _up_to(its: dict, iteration: int) -> tuple[int, float]:
    """Env steps at ``iteration`` and the wall time recorded up to it."""
    return its[iteration].env_steps, round(sum(i.wall_seconds for k, i in its.items() if k <= iteration), 1)


def parse_versions(text: str) -> list[int] | None:
    """``"48,240"`` -> [48, 240]; ``"700..999"`` -> [700, ..., 999]; None when it is neither."""
    try:
        if ".." in text:
            first, last = (int(x) for x in text.split(".."))
            return list(range(first, last + 1)) if first <= last else None
        return [int(v) for v in text.split(",")]
    except ValueError:
        return None


def format_missing(missing: list[int]) -> str:
    """The first few missing versions, then how many more."""
    head = ", ".join(str(v) for v in missing[:5])
    return head + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--agent", required=True, help="the trained agent's name in that database")
    ap.add_argument("--versions", required=True, help="comma-separated versions to ship, or a consecutive range "
                    "FIRST..LAST (every version in it must be stored); the last is the default")
    ap.add_argument("--half", action="store_true", help="store the parameters in half precision (float16)")
    ap.add_argument("--as", dest="name", required=True, help="the shipped agent's name")
    ap.add_argument("--command", required=True, help="the sumo command that reproduces the run")
    ap.add_argument("--code-commit", required=True)
    ap.add_argument("--warm-start-command", default="", help="the command of the run the shipped one was warm-started from")
    ap.add_argument("--notes", default="")
    ap.add_argument("--to", default=str(Path(__file__).resolve().parents[1] / "policies"))
    args = ap.parse_args(argv)
    wanted = parse_versions(args.versions)
    if wanted is None:
        print(f"--versions {args.versions!r} is neither a comma-separated list nor a range FIRST..LAST", file=sys.stderr)
        return 2
    db = Database(args.db if "://" in args.db else f"sqlite:///{Path(args.db).expanduser().resolve()}")
    with db.read() as s:
        agent, rows, run, its = _training(s, args.agent)
        missing = [v for v in wanted if v not in rows]
        if missing:
            print(f"{args.agent} lacks {len(missing)} of the versions asked for ({format_missing(missing)}); it has "
                  f"{len(rows)} versions, {min(rows, default=None)}..{max(rows, default=None)}", file=sys.stderr)
            return 2
        versions = []
        for v in wanted:
            row: Version = rows[v]
            steps = its[row.iteration].env_steps if row.iteration in its else None
            versions.append((v, Path(row.checkpoint_path), row.sha256, row.iteration, steps))
        last = rows[wanted[-1]].iteration
        steps, wall = _up_to(its, last)
        provenance = {
            "command": args.command, "seed": run.seed, "env_steps": steps, "iterations": last,
            "wall_seconds": wall, "code_commit": args.code_commit, "trained_as": args.agent,
            "config": run.config.get("train", {}), "notes": args.notes,
        }
        init_from = provenance["config"].get("init_from")
        start = init_from.partition("@")[0] if init_from else None
        if start and "run_id" not in (registry.get_agent(s, start).origin or {}):
            # warm-started from a shipped agent: its provenance is the manifest's
            shipped_from = {a.name: a for a in shipped.read_manifest()}[start]
            prov = shipped_from.provenance
            provenance["warm_start"] = {"version": init_from, "shipped": True, "command": prov.get("command"),
                                        **{k: prov.get(k) for k in ("seed", "iterations", "env_steps", "wall_seconds")}}
        elif init_from:  # the stage it was warm-started from, up to the version it started at
            name, _, version = init_from.partition("@")
            _, rows0, run0, its0 = _training(s, name)
            at = rows0[int(version)].iteration
            steps0, wall0 = _up_to(its0, at)
            provenance["warm_start"] = {"version": init_from, "command": args.warm_start_command, "seed": run0.seed,
                                        "iterations": at, "env_steps": steps0, "wall_seconds": wall0,
                                        "config": run0.config.get("train", {})}
            provenance["env_steps_both_stages"] = steps + steps0
            provenance["wall_seconds_both_stages"] = round(wall + wall0, 1)
        body, arch, strategy = agent.body, agent.arch, agent.strategy
    if args.half:
        entry = shipped.ship_half_entry(Path(args.to), args.name, body, arch, strategy, versions, provenance,
                                        default_version=wanted[-1])
        shipped.write_manifest(Path(args.to), [entry], keep=True)
    else:
        entry = shipped.ship(Path(args.to), args.name, body, arch, strategy, versions, provenance, default_version=wanted[-1])
    size = sum((Path(args.to) / (v["file"] + s)).stat().st_size for v in entry["versions"] for s in (".safetensors", ".json"))
    shown = [v["version"] for v in entry["versions"]]
    listed = f"{shown[0]}..{shown[-1]} ({len(shown)})" if len(shown) > 3 else str(shown)
    print(f"shipped {args.name}: versions {listed}{' in float16' if args.half else ''}, {size / 1e6:.1f} MB, into {args.to}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
