"""One writer per run: a second `sumo train --resume` of a run that a live process still trains is
refused with nothing written; a run whose process died (or that another machine last wrote long
ago) can be taken over; a process whose run was taken over stops at its next write, writing nothing."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from sumo_cli.store import ownership

TINY = ["--recipe", "paper", "--envs", "2", "--steps", "20", "--physics", "fast", "--epochs", "1", "--minibatches", "1"]


@pytest.fixture
def sleeper():
    """A live process whose command line names sumo (as a training process's does)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "sumo"])
    cmdline = Path(f"/proc/{proc.pid}/cmdline")
    deadline = time.time() + 30
    while b"sumo" not in cmdline.read_bytes() and time.time() < deadline:  # until it has exec'd
        time.sleep(0.01)
    yield proc
    proc.kill()
    proc.wait()


def _db(tmp_path: Path):
    from sumo_cli.store.database import open_database

    return open_database(str(tmp_path / "db" / "sumo.sqlite"))


def _run(tmp_path: Path):
    from sumo_cli.store.models import Iteration, Run

    d = _db(tmp_path)
    with d.read() as s:
        run = s.get(Run, 1)
        out = (run.status, run.owner, run.progress_done, s.query(Iteration).count())
    d.dispose()
    return out


def _set_owner(tmp_path: Path, owner: str, status: str = "running", age: timedelta = timedelta(0)) -> None:
    from sumo_cli.store.models import Run

    d = _db(tmp_path)
    with d.write() as s:
        run = s.get(Run, 1)
        run.owner, run.status, run.updated_at = owner, status, datetime.now(timezone.utc) - age
    d.dispose()


def test_who_counts_as_alive(sleeper):
    host = socket.gethostname()
    assert ownership.is_alive(f"{host}:{sleeper.pid}:abc", None)
    assert not ownership.is_alive(ownership.new_owner(), None)  # this very process may take back its own runs
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()  # its pid is free now (pids are handed out in turn: not reused within this test)
    assert not ownership.is_alive(f"{host}:{ended.pid}:x", None)
    other = "another-machine.example:4242:abc"
    assert ownership.is_alive(other, datetime.now(timezone.utc) - timedelta(minutes=1))
    assert not ownership.is_alive(other, datetime.now(timezone.utc) - ownership.OTHER_HOST_STALE - timedelta(seconds=1))
    assert not ownership.is_alive("not an owner", None)


def test_a_second_resume_of_a_running_run_is_refused_and_a_dead_ones_run_resumes(cli, tmp_path, sleeper):
    code, _, err = cli("train", "--body", "ant", "--arch", "mlp", "--iterations", "2", *TINY)
    assert code == 0, err
    # as if a process were still training it: status running, held by a live sumo process
    held = f"{socket.gethostname()}:{sleeper.pid}:t0"
    _set_owner(tmp_path, held)
    # a finished run is refused for that reason first; make it resumable: one iteration more to do
    from sumo_cli.store.models import Run

    d = _db(tmp_path)
    with d.write() as s:
        run = s.get(Run, 1)
        cfg = dict(run.config)
        cfg["train"] = {**cfg["train"], "iterations": 3}
        run.config, run.progress_total = cfg, 3
    d.dispose()
    before = _run(tmp_path)
    code, out, err = cli("train", "--resume", "1")
    assert code == 2
    assert f"run 1 is being run by process {sleeper.pid} on {socket.gethostname()}" in err
    assert f"kill {sleeper.pid}" in err and "Traceback" not in err
    assert _run(tmp_path) == before  # nothing written, the holder kept
    # the holder gone, the run resumes, finishes and is released
    sleeper.kill()
    sleeper.wait()
    code, out, err = cli("train", "--resume", "1", "--json")
    assert code == 0, err
    assert json.loads(out)["latest_version"] == 3
    assert _run(tmp_path) == ("finished", None, 3, 3)


def test_a_process_whose_run_was_taken_over_stops_without_writing(tmp_path):
    from sumo_cli.runs import training as TR
    from sumo_cli.selfplay.selfplay import TrainConfig
    from sumo_cli.selfplay.recipes import recipe_values
    from sumo_cli.runtime.executor import make_executor
    from sumo_cli.store.runs import RunTakenOver

    kw = recipe_values("paper", "ant")
    kw.update(body="ant", arch="mlp", iterations=4, n_envs=2, num_steps=20, physics="fast", epochs=1, num_minibatches=1)
    cfg = TrainConfig(**kw)
    d = _db(tmp_path)
    name, pool = TR.check_new_run(d, cfg, None)
    run_id = TR.create_run(d, cfg, name, pool)

    def take_over(p) -> None:  # noqa: ANN001 - after iteration 2 is stored, a second process claims the run
        if p.k == 2:
            _set_owner(tmp_path, "another-machine.example:1:t1")

    executor = make_executor(1)
    try:
        with pytest.raises(RunTakenOver, match="taken over by another process"):
            TR.run_training(d, run_id, executor, take_over)
    finally:
        executor.close()
        d.dispose()
    # iteration 3 was computed but not written; the run is the new holder's, its status untouched
    assert _run(tmp_path) == ("running", "another-machine.example:1:t1", 2, 2)


@pytest.mark.parametrize("kind", ["tournament", "evolve"])
def test_a_tournament_or_evolution_still_running_elsewhere_is_not_resumed(cli, tmp_path, zoo_dir, sleeper, kind):
    code, _, err = cli("zoo", "import", zoo_dir)
    assert code == 0, err
    games = ["--agents", "zoo-ant-mlp-v3,zoo-bug-mlp-v3,zoo-spider-mlp-v3", "--rounds", "1", "--episodes", "1",
             "--physics", "fast", "-j", "1", "--seed", "4"]
    extra = ["--matches", "3"] if kind == "tournament" else ["--copies", "2", "--generations", "1", "--matches", "2"]
    code, _, err = cli(kind, *games, *extra)
    assert code == 0, err
    _set_owner(tmp_path, f"{socket.gethostname()}:{sleeper.pid}:t0")  # as if it had never finished
    before = _run(tmp_path)
    code, _, err = cli(kind, "--resume", "1")
    assert code == 2 and f"run 1 is being run by process {sleeper.pid}" in err, err
    assert _run(tmp_path) == before


def test_runs_marks_a_run_whose_process_is_gone_as_interrupted_with_its_resume_command(cli, tmp_path, sleeper):
    code, _, err = cli("train", "--body", "ant", "--arch", "mlp", "--iterations", "1", *TINY)
    assert code == 0, err
    resume = f"sumo --db {tmp_path / 'db' / 'sumo.sqlite'} train --resume 1"

    def listed() -> dict:
        code, out, err = cli("runs", "--json")
        assert code == 0, err
        return json.loads(out)[0]

    _set_owner(tmp_path, f"{socket.gethostname()}:{sleeper.pid}:t0")  # as if killed -9 while a process trains it
    assert (listed()["status"], listed()["resume"]) == ("running", None)
    sleeper.kill()
    sleeper.wait()
    assert (listed()["status"], listed()["resume"]) == ("interrupted", resume)
    code, out, err = cli("runs")
    assert f"resume run 1 with: {resume}" in " ".join(err.split())
    code, out, err = cli("runs", "show", "1")
    assert "interrupted" in err and f"resume with: {resume}" in " ".join(err.split())
    # a run written but not yet claimed (its process loads its agents first) is running until it goes stale
    _set_owner(tmp_path, None)
    assert listed()["status"] == "running"
    _set_owner(tmp_path, None, age=ownership.OTHER_HOST_STALE + timedelta(seconds=5))
    assert listed()["status"] == "interrupted"
    _set_owner(tmp_path, None, status="finished")
    assert (listed()["status"], listed()["resume"]) == ("finished", None)
