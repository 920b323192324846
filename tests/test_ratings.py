import math

import numpy as np
import pytest

from sumo_cli.compete import ratings
from sumo_cli.compete.ratings import Rating


def test_paper_settings_and_pinned_version():
    import trueskill

    env = ratings.make_env(0.3)
    assert (env.mu, env.sigma, env.beta) == (25.0, 25.0 / 3.0, 4.1667)
    assert trueskill.__version__ == ratings.TRUESKILL_VERSION


def test_equal_draw_probability_matches_simulation():
    rng = np.random.default_rng(0)
    rounds, episodes, e = 20, 3, 0.1
    p_exact = ratings.equal_agents_draw_probability(rounds, episodes, e)
    outcomes = rng.choice(3, size=(200_000, rounds, episodes), p=[(1 - e) / 2, (1 - e) / 2, e])
    wa, wb = (outcomes == 0).sum(-1), (outcomes == 1).sum(-1)
    ra, rb = (wa > wb).sum(-1), (wb > wa).sum(-1)
    simulated = np.mean(np.abs(ra - rb) < 0.05 * rounds)
    assert p_exact == pytest.approx(simulated, abs=0.005)
    # Longer games have a wider absolute draw band (5 rounds of 100) but a larger spread.
    assert 0.2 < ratings.equal_agents_draw_probability(100, 3) < 0.6


def test_draw_moves_ratings_together_and_win_separates():
    env = ratings.make_env(0.3)
    a, b = Rating(30, 3), Rating(20, 3)
    da, db = ratings.rate_game(env, a, b, "draw")
    assert da.mu < a.mu and db.mu > b.mu
    wa, wb = ratings.rate_game(env, Rating(), Rating(), "a")
    assert wa.mu > 25 > wb.mu and wa.sigma < ratings.SIGMA


def test_win_probability_formula():
    a, b = Rating(29, 2), Rating(25, 2)
    expected = 0.5 * (1 + math.erf((4 / math.sqrt(2 * 4.1667**2 + 8)) / math.sqrt(2)))
    assert ratings.win_probability(a, b) == pytest.approx(expected)
    assert ratings.win_probability(a, b) + ratings.win_probability(b, a) == pytest.approx(1.0)
    assert ratings.win_probability(a, a) == pytest.approx(0.5)


def test_bradley_terry_recovers_order_independent_strengths():
    rng = np.random.default_rng(1)
    true = np.array([1.0, 0.5, 0.0, -0.5, -1.0])
    games = []
    for _ in range(3000):
        a, b = rng.choice(5, 2, replace=False)
        p = 1 / (1 + np.exp(true[b] - true[a]))
        games.append((a, b, "a" if rng.random() < p else "b"))
    est = ratings.bradley_terry(5, games)
    assert np.argsort(-est).tolist() == [0, 1, 2, 3, 4]
    assert est - est.mean() == pytest.approx(true - true.mean(), abs=0.15)
    shuffled = [games[i] for i in rng.permutation(len(games))]
    assert ratings.bradley_terry(5, shuffled) == pytest.approx(est, abs=1e-8)
    point, low, high = ratings.bradley_terry_bootstrap(5, games[:500], samples=50)
    assert np.all(low <= point + 1e-9) and np.all(point <= high + 1e-9)
