"""The agent registry: names to agents to versions (checkpoints), and the records the CLI shows."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from sumo_cli import names
from sumo_cli.errors import UserError
from sumo_cli.store.models import Agent, Match, Member, Rating, Version

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class ResolvedVersion:
    """Everything needed to load one agent version, detached from the session. ``strategy`` is the
    one the agent was trained with; ``played_as`` another one asked for with ``NAME:STRATEGY``."""

    agent_name: str
    body: str
    arch: str
    strategy: str
    version: int
    version_id: int
    checkpoint_path: str
    sha256: str
    played_as: str | None = None

    @property
    def plays(self) -> str:
        """The strategy it plays games with."""
        return self.played_as or self.strategy

    @property
    def display(self) -> str:
        text = f"{self.agent_name}@{self.version}"
        return text if self.played_as is None else f"{text}:{self.played_as}"


def get_agent(session: Session, name: str) -> Agent | None:
    return session.scalar(select(Agent).where(Agent.name == name))


def agent_names(session: Session) -> list[str]:
    return list(session.scalars(select(Agent.name).order_by(Agent.name)))


def agents_with_versions(session: Session) -> list[tuple[Agent, list[int]]]:
    """Every agent, by name, with the numbers of its versions."""
    return [(a, [v.version for v in a.versions]) for a in session.scalars(select(Agent).order_by(Agent.name))]


def create_agent(
    session: Session, name: str, body: str, arch: str, strategy: str, provenance: str, origin: dict
) -> Agent:
    if get_agent(session, name) is not None:
        raise UserError(f"an agent named {name!r} already exists")
    agent = Agent(name=name, body=body, arch=arch, strategy=strategy, provenance=provenance, origin=origin)
    session.add(agent)
    session.flush()
    return agent


def add_version(
    session: Session,
    agent: Agent,
    version: int,
    checkpoint_path: str,
    sha256: str,
    iteration: int | None = None,
    metrics: dict | None = None,
    run_id: int | None = None,
) -> Version:
    if not _SHA256.match(sha256):
        raise ValueError(f"not a SHA-256 hex digest: {sha256!r}")
    row = Version(
        agent_id=agent.id,
        version=version,
        iteration=iteration,
        checkpoint_path=str(checkpoint_path),
        sha256=sha256,
        metrics=metrics or {},
        run_id=run_id,
    )
    session.add(row)
    session.flush()
    return row


def version_hashes(session: Session, agent_names: list[str]) -> dict[str, tuple[str, int | None, dict[int, str]]]:
    """For each of these agents the database holds: (provenance, default version, {version: SHA-256}),
    in one query."""
    out: dict[str, tuple[str, int | None, dict[int, str]]] = {}
    rows = session.execute(select(Agent.name, Agent.provenance, Agent.default_version, Version.version, Version.sha256)
                           .outerjoin(Version, Version.agent_id == Agent.id).where(Agent.name.in_(agent_names)))
    for name, provenance, default, version, sha in rows:
        hashes = out.setdefault(name, (provenance, default, {}))[2]
        if version is not None:
            hashes[version] = sha
    return out


def set_default_version(agent: Agent, version: int | None) -> None:
    """The version a bare ``NAME`` plays (None: the latest); written when the session commits."""
    agent.default_version = version


def delete_agent(session: Session, agent: Agent) -> None:
    """Remove an agent and its version rows (not its files)."""
    session.delete(agent)
    session.flush()


def _unused(version_id):  # noqa: ANN001, ANN202 - a column; a SQL condition
    """No match, rating or evolution member names this version."""
    return ~(select(Match.id).where((Match.version_a_id == version_id) | (Match.version_b_id == version_id)).exists()
             | select(Rating.id).where(Rating.version_id == version_id).exists()
             | select(Member.id).where(Member.version_id == version_id).exists())


def unused_versions(session: Session, agent_names: list[str]) -> dict[str, set[int]]:
    """For each of these agents: its versions that no stored game names."""
    out: dict[str, set[int]] = {}
    rows = session.execute(select(Agent.name, Version.version).join(Version, Version.agent_id == Agent.id)
                           .where(Agent.name.in_(agent_names), _unused(Version.id)))
    for name, version in rows:
        out.setdefault(name, set()).add(version)
    return out


def drop_version_if_unused(session: Session, row: Version) -> bool:
    """Delete a version row that no match, rating or evolution member names; returns whether it did."""
    if not session.scalar(select(_unused(row.id))):
        return False
    session.delete(row)
    session.flush()
    return True


def version_paths(session: Session, agent_names: list[str]) -> dict[str, dict[int, str]]:
    """For each of these agents the database holds: {version: checkpoint path}, in one query."""
    out: dict[str, dict[int, str]] = {}
    rows = session.execute(select(Agent.name, Version.version, Version.checkpoint_path)
                           .join(Version, Version.agent_id == Agent.id).where(Agent.name.in_(agent_names)))
    for name, version, path in rows:
        out.setdefault(name, {})[version] = path
    return out


def latest_version(session: Session, agent: Agent) -> int | None:
    return session.scalar(select(func.max(Version.version)).where(Version.agent_id == agent.id))


def resolve(session: Session, text: str) -> ResolvedVersion:
    """A typed name to one stored version, or one sentence saying what exists instead."""
    ref = names.parse(text)
    agent = get_agent(session, ref.name)
    if agent is None:
        known = agent_names(session)
        close = names.close_matches(ref.name, known)
        if close:
            hint = f"; close matches: {', '.join(close)}"
        elif known:
            hint = f"; `sumo agents` lists the {len(known)} known agents"
        else:
            hint = "; the database has no agents yet (import some with `sumo zoo import PATH` or train one with `sumo train`)"
        raise UserError(f"unknown agent {text.strip()!r}{hint}")
    wanted = ref.version or agent.default_version or latest_version(session, agent)
    if wanted is None:
        raise UserError(f"agent {agent.name!r} has no versions yet")
    row = session.scalar(select(Version).where(Version.agent_id == agent.id, Version.version == wanted))
    if row is None:
        have = [v.version for v in agent.versions]
        span = f"{min(have)}..{max(have)}" if have else "none"
        raise UserError(f"agent {agent.name!r} has no version {wanted} (versions: {span})")
    if not _SHA256.match(row.sha256 or "") or not row.checkpoint_path:
        raise UserError(
            f"the database row of {agent.name}@{wanted} is corrupt (checkpoint path or SHA-256 invalid); "
            "re-import or re-train this agent"
        )
    played_as = ref.played_as if ref.played_as != agent.strategy else None  # ant-track:track is ant-track
    if played_as is not None and agent.strategy == "rl2":
        raise UserError(f"{agent.name} is an RL^2 policy: it adapts through its recurrent state only; "
                        f"drop ':{played_as}'")
    return ResolvedVersion(
        agent.name, agent.body, agent.arch, agent.strategy, row.version, row.id, row.checkpoint_path, row.sha256,
        played_as,
    )


def find_version(session: Session, agent: str, version: int, sha256: str) -> int | None:
    """The id of ``agent@version`` with checkpoint ``sha256``: under that name, or, the agent retired
    since (shipped on as ``<prefix>-<agent>``, :func:`sumo_cli.store.shipped.retire`), under its new
    name with the same number and SHA-256; None if the database holds neither."""
    vid = session.scalar(select(Version.id).join(Agent, Agent.id == Version.agent_id)
                         .where(Agent.name == agent, Version.version == version, Version.sha256 == sha256))
    if vid is not None:
        return vid
    rows = session.execute(select(Version.id, Agent.name).join(Agent, Agent.id == Version.agent_id)
                           .where(Version.version == version, Version.sha256 == sha256).order_by(Version.id)).all()
    return next((vid for vid, name in rows if name.endswith("-" + agent)), None)


@dataclass(frozen=True)
class Record:
    games: int
    wins: int
    draws: int
    losses: int
    interrupted: int = 0  # games stopped before their last round: not in the counts above


def record(session: Session, agent: Agent) -> Record:
    """Games, wins, draws and losses of all versions of an agent, from either side; games that
    were interrupted are counted apart (they have no result)."""
    ids = [v.id for v in agent.versions]
    if not ids:
        return Record(0, 0, 0, 0)
    rows = session.execute(
        select(Match.version_a_id, Match.version_b_id, Match.outcome, Match.settings).where(
            or_(Match.version_a_id.in_(ids), Match.version_b_id.in_(ids))
        )
    ).all()
    cut_short = sum(bool((settings or {}).get("interrupted")) for *_, settings in rows)
    rows = [(a, b, outcome) for a, b, outcome, settings in rows if not (settings or {}).get("interrupted")]
    wins = draws = losses = 0
    for a, b, outcome in rows:
        if a in ids and b in ids:  # self-play: count once, as a draw of the agent with itself
            draws += 1
            continue
        side = "a" if a in ids else "b"
        if outcome == "draw":
            draws += 1
        elif outcome == side:
            wins += 1
        else:
            losses += 1
    return Record(len(rows), wins, draws, losses, cut_short)


def checkpoint_root(db_url: str) -> Path:
    """Where new checkpoints go: SUMO_CHECKPOINTS, else ``<name>-checkpoints/`` beside an SQLite
    file (``db/sumo.sqlite`` -> ``db/sumo-checkpoints/``), else ``./checkpoints/<database>/``. One
    folder per database: two databases side by side must not overwrite each other's files (agent
    names and run ids repeat across databases)."""
    import os

    from sqlalchemy.engine import make_url

    if os.environ.get("SUMO_CHECKPOINTS"):
        return Path(os.environ["SUMO_CHECKPOINTS"]).resolve()
    url = make_url(db_url)
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        path = Path(url.database)
        return path.parent / f"{path.stem}-checkpoints"
    return Path("checkpoints").resolve() / (url.database or "default")
