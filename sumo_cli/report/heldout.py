"""The held-out gain of a meta run over its meta-updates (`sumo runs show RUN` of a meta run).

A meta run measures, on the first and every tenth meta-update (``--heldout-every``; ``measures_heldout`` of
:mod:`sumo_cli.selfplay.meta_selfplay`), the return of theta after its meta-update's adaptation (phi)
and without it, on the next versions of the opponents it adapted to (held out: never trained on);
the gain is adapted minus unadapted per episode, with its 95% t-interval over the meta-batch's tasks
(``heldout_gain``, ``heldout_gain_ci95``). :func:`heldout_curve` lists those measurements in order;
:func:`last_share` sums up the last 20% of meta-updates (those after 80% of the last one stored):
the mean of the measurements there with the 95% t-interval over them (each a fresh draw of tasks and
bouts), or, with one measurement there, that measurement and its own interval over the tasks. So
"no gain yet" is a curve and an interval, not a guess. Plain data in, no torch.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

#: The share of meta-updates, at the end of the run, that :func:`last_share` sums up.
LAST_SHARE = 0.2


def _num(v) -> float | None:  # noqa: ANN001
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def heldout_curve(iterations: list[dict]) -> list[dict]:
    """``[{"iteration", "env_steps", "adapted", "unadapted", "gain", "ci95", "low", "high"}]``, one per
    meta-update that measured the held-out gain (``iterations``: the stored iterations of
    :func:`sumo_cli.store.runs.run_detail`). ``ci95`` is the half-width (None when not finite)."""
    out = []
    for it in iterations:
        m = it.get("metrics") or {}
        gain = _num(m.get("heldout_gain"))
        if gain is None:
            continue
        half = _num(m.get("heldout_gain_ci95"))
        out.append({"iteration": it["iteration"], "env_steps": it.get("env_steps"),
                    "adapted": _num(m.get("heldout_return_adapted")), "unadapted": _num(m.get("heldout_return_unadapted")),
                    "gain": gain, "ci95": half,
                    "low": gain - half if half is not None else None, "high": gain + half if half is not None else None})
    return out


def _t975(dof: int) -> float:
    from scipy.stats import t

    return float(t.ppf(0.975, dof))


def last_share(curve: list[dict], last_iteration: int, share: float = LAST_SHARE) -> dict | None:
    """The measurements of the last ``share`` of meta-updates (iteration > (1 - share) * last
    iteration): ``{"from", "to", "n", "mean", "ci95", "low", "high", "over"}``; ``over`` says what the
    interval is over ("measurements" or "tasks" with a single measurement). None without any."""
    cut = (1.0 - share) * last_iteration
    rows = [c for c in curve if c["iteration"] > cut]
    if not rows:
        return None
    x = np.array([c["gain"] for c in rows])
    if len(rows) >= 2:
        half, over = _t975(len(rows) - 1) * float(x.std(ddof=1)) / math.sqrt(len(rows)), "measurements"
    else:
        half, over = rows[0]["ci95"], "tasks"
    mean = float(x.mean())
    return {"from": math.floor(cut) + 1, "to": last_iteration, "n": len(rows), "mean": mean,
            "ci95": half, "low": mean - half if half is not None else None,
            "high": mean + half if half is not None else None, "over": over}


def verdict(last: dict | None) -> str:
    """How the last share reads: "gain" (interval above 0), "loss" (below 0) or "no gain yet"."""
    if last is None or last["low"] is None:
        return "not measured"
    return "gain" if last["low"] > 0 else "loss" if last["high"] < 0 else "no gain yet"


def last_share_line(last: dict | None) -> str:
    """One sentence for :func:`last_share`."""
    if last is None:
        return "held-out gain, last 20% of meta-updates: no measurement there yet"
    interval = (f" +- {last['ci95']:.1f} (95% interval {last['low']:.1f} to {last['high']:.1f}, over the "
                f"{'measurements' if last['over'] == 'measurements' else 'tasks of the one measurement'})"
                if last["ci95"] is not None else " (no interval)")
    return (f"held-out gain, last 20% of meta-updates ({last['from']}-{last['to']}, {last['n']} measurement"
            f"{'s' if last['n'] != 1 else ''}): {last['mean']:.1f}{interval} per episode: {verdict(last)}")


def draw_heldout(ax, curve: list[dict], last: dict | None) -> None:  # noqa: ANN001 - a matplotlib Axes
    """The gain with its 95% interval against meta-updates, 0 marked, the last 20% shaded with its mean."""
    xs = [c["iteration"] for c in curve]
    ys = [c["gain"] for c in curve]
    err = [c["ci95"] if c["ci95"] is not None else 0.0 for c in curve]
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.errorbar(xs, ys, yerr=err, fmt="o-", color="tab:blue", markersize=3, linewidth=1.0, capsize=2,
                label="adapted - unadapted (95% interval over tasks)")
    if last is not None:
        ax.axvspan(last["from"] - 0.5, last["to"] + 0.5, color="tab:orange", alpha=0.12)
        if last["low"] is not None:
            ax.fill_between([last["from"], last["to"]], [last["low"]] * 2, [last["high"]] * 2, color="tab:orange",
                            alpha=0.3, label=f"last 20%: {last['mean']:.1f} [{last['low']:.1f}, {last['high']:.1f}]")
        ax.hlines(last["mean"], last["from"], last["to"], color="tab:orange", linewidth=1.5)
    ax.set_title("held-out gain: return adapted minus unadapted on next-version opponents", fontsize=9)
    ax.set_xlabel("meta-update", fontsize=8)
    ax.set_ylabel("return per episode", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")


def heldout_figure(curve: list[dict], last: dict | None, path: str | Path, title: str) -> Path:
    """The held-out curve alone as a PNG."""
    from sumo_cli.report.plots import _pyplot, _save

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4), dpi=120)
    draw_heldout(ax, curve, last)
    fig.suptitle(title, fontsize=10)
    return _save(plt, fig, path)
