"""Ctrl-C and kills of tournaments and evolutions, as real processes on the imported zoo agents:
Ctrl-C exits 130 at once however long the games (every finished game kept, a second Ctrl-C
harmless, no traceback), the printed resume command runs as printed, and the workers of a driver
killed with SIGKILL end by themselves."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import processes

pytestmark = pytest.mark.slow

ZOO3 = "zoo-ant-lstm-v3,zoo-bug-lstm-v3,zoo-spider-lstm-v3,zoo-ant-mlp-v3"
# Games of 100 rounds x 3 episodes take minutes each on any machine: were Ctrl-C to wait for the
# games in flight, the bounded waits below would fail.
LONG = {
    "tournament": ("tournament", "--agents", ZOO3, "--matches", 4, "--rounds", 100, "--episodes", 3),
    "evolve": ("evolve", "--agents", ZOO3, "--copies", 1, "--generations", 2, "--matches", 4, "--rounds", 100,
               "--episodes", 3),
}
SHORT = {
    "tournament": ("tournament", "--agents", ZOO3, "--matches", 30, "--rounds", 1, "--episodes", 1, "--seed", 2),
    "evolve": ("evolve", "--agents", ZOO3, "--copies", 2, "--generations", 4, "--matches", 6, "--rounds", 1,
               "--episodes", 1, "--seed", 2),
}


@pytest.fixture
def db_copy(zoo_db, tmp_path) -> Path:
    """A private copy of the zoo database in a folder whose name needs quoting in a shell."""
    dst = tmp_path / "my runs" / "sumo.sqlite"
    dst.parent.mkdir()
    shutil.copy(zoo_db, dst)
    return dst


def _ctrl_c_as_on_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(db: Path, cwd: Path, *args) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "80"}
    env.pop("SUMO_DB", None)
    return subprocess.Popen([sys.executable, "-m", "sumo_cli", "--db", str(db), *map(str, args), "-j", "2"], cwd=cwd,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_ctrl_c_as_on_a_terminal)


def _stored_games(db: Path) -> int:
    from sqlalchemy import create_engine, text

    engine = create_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as conn:
            return conn.execute(text("SELECT count(*) FROM matches WHERE run_id IS NOT NULL")).scalar()
    except Exception:  # noqa: BLE001 - not created yet
        return 0
    finally:
        engine.dispose()


def _wait_for_workers(proc: subprocess.Popen, n: int = 2, timeout: float = 300) -> list[int]:
    """The driver's descendants once ``n`` pool workers have started and had time to take games."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, proc.communicate()
        workers = [p for p in processes.descendants(proc.pid) if "spawn_main" in processes.cmdline(p)]
        if len(workers) >= n:
            time.sleep(3)  # the workers import, load the agents and start their games
            return processes.descendants(proc.pid)
        time.sleep(0.1)
    raise AssertionError("the workers never started")


@pytest.mark.parametrize("command", ["tournament", "evolve"])
@pytest.mark.parametrize("to_group", [True, False], ids=["ctrl-c-twice-to-the-group", "sigint-to-the-driver"])
def test_ctrl_c_during_long_games_exits_130_at_once(db_copy, tmp_path, command, to_group):
    proc = _start(db_copy, tmp_path, *LONG[command])
    family = _wait_for_workers(proc)
    if to_group:  # a terminal's Ctrl-C reaches driver and workers; a second one follows impatiently
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.3)
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "Resume with: sumo --db" in err, err
    assert processes.wait_gone(family, timeout=10) == []


@pytest.mark.parametrize("command", ["tournament", "evolve"])
def test_printed_resume_command_runs_as_printed(db_copy, tmp_path, command):
    proc = _start(db_copy, tmp_path, *SHORT[command])
    deadline = time.time() + 300
    while _stored_games(db_copy) < 3 and time.time() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    hint = " ".join(err.split()).split("Resume with: ", 1)[1].strip()
    stored = _stored_games(db_copy)
    assert stored >= 3

    # pasted into a fresh shell somewhere else, with the virtual environment's sumo on the PATH
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "SUMO_DB"}
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    assert shlex.split(hint)[0] == "sumo"
    done = subprocess.run(["bash", "-c", hint + " --json"], cwd=elsewhere, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, (hint, done.stderr)
    assert not (elsewhere / "db").exists()  # no stray database
    assert _stored_games(db_copy) > stored


def test_workers_end_when_their_driver_is_killed(db_copy, tmp_path):
    proc = _start(db_copy, tmp_path, *LONG["tournament"])
    family = _wait_for_workers(proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    left = processes.wait_gone(family, timeout=15)
    assert left == [], [processes.cmdline(p) for p in left]
