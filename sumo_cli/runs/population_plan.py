"""A population plan: the training steps that make a population, read from a TOML file.

The shipped one is ``policies/population.toml`` (the paper's 105: 3 bodies x 7 combinations x 5
stages). A step is either one ``sumo train`` run, named as the step, with the options in ``train``; or,
with ``weights_of``, another step's versions played with the step's own strategy (PPO tracking of a
no-adaptation sibling). ``member`` names the population slot a step fills (a canonical combination
name such as ``ant-meta``). A step depends on every step whose name its options mention
(``--init-from``, ``--teacher``, ``--opponents``) and on its ``weights_of``.

Everything here is parsing and checking (no torch, no database): :mod:`sumo_cli.runs.population_runner`
runs a plan.
"""

from __future__ import annotations

import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from sumo_cli import names
from sumo_cli.errors import UserError
from sumo_cli.selfplay.new_run import run_identity

FORMAT = "sumo-population-plan"
FORMAT_VERSION = 1
#: Options a step may not give: the runner sets the name, the database, resume and the workers.
RESERVED = ("--name", "--db", "--resume", "-j", "--workers", "--address", "--json", "--env")
#: Options whose values name agents (so steps): their dependencies.
AGENT_OPTIONS = ("--init-from", "--teacher", "--opponents")


def default_plan_path() -> Path:
    return Path(__file__).resolve().parents[2] / "policies" / "population.toml"


@dataclass(frozen=True)
class Step:
    name: str
    member: str  # the canonical population slot, e.g. "ant-meta"; "" for a step that fills none
    train: tuple[str, ...] = ()  # sumo train options (a training step)
    weights_of: str = ""  # a tracking step: the step whose versions it plays
    depends: tuple[str, ...] = ()
    body: str = ""
    arch: str = ""
    strategy: str = ""

    @property
    def trains(self) -> bool:
        return not self.weights_of

    @property
    def kind(self) -> str:
        return f"{self.arch}-{self.strategy}"

    def option(self, flag: str) -> str | None:
        """The value of ``flag`` in the step's train options (the last one given), else None."""
        value = None
        for i, tok in enumerate(self.train):
            if tok == flag and i + 1 < len(self.train):
                value = self.train[i + 1]
            elif tok.startswith(flag + "="):
                value = tok.split("=", 1)[1]
        return value

    def iterations(self) -> int | None:
        """The step's --iterations (or -n), None when it leaves them to its recipe."""
        for flag in ("--iterations", "-n"):
            v = self.option(flag)
            if v is not None:
                return int(v)
        return None


@dataclass
class Plan:
    path: Path
    steps: list[Step]
    seconds_per_iteration: dict[str, float] = field(default_factory=dict)

    def step(self, name: str) -> Step:
        return next(s for s in self.steps if s.name == name)

    def members(self) -> dict[str, str]:
        """population slot -> step name"""
        return {s.member: s.name for s in self.steps if s.member}

    def ordered(self) -> list[Step]:
        """The steps in dependency order, file order among those that are ready together."""
        done: set[str] = set()
        out: list[Step] = []
        left = list(self.steps)
        while left:
            ready = [s for s in left if set(s.depends) <= done]
            if not ready:
                cycle = ", ".join(s.name for s in left)
                raise UserError(f"the plan's steps {cycle} depend on each other in a cycle")
            out.append(ready[0])
            done.add(ready[0].name)
            left.remove(ready[0])
        return out


def _agent_names(value: str) -> list[str]:
    return [part.strip().split("@", 1)[0] for part in value.split(",") if part.strip()]


def _combination(train: tuple[str, ...], where: str) -> tuple[str, str, str]:
    probe = Step("", "", train)
    body = (probe.option("--body") or "").strip().lower()
    if body not in names.BODIES:
        raise UserError(f"{where}: --body must be one of {', '.join(names.BODIES)}")
    return run_identity(body, probe.option("--arch"), probe.option("--strategy"))


def parse_plan(text: str, path: Path) -> Plan:
    """A plan from TOML text; every error is one sentence naming the file and the step."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path} is not valid TOML: {exc}") from None
    if doc.get("format") != FORMAT or doc.get("format_version") != FORMAT_VERSION:
        raise UserError(f"{path} is not a {FORMAT} v{FORMAT_VERSION} file (its 'format' and 'format_version' say otherwise)")
    raw = doc.get("steps")
    if not isinstance(raw, list) or not raw:
        raise UserError(f"{path} has no [[steps]]")
    costs = {str(k): float(v) for k, v in (doc.get("seconds_per_iteration") or {}).items()}
    seen: dict[str, dict] = {}
    for i, entry in enumerate(raw, 1):
        where = f"{path}, step {i}"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise UserError(f"{where} has no name")
        unknown = set(entry) - {"name", "member", "train", "weights_of"}
        if unknown:
            raise UserError(f"{where} ({entry['name']}) has unknown keys: {', '.join(sorted(unknown))}")
        name = names.validate_custom_name(entry["name"])
        if name in seen:
            raise UserError(f"{path}: two steps are named {name!r}")
        if ("train" in entry) == ("weights_of" in entry):
            raise UserError(f"{where} ({name}) needs exactly one of 'train' (a training run) and 'weights_of' (a sibling's versions)")
        seen[name] = entry
    steps: list[Step] = []
    members: dict[str, str] = {}
    for i, entry in enumerate(raw, 1):
        name = entry["name"]
        where = f"{path}, step {name}"
        member = ""
        if entry.get("member"):
            ref = names.parse(str(entry["member"]))
            if ref.body is None or ref.version is not None or ref.body == names.LOCOMOTION:
                raise UserError(f"{where}: member {entry['member']!r} is not a population slot such as ant-meta or bug-mlp")
            member = ref.name
            if member in members:
                raise UserError(f"{path}: steps {members[member]} and {name} both fill {member}")
            members[member] = name
        if "train" in entry:
            try:
                train = tuple(shlex.split(str(entry["train"])))
            except ValueError as exc:
                raise UserError(f"{where}: its train options cannot be split ({exc})") from None
            bad = [t for t in train if t.split("=", 1)[0] in RESERVED]
            if bad:
                raise UserError(f"{where}: {bad[0].split('=', 1)[0]} is set by `sumo population train`, not by a step")
            body, arch, strategy = _combination(train, where)
            probe = Step(name, member, train)
            deps = []
            for flag in AGENT_OPTIONS:
                for agent in _agent_names(probe.option(flag) or ""):
                    if agent.startswith("zoo-"):
                        raise UserError(f"{where}: {flag} names an original RoboSumo policy ({agent}); a population is trained from fresh weights")
                    if agent == name:
                        raise UserError(f"{where}: {flag} names the step itself")
                    if agent in seen and agent != name and agent not in deps:
                        deps.append(agent)
            try:
                it = probe.iterations()
            except ValueError:
                raise UserError(f"{where}: --iterations must be a whole number") from None
            if it is not None and it < 1:
                raise UserError(f"{where}: --iterations must be at least 1")
            step = Step(name, member, train, "", tuple(deps), body, arch, strategy)
        else:
            source = str(entry["weights_of"])
            if source not in seen or "train" not in seen[source]:
                raise UserError(f"{where}: weights_of names {source!r}, which is not a training step of the plan")
            body, arch, _ = _combination(tuple(shlex.split(str(seen[source]["train"]))), f"{path}, step {source}")
            step = Step(name, member, (), source, (source,), body, arch, "track")
        if member:
            ref = names.parse(member)
            if (ref.body, ref.arch, ref.strategy) != (step.body, step.arch, step.strategy):
                raise UserError(f"{where}: it trains a {step.body} {step.arch} with strategy {step.strategy}, "
                                f"which cannot fill {member}")
        steps.append(step)
    plan = Plan(path, steps, costs)
    plan.ordered()  # a cycle is an error now, not halfway through training
    return plan


def load_plan(path: str | Path | None = None) -> Plan:
    p = Path(path).expanduser() if path else default_plan_path()
    if not p.is_file():
        raise UserError(f"no plan file at {p}")
    return parse_plan(p.read_text(), p)
