"""Fig. 5's verdict: each adaptive agent against itself unadapted, game by game.

`sumo experiment adaptation` plays each adaptive agent (``track``, ``meta``) and the same weights
without adaptation (``NAME:none``) against the same learning opponents on the same seeds
(:mod:`sumo_cli.compete.pairing`). The paired difference is the agent's rounds won adapted minus
unadapted in the two games of one opponent and repeat; its mean and 95% t-interval over the paired
games is the verdict: the meta-update helps when the interval lies above 0. A run made before
pairing (no ``"paired"`` in its configuration) that named both players is paired the same way, its
games on different seeds (said so).
"""

from __future__ import annotations

import math

import numpy as np

from sumo_cli.compete.pairing import pairs
from sumo_cli.report import stats
from sumo_cli.report.section import Section, md_table, verdict

META_CLAIM = "meta-learned adaptation wins more rounds than the same weights unadapted (paired games)"


def paired_differences(cfg: dict, games: dict[int, dict]) -> dict[tuple[int, int], np.ndarray]:
    """(adaptive player index, opponent index) -> rounds won adapted minus unadapted, one per paired
    game both of whose games are stored (``games``: index -> a stored game of :func:`run_games`)."""
    from sumo_cli.compete.experiment import layout

    by_key = {(g["a"], g["b"], g["episodes"], g["repeat"]): g["index"] for g in layout(cfg)}
    out: dict[tuple[int, int], list[int]] = {}
    for i, t in pairs(cfg["agents"]):
        for (a, b, e, k), idx in sorted(by_key.items()):
            twin = by_key.get((t, b, e, k))
            if a != i or idx not in games or twin not in games:
                continue
            out.setdefault((i, b), []).append(games[idx]["rounds_won_a"] - games[twin]["rounds_won_a"])
    return {key: np.array(v, dtype=float) for key, v in out.items()}


def mean_ci(d: np.ndarray) -> tuple[float, float, float]:
    """Mean and 95% t-interval (NaN bounds below two values)."""
    m = float(d.mean())
    if len(d) < 2:
        return m, math.nan, math.nan
    from scipy.stats import t

    half = float(t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d)))
    return m, m - half, m + half


def _text(d: np.ndarray) -> str:
    m, lo, hi = mean_ci(d)
    return f"{m:+.1f}" + (f" (95% {lo:+.1f} to {hi:+.1f})" if math.isfinite(lo) else "")


def add_paired(sec: Section, run: dict, games: dict[int, dict]) -> None:
    """Add to Fig. 5's section the paired table and, first among its verdicts, the meta-learners'
    paired difference pooled over their paired games."""
    cfg = run["config"]
    diffs = paired_differences(cfg, games)
    agents, opps = cfg["agents"], cfg["opponents"]
    seeds = "the same seeds" if cfg.get("paired") else "different seeds (a run made before pairing)"
    if diffs:
        rows = [[agents[i]["label"], agents[i]["strategy"], opps[j]["label"].split("@")[0], str(len(d)), _text(d)]
                for (i, j), d in sorted(diffs.items())]
        for i in sorted({i for i, _ in diffs}):
            d = np.concatenate([v for (a, _), v in sorted(diffs.items()) if a == i])
            rows.append([agents[i]["label"], agents[i]["strategy"], "all", str(len(d)), _text(d)])
        sec.body += ["", f"Adapted minus unadapted: rounds won by each adaptive agent minus rounds won by the same "
                         f"weights played without adaptation (`NAME:none`), game by game on {seeds}, of "
                         f"{cfg['rounds']} rounds; 95% t-interval over the paired games.", "",
                     *md_table(["agent", "strategy", "opponent", "paired games", "adapted - unadapted (95%)"], rows)]
    meta = [v for (i, _), v in sorted(diffs.items()) if agents[i]["strategy"] == "meta"]
    if not meta:
        why = ("no meta-learner was played both adapted and unadapted in this run (`sumo experiment adaptation` "
               "pairs them)")
        sec.verdicts.insert(0, verdict(META_CLAIM, None, why))
        return
    d = np.concatenate(meta)
    if len(d) < stats.MIN_GAMES:
        sec.verdicts.insert(0, verdict(META_CLAIM, None, f"only {len(d)} paired games (a verdict needs "
                                                         f"{stats.MIN_GAMES}): {_text(d)} rounds"))
        return
    m, lo, hi = mean_ci(d)
    sec.verdicts.insert(0, verdict(META_CLAIM, stats.sign(m, lo, hi),
                                   f"adapted minus unadapted, rounds won of {cfg['rounds']}, over {len(d)} paired games "
                                   f"on {seeds}: {m:+.1f} (95% {lo:+.1f} to {hi:+.1f})"))
