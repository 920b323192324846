"""benchmarks/population_quality.py at tiny sizes (one round of 3 bouts a cell): how bouts end and how
long they last, the issue's bars, a candidate measured in its slot's place, the manifest's quality,
the original agents as opponents (only with SUMO_ZOO_DIR), and bad arguments refused before anything
is written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks import population_quality as PQ

POLICIES = Path(__file__).resolve().parents[1] / "policies"


@pytest.fixture
def shipped_db(tmp_path: Path, monkeypatch) -> Path:  # noqa: ANN001
    """An empty database that sees the shipped population (policies/)."""
    from sumo_cli.store.database import open_database

    monkeypatch.setenv("SUMO_POLICIES", str(POLICIES))
    monkeypatch.setenv("SUMO_CHECKPOINTS", str(tmp_path / "ckpt"))
    path = tmp_path / "db.sqlite"
    open_database(str(path)).dispose()
    return path


def _shipped_default(name: str) -> int:
    """The version the population plays of a shipped agent: its final stage."""
    return next(a["default_version"] for a in json.loads((POLICIES / "manifest.json").read_text())["agents"]
                if a["name"] == name)


def _run(db: Path, tmp_path: Path, *extra: str) -> tuple[int, dict | None]:
    out = tmp_path / "q.json"
    code = PQ.main(["--db", str(db), "--rounds", "1", "--cross-rounds", "1", "--workers", "1", "--out", str(out),
                    "--markdown", str(tmp_path / "population.md"), *extra])
    return code, (json.loads(out.read_text()) if out.is_file() else None)


@pytest.mark.slow
def test_a_slot_and_a_candidate_say_how_their_bouts_end_and_the_manifest_gets_the_slots_quality(shipped_db, tmp_path):
    manifest = tmp_path / "manifest.json"
    shutil.copyfile(POLICIES / "manifest.json", manifest)
    before = json.loads(manifest.read_text())
    final = f"ant-mlp@{_shipped_default('ant-mlp')}"
    code, out = _run(shipped_db, tmp_path, "--shipped", "--only", "ant-mlp", "--agent", "ant-mlp@160", "--parts", "bars",
                     "--zoo", "", "--manifest", str(manifest))
    assert code == 0
    assert sorted(out) == ["ant-mlp", "ant-mlp@160"]
    assert out["ant-mlp"]["agent"] == final != "ant-mlp@160" and out["ant-mlp@160"]["agent"] == "ant-mlp@160"
    assert out["ant-mlp@160"]["slot"] == "ant-mlp" and out["ant-mlp@160"]["stage_versions"][-1] == 160
    for entry in out.values():
        assert set(entry["games"]) == {"motionless-ant", "motionless-bug", "random", "stage-1"}
        for g in entry["games"].values():
            assert g["bouts"] == 3 and sum(g["ends"].values()) == 3
            assert g["won"] == g["ends"]["won_ring_out"] + g["ends"]["won_fall"]
            assert g["lost"] == g["ends"]["lost_ring_out"] + g["ends"]["lost_fall"]
            assert 0 < g["length"]["median"] <= 500 and 0 < g["length"]["mean"] <= 500
        t = entry["bars"]["timeouts-vs-motionless"]
        still = [entry["games"][k] for k in ("motionless-ant", "motionless-bug")]
        assert t["bouts"] == 6 and t["timeouts"] == sum(g["ends"]["timeout"] for g in still)
        assert t["bar"] == 0.10 and t["met"] == (t["rate"] <= 0.10)
        assert entry["bars"]["motionless-bug"]["bar"] == 0.85 and entry["bars"]["stage-1"]["bar"] == 0.65
        assert entry["all_bars_met"] == all(b["met"] for b in entry["bars"].values())
    # the candidate played on its slot's seeds, the same opponents
    page = (tmp_path / "population.md").read_text()
    assert "| `ant-mlp@160` | motionless-ant | 3 |" in page and "timeouts vs motionless" in page
    assert "no zoo folder was at hand" in page
    # only the measured final stage's entry changed, and only its quality
    after = json.loads(manifest.read_text())
    for a, b in zip(before["agents"], after["agents"]):
        if a["name"] != "ant-mlp":
            assert a == b
        else:
            assert b["provenance"]["quality"]["agent"] == final
            assert "timeouts-vs-motionless" in b["provenance"]["quality"]["bars"]
            assert {k: v for k, v in b["provenance"].items() if k != "quality"} == \
                   {k: v for k, v in a["provenance"].items() if k != "quality"}
            assert {k: v for k, v in b.items() if k != "provenance"} == {k: v for k, v in a.items() if k != "provenance"}


@pytest.mark.slow
def test_merging_keeps_the_parts_not_measured_again_and_drops_a_re_measured_parts_old_games(shipped_db, tmp_path):
    """--merge: a slot measured again keeps its games of the other parts; its games of the part measured
    again are the new ones only (an earlier agent's opponents do not linger); other slots stay."""
    code, first = _run(shipped_db, tmp_path, "--shipped", "--only", "ant-mlp", "--parts", "bars,cross", "--zoo", "")
    assert code == 0
    bars = {k: g for k, g in first["ant-mlp"]["games"].items() if "@" not in k}
    doc = json.loads(json.dumps(first))
    bug_mlp = f"bug-mlp@{_shipped_default('bug-mlp')}"
    doc["bug-mlp"] = {**doc["ant-mlp"], "agent": bug_mlp, "slot": "bug-mlp"}
    doc["ant-mlp"]["games"]["pop1-bug-lstm@40"] = dict(first["ant-mlp"]["games"][bug_mlp])
    (tmp_path / "q.json").write_text(json.dumps(doc))
    code, merged = _run(shipped_db, tmp_path, "--shipped", "--only", "ant-mlp", "--parts", "cross", "--zoo", "", "--merge")
    assert code == 0
    games = merged["ant-mlp"]["games"]
    assert "pop1-bug-lstm@40" not in games and {k: g for k, g in games.items() if "@" not in k} == bars
    assert {k for k in games if "@" in k} == {k for k in first["ant-mlp"]["games"] if "@" in k}
    assert merged["bug-mlp"]["games"] == doc["bug-mlp"]["games"]


@pytest.mark.slow
@pytest.mark.zoo
def test_the_original_agents_of_the_body_are_opponents_and_never_imported(shipped_db, tmp_path, zoo_dir):
    code, out = _run(shipped_db, tmp_path, "--shipped", "--only", "bug-mlp", "--parts", "zoo", "--zoo", str(zoo_dir))
    assert code == 0
    games, bars = out["bug-mlp"]["games"], out["bug-mlp"]["bars"]
    assert set(games) == {"zoo-bug-mlp-v3", "zoo-bug-lstm-v3"}
    assert bars["original-mlp-v3"]["bar"] == 0.30 and "bar" not in bars["original-lstm-v3"]
    assert "| `bug-mlp` | zoo-bug-lstm-v3 | 3 |" in (tmp_path / "population.md").read_text()
    from sumo_cli.store.database import open_database
    from sumo_cli.store import registry

    db = open_database(str(shipped_db))
    with db.read() as s:
        assert not [n for n in registry.agent_names(s) if n.startswith("zoo-")]  # measured against, nothing imported
    db.dispose()


def test_the_original_mlp_bar_holds_for_the_ant_and_bug_mlps_and_lstms_only():
    from benchmarks.population_fights import bars

    g = {"won": 1, "bouts": 3, "ends": {"timeout": 0}}
    assert bars("ant-lstm", {"zoo-ant-mlp-v3": g})["original-mlp-v3"]["bar"] == 0.30
    assert "bar" not in bars("spider-mlp", {"zoo-spider-mlp-v3": g})["original-mlp-v3"]
    assert "bar" not in bars("ant-meta", {"zoo-ant-mlp-v3": g})["original-mlp-v3"]
    assert "original-mlp-v3" not in bars("ant-mlp", {"zoo-bug-mlp-v3": g})  # only its own body's


@pytest.mark.parametrize("args, sentence", [
    (["--parts", "bars,nope"], "--parts bars,nope: give bars, cross and/or zoo"),
    (["--agent", "ant-mlp@x"], "--agent ant-mlp@x: give an agent as NAME or NAME@VERSION"),
    (["--agent", "no-such-agent"], "--agent no-such-agent: the database has no agent of that name"),
    (["--agent", "ant-mlp@7"], "--agent ant-mlp@7: no such version"),
    (["--only", "ant-nothing"], "--only ant-nothing: not a population slot"),
    (["--zoo", "/no/such/zoo"], "--zoo /no/such/zoo: no such folder"),
    (["--rounds", "0"], "must be at least 1"),
    (["--manifest", "/no/such/manifest.json"], "no such manifest file"),
])
def test_bad_arguments_are_one_sentence_exit_2_and_nothing_written(shipped_db, tmp_path, capsys, args, sentence):
    code, out = _run(shipped_db, tmp_path, "--shipped", "--parts", "bars", *[a for a in args if a])
    err = capsys.readouterr().err.strip()
    assert code == 2 and sentence in err and len(err.splitlines()) == 1, err
    assert out is None and not (tmp_path / "population.md").exists()


def test_a_database_that_is_not_there_is_refused_and_not_created(tmp_path, capsys):
    code, out = _run(tmp_path / "missing.sqlite", tmp_path, "--parts", "bars")
    assert code == 2 and "--db" in capsys.readouterr().err
    assert out is None and not (tmp_path / "missing.sqlite").exists()


def test_the_page_shows_how_bouts_end_and_a_shipped_agents_budget_in_all_its_sittings():
    from types import SimpleNamespace

    from benchmarks.population_fights import bars, markdown

    ends = {"won_ring_out": 1, "won_fall": 0, "lost_ring_out": 0, "lost_fall": 0, "timeout": 2, "unstable": 0, "drawn_other": 0}
    games = {"motionless-ant": {"won": 1, "drawn": 2, "lost": 0, "bouts": 3, "ends": ends, "length": {"mean": 400.0, "median": 500}}}
    out = {"spider-mlp": {"agent": "spider-mlp@600", "slot": "spider-mlp", "stage_versions": [120, 600], "games": games,
                          "bars": bars("spider-mlp", games), "all_bars_met": False,
                          "budget": {"iterations": 600, "env_steps": 19_660_800, "wall_seconds": 7200.0}}}
    args = SimpleNamespace(rounds=1, cross_rounds=1, seed=1, parts="bars", zoo_used=None)
    page = markdown(out, args)
    assert "| `spider-mlp` | motionless-ant | 3 | 33% | 0% | 0% | 67% | 400 | 500 |" in page
    assert "66.7% (2/3; 21%-94%) **below** | not met |" in page  # the timeouts vs motionless: stands off
    assert "| `spider-mlp` | 600 | 19.66 M | 2.00 |" in page


@pytest.mark.slow
def test_merging_without_an_out_file_starts_from_the_manifests_recorded_quality(shipped_db, tmp_path):
    from benchmarks.population_fights import manifest_quality

    manifest = tmp_path / "manifest.json"
    shutil.copyfile(POLICIES / "manifest.json", manifest)
    recorded = manifest_quality(manifest)
    assert "ant-mlp" in recorded and len(recorded) > 1
    code, out = _run(shipped_db, tmp_path, "--shipped", "--only", "ant-mlp", "--parts", "bars", "--zoo", "",
                     "--merge", "--manifest", str(manifest))
    assert code == 0 and sorted(out) == sorted(recorded)
    for slot, entry in out.items():  # the slots not measured again keep their recorded games
        if slot != "ant-mlp":
            assert entry["games"] == recorded[slot]["games"]
    assert out["ant-mlp"]["games"]["random"]["bouts"] == 3  # measured now, one round
    assert {k: g for k, g in out["ant-mlp"]["games"].items() if "@" in k} == \
           {k: g for k, g in recorded["ant-mlp"]["games"].items() if "@" in k}  # its parts not measured now stay
