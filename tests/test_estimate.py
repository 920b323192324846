"""The expected duration of a tournament or an evolution: the engine's game-rounds reach the driver
while a job still runs (from a pool worker too), the estimate is the rounds left at the measured
rate, and a run prints it before its first game ends."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from sumo_cli.runtime import progress
from sumo_cli.runtime.executor import InlineExecutor, ProcessExecutor

REPO_POLICIES = Path(__file__).resolve().parents[1] / "policies"


def _report_then_wait(gate: str) -> str:
    """A job that reports work, then finishes only once the driver has seen the report."""
    progress.report(7, 0.5)
    deadline = time.time() + 60
    while not os.path.exists(gate):
        if time.time() > deadline:
            return "the report never reached the driver while the job ran"
        time.sleep(0.02)
    return "done"


@pytest.mark.parametrize("make", [InlineExecutor, lambda: ProcessExecutor(2)], ids=["inline", "pool"])
def test_work_reported_by_a_running_job_reaches_the_driver(make, tmp_path):
    gate = tmp_path / "seen"
    seen = []

    def on_progress(units: float, seconds: float) -> None:
        seen.append((units, seconds))
        gate.touch()

    if make is InlineExecutor:  # the job runs in the driver: its report is seen at once
        def job(g: str) -> str:
            progress.report(7, 0.5)
            return "done" if seen else "not seen"
    else:
        job = _report_then_wait
    executor = make()
    try:
        results = dict(executor.run(job, [(0, (str(gate),)), (1, (str(gate),))], on_progress))
    finally:
        executor.close()
    assert results == {0: "done", 1: "done"}
    assert sum(u for u, _ in seen) == 14 and sum(s for _, s in seen) == pytest.approx(1.0)
    progress.report(3, 1.0)  # outside a run: goes nowhere
    assert sum(u for u, _ in seen) == 14


def test_throughput_is_per_worker():
    t = progress.Throughput()
    t.add(10, 5.0)
    t.add(30, 15.0)  # 0.5 s per unit on one worker
    assert t.seconds_for(100, workers=1) == pytest.approx(50.0)
    assert t.seconds_for(100, workers=2) == pytest.approx(25.0)


def test_estimate_lines_and_their_timing(monkeypatch):
    from sumo_cli.runtime import estimate as E

    clock = [100.0]
    monkeypatch.setattr(E.time, "monotonic", lambda: clock[0])
    lines: list[str] = []
    est = E.RunEstimate(rounds_to_play=1000, workers=2, say=lines.append)
    assert est.left_text() == "-"
    clock[0] = 102.0
    est.on_progress(10, 5.0)  # 0.5 s per game-round per worker: 990 left on 2 workers = 247.5 s
    assert est.left_text() == "4 min 08 s"
    assert lines == ["expected duration: 4 min 10 s, 4 min 08 s left (0.50 s per game-round on each of 2 worker(s), "
                     "from the 10 of 1,000 game-rounds played so far)"]
    clock[0] = 130.0
    est.on_progress(10, 5.0)  # neither a tenth of the run nor 10 minutes later
    assert len(lines) == 1
    clock[0] = 702.0
    est.on_progress(10, 5.0)  # 10 minutes after the first line
    assert lines[-1].startswith("estimate: 4 min 02 s left (0.50 s per game-round")  # 970 x 0.5 / 2
    clock[0] = 710.0
    est.on_progress(200, 100.0)  # a tenth of the run, but within a minute of the last line
    assert len(lines) == 2
    clock[0] = 770.0
    est.on_progress(10, 5.0)
    assert len(lines) == 3 and "from the 240 of 1,000 game-rounds" in lines[-1]
    assert [E.duration(s) for s in (0, 59.4, 61, 3600, 7530)] == ["0 s", "59 s", "1 min 01 s", "1 h 00 min", "2 h 05 min"]


@pytest.fixture
def shipped_agents(monkeypatch):  # noqa: ANN001
    if not (REPO_POLICIES / "manifest.json").exists():
        pytest.skip(reason="policies/ ships no agent")
    monkeypatch.setenv("SUMO_POLICIES", str(REPO_POLICIES))


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_tournament_says_its_expected_duration_before_the_first_game_ends(shipped_agents, cli):
    code, _, err = cli("tournament", "--agents", "ant-mlp,bug-mlp", "--matches", 2, "--rounds", 3, "--episodes", 1,
                       "--leaderboard-every", 1, "-j", 1)
    err = _flat(err)
    assert code == 0, err
    assert "expected duration: " in err and "after 1 rated games" in err, err
    assert err.index("expected duration: ") < err.index("after 1 rated games")
    assert "from the 1 of 6 game-rounds played so far" in err  # one round of the first game


def test_evolution_says_its_expected_duration_before_the_first_game_ends(shipped_agents, cli):
    code, _, err = cli("evolve", "--agents", "ant-mlp,bug-mlp", "--copies", 1, "--generations", 2, "--matches", 1,
                       "--rounds", 3, "--episodes", 1, "-j", 1)
    err = _flat(err)
    assert code == 0, err
    # the first generation is one game: its end is the first "generation 1:" line
    assert "expected duration: " in err and "generation 1: " in err, err
    assert err.index("expected duration: ") < err.index("generation 1: ")
    assert "from the 1 of 6 game-rounds played so far" in err
