"""Long commands in a log (stderr not a terminal): plain progress lines at a steady pace, with the
time left known from the first step; the training header says what an iteration really costs."""

from __future__ import annotations

import pytest

from sumo_cli.runtime.progress_lines import ProgressLines

TINY = ["--recipe", "paper", "--envs", "2", "--steps", "20", "--physics", "fast", "--epochs", "1", "--minibatches", "1",
        "--anneal", "2"]


# tiny tensors: the shared one-thread fixture of conftest.py for every test here
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_lines_come_at_a_steady_pace_with_the_time_left_from_the_first_step():
    now = [0.0]
    said: list[str] = []
    lines = ProgressLines("iteration", 10, 2, said.append, enabled=True, every_s=30.0, clock=lambda: now[0])
    assert lines.seconds_left(2) is None
    for k in range(3, 11):
        now[0] += 20.0
        lines.step_took(20.0)
        lines.update(k, "return 5")
    # steps every 20 s, lines at most every 30 s: the first, then every other, and the last
    assert [line.split(" ")[1] for line in said] == ["3/10", "5/10", "7/10", "9/10", "10/10"]
    assert said[0] == "iteration 3/10 (30%), return 5, 20 s so far, 2 min 20 s left"
    quiet: list[str] = []
    off = ProgressLines("games", 4, 0, quiet.append, enabled=False)
    off.update(4)
    assert quiet == []


def test_training_in_a_log_writes_progress_lines_and_the_real_cost_of_an_iteration(cli):
    code, out, err = cli("train", "--body", "ant", "--arch", "mlp", "--strategy", "meta", *TINY, "--iterations", "3")
    assert code == 0, err
    text = " ".join(err.split())
    # a meta-iteration collects its batch once per phase (4 by default): the header says so
    assert "of 160 env steps (2 x 20 x 4 phases)" in text
    assert "iteration 1 took" in text and "the 2 left take about" in text
    assert "iteration 1/3 (33%)" in text and "iteration 3/3 (100%)" in text and "left" in text


def test_tournament_and_evolution_in_a_log_write_progress_lines(shipped_ants, cli):
    game = ("--agents", "ant-mlp,sparring-ant", "--matches", "2", "--rounds", "1", "--episodes", "1", "--physics", "fast",
            "-j", "1")
    code, out, err = cli("tournament", *game)
    assert code == 0, err
    assert "games 1/2 (50%), 1 rated" in " ".join(err.split())
    code, out, err = cli("evolve", *game, "--generations", "1", "--copies", "1")
    assert code == 0, err
    assert "games 2/2 (100%), generation 1/1: 2/2 games" in " ".join(err.split())


def test_a_resumed_run_says_its_expected_duration_in_its_header(cli):
    code, out, err = cli("train", "--body", "ant", "--arch", "mlp", *TINY, "--iterations", "1")
    assert code == 0, err
    code, out, err = cli("train", "--resume", "1", "--iterations", "3")
    assert code == 0, err
    assert "left at the stored iterations' pace" in " ".join(err.split())
