"""A population plan that spans sittings: its steps continue from what shipped in ``policies/``.

A sitting trains what it can and ships it (scripts/ship_population.py); the next one may start on a
fresh machine with nothing but the repository. A training step whose run is not in the local
database, and whose member the manifest ships from that very step (its ``plan_step``), then
continues from the shipped final stage: a new ``sumo train`` run named as the step, ``--init-from``
the shipped version, for the iterations the plan asks beyond those shipped, a self-play step with the
shipped versions among its opponents (its early history), without the teacher and the motionless
start it had as a beginner (a meta step's learnt step sizes start afresh: --init-from takes the
policy and its observation statistics). When the plan asks no more than shipped, the step is done
from shipped: the shipped versions are registered under the step's name (the same files and
hashes), so the steps that name it find them. A step that fills no slot any more (a newer step took
its member over, and it still teaches or plays in others) is found under the name its member was
retired to. Shipped versions are numbered by the iterations done in all, so a continued
run's iteration ``i`` is the agent's iteration ``shipped + i``.

No torch and no SQLAlchemy here: the manifest is read by the shipped-policies module, the database
through :mod:`sumo_cli.store.registry`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sumo_cli.errors import UserError
from sumo_cli.store import registry
from sumo_cli.store.database import Database

#: The key of a registered-from-shipped step agent's origin: the shipped member it plays.
ORIGIN_KEY = "from_shipped"
LOCAL, SHIPPED = "locally", "from shipped"

#: What the paper did where the plan takes a shortcut, by strategy.
PAPER_DID = {
    "none": "trained by PPO self-play for thousands of iterations of 32,000 episodes on a cluster; here 400-1250 (MLP) "
            "or 160-200 (LSTM, kickstarted by its body's MLP) updates of 32,768 env steps on 2 cores",
    "track": "a PPO agent trained like its no-adaptation sibling and tracking at execution: here the sibling's very "
             "versions, played with PPO tracking between rounds",
    "meta": "meta-trained from scratch against the pre-trained pool for as long as the pool trained",
    "rl2": "trained from scratch against the pool for as long as the pool trained; here 40 updates kickstarted by "
           "its body's MLP (the rl2 recipe)",
}


def paper_did(step) -> str:  # noqa: ANN001 - a population_plan.Step
    """What the paper did for the step's kind of agent, and what the step does instead."""
    teacher, iterations = step.option("--teacher"), step.iterations()
    taught = f", kickstarted by {teacher}" if teacher and teacher != "none" else ""
    paper = PAPER_DID[step.strategy].split("; here")[0]
    if step.strategy == "rl2":
        stride = step.option("--opponent-stride")
        if not (teacher or stride or iterations):  # the recipe's values
            return PAPER_DID["rl2"]
        meets = f", meeting the pool's versions up to {stride} x its own progress (--opponent-stride {stride})" if stride else ""
        return f"{paper}; here {iterations or 40} updates{taught} against {step.option('--opponents') or 'the pool'}{meets}"
    if step.strategy == "none" and iterations:
        return f"{paper}; here {iterations} updates of 32,768 env steps{taught} on 2 cores"
    if step.strategy != "meta":
        return PAPER_DID[step.strategy]
    recipe = "the meta recipe's"
    return (f"{paper}; here from fresh weights{taught}, {iterations or recipe} meta-updates "
            f"against {step.option('--opponents') or recipe + ' opponents'}, the step sizes starting at "
            f"{step.option('--alpha-init') or recipe + ' value'}")


@dataclass(frozen=True)
class ShippedStep:
    """What the manifest ships from a step: its member's final stage and the iterations done in all."""

    member: str
    final: int
    iterations: int
    env_steps: int
    versions: tuple[int, ...]  # the shipped ones


def _read_manifest() -> list:
    from sumo_cli.store import shipped
    return shipped.read_manifest()


def latest_retired(entries, step_name: str, provenance=lambda e: e.provenance):  # noqa: ANN001
    """The entry a step's member was retired to (scripts/retire_agents.py), the longest if it was
    retired more than once, else None; ``provenance`` reads an entry's (a manifest dict's too)."""
    retired = [e for e in entries if provenance(e).get("retired")
               and (provenance(e).get("plan_step") or {}).get("name") == step_name]
    return max(retired, key=lambda e: int(provenance(e).get("iterations") or 0), default=None)


def shipped_steps(plan) -> dict[str, ShippedStep]:  # noqa: ANN001 - a population_plan.Plan
    """step name -> what the manifest (``policies/``, or ``SUMO_POLICIES``) ships from it."""
    agents = _read_manifest()
    by_name = {a.name: a for a in agents}
    out = {}
    for step in plan.steps:
        if not step.trains:
            continue
        agent = by_name.get(step.member) if step.member else latest_retired(agents, step.name)
        if agent is None or not agent.versions:
            continue
        prov = agent.provenance
        if (prov.get("plan_step") or {}).get("name") != step.name:
            continue
        final = agent.default_version if agent.default_version is not None else agent.versions[-1].version
        row = next((v for v in agent.versions if v.version == final), agent.versions[-1])
        out[step.name] = ShippedStep(agent.name, final, int(prov.get("iterations") or row.iteration or final),
                                     int(prov.get("env_steps") or row.env_steps or 0), tuple(v.version for v in agent.versions))
    return out


def from_shipped(agent) -> str | None:  # noqa: ANN001 - store.models.Agent
    """The shipped member a registered-from-shipped step agent plays, else None."""
    return (agent.origin or {}).get(ORIGIN_KEY) if agent is not None else None


def continued_from(s, step, run_config: dict) -> int:  # noqa: ANN001 - a read session, a population_plan.Step
    """The iterations shipped before a step's run began: its ``--init-from`` is the step's shipped
    member (a continuation), else 0."""
    init = str((run_config.get("train") or {}).get("init_from") or "")
    name, _, version = init.partition("@")
    if not step.member or name != step.member or not version.isdigit():
        return 0
    agent = registry.get_agent(s, name)
    row = next((v for v in agent.versions if v.version == int(version)), None) if agent else None
    return int(row.iteration) if row is not None and row.iteration is not None else int(version)


def continue_options(step, shipped_step: ShippedStep, total: int) -> list[str]:  # noqa: ANN001 - a population_plan.Step
    """The ``sumo train`` options that continue a step from its shipped final stage up to ``total``
    iterations in all (the last value of an option wins)."""
    opponents = [o.strip() for o in (step.option("--opponents") or "self").split(",") if o.strip()]
    if "self" in opponents and shipped_step.member not in opponents:  # self-play: its shipped history too
        opponents.append(shipped_step.member)
    extra = ["--init-from", f"{shipped_step.member}@{shipped_step.final}", "--iterations", str(total - shipped_step.iterations),
             "--opponents", ",".join(opponents)]
    if step.strategy != "meta":  # a meta step's --init-from is all it had; the others were beginners once
        extra += ["--teacher", "none", "--motionless-iterations", "0"]
    return ["--name", step.name, *step.train, *extra]


def register(db: Database, step, shipped_step: ShippedStep) -> int:  # noqa: ANN001 - a population_plan.Step
    """Register the shipped member's versions under the step's name (a step done from shipped);
    returns how many versions it added."""
    added = 0
    with db.write() as s:
        source = registry.get_agent(s, shipped_step.member)
        if source is None or not source.versions:
            raise UserError(f"{step.name} is shipped as {shipped_step.member}, and the database does not hold it; "
                            "is SUMO_POLICIES set to another folder?")
        agent = registry.get_agent(s, step.name)
        if agent is None:
            agent = registry.create_agent(s, step.name, source.body, source.arch, source.strategy, "trained",
                                          {ORIGIN_KEY: shipped_step.member, "iterations": shipped_step.iterations})
        have = {v.version: v for v in agent.versions}
        for v in _shipped_rows(source, shipped_step):
            held = have.get(v.version)
            if held is None:
                registry.add_version(s, agent, v.version, v.checkpoint_path, v.sha256, iteration=v.iteration,
                                     metrics=dict(v.metrics) if v.metrics else None)
                added += 1
            elif (held.checkpoint_path, held.sha256) != (v.checkpoint_path, v.sha256):  # the checkout moved
                held.checkpoint_path, held.sha256 = v.checkpoint_path, v.sha256
        registry.set_default_version(agent, shipped_step.final)
    return added


def _shipped_rows(source, shipped_step: ShippedStep) -> list:  # noqa: ANN001 - the member's Agent; its Versions
    return [v for v in source.versions if v.version in shipped_step.versions]


def registered_as_shipped(s, agent, shipped_step: ShippedStep) -> bool:  # noqa: ANN001 - a read session, an Agent
    """Whether a registered-from-shipped step agent holds the member's shipped versions at the member's
    files (not those of a checkout that has since moved or shipped again)."""
    source = registry.get_agent(s, shipped_step.member)
    if agent is None or source is None:
        return False
    have = {v.version: (v.checkpoint_path, v.sha256) for v in agent.versions}
    return all(have.get(v.version) == (v.checkpoint_path, v.sha256) for v in _shipped_rows(source, shipped_step))


def unregister(db: Database, step) -> None:  # noqa: ANN001 - a population_plan.Step
    """Forget a registered-from-shipped step agent (the plan now asks more of it: it continues)."""
    with db.write() as s:
        agent = registry.get_agent(s, step.name)
        if agent is not None and from_shipped(agent):
            registry.delete_agent(s, agent)


# ---------------------------------------------------------------------------------------------
# shipping a step again (scripts/ship_population.py)


def merged_versions(prior: dict | None, offset: int, run_versions: list[int]) -> tuple[list[int], dict[int, dict]]:
    """The versions an agent holds when its run continued from its shipped final stage (``offset``
    iterations shipped before it): the shipped ones up to there and the run's, numbered by the
    iterations in all (run version ``v`` is ``offset + v``); its five stages are chosen among them.
    Returns them sorted, and the shipped versions' manifest rows by version (kept as they are)."""
    old = {v["version"]: v for v in prior["versions"] if v["version"] <= offset} if prior and offset else {}
    return sorted(set(old) | {offset + v for v in run_versions}), old


def sittings(prior: dict | None, offset: int, this: dict) -> list[dict]:
    """The agent's budget per sitting: the shipped sittings before ``offset`` (the iteration its run
    continued from; 0: a run from fresh weights) and this one (``from_iteration`` added)."""
    before: list[dict] = []
    if prior and offset:
        p = prior.get("provenance", {})
        before = p.get("sittings") or [{"from_iteration": 0, "iterations": p.get("iterations"), "env_steps": p.get("env_steps"),
                                        "wall_seconds": p.get("wall_seconds"), "seed": p.get("seed"),
                                        "code_commit": p.get("code_commit")}]
        before = [e for e in before if e["from_iteration"] < offset]
    return before + [{"from_iteration": offset, **this}]


def prune(folder: Path, entries: list[dict]) -> list[str]:
    """Remove the files under ``folder`` that no manifest entry ships any more (and emptied folders);
    returns the removed paths, relative to ``folder``."""
    keep = {folder / (v["file"] + suffix) for e in entries for v in e["versions"] for suffix in (".safetensors", ".json")}
    removed = []
    for child in sorted(folder.iterdir()):
        if not child.is_dir():
            continue
        for f in sorted(child.rglob("*")):
            if f.is_file() and f not in keep:
                f.unlink()
                removed.append(str(f.relative_to(folder)))
        if not any(child.rglob("*")):
            child.rmdir()
    return removed
