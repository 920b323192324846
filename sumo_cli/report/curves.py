"""The learning-curve figure of `sumo eval sumo`."""

from __future__ import annotations

from pathlib import Path

from sumo_cli.report.plots import _pyplot, _save


def learning_curve(doc: dict, path: str | Path) -> Path:
    """Win rate (left) and mean steps to close in (right) against env steps, one line per opponent."""
    plt = _pyplot()
    fig, (ax_win, ax_close) = plt.subplots(1, 2, figsize=(10, 4))
    by_opp: dict[str, list[dict]] = {}
    for r in doc["curve"]:
        by_opp.setdefault(r["opponent"], []).append(r)
    for opp, rows in by_opp.items():
        xs = [r["env_steps"] if r["env_steps"] is not None else r["version"] for r in rows]
        ax_win.plot(xs, [r["win_rate"] for r in rows], marker="o", label=opp)
        ax_close.plot(xs, [r["mean_steps_to_close"] for r in rows], marker="o", label=opp)
    xlabel = "env steps" if doc["curve"] and doc["curve"][0]["env_steps"] is not None else "version"
    ax_win.set(xlabel=xlabel, ylabel="win rate", ylim=(-0.02, 1.02), title=f"{doc['agent']}: wins ({doc['bouts']} bouts)")
    ax_close.set(xlabel=xlabel, ylabel="steps until torsos within 1.5 m", title="closing in (lower is faster)")
    ax_win.legend()
    return _save(plt, fig, path)
