"""What `sumo report` reads beyond compete.results: every stored run of a kind, and the games of a
run with the bouts each side won (and per round), as plain data."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from sumo_cli.store.models import Agent, Match, Round, Run, Version


def runs_of_kind(session: Session, kind: str) -> list[dict]:
    """Every run of ``kind``, oldest first: id, status, seed, config, state, progress, created."""
    out = []
    for r in session.scalars(select(Run).where(Run.kind == kind).order_by(Run.id)):
        out.append({"id": r.id, "kind": r.kind, "status": r.status, "seed": r.seed, "config": dict(r.config or {}),
                    "state": dict(r.state or {}), "done": r.progress_done, "total": r.progress_total,
                    "created_at": r.created_at.isoformat() if r.created_at else None})
    return out


def version_info(session: Session, version_ids: set[int] | list[int]) -> dict[int, dict]:
    """Version id -> {"name": agent@version, "agent", "version", "body", "arch", "strategy"}."""
    ids = sorted(set(version_ids))
    if not ids:
        return {}
    rows = session.execute(
        select(Version.id, Version.version, Agent.name, Agent.body, Agent.arch, Agent.strategy)
        .join(Agent, Agent.id == Version.agent_id).where(Version.id.in_(ids))).all()
    return {int(vid): {"name": f"{name}@{v}", "agent": name, "version": int(v), "body": body, "arch": arch,
                       "strategy": strategy} for vid, v, name, body, arch, strategy in rows}


def run_games(session: Session, run_id: int, with_rounds: bool = False) -> list[dict]:
    """The games of a run in schedule order: index, both version ids, outcome, rounds won and the
    bouts won by each side over the game (and, with ``with_rounds``, every round's
    (version_b, wins_a, wins_b, draws))."""
    matches = session.execute(
        select(Match.id, Match.run_index, Match.version_a_id, Match.version_b_id, Match.outcome, Match.rounds_won_a,
               Match.rounds_won_b, Match.rounds_drawn, Match.settings, Match.seed)
        .where(Match.run_id == run_id).order_by(Match.run_index)).all()
    if not matches:
        return []
    per_round: dict[int, list[tuple[int, int, int, int, int]]] = {}
    rows = session.execute(
        select(Round.match_id, Round.index, Round.version_b, Round.wins_a, Round.wins_b, Round.draws)
        .join(Match, Match.id == Round.match_id).where(Match.run_id == run_id)
        .order_by(Round.match_id, Round.index)).all()
    for mid, idx, vb, wa, wb, d in rows:
        per_round.setdefault(int(mid), []).append((int(idx), int(vb), int(wa), int(wb), int(d)))
    out = []
    for mid, idx, va, vb, outcome, ra, rb, rd, settings, seed in matches:
        rounds = per_round.get(int(mid), [])
        game = {"match_id": int(mid), "index": None if idx is None else int(idx), "a": int(va), "b": int(vb),
                "outcome": outcome, "rounds_won_a": int(ra), "rounds_won_b": int(rb), "rounds_drawn": int(rd),
                "bouts_won_a": sum(r[2] for r in rounds), "bouts_won_b": sum(r[3] for r in rounds),
                "bouts_drawn": sum(r[4] for r in rounds), "settings": dict(settings or {}), "seed": int(seed)}
        if with_rounds:
            game["rounds"] = [{"index": r[0], "version_b": r[1], "wins_a": r[2], "wins_b": r[3], "draws": r[4]}
                              for r in rounds]
        out.append(game)
    return out


def agent_catalogue(session: Session) -> list[dict]:
    """Every agent: name, body, arch, strategy, provenance, its versions (ascending) and the
    version a bare name plays (its default, else its highest)."""
    out = []
    for a in session.scalars(select(Agent).order_by(Agent.name)):
        versions = [v.version for v in a.versions]
        if not versions:
            continue
        out.append({"name": a.name, "body": a.body, "arch": a.arch, "strategy": a.strategy,
                    "provenance": a.provenance, "versions": versions,
                    "plays": a.default_version if a.default_version in versions else versions[-1]})
    return out
