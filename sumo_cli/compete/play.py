"""One game as a user asks for it: resolve, load, play, store. Used by `sumo play`."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

from sumo_cli import __version__, names
from sumo_cli.compete.game import AgentData, GameSettings, play_game
from sumo_cli.compete.learning_opponent import learning_schedule
from sumo_cli.compete.summary import summarise
from sumo_cli.errors import UserError
from sumo_cli.store.library import load_agent
from sumo_cli.store import matches as store_matches
from sumo_cli.store import registry
from sumo_cli.store.database import Database


def mujoco_version() -> str:
    from importlib.metadata import version

    return version("mujoco")


@dataclass
class GameJob:
    a: AgentData
    b: list[AgentData]
    version_a_id: int
    version_b_id: int
    settings: GameSettings
    seed: int
    opponent_learning: bool
    note: str | None = None  # how a learning opponent steps through its stored versions, when not one by one

    @property
    def rounds(self) -> int:
        return self.settings.rounds

    @property
    def a_display(self) -> str:
        return self.a.display

    @property
    def b_display(self) -> str:
        return self.b[0].display + ("+" if self.opponent_learning else "")


def prepare_game(
    db: Database, name_a: str, name_b: str, rounds: int, episodes: int, seed: int, physics: str, threads: int,
    opponent_learning: bool = False, start_version: int | None = None,
) -> GameJob:
    """Resolve and load both agents (and every version B needs); everything is checked before play."""
    la = load_agent(db, name_a)
    if opponent_learning:
        with db.read() as s:
            rv = registry.resolve(s, name_b)
            agent = registry.get_agent(s, rv.agent_name)
            have = sorted(v.version for v in agent.versions)
        start = start_version if start_version is not None else rv.version
        named = start_version is not None or names.parse(name_b).version is not None
        schedule = learning_schedule(rv.agent_name, have, start, named, rounds)
        played_as = f":{rv.played_as}" if rv.played_as else ""
        loaded = {v: load_agent(db, f"{rv.agent_name}@{v}{played_as}") for v in sorted(set(schedule.versions))}
        b = [AgentData.from_loaded(loaded[v]) for v in schedule.versions]
        vb_id = loaded[schedule.versions[0]].version_id
    else:
        if start_version is not None:
            raise UserError("--start-version only applies with --opponent-learning")
        lb = load_agent(db, name_b)
        b = [AgentData.from_loaded(lb)]
        vb_id = lb.version_id
    settings = GameSettings(rounds=rounds, episodes=episodes, physics=physics, threads=threads)
    return GameJob(AgentData.from_loaded(la), b, la.version_id, vb_id, settings, seed, opponent_learning,
                   schedule.note if opponent_learning else None)


@dataclass
class PlayOutcome:
    result: dict
    summary: dict
    match_id: int
    interrupted: bool


def run_and_store(db: Database, job: GameJob, view, video: Path | None = None) -> PlayOutcome:  # noqa: ANN001
    """Play the game with a live view; store it (also when interrupted, marked so)."""
    done_rounds = []

    def on_round(rd) -> None:  # noqa: ANN001
        done_rounds.append(rd)
        view.on_round(rd)

    interrupted = False
    b_arg = job.b if job.opponent_learning else job.b[0]
    started = time.perf_counter()
    with view:
        try:
            result = play_game(job.a, b_arg, job.settings, job.seed, on_round=on_round).to_dict()
        except KeyboardInterrupt:
            interrupted = True
            result = None
    if interrupted:
        if not done_rounds:
            raise KeyboardInterrupt
        from sumo_cli.compete.rules import game_outcome

        rounds = [asdict(r) for r in done_rounds]
        won_a = sum(r["outcome"] == "a" for r in rounds)
        won_b = sum(r["outcome"] == "b" for r in rounds)
        result = {
            "a": job.a.display, "b": job.b[0].display, "seed": job.seed, "settings": asdict(job.settings),
            "outcome": game_outcome(won_a, won_b, len(rounds)), "rounds_won_a": won_a, "rounds_won_b": won_b,
            "rounds_drawn": len(rounds) - won_a - won_b, "rounds": rounds, "timing": {},
            "wall_seconds": round(time.perf_counter() - started, 3),
        }
    result["extra_settings"] = {"opponent_learning": job.opponent_learning, "interrupted": interrupted}
    with db.write() as s:
        match_id = store_matches.record_game(
            s, result, job.version_a_id, job.version_b_id, code_version=__version__, mujoco_version=mujoco_version()
        )
    if video is not None and not interrupted:
        from sumo_cli.compete.video import record_game_video

        record_game_video(job, video)
    return PlayOutcome(result, summarise(result), match_id, interrupted)
