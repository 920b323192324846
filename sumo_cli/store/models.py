"""SQLAlchemy models: the whole persistent state of sumo.

Agents and their versions (checkpoints), runs (training, tournament, evolution, evaluation),
matches (iterated games) with their rounds and episodes, ratings after every rated match,
population members per generation with lineage, and per-iteration training metrics.
"""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import (
    JSON,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

# Every constraint gets a name, so SQLite ALTERs through Alembic's batch mode stay possible.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Agent(Base):
    """A named agent: one body, one policy architecture, one adaptation strategy."""

    __tablename__ = "agents"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    body: Mapped[str] = mapped_column(String(16))
    arch: Mapped[str] = mapped_column(String(16))
    strategy: Mapped[str] = mapped_column(String(16))
    # "zoo" (imported original policy), "trained" (sumo train), "shipped" (policies/ folder).
    provenance: Mapped[str] = mapped_column(String(16))
    # Where it came from: source file and its hash, or the training run and its configuration.
    origin: Mapped[dict] = mapped_column(JSON, default=dict)
    # The version used when a name carries no @version; None means the highest.
    default_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    versions: Mapped[list["Version"]] = relationship(
        back_populates="agent", order_by="Version.version", cascade="all, delete-orphan"
    )


class Version(Base):
    """One snapshot of an agent: a checkpoint file pair and its SHA-256."""

    __tablename__ = "versions"
    __table_args__ = (UniqueConstraint("agent_id", "version"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    agent_id: Mapped[int] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"), index=True)
    version: Mapped[int] = mapped_column(Integer)
    iteration: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # The training run that produced this snapshot (None for imported agents).
    run_id: Mapped[int | None] = mapped_column(
        ForeignKey("runs.id", ondelete="SET NULL"), nullable=True, index=True
    )
    checkpoint_path: Mapped[str] = mapped_column(String(1024))
    sha256: Mapped[str] = mapped_column(String(64))
    metrics: Mapped[dict] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    agent: Mapped[Agent] = relationship(back_populates="versions")


class Run(Base):
    """A long job: training, a tournament, an evolution or an evaluation. Resumable by id."""

    __tablename__ = "runs"
    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), index=True)
    config: Mapped[dict] = mapped_column(JSON, default=dict)
    seed: Mapped[int] = mapped_column(Integer)
    # running | interrupted | finished | failed
    status: Mapped[str] = mapped_column(String(16), default="running")
    progress_done: Mapped[int] = mapped_column(Integer, default=0)
    progress_total: Mapped[int] = mapped_column(Integer, default=0)
    # Resumable state that is not derivable from finished rows (e.g. optimiser step counts).
    state: Mapped[dict] = mapped_column(JSON, default=dict)
    code_version: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # The process that runs it ("host:pid:token"), so that two processes never write one run; None
    # when no process holds it (runtime.ownership).
    owner: Mapped[str | None] = mapped_column(String(200), nullable=True)


class Iteration(Base):
    """Metrics of one training iteration, so learning curves can be plotted from the database."""

    __tablename__ = "iterations"
    __table_args__ = (UniqueConstraint("run_id", "iteration"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    iteration: Mapped[int] = mapped_column(Integer)
    env_steps: Mapped[int] = mapped_column(Integer)
    wall_seconds: Mapped[float] = mapped_column(Float)
    metrics: Mapped[dict] = mapped_column(JSON, default=dict)


class Match(Base):
    """One iterated adaptation game between two agent versions. (run_id, run_index) is unique so a
    resumed tournament writes each scheduled game exactly once."""

    __tablename__ = "matches"
    __table_args__ = (UniqueConstraint("run_id", "run_index"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int | None] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), nullable=True, index=True
    )
    run_index: Mapped[int | None] = mapped_column(Integer, nullable=True)
    version_a_id: Mapped[int] = mapped_column(ForeignKey("versions.id"), index=True)
    version_b_id: Mapped[int] = mapped_column(ForeignKey("versions.id"), index=True)
    settings: Mapped[dict] = mapped_column(JSON, default=dict)
    seed: Mapped[int] = mapped_column(Integer)
    # "a" | "b" | "draw"
    outcome: Mapped[str] = mapped_column(String(8))
    rounds_won_a: Mapped[int] = mapped_column(Integer)
    rounds_won_b: Mapped[int] = mapped_column(Integer)
    rounds_drawn: Mapped[int] = mapped_column(Integer)
    code_version: Mapped[str] = mapped_column(String(32))
    mujoco_version: Mapped[str] = mapped_column(String(32))
    timing: Mapped[dict] = mapped_column(JSON, default=dict)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    wall_seconds: Mapped[float] = mapped_column(Float, default=0.0)

    rounds: Mapped[list["Round"]] = relationship(
        back_populates="match", order_by="Round.index", cascade="all, delete-orphan"
    )


class Round(Base):
    """One round of a game; its episodes (bouts) are in ``episodes``."""

    __tablename__ = "rounds"
    __table_args__ = (UniqueConstraint("match_id", "index"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    match_id: Mapped[int] = mapped_column(ForeignKey("matches.id", ondelete="CASCADE"), index=True)
    index: Mapped[int] = mapped_column(Integer)
    # Versions that played this round (the opponent's version grows with --opponent-learning).
    version_a: Mapped[int] = mapped_column(Integer)
    version_b: Mapped[int] = mapped_column(Integer)
    # "a" | "b" | "draw"
    outcome: Mapped[str] = mapped_column(String(8))
    wins_a: Mapped[int] = mapped_column(Integer)
    wins_b: Mapped[int] = mapped_column(Integer)
    draws: Mapped[int] = mapped_column(Integer)

    match: Mapped[Match] = relationship(back_populates="rounds")
    episodes: Mapped[list["Episode"]] = relationship(
        back_populates="round", order_by="Episode.index", cascade="all, delete-orphan"
    )


class Episode(Base):
    """One bout: outcome from A's side (win/loss/draw), how it ended, length in env steps."""

    __tablename__ = "episodes"
    __table_args__ = (UniqueConstraint("round_id", "index"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    round_id: Mapped[int] = mapped_column(ForeignKey("rounds.id", ondelete="CASCADE"), index=True)
    index: Mapped[int] = mapped_column(Integer)
    outcome: Mapped[str] = mapped_column(String(8))
    # ring_out | fall | timeout | unstable
    reason: Mapped[str] = mapped_column(String(16))
    length: Mapped[int] = mapped_column(Integer)
    seed: Mapped[int] = mapped_column(Integer)

    round: Mapped[Round] = relationship(back_populates="episodes")


class Rating(Base):
    """An agent version's TrueSkill after a rated match, so a leaderboard exists at every point."""

    __tablename__ = "ratings"
    __table_args__ = (
        UniqueConstraint("run_id", "after_index", "version_id"),
        Index("ix_ratings_run_version", "run_id", "version_id"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    # Schedule index of the match after which this rating holds.
    after_index: Mapped[int] = mapped_column(Integer)
    match_id: Mapped[int] = mapped_column(ForeignKey("matches.id", ondelete="CASCADE"))
    version_id: Mapped[int] = mapped_column(ForeignKey("versions.id"))
    mu: Mapped[float] = mapped_column(Float)
    sigma: Mapped[float] = mapped_column(Float)


class Member(Base):
    """A population slot in one generation of an evolution, with lineage."""

    __tablename__ = "members"
    __table_args__ = (UniqueConstraint("run_id", "generation", "slot"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    generation: Mapped[int] = mapped_column(Integer)
    slot: Mapped[int] = mapped_column(Integer)
    version_id: Mapped[int] = mapped_column(ForeignKey("versions.id"))
    # The slot (in the previous generation) this member was cloned from; equals slot when it survived.
    parent_slot: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # The schedule index of the game that made this slot a clone, if any.
    cloned_by_match: Mapped[int | None] = mapped_column(Integer, nullable=True)
