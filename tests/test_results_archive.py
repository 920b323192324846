"""The paper-scale runs' page in docs/paper-scale/ stands on their archives in docs/runs/: each archive
imports into a fresh database with the shipped population (so no agent it played has been re-shipped
since), and its games give the numbers the page states."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "docs" / "runs"
PAGE = ROOT / "docs" / "paper-scale" / "report.md"
#: The later tournaments' own pages (scripts/report_paper_scale.sh OUT ARCHIVE), once they have one.
PAGES = {"tournament-paper-3.json.gz": ROOT / "docs" / "paper-scale-3" / "report.md"}


def test_the_paper_scale_page_is_drawn_from_its_archives(cli, monkeypatch):
    monkeypatch.setenv("SUMO_POLICIES", str(ROOT / "policies"))
    page = " ".join(PAGE.read_text().split())
    tournament = _stated_tournament(page)
    evolution = re.search(r"Run 2 \((\w+)\): 105 agents x 10 copies = 1050 members, (\d+) of 10 generations of "
                          r"1000 games(?:; generation (\d+) in play: (\d+) of 1000 games played)?", page)
    assert tournament and evolution, "the page no longer states its runs"
    for run_id, kind, stated in ((1, "tournament", tournament), (2, "evolution", evolution)):
        code, out, err = cli("--db", "paper.sqlite", "runs", "import", str(RUNS / f"{kind}-paper.json.gz"), "--json")
        assert code == 0, err
        imported = json.loads(out)
        assert (imported["id"], imported["kind"], imported["status"]) == (run_id, kind, stated[1])
    code, out, err = cli("--db", "paper.sqlite", "runs", "show", "1", "--json")
    assert code == 0, err
    assert json.loads(out)["results"]["rated"] == int(tournament[2])
    code, out, err = cli("--db", "paper.sqlite", "runs", "show", "2", "--json")
    assert code == 0, err
    shown = json.loads(out)
    assert len(shown["generations"]) - 1 == int(evolution[2])
    if evolution[3]:
        assert (shown["current"]["generation"], shown["current"]["played"]) == (int(evolution[3]), int(evolution[4]))


@pytest.mark.parametrize("archive", ["tournament-paper-2.json.gz", "tournament-paper-3.json.gz"])
def test_a_later_populations_tournament_resumes_from_its_archive_on_the_shipped_population(cli, monkeypatch, archive):
    """The paper-scale tournaments of the second plan's population and of the population as of the
    nineteenth sitting, carried across sittings: each archive imports against the population shipped
    now (every version it played, by SHA-256)."""
    monkeypatch.setenv("SUMO_POLICIES", str(ROOT / "policies"))
    code, out, err = cli("--db", "later.sqlite", "runs", "import", str(RUNS / archive), "--json")
    assert code == 0, err
    imported = json.loads(out)
    assert imported["kind"] == "tournament" and imported["status"] in ("interrupted", "finished")
    code, out, err = cli("--db", "later.sqlite", "runs", "show", str(imported["id"]), "--json")
    assert code == 0, err
    shown = json.loads(out)
    assert len(shown["run"]["config"]["members"]) == 105
    assert {m["name"].split("@")[0] for m in shown["run"]["config"]["members"]} == {
        a for a in _population_names()}
    page = PAGES.get(archive)
    if page is not None:  # its page states the run as the archive holds it
        stated = _stated_tournament(" ".join(page.read_text().split()))
        assert stated, f"{page} no longer states its run"
        assert (imported["status"], shown["results"]["rated"]) == (stated[1], int(stated[2]))


def _stated_tournament(page: str) -> re.Match | None:
    """How a page states its tournament (run 1): its status and the games rated."""
    return re.search(r"Run 1 \((\w+)\): 105 agents, (\d+) of 1000 games rated", page)


def _population_names() -> set[str]:
    from sumo_cli.runs.population_plan import load_plan

    return set(load_plan().members())
