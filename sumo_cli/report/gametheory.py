"""A tournament as a two-player zero-sum game: the empirical win-rate matrix of its bouts and the
Nash averaging of Balduzzi et al. (2018, "Re-evaluating evaluation").

TrueSkill and Bradley-Terry give every agent one number, which presumes that skill is transitive.
Nash averaging does not: it takes the antisymmetric matrix of log-odds ``A[i, j] = logit P(i beats
j)``, finds the maximum-entropy Nash equilibrium ``p`` of the symmetric zero-sum game it defines
(a mixture of agents that no agent beats on average), and rates each agent by its payoff against
that mixture, ``(A p)_i``: 0 for the agents in the equilibrium's support, negative for the rest.
Agents that only beat the weak score no better than the weak; an agent that beats the "best" one
can be in the support even when its average win rate is low; copies of an agent share one weight.

The matrix is built from bouts (episodes), not games: a tournament of 1,000 games among 105 agents
plays most pairs at most once, and a game's 100 x 3 bouts measure the pair far better than its one
outcome. Draws count as half a win to each side. Pairs that never met are filled in from a
Bradley-Terry fit of the same bouts (stated in the report, drawn hatched in the figure).
"""

from __future__ import annotations

import numpy as np

from sumo_cli.compete import ratings as R

#: Virtual bouts added to each observed pair, half won by each side (Laplace's rule), so that a
#: pair whose bouts all went one way has a finite log-odds.
PRIOR_BOUTS = 2.0
#: Tolerance of the equilibrium constraints ``(A^T p)_j >= -EQUILIBRIUM_TOL`` when maximising the
#: entropy; the value of the game is 0, so this is in log-odds units.
EQUILIBRIUM_TOL = 1e-6


def bout_counts(n: int, games: list[tuple[int, int, float, float, float]]) -> tuple[np.ndarray, np.ndarray]:
    """``wins[i, j]`` (i's bouts won over j, draws as half) and ``bouts[i, j]`` (bouts played by the
    pair, symmetric) from games ``(a, b, bouts won by a, bouts won by b, bouts drawn)``."""
    wins = np.zeros((n, n))
    for a, b, wa, wb, d in games:
        wins[a, b] += wa + d / 2
        wins[b, a] += wb + d / 2
    return wins, wins + wins.T


def win_rate_matrix(wins: np.ndarray, bouts: np.ndarray, prior: float = PRIOR_BOUTS) -> tuple[np.ndarray, np.ndarray]:
    """``(P, observed)``: ``P[i, j]`` the smoothed share of bouts i won against j (``P + P.T = 1``,
    0.5 on the diagonal); pairs that never met (``observed`` False) take the Bradley-Terry
    prediction from all bouts."""
    n = wins.shape[0]
    observed = bouts > 0
    np.fill_diagonal(observed, False)
    strength = np.exp(R.bradley_terry_wins(wins))
    predicted = strength[:, None] / (strength[:, None] + strength[None, :])
    smoothed = (wins + prior / 2) / np.where(observed, bouts + prior, 1.0)
    p = np.where(observed, smoothed, predicted)
    p[np.arange(n), np.arange(n)] = 0.5
    return p, observed


def log_odds(p: np.ndarray) -> np.ndarray:
    """The antisymmetric payoff matrix ``log(P / (1 - P))``."""
    p = np.clip(p, 1e-9, 1 - 1e-9)
    a = np.log(p / (1 - p))
    return (a - a.T) / 2  # exactly antisymmetric


def nash_equilibrium(a: np.ndarray) -> np.ndarray:
    """The maximum-entropy Nash equilibrium of the symmetric zero-sum game with antisymmetric
    payoff ``a`` (row player's payoff). First a linear programme (scipy's ``linprog``) finds an
    equilibrium and the game's value (0 for an antisymmetric matrix); then, among the mixtures that
    guarantee that value against every pure strategy, the one of maximum entropy (SLSQP, started
    from the LP's solution), which is unique and gives copies of an agent equal shares."""
    from scipy.optimize import linprog, minimize

    n = a.shape[0]
    if n == 1:
        return np.ones(1)
    # maximise v subject to (a^T p)_j >= v for all j, sum p = 1, p >= 0; variables (p, v)
    c = np.zeros(n + 1)
    c[-1] = -1.0
    a_ub = np.hstack([-a.T, np.ones((n, 1))])
    lp = linprog(c, A_ub=a_ub, b_ub=np.zeros(n), A_eq=np.hstack([np.ones((1, n)), np.zeros((1, 1))]), b_eq=[1.0],
                 bounds=[(0, None)] * n + [(None, None)], method="highs")
    if not lp.success:
        raise RuntimeError(f"the equilibrium LP failed: {lp.message}")
    p0, value = lp.x[:n], lp.x[-1]
    scale = max(1.0, float(np.abs(a).max()))

    def neg_entropy(p: np.ndarray) -> float:
        q = np.clip(p, 1e-12, None)
        return float(np.sum(q * np.log(q)))

    def grad(p: np.ndarray) -> np.ndarray:
        return np.log(np.clip(p, 1e-12, None)) + 1.0

    cons = [{"type": "eq", "fun": lambda p: np.sum(p) - 1.0, "jac": lambda p: np.ones(n)},
            {"type": "ineq", "fun": lambda p: (a.T @ p - value) / scale + EQUILIBRIUM_TOL, "jac": lambda p: a.T / scale}]
    start = 0.9 * p0 + 0.1 * np.full(n, 1.0 / n)  # away from the simplex's faces, where the entropy's gradient is infinite
    res = minimize(neg_entropy, start, jac=grad, constraints=cons, bounds=[(0, 1)] * n, method="SLSQP",
                   options={"maxiter": 500, "ftol": 1e-12})
    p = res.x if res.success and np.min(a.T @ res.x - value) >= -1e-4 * scale else p0
    p = np.clip(p, 0, None)
    # an agent that does worse than the game's value against an equilibrium is in the support of none
    # (complementary slackness): what the tolerance above left it is numerical dust
    p[a @ p < value - 1e-4 * scale] = 0.0
    return p / p.sum()


def nash_averaging(p_win: np.ndarray) -> dict:
    """``{"weights": equilibrium mixture, "skill": payoff of each agent against it (0 in the
    support, negative outside), "log_odds": the payoff matrix}`` from a win-rate matrix."""
    a = log_odds(p_win)
    weights = nash_equilibrium(a)
    return {"weights": weights, "skill": a @ weights, "log_odds": a}


def ranks(scores: np.ndarray) -> np.ndarray:
    """1 for the highest score; ties share the best rank among them."""
    scores = np.asarray(scores, dtype=float)
    return np.array([1 + int(np.sum(scores > s + 1e-9)) for s in scores])


def kendall_tau(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's rank correlation (tau-b) of two score vectors; 1 = same order."""
    from scipy.stats import kendalltau

    if len(x) < 2:
        return 1.0
    tau = kendalltau(x, y).statistic
    return float(tau) if np.isfinite(tau) else 0.0


#: One-sided normal quantile a pair's bout record must clear for one side to count as beating the
#: other in a circle: (wins - n/2) / sqrt(n/4) > CYCLE_Z, i.e. the majority is not a coin's noise.
CYCLE_Z = 1.959963984540054


def nontransitive_cycles(p_win: np.ndarray, observed: np.ndarray, names: list[str], limit: int = 5,
                         wins: np.ndarray | None = None, bouts: np.ndarray | None = None,
                         z: float = CYCLE_Z) -> list[str]:
    """Up to ``limit`` observed triples where i beats j, j beats k and k beats i (each by the
    majority of their bouts; given ``wins`` and ``bouts``, by a majority beyond ``z`` standard
    errors of a fair coin), strongest first (by the smallest of the three margins)."""
    n = len(names)
    beats = (p_win > 0.5) & observed
    if wins is not None and bouts is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            score = (wins - bouts / 2) / np.sqrt(bouts / 4)
        beats &= np.nan_to_num(score, nan=0.0) > z
    found = []
    for i in range(n):
        for j in np.flatnonzero(beats[i]):
            for k in np.flatnonzero(beats[j]):
                if beats[k, i] and i < j and i < k:
                    margin = min(p_win[i, j], p_win[j, k], p_win[k, i])
                    found.append((margin, f"{names[i]} > {names[j]} > {names[k]} > {names[i]}"))
    found.sort(key=lambda t: -t[0])
    return [text for _, text in found[:limit]]
