"""Writing and reading runs (training, tournaments, evolutions, experiments), their ownership
claims, progress and ratings.

Everything here takes and returns plain data; only the driver process calls it, in short
transactions.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from sumo_cli.errors import UserError
from sumo_cli.store.models import Agent, Iteration, Match, Member, Rating, Run, Version


def create_run(session: Session, kind: str, config: dict, seed: int, total: int, code_version: str) -> int:
    run = Run(kind=kind, config=config, seed=seed, status="running", progress_total=total, code_version=code_version)
    session.add(run)
    session.flush()
    return run.id


def get_run(session: Session, run_id: int, kind: str | None = None) -> Run:
    run = session.get(Run, run_id)
    if run is None or (kind is not None and run.kind != kind):
        what = f"{kind} run" if kind else "run"
        raise UserError(f"no {what} with id {run_id}; `sumo runs` lists them")
    return run


def find_run(session: Session, run_id: int | None) -> Run | None:
    """The run with this id, or None (also for no id): where a missing run is no error."""
    return session.get(Run, run_id) if run_id is not None else None


class RunTakenOver(UserError):
    """Another process has taken the run over: this one must stop without writing to it."""


def live_holder(run: Run, is_alive: Callable[[str, datetime | None], bool]) -> str | None:
    """The owner of a running ``run`` while its process may still be alive (``is_alive(holder, last
    write)``), else None."""
    held = run.owner
    return held if held and run.status == "running" and is_alive(held, run.updated_at) else None


def claim_run(session: Session, run_id: int, owner: str, is_alive: Callable[[str, datetime | None], bool]) -> str | None:
    """Make ``owner`` the run's only writer and return None; or, while another live process holds
    the run (:func:`live_holder`), change nothing and return the holder."""
    run = session.get(Run, run_id)
    held = live_holder(run, is_alive)
    if held and held != owner:
        return held
    run.owner = owner
    return None


def check_owner(session: Session, run_id: int, owner: str) -> None:
    """Raise :class:`RunTakenOver` unless ``owner`` still holds the run."""
    if session.get(Run, run_id).owner != owner:
        raise RunTakenOver(f"run {run_id} was taken over by another process (a second --resume); this one "
                           "stopped without writing its last step")


def set_run_status(session: Session, run_id: int, status: str, done: int | None = None, state: dict | None = None,
                   owner: str | None = None) -> None:
    """``owner`` given: the write of a process that claimed the run (:func:`claim_run`), refused with
    :class:`RunTakenOver` if another has taken it over since; a final status releases the run."""
    run = session.get(Run, run_id)
    if owner is not None:
        check_owner(session, run_id, owner)
        if status != "running":
            run.owner = None
    run.status = status
    run.updated_at = datetime.now(timezone.utc)
    if done is not None:
        run.progress_done = done
    if state is not None:
        run.state = state
    if status == "finished":
        run.finished_at = run.updated_at


def extend_run(session: Session, run_id: int, section: str, iterations: int) -> None:
    """Raise a run's planned iterations (its stored ``config[section]["iterations"]`` and total) to
    ``iterations``; a finished run becomes interrupted, to be resumed."""
    run = session.get(Run, run_id)
    run.config = {**run.config, section: {**run.config[section], "iterations": int(iterations)}}
    run.progress_total = int(iterations)
    if run.status == "finished":
        run.status, run.finished_at = "interrupted", None
    run.updated_at = datetime.now(timezone.utc)


def finished_indices(session: Session, run_id: int) -> dict[int, int]:
    """Schedule index -> match id of the games of a run already written."""
    rows = session.execute(select(Match.run_index, Match.id).where(Match.run_id == run_id)).all()
    return {int(i): int(m) for i, m in rows}


def run_outcomes(session: Session, run_id: int) -> dict[int, str]:
    """Schedule index -> outcome ('a', 'b' or 'draw') of every game of a run written so far."""
    rows = session.execute(select(Match.run_index, Match.outcome).where(Match.run_id == run_id)).all()
    return {int(i): str(o) for i, o in rows}


def played_versions(session: Session, run_id: int) -> dict[int, tuple[int, int]]:
    """Schedule index -> (version id of player a, of player b) of every game of a run written so far."""
    rows = session.execute(select(Match.run_index, Match.version_a_id, Match.version_b_id).where(Match.run_id == run_id))
    return {int(i): (int(a), int(b)) for i, a, b in rows}


def version_label(session: Session, version_id: int) -> str:
    """``agent@version`` of a stored version, as a name resolves."""
    v = session.get(Version, version_id)
    return f"{session.get(Agent, v.agent_id).name}@{v.version}"


def run_generations(session: Session, run_id: int) -> dict[int, dict[int, int]]:
    """Generation -> {slot: version id} of an evolution run's stored members."""
    out: dict[int, dict[int, int]] = {}
    rows = session.execute(select(Member.generation, Member.slot, Member.version_id).where(Member.run_id == run_id))
    for generation, slot, version_id in rows:
        out.setdefault(int(generation), {})[int(slot)] = int(version_id)
    return out


def last_env_steps(session: Session, run_id: int) -> int:
    """Env steps a training run has simulated up to its last stored iteration (0 before any)."""
    steps = session.scalar(select(Iteration.env_steps).where(Iteration.run_id == run_id)
                           .order_by(Iteration.iteration.desc()).limit(1))
    return int(steps or 0)


def shown_status(run: Run, is_alive: Callable[[str | None, datetime | None], bool] | None) -> str:
    """A run's status as it stands: a ``running`` run whose process is gone (killed with SIGKILL, the
    machine lost: it could not write ``interrupted`` itself) is ``interrupted``. ``is_alive(owner,
    last write)`` (runtime.ownership.is_alive; owner None: a run not yet claimed by the process that
    is starting it); None: the stored status."""
    if run.status != "running" or is_alive is None:
        return run.status
    return "running" if is_alive(run.owner, run.updated_at) else "interrupted"


def mean_iteration_seconds(session: Session, run_id: int) -> float | None:
    """The mean wall time of a training run's stored iterations (None before the first)."""
    mean = session.scalar(select(func.avg(Iteration.wall_seconds)).where(Iteration.run_id == run_id))
    return float(mean) if mean is not None else None


def list_runs(session: Session, limit: int = 50,
              is_alive: Callable[[str | None, datetime | None], bool] | None = None) -> list[dict]:
    """The newest runs, their status as :func:`shown_status` sees it."""
    out = []
    for r in session.scalars(select(Run).order_by(Run.id.desc()).limit(limit)):
        out.append({
            "id": r.id, "kind": r.kind, "status": shown_status(r, is_alive), "done": r.progress_done, "total": r.progress_total,
            "seed": r.seed, "created_at": r.created_at.isoformat() if r.created_at else None,
            "updated_at": r.updated_at.isoformat() if r.updated_at else None,
        })
    return out


def add_iteration(session: Session, run_id: int, iteration: int, env_steps: int, wall_seconds: float,
                  metrics: dict) -> None:
    session.add(Iteration(run_id=run_id, iteration=iteration, env_steps=env_steps, wall_seconds=wall_seconds,
                          metrics=metrics))


def iteration_totals(session: Session, run_id: int) -> tuple[int, float, int]:
    """Stored iterations of a training run: how many, their wall seconds, the env steps at the last."""
    n, wall, steps = session.execute(select(func.count(), func.coalesce(func.sum(Iteration.wall_seconds), 0.0),
                                            func.coalesce(func.max(Iteration.env_steps), 0))
                                     .where(Iteration.run_id == run_id)).one()
    return n, wall, steps


def generation_slots(session: Session, run_id: int, generation: int) -> list[tuple[int, int]]:
    """(slot, version id) of every member of an evolution's generation as stored."""
    return [tuple(r) for r in session.execute(select(Member.slot, Member.version_id).where(
        Member.run_id == run_id, Member.generation == generation)).all()]


def add_member(session: Session, run_id: int, generation: int, slot: int, version_id: int, parent_slot: int | None,
               cloned_by_match: int | None = None) -> None:
    """One slot of an evolution's generation: the version in it, and the slot and game it was copied from."""
    session.add(Member(run_id=run_id, generation=generation, slot=slot, version_id=version_id, parent_slot=parent_slot,
                       cloned_by_match=cloned_by_match))


def restart_ratings(session: Session, run_id: int) -> list[tuple[int, int, str]]:
    """(schedule index, match id, outcome) of every game of a tournament so far, with its stored
    ratings deleted: they are a function of the results in schedule order and are rebuilt."""
    rows = session.execute(select(Match.run_index, Match.id, Match.outcome).where(Match.run_id == run_id)).all()
    session.execute(delete(Rating).where(Rating.run_id == run_id))
    return [tuple(r) for r in rows]


def add_rating(session: Session, run_id: int, after_index: int, match_id: int, version_id: int, mu: float, sigma: float) -> None:
    session.add(Rating(run_id=run_id, after_index=after_index, match_id=match_id, version_id=version_id, mu=mu, sigma=sigma))


# Runs are of these kinds; only training runs have per-iteration rows (``sumo_cli.runs.training.RUN_KIND``).
TRAIN_KIND = "train"
#: The command that continues an unfinished run of each resumable kind (an evolution: ``sumo evolve --resume ID``).
RESUME_COMMANDS = {TRAIN_KIND: "train", "tournament": "tournament", "evolution": "evolve"}


def run_detail(session: Session, run_id: int,
               is_alive: Callable[[str | None, datetime | None], bool] | None = None) -> dict:
    """One run as plain data for `sumo runs show`: ``{"run": {...}}`` (its status as
    :func:`shown_status` sees it), plus ``"iterations"`` (every stored iteration in order:
    iteration, env steps, wall seconds and the metrics dict) when it is a training run. An unknown
    id is a UserError naming `sumo runs`."""
    run = get_run(session, run_id)
    config = dict(run.config or {})

    def iso(t: datetime | None) -> str | None:
        return t.isoformat() if t is not None else None

    doc: dict = {
        "run": {
            "id": run.id, "kind": run.kind, "status": shown_status(run, is_alive), "done": run.progress_done,
            "total": run.progress_total, "seed": run.seed, "code_version": run.code_version,
            "env": str(config.get("env", "sumo")) if run.kind == TRAIN_KIND else None,
            "config": config, "created_at": iso(run.created_at), "updated_at": iso(run.updated_at),
            "finished_at": iso(run.finished_at),
        }
    }
    if run.kind == TRAIN_KIND:
        rows = session.scalars(select(Iteration).where(Iteration.run_id == run.id).order_by(Iteration.iteration))
        doc["iterations"] = [
            {"iteration": it.iteration, "env_steps": it.env_steps, "wall_seconds": it.wall_seconds,
             "metrics": dict(it.metrics or {})}
            for it in rows
        ]
    return doc
