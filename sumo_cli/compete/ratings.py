"""Ratings: TrueSkill with the paper's settings, the a-priori win probability, and an
order-independent Bradley-Terry estimate with bootstrap intervals.

TrueSkill is order-dependent, so updates are applied in schedule order (never completion order):
the same seed then gives the same leaderboard whatever the worker count.

Draws. trueskill's ``draw_probability`` is the chance that two *equally skilled* players draw, not
the overall draw rate; 0 is degenerate once draws happen. Our games have a rule-defined draw band
(round-win difference under 5% of the rounds), so we compute the draw chance of two equal agents
exactly from the game settings (:func:`equal_agents_draw_probability`) under a stated episode
model: each episode is won by either side with equal probability and drawn with probability
``episode_draw_rate``. Users may override it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sumo_cli.compete.rules import GAME_MARGIN

MU = 25.0
SIGMA = 25.0 / 3.0
BETA = 4.1667  # the paper's value (25/6)
TAU = 25.0 / 300.0  # trueskill's default dynamics factor
TRUESKILL_VERSION = "0.4.5"
#: Episode draw rate between equal agents assumed by the default draw probability: mirror bouts of
#: the original zoo agents were all decided before the step limit, but trained-from-scratch
#: agents time out more often; 0.1 is a middle value, stated rather than fitted.
EPISODE_DRAW_RATE = 0.1


def _round_distribution(episodes: int, episode_draw_rate: float) -> tuple[float, float, float]:
    """P(round won by a), P(won by b), P(drawn) for equal agents over ``episodes`` episodes."""
    q = (1.0 - episode_draw_rate) / 2.0
    pa = pb = pd = 0.0
    for wa in range(episodes + 1):
        for wb in range(episodes + 1 - wa):
            d = episodes - wa - wb
            p = math.factorial(episodes) / (math.factorial(wa) * math.factorial(wb) * math.factorial(d))
            p *= q**wa * q**wb * episode_draw_rate**d
            if wa > wb:
                pa += p
            elif wb > wa:
                pb += p
            else:
                pd += p
    return pa, pb, pd


def equal_agents_draw_probability(
    rounds: int, episodes: int, episode_draw_rate: float = EPISODE_DRAW_RATE, margin: float = GAME_MARGIN
) -> float:
    """Exact probability that a game between two equal agents ends in the rules' draw band."""
    pa, pb, pd = _round_distribution(episodes, episode_draw_rate)
    # Distribution of (round wins a - round wins b) after `rounds` independent rounds.
    dist = np.zeros(2 * rounds + 1)
    dist[rounds] = 1.0
    for _ in range(rounds):
        new = pd * dist
        new[1:] += pa * dist[:-1]
        new[:-1] += pb * dist[1:]
        dist = new
    need = margin * rounds
    diffs = np.arange(-rounds, rounds + 1)
    p = float(dist[np.abs(diffs) < need - 1e-9].sum())
    # trueskill needs 0 < p < 1.
    return min(max(p, 1e-6), 1 - 1e-6)


def make_env(draw_probability: float):
    import trueskill

    return trueskill.TrueSkill(mu=MU, sigma=SIGMA, beta=BETA, tau=TAU, draw_probability=draw_probability)


@dataclass
class Rating:
    mu: float = MU
    sigma: float = SIGMA

    @property
    def conservative(self) -> float:
        return self.mu - 3.0 * self.sigma


def rate_game(env, a: Rating, b: Rating, outcome: str) -> tuple[Rating, Rating]:  # noqa: ANN001
    """One TrueSkill update; outcome 'a', 'b' or 'draw'."""
    ra, rb = env.create_rating(a.mu, a.sigma), env.create_rating(b.mu, b.sigma)
    if outcome == "a":
        (na,), (nb,) = env.rate([(ra,), (rb,)], ranks=[0, 1])
    elif outcome == "b":
        (na,), (nb,) = env.rate([(ra,), (rb,)], ranks=[1, 0])
    elif outcome == "draw":
        (na,), (nb,) = env.rate([(ra,), (rb,)], ranks=[0, 0])
    else:
        raise ValueError(f"unknown outcome {outcome!r}")
    return Rating(na.mu, na.sigma), Rating(nb.mu, nb.sigma)


def win_probability(a: Rating, b: Rating, beta: float = BETA) -> float:
    """The paper's a-priori P(a beats b) = Phi((mu_a - mu_b) / sqrt(2 beta^2 + sigma_a^2 + sigma_b^2))."""
    denom = math.sqrt(2 * beta * beta + a.sigma**2 + b.sigma**2)
    return 0.5 * (1.0 + math.erf((a.mu - b.mu) / denom / math.sqrt(2.0)))


def bradley_terry(
    n_players: int, games: list[tuple[int, int, str]], iterations: int = 2000, prior_games: float = 1.0
) -> np.ndarray:
    """Order-independent strengths (log-scale, mean 0) by maximum likelihood with draws as half a
    win each; ``prior_games`` virtual draws against an average opponent keep unbeaten or winless
    players finite (a standard regularisation; documented, small)."""
    wins = np.zeros((n_players, n_players))
    for a, b, outcome in games:
        if outcome == "a":
            wins[a, b] += 1
        elif outcome == "b":
            wins[b, a] += 1
        else:
            wins[a, b] += 0.5
            wins[b, a] += 0.5
    return bradley_terry_wins(wins, iterations, prior_games)


def bradley_terry_wins(wins: np.ndarray, iterations: int = 2000, prior_games: float = 1.0) -> np.ndarray:
    """:func:`bradley_terry` from a matrix of wins (``wins[i, j]``: i's wins over j, draws as half
    a win each; any non-negative weights, e.g. bouts instead of games)."""
    wins = np.asarray(wins, dtype=float)
    n_players = wins.shape[0]
    n = wins + wins.T
    w = wins.sum(1) + prior_games / 2
    p = np.ones(n_players)
    for _ in range(iterations):  # Zermelo / minorise-maximise iterations
        denom = (n / (p[:, None] + p[None, :])).sum(1) + prior_games / (p + 1.0)
        new = w / denom
        new /= np.exp(np.mean(np.log(new)))
        if np.max(np.abs(new - p)) < 1e-10:
            p = new
            break
        p = new
    return np.log(p)


def bradley_terry_bootstrap(
    n_players: int, games: list[tuple[int, int, str]], samples: int = 200, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Point estimate and 95% bootstrap interval (games resampled with replacement)."""
    point = bradley_terry(n_players, games)
    rng = np.random.default_rng(seed)
    boots = np.empty((samples, n_players))
    for i in range(samples):
        idx = rng.integers(0, len(games), len(games))
        boots[i] = bradley_terry(n_players, [games[j] for j in idx], iterations=500)
    return point, np.percentile(boots, 2.5, axis=0), np.percentile(boots, 97.5, axis=0)
