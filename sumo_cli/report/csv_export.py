"""Results as CSV files, for pandas or R without a script: one row per record, one column per
field. Nested fields become dotted columns (``metrics.win_rate``), lists their JSON text; the
columns are the union of the rows' fields, in the order they first appear."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path


def flatten(row: dict, prefix: str = "") -> dict:
    out: dict = {}
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, f"{name}."))
        elif isinstance(value, (list, tuple)):
            out[name] = json.dumps(value, default=str)
        else:
            out[name] = value
    return out


def write_csv(path: str | Path, rows: list[dict]) -> Path:
    """Write ``rows`` to ``path`` (whole or not at all: through a temporary file beside it)."""
    path = Path(path)
    flat = [flatten(r) for r in rows]
    columns: dict[str, None] = {}
    for r in flat:
        columns.update(dict.fromkeys(r))
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(columns), restval="")
        writer.writeheader()
        writer.writerows(flat)
    os.replace(tmp, path)
    return path


def bout_rows(games: list[dict]) -> list[dict]:
    """One row per bout of every game (the documents of ``store.matches.match_dict``): the game, its
    round and the bout, outcomes from A's side."""
    out = []
    for g in games:
        st = g.get("settings") or {}
        for r in g["rounds"]:
            for k, e in enumerate(r["episodes"]):
                out.append({
                    "match_id": g["id"], "run_id": g["run_id"], "run_index": g["run_index"], "a": g["a"], "b": g["b"],
                    "game_outcome": g["outcome"], "interrupted": g["interrupted"], "seed": g["seed"],
                    "physics": st.get("physics"), "rounds": st.get("rounds"), "episodes": st.get("episodes"),
                    "round": r["index"] + 1, "version_a": r["version_a"], "version_b": r["version_b"],
                    "round_outcome": r["outcome"], "bout": k + 1, "bout_outcome": e["outcome"], "reason": e["reason"],
                    "length": e["length"],
                })
    return out


def share_rows(generations: list[dict]) -> list[dict]:
    """One row per generation, grouping and group of an evolution's shares."""
    return [{"generation": g, "by": by, "group": group, "share": share}
            for g, shares in enumerate(generations) for by, groups in shares.items() for group, share in groups.items()]


def iteration_rows(iterations: list[dict]) -> list[dict]:
    """A training run's learning curve: one row per iteration, its metrics as columns."""
    return [{"iteration": it["iteration"], "env_steps": it["env_steps"], "wall_seconds": it["wall_seconds"],
             **it["metrics"]} for it in iterations]
