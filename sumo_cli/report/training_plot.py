"""A training run's per-iteration metrics against env steps, as a PNG (`sumo runs show RUN --plot`).

Takes plain data (the run dict and the iteration list of
:func:`sumo_cli.store.registry.run_detail`), smooths nothing and skips missing (None) values.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from sumo_cli.report.plots import _pyplot, _save

# Locomotion keys that are returns averaged over the iteration's episodes (meta: before and after
# the inner update); return_ep<i> (the i-th episode of the 7-episode sequence) are drawn apart.
_LOCO_MEAN_RETURNS = ("mean_return", "pre_return", "post_return", "post_episode_return")
_RETURN_EP = re.compile(r"^return_ep(\d+)$")


def series(iterations: list[dict], key: str) -> tuple[list[float], list[float]]:
    """(env steps, value) of every iteration whose metric ``key`` is a finite number."""
    xs, ys = [], []
    for it in iterations:
        v = (it.get("metrics") or {}).get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            continue
        xs.append(it["env_steps"])
        ys.append(float(v))
    return xs, ys


def _line(ax, iterations: list[dict], key: str, label: str, **kw) -> bool:
    xs, ys = series(iterations, key)
    if not xs:
        return False
    if len(xs) <= 40:
        kw.setdefault("marker", "o")
        kw.setdefault("markersize", 3)
    ax.plot(xs, ys, label=label, linewidth=1.2, **kw)
    return True


def _finish(ax, title: str, ylabel: str, drew: bool, legend: bool = True) -> None:
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("env steps", fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    if not drew:
        ax.text(0.5, 0.5, "not recorded", ha="center", va="center", transform=ax.transAxes, fontsize=8, color="grey")
    elif legend:
        ax.legend(fontsize=7, loc="best")


def training_curves(run: dict, iterations: list[dict], path: str | Path) -> Path:
    """Write the figure of a training run: for sumo, the win/draw/loss rates of the training bouts,
    the mean faithful return, the mean closest torso distance and the dense-reward weight alpha;
    for locomotion, the return-like metrics that were recorded."""
    if run.get("env") == "locomotion":
        return _locomotion(run, iterations, path)
    return _sumo(run, iterations, path)


def _title(run: dict) -> str:
    agent = (run.get("config") or {}).get("agent")
    return f"training run {run['id']}" + (f" ({agent})" if agent else "") + f": {run['status']}, " \
        f"{run['done']}/{run['total']} iterations"


def _sumo(run: dict, iterations: list[dict], path: str | Path) -> Path:
    from sumo_cli.report.heldout import draw_heldout, heldout_curve, last_share

    plt = _pyplot()
    curve = heldout_curve(iterations)  # a meta run: its held-out gain in a third row
    fig, axes = plt.subplots(3 if curve else 2, 2, figsize=(10, 10.5 if curve else 7), dpi=120)
    (a, b), (c, d) = axes[:2]
    if curve:
        for ax in axes[2]:
            ax.remove()
        draw_heldout(fig.add_subplot(3, 1, 3), curve, last_share(curve, iterations[-1]["iteration"]))

    drew = False
    for key, label, color in (("win_rate", "win", "tab:green"), ("draw_rate", "draw", "tab:grey"),
                              ("loss_rate", "loss", "tab:red")):
        drew |= _line(a, iterations, key, label, color=color)
    drew |= _line(a, iterations, "eval_win_rate", "win vs motionless (eval)", color="tab:green", linestyle="--")
    a.set_ylim(-0.02, 1.02)
    _finish(a, "training bouts: outcome rates", "share of bouts", drew)

    drew = _line(b, iterations, "mean_return", "training bouts", color="tab:blue")
    drew |= _line(b, iterations, "eval_mean_return", "vs motionless (eval)", color="tab:blue", linestyle="--")
    _finish(b, "mean faithful return", "return", drew)

    drew = _line(c, iterations, "mean_min_dist", "training bouts", color="tab:purple")
    drew |= _line(c, iterations, "eval_mean_min_dist", "vs motionless (eval)", color="tab:purple", linestyle="--")
    _finish(c, "mean closest torso distance", "distance", drew)

    drew = _line(d, iterations, "alpha", "alpha", color="tab:orange")
    d.set_ylim(-0.02, 1.02)
    _finish(d, "dense-reward weight alpha", "alpha", drew, legend=False)

    fig.suptitle(_title(run), fontsize=10)
    return _save(plt, fig, path)


def _locomotion(run: dict, iterations: list[dict], path: str | Path) -> Path:
    plt = _pyplot()
    keys = {k for it in iterations for k in (it.get("metrics") or {})}
    per_episode = sorted((int(m.group(1)), k) for k in keys if (m := _RETURN_EP.match(k)))
    n = 2 if per_episode else 1
    fig, axes = plt.subplots(1, n, figsize=(5.5 * n, 4.2), dpi=120, squeeze=False)

    ax = axes[0][0]
    drew = False
    for key in _LOCO_MEAN_RETURNS:
        if key in keys:
            drew |= _line(ax, iterations, key, key.replace("_", " "))
    _finish(ax, "mean return", "return", drew)

    if per_episode:
        ax = axes[0][1]
        cmap = plt.get_cmap("viridis")
        drew = False
        for j, (i, key) in enumerate(per_episode):
            drew |= _line(ax, iterations, key, f"episode {i}", color=cmap(j / max(1, len(per_episode) - 1)))
        _finish(ax, "return by episode of the sequence", "return", drew)

    fig.suptitle(_title(run), fontsize=10)
    return _save(plt, fig, path)
