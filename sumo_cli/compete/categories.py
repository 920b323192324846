"""Summaries the CLI prints: per-category means of a leaderboard, shares by kind."""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np

from sumo_cli.errors import UserError

#: What an evolution's shares are grouped by.
GROUPINGS = ("body", "arch", "strategy", "kind")


def check_grouping(by: str) -> str:
    if by not in GROUPINGS:
        raise UserError(f"--by must be {', '.join(GROUPINGS[:-1])} or {GROUPINGS[-1]}, got {by!r}")
    return by


def category_summary(rows: list[dict]) -> dict[str, list[dict]]:
    """Mean and spread of mu (and the mean conservative rating) by body, architecture, strategy."""
    out: dict[str, list[dict]] = {}
    for key in ("body", "arch", "strategy"):
        groups: dict[str, list[dict]] = defaultdict(list)
        for r in rows:
            groups[r[key]].append(r)
        out[key] = [
            {
                key: k, "agents": len(g), "mean_mu": float(np.mean([r["mu"] for r in g])),
                "sd_mu": float(np.std([r["mu"] for r in g])),
                "mean_conservative": float(np.mean([r["conservative"] for r in g])),
                "win_rate": (sum(r["wins"] for r in g) / max(1, sum(r["games"] for r in g))),
            }
            for k, g in sorted(groups.items(), key=lambda kv: -np.mean([r["mu"] for r in kv[1]]))
        ]
    return out


def shares(kinds: list[str]) -> dict[str, float]:
    c = Counter(kinds)
    n = max(1, len(kinds))
    return {k: v / n for k, v in sorted(c.items())}
