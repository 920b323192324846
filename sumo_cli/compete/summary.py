"""Summaries of a game for people and scripts: win rates with intervals, bout lengths."""

from __future__ import annotations

import numpy as np

from sumo_cli.compete.paper_defaults import LAST_ROUNDS
from sumo_cli.compete.rules import wilson_interval



def _rate(rounds: list[dict], side: str) -> dict:
    wins = sum(r["outcome"] == side for r in rounds)
    iv = wilson_interval(wins, len(rounds))
    return {"rounds": len(rounds), "wins": wins, "rate": iv.estimate, "ci95": [iv.low, iv.high]}


def summarise(result: dict) -> dict:
    rounds = result["rounds"]
    last = rounds[-LAST_ROUNDS:]
    lengths = np.array([e["length"] for r in rounds for e in r["episodes"]])
    reasons: dict[str, int] = {}
    for r in rounds:
        for e in r["episodes"]:
            reasons[e["reason"]] = reasons.get(e["reason"], 0) + 1
    eps_a = sum(e["outcome"] == "win" for r in rounds for e in r["episodes"])
    eps_b = sum(e["outcome"] == "loss" for r in rounds for e in r["episodes"])
    n_eps = len(lengths)
    return {
        "outcome": result["outcome"],
        "rounds_won_a": result["rounds_won_a"],
        "rounds_won_b": result["rounds_won_b"],
        "rounds_drawn": result["rounds_drawn"],
        "win_rate_a": _rate(rounds, "a"),
        "win_rate_b": _rate(rounds, "b"),
        f"win_rate_a_last_{LAST_ROUNDS}": _rate(last, "a"),
        f"win_rate_b_last_{LAST_ROUNDS}": _rate(last, "b"),
        "episodes": {"total": n_eps, "won_a": eps_a, "won_b": eps_b, "drawn": n_eps - eps_a - eps_b},
        "bout_length": {
            "mean": float(lengths.mean()) if n_eps else None,
            "median": float(np.median(lengths)) if n_eps else None,
            "min": int(lengths.min()) if n_eps else None,
            "max": int(lengths.max()) if n_eps else None,
            "by_reason": reasons,
        },
    }
