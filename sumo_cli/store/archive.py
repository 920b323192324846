"""A run of games (a tournament, an evolution, a game experiment) as one file, to carry it to another
database: its stored games, ratings and evolution members, with every version it played named by
agent, version number and checkpoint SHA-256 instead of this database's ids.

Imported into a database that holds those versions (the shipped agents register themselves in
every database), the run continues with ``--resume`` from where it was exported, or is shown and
reported as it finished. That is how a run longer than a sitting, or than one machine's time, goes
on elsewhere: the games are independent and seeded by the run, so which database or process played
them changes nothing in the results (another CPU model may round floats differently).

The file is gzip-compressed JSON: ``{"format", "format_version", "sha256", "payload"}``, the hash over
the canonical JSON of the payload, checked on reading. Training runs are not archived: their
versions are checkpoints, which ship through ``policies/``.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from sumo_cli.errors import UserError
from sumo_cli.store import registry
from sumo_cli.store.database import Database
from sumo_cli.store.models import Agent, Episode, Match, Member, Rating, Round, Run, Version

FORMAT = "sumo-run-archive"
FORMAT_VERSION = 1
# A run that was still playing when it was exported continues as an interrupted one.
UNFINISHED = "interrupted"


def _when(t: datetime | None) -> str | None:
    """A stored time as UTC without an offset: SQLite gives it back naive, PostgreSQL with one."""
    if t is None:
        return None
    return (t.astimezone(timezone.utc).replace(tzinfo=None) if t.tzinfo is not None else t).isoformat()


def _parse(t: str | None) -> datetime | None:
    return datetime.fromisoformat(t).replace(tzinfo=timezone.utc) if t is not None else None


def _canonical(payload: dict) -> bytes:
    return json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()


class _VersionKeys:
    """This database's version ids <-> the archive's version keys (index into its ``versions``)."""

    def __init__(self, session: Session):
        self.session = session
        self.keys: dict[int, int] = {}
        self.rows: list[dict] = []

    def key(self, version_id: int) -> int:
        if version_id not in self.keys:
            v = self.session.get(Version, version_id)
            agent = self.session.get(Agent, v.agent_id)
            self.keys[version_id] = len(self.rows)
            self.rows.append({"agent": agent.name, "version": v.version, "sha256": v.sha256})
        return self.keys[version_id]


def export_run(db: Database, run_id: int) -> dict:
    """The payload of run ``run_id``'s archive, read in one transaction (a run still playing is
    taken as it stands)."""
    with db.read() as s:
        run = s.get(Run, run_id)
        if run is None:
            raise UserError(f"no run with id {run_id}; `sumo runs` lists them")
        if s.scalar(select(Version.id).where(Version.run_id == run_id).limit(1)) is not None:
            raise UserError(f"run {run_id} is a {run.kind} run that stored versions of its own; only runs of "
                            "games are archived (a trained agent ships through policies/)")
        keys = _VersionKeys(s)
        matches = s.scalars(select(Match).where(Match.run_id == run_id).order_by(Match.run_index, Match.id)).all()
        position = {m.id: i for i, m in enumerate(matches)}
        rounds = _rounds_of(s, run_id)
        return {
            "run": {"kind": run.kind, "config": run.config, "seed": run.seed, "status": run.status,
                    "progress_done": run.progress_done, "progress_total": run.progress_total, "state": run.state,
                    "code_version": run.code_version, "created_at": _when(run.created_at),
                    "updated_at": _when(run.updated_at), "finished_at": _when(run.finished_at)},
            "matches": [_match_row(m, rounds.get(m.id, []), keys) for m in matches],
            "ratings": [[r.after_index, position[r.match_id], keys.key(r.version_id), r.mu, r.sigma]
                        for r in s.scalars(select(Rating).where(Rating.run_id == run_id).order_by(Rating.id))],
            "members": [[m.generation, m.slot, keys.key(m.version_id), m.parent_slot, m.cloned_by_match]
                        for m in s.scalars(select(Member).where(Member.run_id == run_id).order_by(Member.id))],
            "versions": keys.rows,
        }


def _rounds_of(s: Session, run_id: int) -> dict[int, list]:
    """Match id -> its rounds as archive rows, each with its bouts, in two queries for the whole run."""
    bouts: dict[int, list] = {}
    for round_id, o, why, n, seed in s.execute(
            select(Episode.round_id, Episode.outcome, Episode.reason, Episode.length, Episode.seed)
            .join(Round, Round.id == Episode.round_id).join(Match, Match.id == Round.match_id)
            .where(Match.run_id == run_id).order_by(Episode.round_id, Episode.index)):
        bouts.setdefault(round_id, []).append([o, why, n, seed])
    rounds: dict[int, list] = {}
    for rd in s.scalars(select(Round).join(Match, Match.id == Round.match_id).where(Match.run_id == run_id)
                        .order_by(Round.match_id, Round.index)):
        rounds.setdefault(rd.match_id, []).append([rd.index, rd.version_a, rd.version_b, rd.outcome, rd.wins_a,
                                                   rd.wins_b, rd.draws, bouts.get(rd.id, [])])
    return rounds


def _match_row(m: Match, rounds: list, keys: _VersionKeys) -> dict:
    return {"run_index": m.run_index, "a": keys.key(m.version_a_id), "b": keys.key(m.version_b_id),
            "settings": m.settings, "seed": m.seed, "outcome": m.outcome,
            "rounds_won": [m.rounds_won_a, m.rounds_won_b, m.rounds_drawn], "code_version": m.code_version,
            "mujoco_version": m.mujoco_version, "timing": m.timing, "started_at": _when(m.started_at),
            "wall_seconds": m.wall_seconds, "rounds": rounds}


def _resolve_versions(s: Session, versions: list[dict]) -> list[int]:
    """This database's id of every version the archive names, checked by SHA-256 (a version of an
    agent retired since is found under its new name); one sentence for the first that is missing or
    differs."""
    ids = []
    for v in versions:
        vid = registry.find_version(s, v["agent"], v["version"], v["sha256"])
        if vid is None:
            sha = s.scalar(select(Version.sha256).join(Agent, Agent.id == Version.agent_id)
                           .where(Agent.name == v["agent"], Version.version == v["version"]))
            if sha is None:
                raise UserError(f"the run played {v['agent']}@{v['version']}, which this database does not hold; "
                                "import or ship that agent first (`sumo agents` lists what it holds)")
            raise UserError(f"{v['agent']}@{v['version']} in this database is not the version the run played "
                            f"(checkpoint SHA-256 {sha[:12]}... here, {v['sha256'][:12]}... in the archive)")
        ids.append(vid)
    return ids


def import_run(db: Database, payload: dict) -> tuple[int, str]:
    """Store the archived run as a new run of this database, in one transaction; its id and status
    (a run exported while it played comes in interrupted, to be resumed)."""
    r = payload["run"]
    with db.write() as s:
        vids = _resolve_versions(s, payload["versions"])
        status = UNFINISHED if r["status"] == "running" else r["status"]
        run = Run(kind=r["kind"], config=r["config"], seed=r["seed"], status=status, progress_done=r["progress_done"],
                  progress_total=r["progress_total"], state=r["state"], code_version=r["code_version"],
                  created_at=_parse(r["created_at"]), updated_at=_parse(r["updated_at"]),
                  finished_at=_parse(r["finished_at"]), owner=None)
        s.add(run)
        s.flush()
        match_ids = [_add_match(s, run.id, m, vids) for m in payload["matches"]]
        for after, pos, key, mu, sigma in payload["ratings"]:
            s.add(Rating(run_id=run.id, after_index=after, match_id=match_ids[pos], version_id=vids[key], mu=mu,
                         sigma=sigma))
        for generation, slot, key, parent, cloned_by in payload["members"]:
            s.add(Member(run_id=run.id, generation=generation, slot=slot, version_id=vids[key], parent_slot=parent,
                         cloned_by_match=cloned_by))
        return run.id, status


def _add_match(s: Session, run_id: int, m: dict, vids: list[int]) -> int:
    won_a, won_b, drawn = m["rounds_won"]
    match = Match(run_id=run_id, run_index=m["run_index"], version_a_id=vids[m["a"]], version_b_id=vids[m["b"]],
                  settings=m["settings"], seed=m["seed"], outcome=m["outcome"], rounds_won_a=won_a, rounds_won_b=won_b,
                  rounds_drawn=drawn, code_version=m["code_version"], mujoco_version=m["mujoco_version"],
                  timing=m["timing"], started_at=_parse(m["started_at"]), wall_seconds=m["wall_seconds"])
    s.add(match)
    s.flush()
    if not m["rounds"]:
        return match.id
    # Bulk inserts: a paper-scale tournament is 100,000 rounds and 300,000 bouts.
    round_ids = s.scalars(insert(Round).returning(Round.id, sort_by_parameter_order=True), [
        {"match_id": match.id, "index": index, "version_a": version_a, "version_b": version_b, "outcome": outcome,
         "wins_a": wins_a, "wins_b": wins_b, "draws": draws}
        for index, version_a, version_b, outcome, wins_a, wins_b, draws, _ in m["rounds"]]).all()
    episodes = [{"round_id": rid, "index": k, "outcome": o, "reason": why, "length": n, "seed": seed}
                for rid, rd in zip(round_ids, m["rounds"]) for k, (o, why, n, seed) in enumerate(rd[7])]
    if episodes:
        s.execute(insert(Episode), episodes)
    return match.id


def write_archive(path: Path, payload: dict) -> None:
    """Write the archive whole or not at all (a temporary file renamed into place); the same payload
    gives the same bytes."""
    doc = {"format": FORMAT, "format_version": FORMAT_VERSION,
           "sha256": hashlib.sha256(_canonical(payload)).hexdigest(), "payload": payload}
    data = _canonical(doc)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as raw, gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as gz:
        gz.write(data)
    os.replace(tmp, path)


def read_archive(path: Path) -> dict:
    """The payload of an archive file, its SHA-256 checked; one sentence for a file that is not one."""
    try:
        with gzip.open(path, "rb") as f:
            doc = json.loads(f.read())
    except FileNotFoundError:
        raise UserError(f"no archive at {path}") from None
    except (OSError, EOFError, ValueError):
        raise UserError(f"{path} is not a run archive (gzip-compressed JSON written by `sumo runs export`)") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise UserError(f"{path} is not a run archive (gzip-compressed JSON written by `sumo runs export`)")
    if doc.get("format_version") != FORMAT_VERSION:
        raise UserError(f"{path} is a run archive of format {doc.get('format_version')}; this sumo reads format "
                        f"{FORMAT_VERSION}")
    if hashlib.sha256(_canonical(doc["payload"])).hexdigest() != doc.get("sha256"):
        raise UserError(f"{path} is damaged: its contents do not match the SHA-256 it records")
    return doc["payload"]
