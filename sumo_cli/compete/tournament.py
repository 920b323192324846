"""The tournament: random pairs of a population play iterated games; TrueSkill in schedule order.

A tournament is a run in the database whose schedule is derived from its seed. Games run in
parallel through the executor; each finished game is written once, keyed by (run, index); ratings
are applied strictly in schedule order as soon as every earlier game is in. Resuming replays the
stored results in order and plays what is missing, so an interrupted run ends with exactly the
leaderboard of an uninterrupted one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable

from sumo_cli import __version__
from sumo_cli.compete import ratings as R
from sumo_cli.compete.engine import CONCURRENCY, batches, run_games_job
from sumo_cli.compete.game import AgentData, GameSettings
from sumo_cli.compete.population import Member
from sumo_cli.compete.schedule import ScheduledGame, random_pairs
from sumo_cli.errors import UserError
from sumo_cli.names import parse as parse_name
from sumo_cli.store.library import load_agent
from sumo_cli.store import ownership, registry
from sumo_cli.store import matches as store_matches
from sumo_cli.store import runs as store_runs
from sumo_cli.store.database import Database


@dataclass
class Standing:
    member: Member
    version_id: int
    rating: R.Rating = field(default_factory=R.Rating)
    games: int = 0
    wins: int = 0
    draws: int = 0
    losses: int = 0

    def count(self, outcome: str, side: str) -> None:
        """Add one game whose ``outcome`` ("a", "b" or "draw") this player saw from ``side``."""
        self.games += 1
        if outcome == "draw":
            self.draws += 1
        elif outcome == side:
            self.wins += 1
        else:
            self.losses += 1


@dataclass
class Leaderboard:
    run_id: int
    rated: int
    total: int
    standings: list[Standing]
    bt: dict | None = None  # Bradley-Terry: name -> (strength, low, high)

    def ranked(self) -> list[Standing]:
        return sorted(self.standings, key=lambda s: (-s.rating.conservative, s.member.name))

    def to_rows(self) -> list[dict]:
        rows = []
        for rank, s in enumerate(self.ranked(), 1):
            row = {
                "rank": rank, "agent": s.member.name, "body": s.member.body, "arch": s.member.arch,
                "strategy": s.member.strategy, "mu": s.rating.mu, "sigma": s.rating.sigma,
                "conservative": s.rating.conservative, "games": s.games, "wins": s.wins, "draws": s.draws,
                "losses": s.losses,
            }
            if self.bt and s.member.name in self.bt:
                row["bradley_terry"] = dict(zip(("strength", "low", "high"), self.bt[s.member.name]))
            rows.append(row)
        return rows


def tournament_config(members: list[Member], matches: int, rounds: int, episodes: int, physics: str,
                      draw_probability: float | None) -> dict:
    if matches < 1:
        raise UserError(f"--matches must be at least 1, got {matches}")
    if rounds < 1 or episodes < 1:
        raise UserError("--rounds and --episodes must be at least 1")
    if draw_probability is None:
        draw_probability = R.equal_agents_draw_probability(rounds, episodes)
    elif not 0 < draw_probability < 1:
        raise UserError(f"--draw-probability must be strictly between 0 and 1, got {draw_probability}")
    return {
        "members": [asdict(m) for m in members], "matches": matches,
        "game": asdict(GameSettings(rounds=rounds, episodes=episodes, physics=physics, threads=1)),
        "draw_probability": draw_probability, "trueskill": {"mu": R.MU, "sigma": R.SIGMA, "beta": R.BETA, "tau": R.TAU,
                                                            "version": R.TRUESKILL_VERSION},
    }


#: The configuration key of the members' checkpoint SHA-256s (tournaments created since 2026-12-07).
MEMBER_SHA256 = "member_sha256"


def create_tournament(db: Database, members: list[Member], config: dict, seed: int) -> int:
    """Store a new tournament run. Its configuration also records every member's checkpoint
    SHA-256, so that a resumed run plays the versions it began with even where a member's name
    resolves to another version by then (re-shipped, the earlier versions retired under a new name)."""
    with db.write() as s:
        shas = [registry.resolve(s, m.name).sha256 for m in members]
        return store_runs.create_run(s, "tournament", {**config, MEMBER_SHA256: shas}, seed, config["matches"],
                                     __version__)


def open_run(db: Database, run_id: int, kind: str, finished: str) -> tuple[dict, int, list[Member], list]:
    """The stored configuration, seed and members of an unfinished tournament or evolution run, with
    every member's agent loaded (each checkpoint verified first); ``finished``: the sentence for a
    finished run."""
    with db.read() as s:
        run = store_runs.get_run(s, run_id, kind)
        if run.status == "finished":
            raise UserError(finished)
        ownership.check_not_running(run)
        config, seed = dict(run.config), run.seed
        members = [Member(**m) for m in config["members"]]
        recorded = _recorded_versions(s, run_id, kind, config, seed, len(members))
        for i, sha in enumerate(config.get(MEMBER_SHA256, [])):
            if i not in recorded:
                ref = parse_name(members[i].name)
                vid = registry.find_version(s, ref.name, ref.version, sha)
                if vid is None:
                    raise UserError(f"the run's member {members[i].name} (checkpoint SHA-256 {sha[:12]}...) is not in "
                                    "this database; import or ship that agent first")
                recorded[i] = vid
        names = [m.name if i not in recorded else
                 store_runs.version_label(s, recorded[i]) + (":" + m.name.split(":", 1)[1] if ":" in m.name else "")
                 for i, m in enumerate(members)]
    return config, seed, members, [load_agent(db, name) for name in names]


def _recorded_versions(s, run_id: int, kind: str, config: dict, seed: int, n: int) -> dict[int, int]:  # noqa: ANN001
    """Member index -> the version id the run stored for it: a resumed run plays the very versions it
    began with, though a name of its may resolve to another since (a member re-shipped, its earlier
    versions retired under another name, sumo_cli/store/shipped.py)."""
    if kind == "evolution":
        return {slot // config["copies"]: vid for slot, vid in store_runs.generation_slots(s, run_id, 0)}
    played = store_runs.played_versions(s, run_id)
    out: dict[int, int] = {}
    for game in random_pairs(n, config["matches"], seed):
        if game.index in played:
            out.setdefault(game.a, played[game.index][0])
            out.setdefault(game.b, played[game.index][1])
    return out


def each_game(results):  # noqa: ANN001, ANN202
    """The (key, result) of every game from an executor's stream of engine batches."""
    for _, batch in results:
        yield from batch


class TournamentRunner:
    """Plays (or resumes) one tournament run."""

    def __init__(self, db: Database, run_id: int):
        self.db = db
        self.config, self.seed, self.members, loaded = open_run(
            db, run_id, "tournament", f"tournament run {run_id} is already finished; `sumo runs show {run_id}` shows it")
        self.run_id = run_id
        self.owner: str | None = None  # this process's claim on the run, taken when it starts playing
        self.schedule: list[ScheduledGame] = random_pairs(len(self.members), self.config["matches"], self.seed)
        self.env = R.make_env(self.config["draw_probability"])
        self.data = [AgentData.from_loaded(x) for x in loaded]
        self.standings = [Standing(m, x.version_id) for m, x in zip(self.members, loaded)]
        self.outcomes: dict[int, str] = {}
        self.match_ids: dict[int, int] = {}
        self.rated = 0

    # -- state from the database
    def _load_finished(self) -> None:
        with self.db.write() as s:
            rows = store_runs.restart_ratings(s, self.run_id)
        for idx, mid, outcome in rows:
            self.outcomes[idx] = outcome
            self.match_ids[idx] = mid
        self._apply_ready()

    def _apply_ready(self) -> None:
        """Rate every game whose predecessors are all in, in schedule order, and store one rating
        row per player of each: its rating right after that game (so the leaderboard at any
        point is the latest row of every player up to that index)."""
        rows = []
        while self.rated < len(self.schedule) and self.rated in self.outcomes:
            i = self.rated
            g = self.schedule[i]
            sa, sb = self.standings[g.a], self.standings[g.b]
            outcome = self.outcomes[i]
            sa.rating, sb.rating = R.rate_game(self.env, sa.rating, sb.rating, outcome)
            for st, side in ((sa, "a"), (sb, "b")):
                st.count(outcome, side)
                rows.append((i, self.match_ids[i], st.version_id, st.rating.mu, st.rating.sigma))
            self.rated += 1
        with self.db.write() as s:
            for i, mid, vid, mu, sigma in rows:
                store_runs.add_rating(s, self.run_id, i, mid, vid, mu, sigma)
            store_runs.set_run_status(s, self.run_id, "running", done=len(self.outcomes), owner=self.owner)

    def leaderboard(self, with_bt: bool = False) -> Leaderboard:
        bt = None
        if with_bt and self.rated:
            games = [(self.schedule[i].a, self.schedule[i].b, self.outcomes[i]) for i in range(self.rated)]
            point, low, high = R.bradley_terry_bootstrap(len(self.members), games, samples=200, seed=self.seed)
            bt = {m.name: (float(p), float(lo), float(hi)) for m, p, lo, hi in zip(self.members, point, low, high)}
        return Leaderboard(self.run_id, self.rated, len(self.schedule), self.standings, bt)

    def run(self, executor, on_game: Callable[[int, dict], None] | None = None,  # noqa: ANN001
            concurrency: int = CONCURRENCY, on_progress: Callable[[float, float], None] | None = None) -> Leaderboard:
        """Play what is missing: batches of up to ``concurrency`` games, each batch in one engine
        (compete/engine.py) on one worker; the results do not depend on either number.
        ``on_progress(game-rounds, seconds)``: the rounds the workers play, as they play them."""
        from sumo_cli.compete.play import mujoco_version

        self.owner = ownership.claim(self.db, self.run_id)  # before the ratings are rebuilt
        self._load_finished()
        pending = [g for g in self.schedule if g.index not in self.outcomes]
        settings = self.config["game"]
        games = [(g.index, self.data[g.a], self.data[g.b], settings, g.seed) for g in pending]
        jobs = ((i, (batch, concurrency)) for i, batch in enumerate(batches(games, executor.workers, concurrency)))
        mj = mujoco_version()
        try:
            for idx, result in each_game(executor.run(run_games_job, jobs, on_progress)):
                g = self.schedule[idx]
                with self.db.write() as s:
                    store_runs.check_owner(s, self.run_id, self.owner)
                    mid = store_matches.record_game(
                        s, result, self.standings[g.a].version_id, self.standings[g.b].version_id,
                        code_version=__version__, mujoco_version=mj, run_id=self.run_id, run_index=idx,
                    )
                self.outcomes[idx] = result["outcome"]
                self.match_ids[idx] = mid
                self._apply_ready()
                if on_game is not None:
                    on_game(idx, result)
        except store_runs.RunTakenOver:
            raise
        except BaseException:
            with self.db.write() as s:
                store_runs.set_run_status(s, self.run_id, "interrupted", done=len(self.outcomes), owner=self.owner)
            raise
        with self.db.write() as s:
            store_runs.set_run_status(s, self.run_id, "finished", done=len(self.outcomes), owner=self.owner)
        return self.leaderboard(with_bt=True)
