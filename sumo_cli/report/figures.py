"""The report's figures (PNG, matplotlib without a display): one colour per policy/adaptation
combination and per body everywhere, so a reader learns them once."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sumo_cli.report.plots import STRATEGY_COLOURS, _pyplot, _save

#: The paper's seven combinations, in its order, each with a colour that stays the same in every figure.
COMBINATION_COLOURS = {
    "mlp-none": "#9e9e9e", "mlp-track": "#1f77b4", "mlp-meta": "#d62728",
    "lstm-none": "#595959", "lstm-track": "#17becf", "lstm-rl2": "#bcbd22", "lstm-meta": "#ff7f0e",
}
BODY_COLOURS = {"ant": "#2ca02c", "bug": "#9467bd", "spider": "#8c564b"}
#: Resolution of every figure (dots per inch): legible on screen, each PNG well under 200 KB.
DPI = 110
#: Two-sided 95% normal quantile.
Z95 = 1.959963984540054


def colour(key: str, table: dict[str, str], i: int) -> str:
    import matplotlib

    return table.get(key) or matplotlib.colormaps["tab10"](i % 10)


def trueskill_by_category(rows: list[dict], path: str | Path, title: str) -> Path:
    """One panel per body; in it every agent's TrueSkill mu with its 95% interval (mu +- 1.96
    sigma), grouped and coloured by combination; the best of each combination is filled."""
    plt = _pyplot()
    bodies = [b for b in BODY_COLOURS if any(r["body"] == b for r in rows)] or sorted({r["body"] for r in rows})
    combos = [c for c in COMBINATION_COLOURS if any(f"{r['arch']}-{r['strategy']}" == c for r in rows)]
    combos += sorted({f"{r['arch']}-{r['strategy']}" for r in rows} - set(combos))
    fig, axes = plt.subplots(1, len(bodies), figsize=(3.2 * len(bodies) + 1.2, 4.0), dpi=DPI, sharey=True, squeeze=False)
    for ax, body in zip(axes[0], bodies):
        for ci, combo in enumerate(combos):
            group = sorted((r for r in rows if r["body"] == body and f"{r['arch']}-{r['strategy']}" == combo),
                           key=lambda r: -r["mu"])
            for k, r in enumerate(group):
                x = ci + (k - (len(group) - 1) / 2) * min(0.12, 0.6 / max(1, len(group)))
                c = colour(combo, COMBINATION_COLOURS, ci)
                ax.errorbar(x, r["mu"], yerr=Z95 * r["sigma"], fmt="o", color=c, ms=6 if k == 0 else 4,
                            mfc=c if k == 0 else "white", capsize=2, lw=1)
        ax.set_xticks(range(len(combos)), combos, rotation=45, ha="right", fontsize=8)
        ax.set_xlim(-0.6, len(combos) - 0.4)
        ax.set_title(body, color=BODY_COLOURS.get(body, "black"))
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("TrueSkill μ (points), 95% interval")
    fig.suptitle(title, fontsize=10)
    return _save(plt, fig, path)


#: Agents up to which the win-rate matrix names every agent and writes every cell's value (24).
MATRIX_NAMED = 40
MATRIX_VALUES = 24


def win_rate_matrix(p: np.ndarray, observed: np.ndarray, names: list[str], path: str | Path, groups: list[str],
                    title: str) -> Path:
    """The empirical P(row beats column) over bouts; pairs that never met show the Bradley-Terry
    prediction, hatched (pale above MATRIX_NAMED agents, where the agents are named by their
    ``groups``, consecutive runs of which are outlined)."""
    plt = _pyplot()
    n = len(names)
    size = min(11.0, max(4.5, 1.6 + 0.34 * n))
    fig, ax = plt.subplots(figsize=(size + 1.2, size), dpi=DPI)
    im = ax.imshow(p, vmin=0, vmax=1, cmap="RdBu_r", interpolation="nearest")
    if n <= MATRIX_NAMED:
        for i in range(n):
            for j in range(n):
                if i != j and not observed[i, j]:
                    ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="///", edgecolor="0.5", lw=0))
                if n <= MATRIX_VALUES and i != j:
                    ax.text(j, i, f"{p[i, j]:.2f}", ha="center", va="center", fontsize=6 if n > 12 else 7,
                            color="white" if abs(p[i, j] - 0.5) > 0.35 else "black")
        fs = 7 if n <= 30 else 5
        ax.set_xticks(range(n), names, rotation=90, fontsize=fs)
        ax.set_yticks(range(n), names, fontsize=fs)
    else:
        pale = np.zeros((n, n, 4))
        pale[..., :3] = 1.0
        pale[..., 3] = np.where(observed | np.eye(n, dtype=bool), 0.0, 0.6)
        ax.imshow(pale, interpolation="nearest")
        starts = [0] + [k for k in range(1, n) if groups[k] != groups[k - 1]] + [n]
        for a, b in zip(starts[:-1], starts[1:]):
            ax.add_patch(plt.Rectangle((a - 0.5, a - 0.5), b - a, b - a, fill=False, edgecolor="black", lw=0.8))
        mids = [(a + b - 1) / 2 for a, b in zip(starts[:-1], starts[1:])]
        labels = [groups[a] for a in starts[:-1]]
        ax.set_xticks(mids, labels, rotation=90, fontsize=6)
        ax.set_yticks(mids, labels, fontsize=6)
        for k in starts[1:-1]:
            ax.axhline(k - 0.5, color="0.3", lw=0.3)
            ax.axvline(k - 0.5, color="0.3", lw=0.3)
    ax.set_xlabel("column agent")
    ax.set_ylabel("row agent")
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.046, label="share of bouts won by the row agent")
    return _save(plt, fig, path)


def rank_comparison(names: list[str], bodies: list[str], rankings: dict[str, np.ndarray], path: str | Path,
                    title: str, label_top: int = 15) -> Path:
    """Each agent's rank under each rating (columns), joined by a line coloured by body: crossing
    lines are where the ratings disagree. Above 30 agents only those in some rating's top
    ``label_top`` are named."""
    plt = _pyplot()
    n = len(names)
    keys = list(rankings)
    fs = 7 if n <= 30 else 5
    fig, ax = plt.subplots(figsize=(8.0, min(9.0, max(3.8, 1.4 + 0.26 * n))), dpi=DPI)
    for i in range(n):
        ys = [rankings[k][i] for k in keys]
        ax.plot(range(len(keys)), ys, marker="o" if n <= 30 else None, ms=4, lw=1 if n <= 30 else 0.7,
                color=BODY_COLOURS.get(bodies[i], "black"), alpha=0.8)
        if n <= 30 or min(ys) <= label_top:
            ax.text(-0.06, ys[0], names[i], ha="right", va="center", fontsize=fs)
            ax.text(len(keys) - 1 + 0.06, ys[-1], names[i], ha="left", va="center", fontsize=fs)
    ax.set_xticks(range(len(keys)), keys, fontsize=9)
    ax.set_xlim(-1.25, len(keys) - 1 + 1.25)
    ax.set_ylim(n + 0.5, 0.5)
    ax.set_ylabel("rank (1 = best)")
    ax.grid(axis="x", alpha=0.3)
    for body, c in BODY_COLOURS.items():
        if body in bodies:
            ax.plot([], [], color=c, label=body)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), title="body", title_fontsize=7)
    ax.set_title(title, fontsize=9)
    return _save(plt, fig, path)


def population_shares(history: list[dict], path: str | Path, title: str) -> Path:
    """Share of the population per generation (stacked areas): by combination (left) and by
    body (right), in the report's colours."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 3.8), dpi=DPI)
    gens = np.arange(len(history))
    for ax, key, table in ((axes[0], "combination", COMBINATION_COLOURS), (axes[1], "body", BODY_COLOURS)):
        kinds = [k for k in table if any(k in h[key] for h in history)]
        kinds += sorted({k for h in history for k in h[key]} - set(kinds))
        ys = np.array([[h[key].get(k, 0.0) for h in history] for k in kinds])
        ax.stackplot(gens, ys, labels=kinds, colors=[colour(k, table, i) for i, k in enumerate(kinds)], alpha=0.9)
        ax.set_xlabel("generation")
        ax.set_ylabel("share of the population")
        ax.set_ylim(0, 1)
        ax.set_xlim(0, max(1, len(history) - 1))
        ax.set_xticks(gens)
        ax.set_title(f"by {key}", fontsize=9)
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.suptitle(title, fontsize=10)
    return _save(plt, fig, path)


def _agent_style(agents: list[dict]) -> dict[int, dict]:
    """Colour by strategy, line style by architecture, so agents of one strategy read as a family."""
    styles = {}
    for i, a in enumerate(agents):
        styles[i] = {"color": colour(a["strategy"], STRATEGY_COLOURS, i), "ls": "-" if a["arch"] == "lstm" else "--"}
    return styles


def adaptation_curves(curves: dict, agents: list[dict], opponents: list[dict], path: str | Path, title: str) -> Path:
    """Fig. 5: ``curves[(agent, opponent)] = (mean, low, high, versions met)`` per round; one panel
    per opponent."""
    from matplotlib.ticker import MaxNLocator

    plt = _pyplot()
    opps = sorted({j for _, j in curves})
    fig, axes = plt.subplots(1, len(opps), figsize=(4.3 * len(opps) + 1.5, 3.8), dpi=DPI, sharey=True, squeeze=False)
    style = _agent_style(agents)
    for ax, j in zip(axes[0], opps):
        met = sorted({v for (i, jj), c in curves.items() if jj == j for v in c[3]})
        for (i, jj), (m, lo, hi, _) in sorted(curves.items()):
            if jj != j:
                continue
            k = np.arange(1, len(m) + 1)
            ax.plot(k, m, color=style[i]["color"], ls=style[i]["ls"], lw=1.5, label=agents[i]["label"])
            ax.fill_between(k, lo, hi, color=style[i]["color"], alpha=0.15, lw=0)
        name = opponents[j]["label"].split("@")[0]
        ax.set_title(f"vs learning {name} (v{met[0]}→v{met[-1]})", fontsize=9)
        ax.set_xlabel("round")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylim(-0.02, 1.02)
        ax.axhline(0.5, color="0.6", lw=0.8, ls=":")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("win rate (share of bouts won)")
    axes[0][-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.suptitle(title, fontsize=10)
    return _save(plt, fig, path)


def sample_complexity(points: dict[int, list[tuple]], agents: list[dict], path: str | Path, title: str) -> Path:
    """Fig. 6: ``points[agent] = [(episodes, mean, low, high, games)]``."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.8, 3.9), dpi=DPI)
    style = _agent_style(agents)
    for i, pts in sorted(points.items()):
        e = np.array([p[0] for p in pts], dtype=float)
        m, lo, hi = (np.array([p[k] for p in pts]) for k in (1, 2, 3))
        ax.errorbar(e, m, yerr=[m - lo, hi - m], color=style[i]["color"], ls=style[i]["ls"], marker="o", ms=4,
                    capsize=3, label=agents[i]["label"])
    ax.set_xlabel("episodes per round")
    ax.set_xticks(sorted({p[0] for pts in points.values() for p in pts}))
    ax.set_ylabel("win rate, last rounds (share of bouts)")
    ax.set_ylim(-0.02, 1.02)
    ax.axhline(0.5, color="0.6", lw=0.8, ls=":")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    ax.set_title(title, fontsize=9)
    return _save(plt, fig, path)


def calibration_bars(rows: list[dict], path: str | Path, title: str) -> Path:
    """Cross-body win rates of the first body with 95% intervals, 50% marked."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.0, 3.4), dpi=DPI)
    y = np.arange(len(rows))
    for k, r in enumerate(rows):
        ax.errorbar(r["rate"], k, xerr=[[r["rate"] - r["low"]], [r["high"] - r["rate"]]], fmt="o", capsize=4,
                    color=BODY_COLOURS.get(r["first"], "black"))
    ax.axvline(0.5, color="0.4", ls=":", lw=1)
    ax.set_yticks(y, [f"{r['first']} vs {r['second']}" for r in rows])
    ax.set_xlim(-0.03, 1.03)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel("share of bouts won by the first body (draws half), 95% interval")
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(title, fontsize=9)
    return _save(plt, fig, path)
