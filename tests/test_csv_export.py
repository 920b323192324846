"""--csv FILE beside --json: games with every round and bout, runs, leaderboards, learning curves;
and one rule for every output path (its folder must exist, as for --db)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from sumo_cli.report.csv_export import flatten, write_csv

GAME = ("--rounds", "2", "--episodes", "2", "--physics", "fast")
TINY = ["--recipe", "paper", "--envs", "2", "--steps", "20", "--physics", "fast", "--epochs", "1", "--minibatches", "1",
        "--anneal", "2"]


# tiny tensors: the shared one-thread fixture of conftest.py for every test here
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _read(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_nested_fields_become_dotted_columns(tmp_path):
    assert flatten({"a": 1, "m": {"x": 2, "y": {"z": 3}}, "l": [1, 2]}) == {"a": 1, "m.x": 2, "m.y.z": 3, "l": "[1, 2]"}
    rows = _read(write_csv(tmp_path / "x.csv", [{"a": 1}, {"a": 2, "b": "c"}]))
    assert rows == [{"a": "1", "b": ""}, {"a": "2", "b": "c"}]


def test_games_runs_leaderboards_and_curves_export_as_csv(shipped_ants, cli, tmp_path):
    assert cli("play", "ant-mlp", "sparring-ant", *GAME)[0] == 0
    code, out, err = cli("matches", "--csv", "games.csv")
    assert code == 0, err
    bouts = _read(tmp_path / "games.csv")
    assert len(bouts) == 4 and {b["round"] for b in bouts} == {"1", "2"} and bouts[0]["a"] == "ant-mlp@7"
    assert {"bout_outcome", "reason", "length", "round_outcome", "game_outcome"} <= set(bouts[0])
    code, out, err = cli("matches", "show", "1", "--csv", "one.csv")
    assert code == 0 and _read(tmp_path / "one.csv") == bouts

    code, out, err = cli("tournament", "--agents", "ant-mlp,sparring-ant:track", "--matches", "2", *GAME, "-j", "1",
                         "--csv", "board.csv")
    assert code == 0, err
    board = _read(tmp_path / "board.csv")
    assert sorted(r["agent"] for r in board) == ["ant-mlp@7", "sparring-ant@7:track"] and "mu" in board[0]
    code, out, err = cli("runs", "show", "1", "--csv", "board2.csv")
    assert code == 0, err
    assert [r["agent"] for r in _read(tmp_path / "board2.csv")] == [r["agent"] for r in board]

    code, out, err = cli("train", "--body", "ant", "--arch", "mlp", *TINY, "--iterations", "2", "--name", "curve")
    assert code == 0, err
    code, out, err = cli("runs", "show", "2", "--csv", "curve.csv")
    assert code == 0, err
    curve = _read(tmp_path / "curve.csv")
    assert [r["iteration"] for r in curve] == ["1", "2"] and "win_rate" in curve[0] and "env_steps" in curve[0]
    code, out, err = cli("runs", "--csv", "runs.csv")
    assert code == 0 and [r["id"] for r in _read(tmp_path / "runs.csv")] == ["2", "1"]


@pytest.mark.parametrize("args", [
    ("matches", "--csv", "no/such/games.csv"),
    ("runs", "--csv", "runs.txt"),
    ("play", "ant-mlp", "sparring-ant", "--plot", "no/such/x.png"),
    ("tournament", "--agents", "ant-mlp,sparring-ant", "--heatmap", "no/such/h.png"),
    ("evolve", "--agents", "ant-mlp,sparring-ant", "--csv", "no/such/s.csv"),
])
def test_every_output_path_needs_its_folder_and_its_suffix(shipped_ants, cli, tmp_path, args):
    code, out, err = cli(*args)
    assert code == 2 and ("does not exist" in err or "ending in" in err), err
    assert not (tmp_path / "no").exists()
    code, out, err = cli("runs", "--json")
    assert code == 0 and out.strip() == "[]"  # nothing was written: checked before the run
