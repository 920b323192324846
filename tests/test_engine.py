"""Many games in one process (compete/engine.py): each game equals the same game played alone by
play_game, bit for bit, whatever the number of concurrent games and whichever games share the
process; the stacked policy call equals each agent's own call."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from sumo_cli.bench.game_bench import random_agent
from sumo_cli.compete import game as G
from sumo_cli.compete.engine import Fixture, play_games
from sumo_cli.compete.game import GameSettings, play_game
from sumo_cli.nets import features as F
from sumo_cli.nets import normalizer as nz
from sumo_cli.nets import policy as P
from sumo_cli.nets.numpy_actor import NumpyActor
from sumo_cli.nets.stacked_actor import StackedActor


@pytest.mark.parametrize("arch", ["mlp", "lstm", "rl2"])
def test_stacked_actor_slices_equal_single_agent_steps(arch):
    spec = P.PolicySpec(arch, 120, 8)
    actors = [NumpyActor(spec, P.init_params(spec, torch.Generator().manual_seed(k)),
                         torch.randn(120, generator=torch.Generator().manual_seed(10 + k)) * 0.1, torch.ones(120) * (0.5 + k))
              for k in range(5)]
    rng = np.random.default_rng(0)
    E = 3
    obs = rng.standard_normal((5, E, 120))
    prev_r = rng.standard_normal((5, E)).astype(np.float32)
    prev_d = (rng.random((5, E)) < 0.5).astype(np.float32)
    h = rng.standard_normal((5, E, spec.hidden)).astype(np.float32)
    c = rng.standard_normal((5, E, spec.hidden)).astype(np.float32)
    for K in (1, 2, 5):
        state = None if arch == "mlp" else (h[:K], c[:K])
        means, new = StackedActor(actors[:K]).step(obs[:K], state, prev_r[:K], prev_d[:K])
        for k in range(K):
            m1, s1 = actors[k].step(obs[k], None if arch == "mlp" else (h[k], c[k]), prev_r[k], prev_d[k])
            assert np.array_equal(m1, means[k])
            if s1 is not None:
                assert np.array_equal(s1[0], new[0][k]) and np.array_equal(s1[1], new[1][k])


def _fixtures(rounds: int = 3, episodes: int = 2) -> list[Fixture]:
    """Games of every strategy, two body pairings, a repeated agent and a self-game."""
    settings = GameSettings(rounds=rounds, episodes=episodes, physics="fast")
    ant = {s: random_agent("ant", s, 1) for s in ("none", "track", "meta", "rl2")}
    bug = {s: random_agent("bug", s, 2) for s in ("none", "track", "meta", "rl2")}
    ant_mlp = replace(random_agent("ant", "none", 3), name="bench-ant-mlp")
    spec = P.PolicySpec("mlp", ant_mlp.spec["obs_dim"], ant_mlp.spec["act_dim"])
    ant_mlp.spec = spec.to_dict()
    ant_mlp.params = {k: v.numpy() for k, v in P.init_params(spec, torch.Generator().manual_seed(3)).items()}
    # a policy that appends features to its observation (nets.features), adapting by tracking
    ego_spec = P.PolicySpec("mlp", spec.obs_dim + 13, spec.act_dim, features="ego")
    stats = nz.new_stats(ego_spec.obs_dim)
    ant_ego = replace(ant_mlp, name="bench-ant-ego", strategy="track", spec=ego_spec.to_dict(),
                      params={k: v.numpy() for k, v in P.init_params(ego_spec, torch.Generator().manual_seed(4)).items()},
                      obs_stats={"sum": stats["sum"].numpy(), "sumsq": stats["sumsq"].numpy() + 1.0,
                                 "count": stats["count"].numpy() + 1.0})
    # and an LSTM whose features have a past (a viewer per side, restarted every round), tracking
    past_spec = P.PolicySpec("lstm", F.policy_dim("ego-past", spec.obs_dim), spec.act_dim, features="ego-past")
    past_stats = nz.new_stats(past_spec.obs_dim)
    ant_past = replace(ant_mlp, name="bench-ant-past", strategy="track", spec=past_spec.to_dict(),
                       params={k: v.numpy() for k, v in P.init_params(past_spec, torch.Generator().manual_seed(5)).items()},
                       obs_stats={"sum": past_stats["sum"].numpy(), "sumsq": past_stats["sumsq"].numpy() + 1.0,
                                  "count": past_stats["count"].numpy() + 1.0})
    pairs = [(ant["track"], bug["none"]), (ant["meta"], ant["none"]), (ant["rl2"], bug["meta"]),
             (bug["track"], ant["rl2"]), (ant["none"], ant["none"]), (ant_mlp, bug["track"]),
             (ant_ego, ant["none"]), (ant_past, bug["meta"]), (ant["track"], ant["meta"])]
    return [Fixture(i, a, b, settings, 100 + i) for i, (a, b) in enumerate(pairs)]


def _record_experiences(monkeypatch) -> dict:
    """Every Experience a game hands to adaptation, in order, per game (keyed by the seed of the
    game's own noise generator)."""
    seen: dict = {}
    original = G._Side.experience

    def spy(self, lengths, terminated):
        exp = original(self, lengths, terminated)
        seen.setdefault(self.gen.initial_seed(), []).append(exp)
        return exp

    monkeypatch.setattr(G._Side, "experience", spy)
    return seen


FIELDS = ("obs", "actions", "logp", "values", "rewards", "prev_rewards", "prev_dones", "lengths", "terminated",
          "final_values")


def _assert_same_experiences(xs: list, ys: list) -> None:
    assert len(xs) == len(ys)
    for x, y in zip(xs, ys):
        for k in FIELDS:
            assert torch.equal(getattr(x, k), getattr(y, k)), k


def _plain(result) -> dict:
    d = result.to_dict()
    d.pop("timing"), d.pop("wall_seconds")
    return d


@pytest.mark.slow
def test_engine_games_equal_games_played_alone(monkeypatch):
    """Results and every adaptation input (observations, actions, rewards, log-probs, values) of
    each game equal play_game's of it alone, with all games at once or three at a time."""
    fixtures = _fixtures()
    seen = _record_experiences(monkeypatch)
    alone = {f.key: _plain(play_game(f.a, f.b, f.settings, f.seed)) for f in fixtures}
    alone_exps = dict(seen)
    adapting = {f.key: sum(x.strategy in ("track", "meta") for x in (f.a, f.b)) for f in fixtures}
    assert sorted(len(v) for v in alone_exps.values()) == sorted(2 * n for n in adapting.values() if n)
    for concurrency in (len(fixtures), 3):
        seen.clear()
        assert {k: _plain(r) for k, r in play_games(fixtures, concurrency=concurrency)} == alone
        assert seen.keys() == alone_exps.keys()
        for key in alone_exps:
            _assert_same_experiences(seen[key], alone_exps[key])


@pytest.mark.slow
def test_engine_game_alone_equals_game_among_others(monkeypatch):
    """A track-vs-meta game (both adapting every round) alone in the engine and among seven others
    that share its agents, bodies and policy specs."""
    fixtures = _fixtures(rounds=4)
    target = fixtures[-1]
    seen = _record_experiences(monkeypatch)
    ((_, alone),) = list(play_games([target], concurrency=1))
    alone_exps = dict(seen)
    seen.clear()
    among = dict(play_games(fixtures, concurrency=len(fixtures)))[target.key]
    assert _plain(among) == _plain(alone)
    (key,) = alone_exps
    _assert_same_experiences(seen[key], alone_exps[key])


def test_engine_reports_every_game_round_as_it_is_played():
    """After each round phase the engine reports one game-round per game in flight (what the
    expected duration of a tournament is computed from), before the games that phase ended are
    yielded: with games of 3 and 5 rounds, three at a time, a game first ends after 3 phases."""
    settings = GameSettings(rounds=3, episodes=1, physics="fast")
    a, b = random_agent("ant", "none", 1), random_agent("bug", "none", 2)
    rounds = [3, 5, 3, 5, 5]
    fixtures = [Fixture(i, a, b, replace(settings, rounds=r), 10 + i) for i, r in enumerate(rounds)]
    events: list = []
    for key, _ in play_games(fixtures, concurrency=3,
                             on_phase=lambda n, seconds: events.append(("phase", n, seconds))):
        events.append(("game", key))
    phases = [e for e in events if e[0] == "phase"]
    assert sum(n for _, n, _ in phases) == sum(rounds)
    assert all(seconds > 0 for _, _, seconds in phases)
    first_game = next(i for i, e in enumerate(events) if e[0] == "game")
    assert [n for _, n, _ in events[:first_game]] == [3, 3, 3]  # three phases of the first three games
    assert sorted(k for e in events if e[0] == "game" for k in [e[1]]) == list(range(5))
