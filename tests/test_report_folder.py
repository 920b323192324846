"""`sumo report` writes only its own files: a manifest in the folder lists them, a new report replaces
those and nothing else, and a folder holding anything else (or one it cannot write) is refused in one
sentence before anything is written."""

from __future__ import annotations

from pathlib import Path

from test_report import make_db

from sumo_cli.report.manifest import MANIFEST


def _empty_db(tmp_path: Path) -> str:
    return make_db(tmp_path / "gen.sqlite", tournament=False, evolution=False, locomotion=False, adaptation=False,
                   calibration=False)


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_the_report_lists_what_it_wrote_and_replaces_only_that(cli, tmp_path):
    db = _empty_db(tmp_path)
    out = tmp_path / "results"
    code, _, err = cli("--db", db, "report", "--out", out)
    assert code == 0, err
    listed = [ln for ln in (out / MANIFEST).read_text().splitlines() if not ln.startswith("#")]
    assert listed == ["report.md"] and sorted(p.name for p in out.iterdir()) == [MANIFEST, "report.md"]
    # a figure an earlier report wrote and this one does not is removed with it; the rest is replaced
    (out / "old-figure.png").write_bytes(b"png")
    (out / MANIFEST).write_text((out / MANIFEST).read_text() + "old-figure.png\n")
    (out / "report.md").write_text("stale")
    code, _, err = cli("--db", db, "report", "--out", out)
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, "report.md"]
    assert (out / "report.md").read_text().startswith("# Results")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".results")]  # no staging left


def test_a_folder_holding_files_no_report_wrote_is_refused_and_left_as_it_was(cli, tmp_path):
    db = _empty_db(tmp_path)
    out = tmp_path / "results"
    code, _, err = cli("--db", db, "report", "--out", out)
    assert code == 0, err
    # the case of the issue: a tracked page and figures beside an earlier report.md
    (out / "population.md").write_text("keep me")
    (out / "shipped.png").write_bytes(b"keep me too")
    before = _files(out)
    code, stdout, err = cli("--db", db, "report", "--out", out)
    flat = " ".join(err.split())
    assert code == 2 and "population.md, shipped.png" in flat and "Traceback" not in err, err
    assert flat.count(". ") == 0 and stdout == ""  # one sentence
    assert _files(out) == before
    # a folder with a report.md but no manifest (an older report, or someone's own) is not taken either
    (out / MANIFEST).unlink()
    code, _, err = cli("--db", db, "report", "--out", out)
    assert code == 2 and "report.md" in err and (out / "population.md").read_text() == "keep me"


def test_a_folder_the_report_cannot_write_into_is_refused_in_one_sentence(cli, tmp_path):
    db = _empty_db(tmp_path)
    code, _, err = cli("--db", db, "report", "--out", "/proc/sumo-report")
    assert code == 2 and "Traceback" not in err and "cannot create files in /proc" in " ".join(err.split()), err
    code, _, err = cli("--db", db, "report", "--out", tmp_path / "no" / "such" / "folder")
    assert code == 2 and "does not exist" in err


def test_the_shipped_results_folder_lists_every_file_in_it_so_sumo_report_in_a_clone_may_replace_it():
    from sumo_cli.report.manifest import check, written

    shipped = Path(__file__).resolve().parents[1] / "docs" / "results"
    assert sorted(written(shipped) + [MANIFEST]) == sorted(p.name for p in shipped.iterdir())
    check(shipped)  # `sumo report` (its default --out) takes it


def test_the_report_names_the_exact_command_that_regenerates_it(cli, tmp_path):
    db = _empty_db(tmp_path)
    code, _, err = cli("--db", db, "report", "--out", "results")
    assert code == 0, err
    head = (tmp_path / "results" / "report.md").read_text().split("\n\n")[1]
    assert f"regenerate it with `sumo --db {tmp_path / 'gen.sqlite'} report --out results`" in head
    assert "same command" not in head
    code, _, err = cli("--db", db, "report", "--out", "results", "--regenerate-with", "scripts/report_results.sh")
    assert code == 0, err
    assert "regenerate it with `scripts/report_results.sh`" in (tmp_path / "results" / "report.md").read_text()
    code, _, err = cli("--db", db, "report", "--out", "results", "--regenerate-with", " ")
    assert code == 2 and "--regenerate-with is empty" in err


def test_the_shipped_report_names_the_script_that_regenerates_it_and_no_temporary_path():
    repo = Path(__file__).resolve().parents[1]
    head = (repo / "docs" / "results" / "report.md").read_text().split("\n\n")[1]
    assert "regenerate it with `scripts/report_results.sh`" in head and "/tmp" not in head
    script = (repo / "scripts" / "report_results.sh").read_text()
    assert 'report --out "$OUT" --regenerate-with "scripts/report_results.sh' in script
