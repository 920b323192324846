"""Writing and reading games: matches with their rounds and episodes.

Everything here takes and returns plain data; only the driver process calls it, in short
transactions, so a crash never leaves a half-written game.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from sumo_cli.errors import UserError
from sumo_cli.store.models import Episode, Match, Round, Version


def record_game(
    session: Session,
    result: dict,
    version_a_id: int,
    version_b_id: int,
    *,
    code_version: str,
    mujoco_version: str,
    run_id: int | None = None,
    run_index: int | None = None,
) -> int:
    """Store one finished game (the dict of compete.game.GameResult) and return the match id. A side
    played with another strategy than its agent's (its name ends in ``:STRATEGY``) keeps that
    strategy in the settings (``played_as_a``/``played_as_b``)."""
    played_as = {f"played_as_{side}": result[side].rpartition(":")[2] for side in ("a", "b") if ":" in result.get(side, "")}
    match = Match(
        run_id=run_id,
        run_index=run_index,
        version_a_id=version_a_id,
        version_b_id=version_b_id,
        settings={**result["settings"], **result.get("extra_settings", {}), **played_as},
        seed=result["seed"],
        outcome=result["outcome"],
        rounds_won_a=result["rounds_won_a"],
        rounds_won_b=result["rounds_won_b"],
        rounds_drawn=result["rounds_drawn"],
        code_version=code_version,
        mujoco_version=mujoco_version,
        timing=result["timing"],
        wall_seconds=result["wall_seconds"],
    )
    session.add(match)
    session.flush()
    for rd in result["rounds"]:
        row = Round(
            match_id=match.id,
            index=rd["index"],
            version_a=rd["version_a"],
            version_b=rd["version_b"],
            outcome=rd["outcome"],
            wins_a=rd["wins_a"],
            wins_b=rd["wins_b"],
            draws=rd["draws"],
        )
        session.add(row)
        session.flush()
        for k, ep in enumerate(rd["episodes"]):
            session.add(
                Episode(round_id=row.id, index=k, outcome=ep["outcome"], reason=ep["reason"], length=ep["length"],
                        seed=ep.get("seed", result["seed"]))
            )
    session.flush()
    return match.id


def interrupted(m: Match) -> bool:
    """Whether the game was stopped before its last round (Ctrl-C in `sumo play`): stored with the
    rounds it played, never counted as a win, draw or loss."""
    return bool((m.settings or {}).get("interrupted"))


def player_label(session: Session, m: Match, side: str) -> str:
    """``agent@version`` of one side of a stored game, with ``:strategy`` when it played another
    strategy than its agent's."""
    v = session.get(Version, m.version_a_id if side == "a" else m.version_b_id)
    played_as = (m.settings or {}).get(f"played_as_{side}")
    return f"{v.agent.name}@{v.version}" + (f":{played_as}" if played_as else "")


def match_dict(session: Session, match_id: int) -> dict:
    m = session.get(Match, match_id)
    if m is None:
        raise UserError(f"no match with id {match_id}; `sumo matches` lists them")
    return {
        "id": m.id,
        "run_id": m.run_id,
        "run_index": m.run_index,
        "a": player_label(session, m, "a"),
        "b": player_label(session, m, "b"),
        "outcome": m.outcome,
        "interrupted": interrupted(m),
        "rounds_won_a": m.rounds_won_a,
        "rounds_won_b": m.rounds_won_b,
        "rounds_drawn": m.rounds_drawn,
        "seed": m.seed,
        "settings": m.settings,
        "code_version": m.code_version,
        "mujoco_version": m.mujoco_version,
        "timing": m.timing,
        "wall_seconds": m.wall_seconds,
        "started_at": m.started_at.isoformat() if m.started_at else None,
        "rounds": [
            {
                "index": r.index,
                "version_a": r.version_a,
                "version_b": r.version_b,
                "outcome": r.outcome,
                "wins_a": r.wins_a,
                "wins_b": r.wins_b,
                "draws": r.draws,
                "episodes": [{"outcome": e.outcome, "reason": e.reason, "length": e.length} for e in r.episodes],
            }
            for r in m.rounds
        ],
    }


def list_matches(session: Session, limit: int = 50, run_id: int | None = None) -> list[dict]:
    q = select(Match).order_by(Match.id.desc()).limit(limit)
    if run_id is not None:
        q = q.where(Match.run_id == run_id)
    out = []
    for m in session.scalars(q):
        out.append({
            "id": m.id, "run_id": m.run_id, "a": player_label(session, m, "a"), "b": player_label(session, m, "b"),
            "outcome": m.outcome, "interrupted": interrupted(m),
            "rounds": f"{m.rounds_won_a}-{m.rounds_drawn}-{m.rounds_won_b}",
            "wall_seconds": round(m.wall_seconds, 1), "started_at": m.started_at.isoformat() if m.started_at else None,
        })
    return out


def count_matches(session: Session) -> int:
    return int(session.scalar(select(func.count(Match.id))) or 0)
