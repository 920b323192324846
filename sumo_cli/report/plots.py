"""The paper's figures from stored results, as PNG files (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: One colour per adaptation strategy, the same in every figure.
STRATEGY_COLOURS = {"none": "#7f7f7f", "track": "#1f77b4", "rl2": "#bcbd22", "meta": "#d62728"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


#: A PNG larger than this is re-saved with a 256-colour palette (figures with many antialiased lines
#: or cells), which keeps it legible at a fraction of the size.
MAX_PNG_BYTES = 200_000


def _save(plt, fig, path: str | Path) -> Path:  # noqa: ANN001
    fig.tight_layout()
    path = Path(path)  # its folder exists: the CLI checks every output path first (cli.common.check_output)
    fig.savefig(path)
    plt.close(fig)
    if path.suffix.lower() == ".png" and path.stat().st_size > MAX_PNG_BYTES:
        from PIL import Image

        with Image.open(path) as im:
            small = im.convert("RGB").quantize(256, dither=Image.Dither.NONE)
        small.save(path, optimize=True)
    return path


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
    return _save(plt, fig, path)


def win_probability_heatmap(rows: list[dict], path: str | Path, top: int = 20, beta: float = 4.1667) -> Path:
    """A-priori P(row agent beats column agent) for the top agents (the paper's heatmap)."""
    from sumo_cli.compete.ratings import Rating, win_probability

    plt = _pyplot()
    rows = rows[:top]
    n = len(rows)
    p = np.array([[win_probability(Rating(a["mu"], a["sigma"]), Rating(b["mu"], b["sigma"]), beta) for b in rows] for a in rows])
    fig, ax = plt.subplots(figsize=(max(5.5, 1.0 + 0.42 * n), max(4.5, 0.8 + 0.38 * n)), dpi=120)
    im = ax.imshow(p, vmin=0, vmax=1, cmap="RdBu_r")
    labels = [r["agent"] for r in rows]
    ax.set_xticks(range(n), labels, rotation=90, fontsize=7)
    ax.set_yticks(range(n), labels, fontsize=7)
    for i in range(n):
        for j in range(n):
            ax.text(j, i, f"{p[i, j]:.2f}", ha="center", va="center", fontsize=6,
                    color="white" if abs(p[i, j] - 0.5) > 0.3 else "black")
    ax.set_title("P(row beats column), a priori from TrueSkill", fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.046, label="a-priori probability that the row agent wins a game")
    return _save(plt, fig, path)


def shares_stacked_area(shares: list[dict[str, float]], path: str | Path, title: str) -> Path:
    """Share of each kind of agent per generation (the paper's evolution figure)."""
    plt = _pyplot()
    kinds = sorted({k for s in shares for k in s})
    gens = np.arange(len(shares))
    ys = np.array([[s.get(k, 0.0) for s in shares] for k in kinds])
    fig, ax = plt.subplots(figsize=(7, 4), dpi=120)
    ax.stackplot(gens, ys, labels=kinds, alpha=0.85)
    ax.set_xlabel("generation")
    ax.set_ylabel("share of the population")
    ax.set_ylim(0, 1)
    ax.set_xlim(0, max(1, len(shares) - 1))
    ax.set_title(title)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return _save(plt, fig, path)


def locomotion_adaptation(results: list[dict], path: str | Path, pairs=("back", "middle", "front")) -> Path:
    """The paper's locomotion figure: mean episodic reward against the episode (1..7) of the
    sequence, one panel per held-out leg pair, one line with its 95% band per agent and strategy (``results``:
    rows with ``agent``, ``strategy``, ``pair``, ``mean`` and ``ci95`` of length 7)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(pairs), figsize=(4.2 * len(pairs), 3.6), dpi=120, sharey=True)
    axes = np.atleast_1d(axes)
    lines = list(dict.fromkeys((r["agent"], r["strategy"]) for r in results))
    colours = {key: plt.get_cmap("tab10")(i % 10) for i, key in enumerate(lines)}
    if len({s for _, s in lines}) == len(lines):  # one line per strategy: the report's strategy colours
        colours = {key: STRATEGY_COLOURS.get(key[1], colours[key]) for key in lines}
    for ax, pair in zip(axes, pairs):
        for r in (r for r in results if r["pair"] == pair):
            m, c = np.asarray(r["mean"], dtype=float), np.asarray(r["ci95"], dtype=float)
            k = np.arange(1, len(m) + 1)
            colour = colours[(r["agent"], r["strategy"])]
            ax.plot(k, m, marker="o", ms=3, color=colour, label=f"{r['agent']} ({r['strategy']})")
            ax.fill_between(k, m - c, m + c, color=colour, alpha=0.2)
        ax.set_title(f"{pair} legs weakened")
        ax.set_xlabel("episode")
        ax.set_xticks(range(1, 8))
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("episodic reward (mean, 95% band)")
    axes[-1].legend(fontsize=7, loc="best")
    return _save(plt, fig, path)
