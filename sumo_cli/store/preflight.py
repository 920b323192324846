"""Checks of the environment a command answers before it writes anything: a ``SUMO_POLICIES``
folder that is not there is refused before a database is created (the shipped agents' module
refuses it too, once the database is open)."""

from __future__ import annotations

import os
from pathlib import Path

from sumo_cli.errors import UserError


def check_policies_folder() -> None:
    named = os.environ.get("SUMO_POLICIES")
    if not named or not named.strip():  # unset: the checkout's policies/; empty: no shipped agents
        return
    folder = Path(named).expanduser().resolve()
    if not (folder / "manifest.json").is_file():
        what = "does not exist" if not folder.exists() else "holds no manifest.json (no shipped agents)"
        raise UserError(f"SUMO_POLICIES={named}: the folder {folder} {what}; unset SUMO_POLICIES for the agents "
                        "shipped in policies/, or set it empty to turn shipped agents off")
