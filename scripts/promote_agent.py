"""Ship an agent shipped beside the population as the member a plan step fills (a maintainer's tool).

    python scripts/retire_agents.py --prefix pop2 --why "..." ant-meta
    python scripts/promote_agent.py fresh-meta-ant-lstm --step pop3-ant-meta

An agent trained and shipped beside the population (``scripts/ship_policy.py``) by the very options a
plan step gives is that step done: its files move to the member's folder, its provenance keeps how it
was trained and adds the plan step, so `sumo population train` counts the step done from shipped and
a later plan that asks more continues from it. Every option the step gives must equal the one its run
was trained with; its ``--iterations`` must be the agent's final shipped version (a run trained longer
ships the step's share: every draw is seeded by iteration). An agent option may name a plan step where the
run named that step's shipped member (``--teacher pop-ant-mlp@200`` for a run taught by ``ant-mlp@200``):
a step done from shipped plays its member's versions. Retire the member's earlier agent first.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from sumo_cli.errors import UserError
from sumo_cli.runs import population_shipped as PS
from sumo_cli.runs.population_plan import AGENT_OPTIONS, Step, load_plan
from sumo_cli.store import shipped


def _as_members(value: str, members_of_steps: dict[str, str]) -> str:
    """An agent option's value with every plan step it names replaced by the member that step fills."""
    parts = []
    for part in value.split(","):
        name, at, version = part.strip().partition("@")
        parts.append(members_of_steps.get(name, name) + at + version)
    return ",".join(parts)


def _disagreements(train: tuple[str, ...], config: dict, final: int, members_of_steps: dict[str, str]) -> list[str]:
    """The step's options that its run's stored configuration contradicts."""
    out = []
    step = Step("", "", train)
    for flag in dict.fromkeys(t.split("=", 1)[0] for t in train if t.startswith("-")):
        value = step.option(flag)
        if flag in ("--iterations", "-n"):
            if int(value) != final or int(config.get("iterations") or 0) < final:
                out.append(f"{flag} {value} (its final shipped version is {final} of {config.get('iterations')} trained)")
            continue
        key = flag[2:].replace("-", "_")
        if key not in config:
            out.append(f"{flag} (its run recorded no {key})")
            continue
        have = config[key]
        have = ",".join(have) if isinstance(have, list) else have
        if flag in AGENT_OPTIONS:
            value = _as_members(value, members_of_steps)
        same = float(have) == float(value) if isinstance(have, (int, float)) and not isinstance(have, bool) else str(have) == value
        if not same:
            out.append(f"{flag} {value} (trained with {have})")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name", help="the agent shipped beside the population")
    ap.add_argument("--step", required=True, help="the plan step it fills the member of")
    ap.add_argument("--plan", default=None, help="the plan (default: the shipped one)")
    ap.add_argument("--to", default=str(Path(__file__).resolve().parents[1] / "policies"))
    args = ap.parse_args(argv)
    folder = Path(args.to)
    try:
        plan = load_plan(args.plan or folder / "population.toml")
        step = next((s for s in plan.steps if s.name == args.step), None)
        if step is None or not step.member or not step.trains:
            raise UserError(f"{args.step} is not a training step of {plan.path} that fills a population slot")
        agent = next((a for a in shipped.read_manifest(folder) if a.name == args.name), None)
        if agent is None:
            raise UserError(f"{args.name}: not shipped in {folder}")
        if (agent.body, agent.arch, agent.strategy) != (step.body, step.arch, step.strategy):
            raise UserError(f"{args.name} is a {agent.body} {agent.arch} with strategy {agent.strategy}; "
                            f"{step.name} trains a {step.body} {step.arch} with strategy {step.strategy}")
        final = agent.default_version if agent.default_version is not None else agent.versions[-1].version
        members_of_steps = {s: m for m, s in plan.members().items()}
        wrong = _disagreements(step.train, agent.provenance.get("config") or {}, final, members_of_steps)
        if wrong:
            raise UserError(f"{args.name} was not trained as {step.name} says: {'; '.join(wrong)}")
        shipped.promote(folder, args.name, step.member,
                        {"name": step.name, "member": step.member, "train": shlex.join(step.train),
                         "depends": list(step.depends)}, PS.paper_did(step))
    except UserError as exc:
        print(exc)
        return 2
    print(f"{args.name} ships as {step.member}, the member of step {step.name}, in {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
