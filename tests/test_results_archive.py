"""The paper-scale tournament's page in docs/tournament/ stands on its archive in docs/runs/: the archive
imports into a fresh database with the shipped population (so no agent it played has been
re-shipped since), and its games rate to the numbers the page states."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHIVE = ROOT / "docs" / "runs" / "tournament-paper.json.gz"
PAGE = ROOT / "docs" / "tournament" / "report.md"


def test_the_tournament_page_is_drawn_from_its_archive(cli, monkeypatch):
    monkeypatch.setenv("SUMO_POLICIES", str(ROOT / "policies"))
    stated = re.search(r"Run 1 \((\w+)\): 105 agents, (\d+) of 1000 games rated", PAGE.read_text())
    assert stated, "the page no longer states its run"
    code, out, err = cli("--db", "paper.sqlite", "runs", "import", str(ARCHIVE), "--json")
    assert code == 0, err
    imported = json.loads(out)
    assert (imported["id"], imported["kind"], imported["status"]) == (1, "tournament", stated[1])
    code, out, err = cli("--db", "paper.sqlite", "runs", "show", "1", "--json")
    assert code == 0, err
    assert json.loads(out)["results"]["rated"] == int(stated[2])
