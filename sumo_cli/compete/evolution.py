"""Evolution of a population (paper, Sec. 5.3): losers are removed and winners duplicated.

Members are slots. Generation 0 holds every agent of the base population ``copies`` times. Each
generation draws ``matches`` random pairs of distinct slots from the population as it stands at the
generation's start; the games run in parallel; then the results are applied in schedule order: the
loser's slot receives a copy of the winner as it was at the generation's start, and a draw changes
nothing (shared/spec/method-notes.md). The size never changes, and every game of a generation is
independent of the others, so they can all run at once.

Each game is stored once, keyed by (run, generation x matches + index); each generation's members
are stored with their lineage (the slot they were cloned from and by which game). Resuming continues
from the last complete generation and the games already stored.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Callable

from sumo_cli import __version__
from sumo_cli.compete.game import AgentData, GameSettings
from sumo_cli.compete.population import Member
from sumo_cli.compete.results import shares
from sumo_cli.compete.schedule import apply_generation, random_pairs
from sumo_cli.compete.engine import CONCURRENCY, batches, run_games_job
from sumo_cli.compete.tournament import each_game, open_run
from sumo_cli.errors import UserError
from sumo_cli.store.library import load_agent
from sumo_cli.store import ownership
from sumo_cli.store import matches as store_matches
from sumo_cli.store import runs as store_runs
from sumo_cli.store.database import Database


def evolution_config(members: list[Member], copies: int, generations: int, matches: int, rounds: int, episodes: int,
                     physics: str) -> dict:
    for value, what in ((copies, "--copies"), (generations, "--generations"), (matches, "--matches"),
                        (rounds, "--rounds"), (episodes, "--episodes")):
        if value < 1:
            raise UserError(f"{what} must be at least 1, got {value}")
    if len(members) * copies < 2:
        raise UserError("an evolution needs at least two slots")
    return {
        "members": [asdict(m) for m in members], "copies": copies, "generations": generations, "matches": matches,
        "game": asdict(GameSettings(rounds=rounds, episodes=episodes, physics=physics, threads=1)),
    }


class EvolutionRunner:
    def __init__(self, db: Database, run_id: int):
        self.db = db
        self.config, self.seed, self.members, loaded = open_run(
            db, run_id, "evolution", f"evolution run {run_id} is already finished; `sumo runs show {run_id}` shows it")
        self.run_id = run_id
        self.owner: str | None = None  # this process's claim on the run, taken when it starts playing
        self.data = [AgentData.from_loaded(x) for x in loaded]
        self.version_ids = [x.version_id for x in loaded]
        self.matches = self.config["matches"]
        self.n_slots = len(self.members) * self.config["copies"]

    @classmethod
    def create(cls, db: Database, config: dict, seed: int) -> int:
        members = [Member(**m) for m in config["members"]]
        version_ids = [load_agent(db, m.name).version_id for m in members]
        total = config["generations"] * config["matches"]
        with db.write() as s:
            run_id = store_runs.create_run(s, "evolution", config, seed, total, __version__)
            for slot in range(len(members) * config["copies"]):
                store_runs.add_member(s, run_id, 0, slot, version_ids[slot // config["copies"]], None)
        return run_id

    # -- generations as stored
    def slots_of(self, generation: int) -> list[int] | None:
        """Member index (into the base population) of every slot, or None if not stored."""
        by_vid = {v: i for i, v in enumerate(self.version_ids)}
        with self.db.read() as s:
            rows = store_runs.generation_slots(s, self.run_id, generation)
        if not rows:
            return None
        slots = [0] * self.n_slots
        for slot, vid in rows:
            slots[slot] = by_vid[vid]
        return slots

    def shares(self, slots: list[int]) -> dict[str, dict[str, float]]:
        return shares(self.members, slots)

    def history(self) -> list[dict[str, dict[str, float]]]:
        out = []
        for g in range(self.config["generations"] + 1):
            slots = self.slots_of(g)
            if slots is None:
                break
            out.append(self.shares(slots))
        return out

    def run(self, executor, on_game: Callable[[int, int], None] | None = None,  # noqa: ANN001
            on_generation: Callable[[int, dict], None] | None = None, concurrency: int = CONCURRENCY,
            on_progress: Callable[[float, float], None] | None = None) -> list[dict]:
        """Play the generations still missing; ``on_game(generation, games done in it)``,
        ``on_generation(generation, shares)`` and ``on_progress(game-rounds, seconds)`` (the rounds
        the workers play, as they play them) report along the way."""
        from sumo_cli.compete.play import mujoco_version

        mj = mujoco_version()
        settings = self.config["game"]
        self.owner = ownership.claim(self.db, self.run_id)
        try:
            for g in range(self.config["generations"]):
                if self.slots_of(g + 1) is not None:
                    continue  # generation already complete
                slots = self.slots_of(g)
                schedule = random_pairs(self.n_slots, self.matches, self.seed, g)
                base = g * self.matches
                with self.db.read() as s:
                    stored = store_runs.run_outcomes(s, self.run_id)
                outcomes = {i - base: o for i, o in stored.items() if base <= i < base + self.matches}
                games = [(x.index, self.data[slots[x.a]], self.data[slots[x.b]], settings, x.seed)
                         for x in schedule if x.index not in outcomes]
                jobs = ((i, (b, concurrency)) for i, b in enumerate(batches(games, executor.workers, concurrency)))
                for idx, result in each_game(executor.run(run_games_job, jobs, on_progress)):
                    x = schedule[idx]
                    with self.db.write() as s:  # the status write checks the claim: all or nothing
                        store_matches.record_game(
                            s, result, self.version_ids[slots[x.a]], self.version_ids[slots[x.b]],
                            code_version=__version__, mujoco_version=mj, run_id=self.run_id, run_index=base + idx)
                        store_runs.set_run_status(s, self.run_id, "running", done=base + len(outcomes) + 1,
                                                   owner=self.owner)
                    outcomes[idx] = result["outcome"]
                    if on_game is not None:
                        on_game(g, len(outcomes))
                nxt, clones = apply_generation(slots, schedule, outcomes)
                parent = {slot: (p, gi) for slot, p, gi in clones}
                with self.db.write() as s:
                    for slot in range(self.n_slots):
                        p, gi = parent.get(slot, (slot, None))
                        store_runs.add_member(s, self.run_id, g + 1, slot, self.version_ids[nxt[slot]], p,
                                              None if gi is None else base + gi)
                    store_runs.set_run_status(s, self.run_id, "running", done=base + self.matches, owner=self.owner)
                if on_generation is not None:
                    on_generation(g + 1, self.shares(nxt))
        except store_runs.RunTakenOver:
            raise
        except BaseException:
            with self.db.write() as s:
                store_runs.set_run_status(s, self.run_id, "interrupted", owner=self.owner)
            raise
        with self.db.write() as s:
            store_runs.set_run_status(s, self.run_id, "finished", owner=self.owner)
        return self.history()
