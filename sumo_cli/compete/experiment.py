"""The paper's game experiments beyond tournaments and evolution, as stored, resumable runs of
independent iterated games:

* ``adaptation`` (Fig. 5): each agent against each pre-trained opponent whose version grows over the
  game, ``repeats`` times;
* ``sample-complexity`` (Fig. 6): the same with several numbers of episodes per round;
* ``calibration`` (the paper's Table 4): agents of different bodies against each other without
  adaptation.

The learning opponent. The paper starts agent and opponent at version 700 of about 2,000 (0.35 of
the way) and moves the opponent one version a round for 100 rounds; one of its versions is one PPO
epoch over 32,000 episodes of self-play. One of our versions is one update on 32,768 env steps,
about 100 times less experience, so +1 a round would barely move our opponents. We keep the
paper's start, 0.35 K (K: the opponent's highest stored version), and move the opponent linearly
up to K over the game: round r of R plays the highest stored version not above
``0.35 K + (K - 0.35 K) r / (R - 1)`` (the lowest stored version while none is that low). With
few stored versions the opponent changes only where a stored version is reached; the report says
how many distinct versions each game met.

Every game is written once, keyed by (run, index); its seed is derived from the run's seed and its
index (in a paired adaptation run, an unadapted twin's game takes its adaptive player's index:
compete/pairing.py), so an interrupted run, resumed, ends exactly as an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Callable

from sumo_cli import __version__, names
from sumo_cli.compete.learning_opponent import START_FRACTION, opponent_versions
from sumo_cli.compete.pairing import seed_indexes
from sumo_cli.compete.schedule import game_seed
from sumo_cli.errors import UserError
from sumo_cli.store import ownership
from sumo_cli.store import matches as store_matches
from sumo_cli.store import runs as store_runs
from sumo_cli.store import registry
from sumo_cli.store.database import Database
from sumo_cli.vocabulary import check_physics

if TYPE_CHECKING:  # torch comes with the game: imported where games are played, so bad input is answered at once
    from sumo_cli.compete.game import AgentData

KINDS = ("adaptation", "sample-complexity", "calibration")


def parse_player(text: str) -> tuple[str, str | None]:
    """``NAME[@V][:STRATEGY]`` -> (name, strategy or None)."""
    name, _, strategy = text.strip().partition(":")
    if strategy and strategy not in names.STRATEGIES:
        raise UserError(f"{text!r}: the strategy after ':' must be one of {', '.join(names.STRATEGIES)}")
    return name, strategy or None


def resolve_players(db: Database, texts: list[str], what: str) -> list[dict]:
    """Each ``NAME[@V][:STRATEGY]`` resolved to ``{"name": agent@version, "agent", "body", "arch",
    "strategy", "label"}``; a strategy the policy cannot play is refused."""
    out = []
    with db.read() as s:
        for text in texts:
            name, strategy = parse_player(text)
            rv = registry.resolve(s, name)
            if rv.body not in names.BODIES:
                raise UserError(f"{what}: {rv.display} is a {rv.body} agent, not a RoboSumo body")
            play = strategy or rv.strategy
            if play != rv.strategy and "rl2" in (play, rv.strategy):
                raise UserError(f"{what}: {rv.display} cannot play as {play}: RL^2 is a policy of its own")
            out.append({"name": rv.display, "agent": rv.agent_name, "body": rv.body, "arch": rv.arch,
                        "strategy": play, "label": f"{rv.display}" + (f":{play}" if play != rv.strategy else "")})
    if len({p["label"] for p in out}) != len(out):
        raise UserError(f"{what} names the same player twice")
    return out


def stored_versions(db: Database, agent: str) -> list[int]:
    with db.read() as s:
        return [v.version for v in registry.get_agent(s, agent).versions]


def config(kind: str, agents: list[dict], opponents: list[dict], rounds: int, episodes: list[int], repeats: int,
           physics: str, start_fraction: float = START_FRACTION) -> dict:
    for value, what in ((rounds, "--rounds"), (repeats, "--repeats"), *((e, "--episodes") for e in episodes)):
        if value < 1:
            raise UserError(f"{what} must be at least 1, got {value}")
    check_physics(physics)
    return {"kind": kind, "agents": agents, "opponents": opponents, "rounds": rounds, "episodes": list(episodes),
            "repeats": repeats, "physics": physics, "start_fraction": start_fraction}


def layout(cfg: dict) -> list[dict]:
    """Every game of an experiment in index order: ``{"index", "a" (agent index), "b" (opponent
    index), "episodes", "repeat"}``; it depends on the configuration only."""
    out = []
    pairs = [(i, j) for i in range(len(cfg["agents"])) for j in range(len(cfg["opponents"]))]
    if cfg["kind"] == "calibration":  # every pair of different bodies once (agents == opponents)
        ps = cfg["agents"]
        pairs = [(i, j) for i in range(len(ps)) for j in range(i + 1, len(ps)) if ps[i]["body"] != ps[j]["body"]]
    for e in cfg["episodes"]:
        for i, j in pairs:
            for k in range(cfg["repeats"]):
                out.append({"index": len(out), "a": i, "b": j, "episodes": e, "repeat": k})
    return out


def plan(cfg: dict, versions: dict[str, list[int]]) -> list[dict]:
    """:func:`layout` with each game's ``"b_versions"``: the opponent's version in each round
    (learning opponents), or its one version (calibration). ``versions``: each opponent agent's
    stored versions."""
    out = []
    for g in layout(cfg):
        opp = cfg["opponents"][g["b"]]
        if cfg["kind"] == "calibration":
            b_versions = [int(opp["name"].rsplit("@", 1)[1])]
        else:
            b_versions = opponent_versions(versions[opp["agent"]], cfg["rounds"], cfg["start_fraction"])
        out.append({**g, "b_versions": b_versions})
    return out


def play_job(games: list[tuple[int, "AgentData", list["AgentData"], dict, int]]) -> list[tuple[int, dict]]:
    """A worker's batch: each game played alone (a learning opponent changes version every round,
    which the batched engine does not do), its rounds reported as they are played."""
    from sumo_cli.compete.game import GameSettings, play_game
    from sumo_cli.runtime import progress

    out = []
    for key, a, b, settings, seed in games:
        last = [time.perf_counter()]

        def on_round(_rd) -> None:  # noqa: ANN001
            now = time.perf_counter()
            progress.report(1.0, now - last[0])
            last[0] = now

        result = play_game(a, b if len(b) > 1 else b[0], GameSettings(**settings), seed, on_round=on_round)
        out.append((key, result.to_dict()))
    return out


def create(db: Database, cfg: dict, seed: int) -> int:
    versions = {o["agent"]: stored_versions(db, o["agent"]) for o in cfg["opponents"]}
    total = len(plan(cfg, versions))
    if total == 0:
        raise UserError("these players make no game: a calibration needs agents of at least two bodies")
    with db.write() as s:
        return store_runs.create_run(s, cfg["kind"], cfg, seed, total, __version__)


class ExperimentRunner:
    """Plays (or resumes) one experiment run."""

    def __init__(self, db: Database, run_id: int):
        with db.read() as s:
            run = store_runs.get_run(s, run_id)
            if run.kind not in KINDS:
                raise UserError(f"run {run_id} is a {run.kind} run, not an experiment; `sumo runs` lists them")
            if run.status == "finished":
                raise UserError(f"experiment run {run_id} is already finished; `sumo report` shows it")
            ownership.check_not_running(run)
            self.cfg, self.seed = dict(run.config), run.seed
        self.db, self.run_id = db, run_id
        self.versions = {o["agent"]: stored_versions(db, o["agent"]) for o in self.cfg["opponents"]}
        self.plan = plan(self.cfg, self.versions)
        self._cache: dict[tuple[str, str], tuple["AgentData", int]] = {}

    def _data(self, name: str, strategy: str) -> tuple["AgentData", int]:
        from sumo_cli.compete.game import AgentData
        from sumo_cli.store.library import load_agent

        if (name, strategy) not in self._cache:
            loaded = load_agent(self.db, name)
            data = AgentData.from_loaded(loaded)
            if strategy != data.strategy:
                if strategy == "meta" and not data.meta:
                    raise UserError(f"{name} has no meta-learned step sizes to play as meta")
                data = dataclasses.replace(data, strategy=strategy)
            self._cache[(name, strategy)] = (data, loaded.version_id)
        return self._cache[(name, strategy)]

    def load(self) -> None:
        """Load (and verify) every checkpoint the games need, before anything is played."""
        for p in self.cfg["agents"]:
            self._data(p["name"], p["strategy"])
        learning = self.cfg["kind"] != "calibration"
        for o in self.cfg["opponents"]:
            vs = sorted({v for g in self.plan if self.cfg["opponents"][g["b"]] is o for v in g["b_versions"]})
            for v in vs if learning else [None]:
                self._data(f"{o['agent']}@{v}" if v is not None else o["name"], o["strategy"])

    def done(self) -> dict[int, str]:
        with self.db.read() as s:
            return store_runs.run_outcomes(s, self.run_id)

    def run(self, executor, on_game: Callable[[int], None] | None = None,  # noqa: ANN001
            on_progress: Callable[[float, float], None] | None = None, per_job: int = 1) -> None:
        from sumo_cli.compete.game import GameSettings
        from sumo_cli.compete.play import mujoco_version
        from sumo_cli.compete.tournament import each_game

        self.load()
        owner = ownership.claim(self.db, self.run_id)
        outcomes = self.done()
        games, ids = [], {}
        seeds = seed_indexes(self.cfg, self.plan)  # an adaptive player's unadapted twin plays its seeds
        for g in self.plan:
            if g["index"] in outcomes:
                continue
            a, va = self._data(self.cfg["agents"][g["a"]]["name"], self.cfg["agents"][g["a"]]["strategy"])
            opp = self.cfg["opponents"][g["b"]]
            if self.cfg["kind"] == "calibration":
                bs = [self._data(opp["name"], opp["strategy"])]
            else:
                bs = [self._data(f"{opp['agent']}@{v}", opp["strategy"]) for v in g["b_versions"]]
            settings = dataclasses.asdict(GameSettings(rounds=self.cfg["rounds"], episodes=g["episodes"],
                                                       physics=self.cfg["physics"], threads=1))
            games.append((g["index"], a, [b for b, _ in bs], settings, game_seed(self.seed, seeds[g["index"]])))
            ids[g["index"]] = (va, bs[0][1])
        jobs = ((i, (games[i:i + per_job],)) for i in range(0, len(games), per_job))
        mj = mujoco_version()
        try:
            for idx, result in each_game(executor.run(play_job, jobs, on_progress)):
                with self.db.write() as s:
                    store_runs.check_owner(s, self.run_id, owner)
                    store_matches.record_game(s, result, *ids[idx], code_version=__version__, mujoco_version=mj,
                                            run_id=self.run_id, run_index=idx)
                    outcomes[idx] = result["outcome"]
                    store_runs.set_run_status(s, self.run_id, "running", done=len(outcomes), owner=owner)
                if on_game is not None:
                    on_game(len(outcomes))
        except store_runs.RunTakenOver:
            raise
        except BaseException:
            with self.db.write() as s:
                store_runs.set_run_status(s, self.run_id, "interrupted", done=len(outcomes), owner=owner)
            raise
        with self.db.write() as s:
            store_runs.set_run_status(s, self.run_id, "finished", done=len(outcomes), owner=owner)
