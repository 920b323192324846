"""The paper's figures from stored results, as PNG files (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def game_curve(result: dict, path: str | Path, window: int = 10) -> Path:
    """Per-round win rates of both agents (share of the round's episodes won, moving average over
    ``window`` rounds) and the cumulative share of rounds won: the paper's adaptation figure."""
    plt = _pyplot()
    rounds = result["rounds"]
    n = np.array([len(r["episodes"]) for r in rounds], dtype=float)
    wa = np.array([r["wins_a"] for r in rounds]) / n
    wb = np.array([r["wins_b"] for r in rounds]) / n
    k = np.arange(1, len(rounds) + 1)

    def smooth(x):
        c = np.cumsum(np.insert(x, 0, 0.0))
        lo = np.maximum(0, k - window)
        return (c[k] - c[lo]) / (k - lo)

    fig, ax = plt.subplots(figsize=(7, 4), dpi=120)
    ax.plot(k, smooth(wa), label=f"{result['a']} (episode win rate, {window}-round mean)", color="tab:blue")
    ax.plot(k, smooth(wb), label=f"{result['b']} (episode win rate, {window}-round mean)", color="tab:red")
    ax.plot(k, np.cumsum([r["outcome"] == "a" for r in rounds]) / k, "--", color="tab:blue", alpha=0.6, label="A: share of rounds won so far")
    ax.plot(k, np.cumsum([r["outcome"] == "b" for r in rounds]) / k, "--", color="tab:red", alpha=0.6, label="B: share of rounds won so far")
    ax.set_xlabel("round")
    ax.set_ylabel("win rate")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"{result['a']} vs {result['b']}: {result['outcome']}")
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
