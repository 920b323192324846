"""Intervals the report gives: bootstrapped 95% intervals of means over independent games."""

from __future__ import annotations

import numpy as np

#: Bootstrap resamples behind every bootstrapped interval of the report.
BOOTSTRAP = 1000


def bootstrap_mean(x: np.ndarray, seed: int = 0, samples: int = BOOTSTRAP) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean over axis 0 (the games) of ``x`` and its percentile-bootstrap 95% interval (games
    resampled with replacement): ``(mean, low, high)``, each of shape ``x.shape[1:]``."""
    x = np.asarray(x, dtype=float)
    mean = x.mean(axis=0)
    if len(x) < 2:
        return mean, mean.copy(), mean.copy()
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(x), (samples, len(x)))
    boots = x[idx].mean(axis=1)
    return mean, np.percentile(boots, 2.5, axis=0), np.percentile(boots, 97.5, axis=0)


def sign(mean: float, low: float, high: float) -> bool | None:
    """True when the interval lies above 0, False below, None when it holds 0."""
    return True if low > 0 else False if high < 0 else None


#: Fewest independent games behind a verdict: with fewer, the bootstrap's interval is too narrow to
#: trust (two identical games give a zero-width one), and the report says "cannot tell".
MIN_GAMES = 5
