"""Many iterated games in one process: what tournament and evolution workers run.

:func:`play_games` keeps up to ``concurrency`` games in flight. Rounds run in phases: in a phase
every game in flight plays its next round, and

- the bouts of all games of one body pairing (and physics) are bouts of one
  :class:`~sumo_cli.sim.sumo_env.BatchedSumo` (game g owns E consecutive bouts: its slot), stepped
  in one call per pairing per step;
- every agent's policy runs in one :class:`~sumo_cli.nets.stacked_actor.StackedActor` call per
  policy spec (architecture and sizes) per step, over the sides of all games still in their round;
- after the phase, every adapting agent goes through one :func:`~sumo_cli.adapt.strategies.adapt`
  call, which groups them by strategy and policy spec: the track agents of a spec get one stacked
  PPO update (:mod:`~sumo_cli.ppo.stacked_ppo`, each agent exactly what it gets alone), the meta
  agents are updated one after another (at a full buffer their update is arithmetic, not overhead).

A game starts in the first phase after a slot frees and ends after its own last round, so games
start and end independently. Everything random is per game (the bouts' starts from
``game_seed(seed, round)``, the action noise from the game's own generator, as in
:func:`~sumo_cli.compete.game.play_game`), and every batched computation is sliced per bout or per
agent, so a game's result does not depend on which games share the process, or how many:
tests/test_engine.py checks that each game equals :func:`play_game` of it alone, bit for bit.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np
import torch

from sumo_cli.compete.game import (
    AgentData, GameResult, GameSettings, RoundResult, _Side, game_result, round_result,
)
from sumo_cli.compete.schedule import game_seed
from sumo_cli.adapt import strategies as S
from sumo_cli.nets import features as F
from sumo_cli.nets.stacked_actor import StackedActor
from sumo_cli.runtime import progress

#: Games one engine keeps in flight by default (the issue's target setting: at least 32).
CONCURRENCY = 32


@dataclass
class Fixture:
    """One game to play: ``key`` comes back with its result."""

    key: int
    a: AgentData
    b: AgentData
    settings: GameSettings
    seed: int


def _pairing(f: Fixture) -> tuple:
    s = f.settings
    return f.a.body, f.b.body, s.physics, s.episodes, s.threads


class _Table:
    """The bouts of every game of one pairing: one env, ``capacity`` slots of E bouts."""

    def __init__(self, pairing: tuple, capacity: int):
        from sumo_cli.sim.sumo_env import BatchedSumo

        body_a, body_b, physics, E, threads = pairing
        self.E = E
        self.env = BatchedSumo(body_a, body_b, capacity * E, physics=physics, seed=0, auto_reset=False,
                               n_threads=threads)
        self.env.finished[:] = True  # a slot's bouts are frozen (never stepped) until its game resets them
        self.free = list(range(capacity - 1, -1, -1))
        self.act_a = np.zeros((capacity * E, self.env.n_actions_a))
        self.act_b = np.zeros((capacity * E, self.env.n_actions_b))
        self.obs_a, self.obs_b = self.env.observe()

    def close(self) -> None:
        self.env.close()


@dataclass(eq=False)
class _Game:
    f: Fixture
    table: _Table
    slot: int
    side_a: _Side
    side_b: _Side
    t_start: float
    rounds: list[RoundResult] = field(default_factory=list)
    timing: dict = field(default_factory=lambda: {"physics": 0.0, "policy": 0.0, "adapt": 0.0})
    # the current round
    r: int = 0
    t: int = 0
    running: bool = False
    lengths: np.ndarray | None = None
    outcome: np.ndarray | None = None
    reason: np.ndarray | None = None

    @property
    def rows(self) -> slice:
        E = self.table.E
        return slice(self.slot * E, (self.slot + 1) * E)


def _start(f: Fixture, table: _Table) -> _Game:
    from sumo_cli.sim.sumo_env import MAX_STEPS

    E = f.settings.episodes
    gen = torch.Generator().manual_seed(game_seed(f.seed, 0xAC7))
    pa, pb = f.a.player(), f.b.player()
    S.start_game([pa, pb])
    return _Game(f, table, table.free.pop(), _Side(pa, E, MAX_STEPS + 1, gen), _Side(pb, E, MAX_STEPS + 1, gen),
                 time.perf_counter())


def _begin_round(g: _Game) -> None:
    E, rows, table = g.table.E, g.rows, g.table
    table.env.reset_envs(np.arange(rows.start, rows.stop), seed=game_seed(g.f.seed, g.r))
    g.side_a.start_round()
    g.side_b.start_round()
    g.t = 0
    g.running = True
    g.lengths = np.zeros(E, dtype=np.int64)
    g.outcome = np.zeros(E, dtype=np.int8)
    g.reason = np.zeros(E, dtype=np.int8)


class _Policies:
    """One stacked actor per policy spec over the sides of the games still playing their round,
    rebuilt whenever that set changes (a few MB of copies; at most once per game per round)."""

    def __init__(self):
        self._cache: dict = {}

    def act(self, games: list[_Game]) -> None:
        groups: dict = {}
        views: dict = {}  # a table side's observations as each policy-side feature set sees them
        for g in games:
            rows = g.rows
            for side, obs in ((g.side_a, g.table.obs_a), (g.side_b, g.table.obs_b)):
                spec = side.p.spec
                # features are computed row by row: once over the table's rows, sliced per game
                # (tests/test_engine.py: each game equals the same game played alone); features with
                # a past, per side, from its own bouts' observations
                if F.stateful(spec.features):
                    seen = side.viewer.view(obs[rows])
                else:
                    key = (id(obs), spec.features)
                    if key not in views:
                        views[key] = F.augment(spec.features, obs)
                    seen = views[key][rows]
                groups.setdefault(spec, []).append((g, side, seen))
        for spec, entries in groups.items():
            ids = tuple(id(side.actor) for _, side, _ in entries)
            cached = self._cache.get(spec)
            if cached is None or cached[0] != ids:
                cached = (ids, StackedActor([side.actor for _, side, _ in entries]))
                self._cache[spec] = cached
            actor = cached[1]
            obs = np.stack([o for _, _, o in entries])
            state = None
            if spec.recurrent:
                state = (np.stack([s.state[0] for _, s, _ in entries]), np.stack([s.state[1] for _, s, _ in entries]))
            prev_r = prev_d = None
            if spec.arch == "rl2":
                prev_r = np.stack([s.prev_reward for _, s, _ in entries])
                prev_d = np.stack([s.prev_done for _, s, _ in entries])
            means, new_state = actor.step(obs, state, prev_r, prev_d)
            for k, (g, side, o) in enumerate(entries):
                st = None if new_state is None else (new_state[0][k], new_state[1][k])
                action = side.commit(g.t, o, means[k], st)
                (g.table.act_a if side is g.side_a else g.table.act_b)[g.rows] = action

    def clear(self) -> None:
        self._cache.clear()


def _step_tables(games: list[_Game]) -> None:
    by_table: dict[int, list[_Game]] = {}
    for g in games:
        by_table.setdefault(id(g.table), []).append(g)
    for group in by_table.values():
        table = group[0].table
        env = table.env
        active_all = ~env.finished
        res = env.step(table.act_a, table.act_b)
        for g in group:
            rows = g.rows
            active = active_all[rows]
            g.side_a.record(g.t, res.dense_a[rows] + res.sparse_a[rows], active)
            g.side_b.record(g.t, res.dense_b[rows] + res.sparse_b[rows], active)
            ended = res.done[rows] & active
            if ended.any():
                g.lengths[ended] = res.length[rows][ended]
                g.outcome[ended] = res.outcome[rows][ended]
                g.reason[ended] = res.reason[rows][ended]
                g.side_a.bouts_ended(res.final_obs_a[rows], ended)
                g.side_b.bouts_ended(res.final_obs_b[rows], ended)
            g.t += 1
            if env.finished[rows].all():
                g.running = False
        table.obs_a, table.obs_b = res.obs_a, res.obs_b


def _share(games: list[_Game], key: str, seconds: float) -> None:
    for g in games:
        g.timing[key] += seconds / len(games)


def play_games(fixtures: list[Fixture], concurrency: int = CONCURRENCY,
               on_phase: Callable[[int, float], None] | None = None) -> Iterator[tuple[int, GameResult]]:
    """Play every fixture, at most ``concurrency`` at once; yield ``(key, result)`` as games end.
    Each result equals ``play_game(f.a, f.b, f.settings, f.seed)``. A game's ``timing`` holds its
    share of the phases it took part in (physics and policy split among the games stepped together,
    adaptation among the games adapted together). After every phase, before the games it ended are
    yielded, ``on_phase(rounds, seconds)``: the game-rounds it played (one per game in flight) and
    its wall-clock time."""
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    for f in fixtures:
        if f.settings.rounds < 1 or f.settings.episodes < 1:
            raise ValueError("a game needs at least one round of at least one episode")
    torch.set_num_threads(1)  # tiny calls: threads cost more than they give; processes run in parallel
    counts: dict[tuple, int] = {}
    for f in fixtures:
        counts[_pairing(f)] = counts.get(_pairing(f), 0) + 1
    tables: dict[tuple, _Table] = {}
    queue = deque(fixtures)
    live: list[_Game] = []
    policies = _Policies()
    try:
        while queue or live:
            t_phase = time.perf_counter()
            while queue and len(live) < concurrency:
                f = queue.popleft()
                key = _pairing(f)
                if key not in tables:
                    tables[key] = _Table(key, min(concurrency, counts[key]))
                live.append(_start(f, tables[key]))
            for g in live:
                _begin_round(g)
            for table in tables.values():
                table.obs_a, table.obs_b = table.env.observe()
            playing = live
            while playing:
                t0 = time.perf_counter()
                policies.act(playing)
                t1 = time.perf_counter()
                _step_tables(playing)
                t2 = time.perf_counter()
                _share(playing, "policy", t1 - t0)
                _share(playing, "physics", t2 - t1)
                playing = [g for g in playing if g.running]
            policies.clear()
            t3 = time.perf_counter()
            players, exps, adapting, done = [], [], [], []
            for g in live:
                f = g.f
                g.rounds.append(round_result(g.r, f.a.version, f.b.version, g.outcome, g.reason, g.lengths))
                if g.r == f.settings.rounds - 1:
                    done.append(g)
                    continue
                terminated = (g.reason == 1) | (g.reason == 2)
                for side in (g.side_a, g.side_b):
                    if side.p.strategy in S.ADAPTING:
                        players.append(side.p)
                        exps.append(side.experience(g.lengths, terminated))
                adapting.append(g)
            S.adapt(players, exps)
            if adapting:
                _share(adapting, "adapt", time.perf_counter() - t3)
            for g in adapting:
                g.r += 1
            if on_phase is not None:
                on_phase(len(live), time.perf_counter() - t_phase)
            live = [g for g in live if g not in done]
            for g in done:
                g.table.free.append(g.slot)
                wall = time.perf_counter() - g.t_start
                timing = dict(g.timing, bookkeeping=max(0.0, wall - sum(g.timing.values())))
                f = g.f
                yield f.key, game_result(f.a.display, f.b.display, f.seed, f.settings, g.rounds, timing, wall)
    finally:
        for table in tables.values():
            table.close()


def run_games_job(games: list[tuple[int, AgentData, AgentData, dict, int]], concurrency: int = CONCURRENCY) -> list:
    """What a worker does: a batch of ``(key, a, b, settings, seed)`` games in one engine, returned
    as ``[(key, result dict)]``; the game-rounds it plays are reported as they are played
    (:mod:`sumo_cli.runtime.progress`), long before the batch returns."""
    fixtures = [Fixture(key, a, b, GameSettings(**settings), seed) for key, a, b, settings, seed in games]
    return [(key, result.to_dict()) for key, result in play_games(fixtures, concurrency, progress.report)]


def batches(games: list, workers: int, concurrency: int = CONCURRENCY) -> list[list]:
    """``games`` cut into engine batches of at most ``concurrency``, and small enough that every
    worker gets a few (results stream back batch by batch; what a kill loses is the batches in
    flight). The cut changes nothing in the results, only when they arrive."""
    size = max(1, min(concurrency, -(-len(games) // (2 * max(1, workers)))))
    return [games[i:i + size] for i in range(0, len(games), size)]
