"""Which agent versions make up a population.

The paper's population: 3 bodies x 7 policy/adaptation combinations x 5 training stages = 105.
A stage is a version of an agent: with versions 1..K stored, the five stages are the versions
nearest to K/5, 2K/5, ..., K (the paper's stages were iterations 500 to 2000 of one run).
"""

from __future__ import annotations

from dataclasses import dataclass

from sumo_cli import names
from sumo_cli.errors import UserError
from sumo_cli.store import registry
from sumo_cli.store.database import Database

STAGES = 5


@dataclass(frozen=True)
class Member:
    name: str  # agent@version, or agent@version:strategy when played with another strategy
    body: str
    arch: str
    strategy: str

    @property
    def kind(self) -> str:
        return f"{self.arch}-{self.strategy}"


def stage_versions(versions: list[int], stages: int = STAGES) -> list[int]:
    """``stages`` distinct versions spread over the agent's history, the last one included: from the
    last stage down, the stored version nearest k/stages of the latest that no later stage took."""
    vs = sorted(set(versions))
    if len(vs) <= stages:
        return vs
    out: list[int] = []
    for k in range(stages, 0, -1):
        target = vs[-1] * k / stages
        out.append(min((v for v in vs if v not in out), key=lambda v: (abs(v - target), v)))
    return sorted(out)


def paper_population(db: Database, bodies: list[str] | None = None, combos: list[str] | None = None,
                     slots: dict[str, str] | None = None) -> list[Member]:
    """The 105 (or the filtered subset): every combination agent's five stages. ``slots`` maps a
    combination's canonical name to the agent that fills it (a population plan's steps, e.g.
    ``ant-meta`` -> ``pop-ant-meta``); by default the canonical names themselves (the shipped
    population). Missing agents are reported together, with how to get them."""
    bodies = bodies or list(names.BODIES)
    members, missing = [], []
    with db.read() as s:
        for body in bodies:
            for arch, strategy in names.COMBINATIONS:
                slot = names.canonical_name(body, arch, strategy)
                if combos and f"{arch}-{strategy}" not in combos and slot not in combos:
                    continue
                name = (slots or {}).get(slot, slot)
                agent = registry.get_agent(s, name)
                if agent is None or not agent.versions:
                    missing.append(name)
                    continue
                for v in stage_versions([x.version for x in agent.versions]):
                    members.append(Member(f"{name}@{v}", body, arch, strategy))
    if missing:
        how = ("train them with `sumo population train` (its plan's steps)" if slots else
               "train them with `sumo population train` (the paper's plan) and play them with --plan, "
               "or name the players with --agents")
        raise UserError(
            f"the database cannot fill the population: {len(missing)} agents are missing ({', '.join(missing[:8])}"
            f"{', ...' if len(missing) > 8 else ''}); {how}"
        )
    return members


def explicit_population(db: Database, agent_names: list[str]) -> list[Member]:
    members = []
    with db.read() as s:
        for n in agent_names:
            rv = registry.resolve(s, n)
            members.append(Member(rv.display, rv.body, rv.arch, rv.plays))
    versions = [m.name.partition(":")[0] for m in members]
    twice = next((v for v in versions if versions.count(v) > 1), None)
    if twice is not None:
        # ratings and population slots are kept per agent version, so one version plays one strategy
        raise UserError(f"--agents names {twice} twice; a population holds each agent version once (with one "
                        "strategy: NAME:STRATEGY)")
    if len(members) < 2:
        raise UserError("a population needs at least two agents")
    return members
