"""A Ctrl-C after a run is written but before its loop starts (loading agents, starting workers,
building the learner and its start files) still marks the run and prints the command that resumes
it, and that command finishes the run."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_POLICIES = Path(__file__).resolve().parents[1] / "policies"
TINY = ["--recipe", "paper", "--envs", "2", "--steps", "40", "--physics", "fast", "--epochs", "2", "--minibatches", "2",
        "--anneal", "2"]


def _ctrl_c(*args, **kwargs):  # noqa: ANN002, ANN003
    raise KeyboardInterrupt


def _hint(err: str) -> list[str]:
    flat = " ".join(err.split())
    assert "Resume with: sumo --db " in flat, err
    return flat.split("Resume with: sumo --db ", 1)[1].split()[1:]  # the words after the database path


def _status(tmp_path: Path, run_id: int) -> str:
    from sumo_cli.store.database import Database
    from sumo_cli.store.models import Run

    db = Database(f"sqlite:///{tmp_path / 'db' / 'sumo.sqlite'}")
    with db.read() as s:
        status = s.get(Run, run_id).status
    db.dispose()
    return status


def test_ctrl_c_while_a_training_run_sets_up(cli, tmp_path, monkeypatch):
    from sumo_cli.runs import training

    real = training._write_start
    monkeypatch.setattr(training, "_write_start", _ctrl_c)  # the start files: after the learner, before iteration 1
    code, out, err = cli("train", "--body", "ant", "--arch", "mlp", "--iterations", "1", *TINY)
    assert code == 130 and out == "", err
    assert "0 of 1 iterations saved" in err and "Traceback" not in err, err
    assert _hint(err) == ["train", "--resume", "1"]
    assert _status(tmp_path, 1) == "interrupted"
    monkeypatch.setattr(training, "_write_start", real)
    code, _, err = cli("train", "--resume", "1")
    assert code == 0, err
    assert _status(tmp_path, 1) == "finished"


@pytest.mark.parametrize("command", ["tournament", "evolve"])
def test_ctrl_c_while_a_run_loads_its_agents(command, cli, tmp_path, monkeypatch):
    if not (REPO_POLICIES / "manifest.json").exists():
        pytest.skip(reason="policies/ ships no agent")
    monkeypatch.setenv("SUMO_POLICIES", str(REPO_POLICIES))
    from sumo_cli.compete import tournament as T

    from sumo_cli.compete import evolution as EV

    real = T.open_run
    monkeypatch.setattr(T, "open_run", _ctrl_c)  # the runner loads (and verifies) every member's agent
    monkeypatch.setattr(EV, "open_run", _ctrl_c)
    games = ["--matches", 2] if command == "tournament" else ["--copies", 1, "--generations", 1, "--matches", 1]
    args = [command, "--agents", "ant-mlp,bug-mlp", *games, "--rounds", 1, "--episodes", 1, "-j", 1]
    code, _, err = cli(*args)
    assert code == 130 and "Traceback" not in err, err
    assert _hint(err) == [command, "--resume", "1"]
    monkeypatch.setattr(T, "open_run", real)
    monkeypatch.setattr(EV, "open_run", real)
    code, _, err = cli(command, "--resume", 1, "-j", 1)
    assert code == 0, err
    assert _status(tmp_path, 1) == "finished"
