"""Games, tournaments and evolution end to end on the imported zoo agents, at small settings.

The crash test kills a real tournament process with SIGKILL part-way and checks that resuming ends
with exactly the leaderboard of an uninterrupted run with the same seed (and another worker count).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ZOO3 = "zoo-ant-lstm-v3,zoo-bug-lstm-v3,zoo-spider-lstm-v3,zoo-ant-mlp-v3"


@pytest.fixture
def db_copy(zoo_db, tmp_path) -> Path:
    """A private copy of the zoo database (checkpoints stay where they are)."""
    dst = tmp_path / "sumo.sqlite"
    shutil.copy(zoo_db, dst)
    return dst


def sumo(db: Path, *args, check=True, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "SUMO_DB": str(db), "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, "-m", "sumo_cli", *map(str, args)], capture_output=True, text=True, env=env, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"sumo {' '.join(map(str, args))} exited {proc.returncode}: {proc.stderr}")
    return proc


def test_play_json_db_and_matches(db_copy, tmp_path):
    out = sumo(db_copy, "play", "zoo-ant-lstm-v3", "zoo-bug-lstm-v3", "--rounds", 2, "--episodes", 2, "--seed", 3,
               "--json", "--plot", tmp_path / "curve.png").stdout
    doc = json.loads(out)
    assert doc["outcome"] in ("a", "b", "draw") and len(doc["rounds"]) == 2
    for rd in doc["rounds"]:
        assert len(rd["episodes"]) == 2
        for ep in rd["episodes"]:
            assert ep["outcome"] in ("win", "loss", "draw")
            assert ep["reason"] in ("ring_out", "fall", "timeout", "unstable")
            assert 1 <= ep["length"] <= 501
        assert rd["outcome"] == ("a" if rd["wins_a"] > rd["wins_b"] else "b" if rd["wins_b"] > rd["wins_a"] else "draw")
    assert 0 <= doc["win_rate_a"]["ci95"][0] <= doc["win_rate_a"]["rate"] <= doc["win_rate_a"]["ci95"][1] <= 1
    assert (tmp_path / "curve.png").stat().st_size > 1000
    listed = json.loads(sumo(db_copy, "matches", "--json").stdout)
    assert listed[0]["id"] == doc["match_id"]
    shown = json.loads(sumo(db_copy, "matches", "show", doc["match_id"], "--json").stdout)
    assert [r["episodes"] for r in shown["rounds"]] == [r["episodes"] for r in doc["rounds"]]
    # The same seed plays the same game.
    again = json.loads(sumo(db_copy, "play", "zoo-ant-lstm-v3", "zoo-bug-lstm-v3", "--rounds", 2, "--episodes", 2,
                            "--seed", 3, "--json").stdout)
    assert again["rounds"] == doc["rounds"]


def test_bad_input_is_one_sentence_and_exit_2(db_copy):
    cases = [
        (("play", "zoo-ant-lstm-v3", "zoo-ant-lstm-v9"), "close matches"),
        (("play", "zoo-ant-lstm-v3", "zoo-bug-lstm-v3", "--rounds", 0), "--rounds"),
        (("play", "zoo-ant-lstm-v3", "zoo-bug-lstm-v3", "--opponent-learning", "--rounds", 5), "several stored versions"),
        (("tournament", "--matches", 5), "cannot fill the population"),
        (("tournament", "--agents", ZOO3, "--matches", -1), "--matches"),
        (("tournament", "--resume", 999), "no tournament run"),
        (("evolve", "--agents", ZOO3, "--generations", 0), "--generations"),
        (("evolve", "--resume", 999), "no evolution run"),
    ]
    before = json.loads(sumo(db_copy, "runs", "--json").stdout)
    for args, needle in cases:
        proc = sumo(db_copy, *args, check=False)
        assert proc.returncode == 2, (args, proc.stderr)
        assert needle in proc.stderr and "Traceback" not in proc.stderr, (args, proc.stderr)
    assert json.loads(sumo(db_copy, "runs", "--json").stdout) == before  # nothing written


def _kill_after_games(db: Path, args: tuple, games: int) -> int:
    """Start `sumo *args -j 2` on ``db``, SIGKILL it once ``games`` games are stored; return how many were."""
    from sqlalchemy import create_engine, text

    env = {**os.environ, "SUMO_DB": str(db)}
    proc = subprocess.Popen([sys.executable, "-m", "sumo_cli", *map(str, args), "-j", "2"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    engine = create_engine(f"sqlite:///{db}")
    deadline = time.time() + 240
    n = 0
    while time.time() < deadline and proc.poll() is None:
        with engine.connect() as conn:
            try:
                n = conn.execute(text("SELECT count(*) FROM matches WHERE run_id IS NOT NULL")).scalar()
            except Exception:  # the tables may not exist yet
                n = 0
        if n >= games:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    engine.dispose()
    return n


def _leaderboard(db: Path, run_id: int | None = None) -> list[tuple]:
    from sqlalchemy import create_engine, text

    engine = create_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT r.after_index, r.version_id, r.mu, r.sigma FROM ratings r ORDER BY r.after_index, r.version_id")).all()
        matches = conn.execute(text("SELECT run_index, outcome FROM matches WHERE run_id IS NOT NULL ORDER BY run_index")).all()
    engine.dispose()
    return [tuple(r) for r in rows], [tuple(m) for m in matches]


def test_tournament_survives_kill_9_and_resumes_identically(db_copy, tmp_path):
    reference = tmp_path / "reference.sqlite"
    shutil.copy(db_copy, reference)
    args = ("tournament", "--agents", ZOO3, "--matches", 10, "--rounds", 1, "--episodes", 1, "--seed", 11)
    ref = json.loads(sumo(reference, *args, "-j", 1, "--json").stdout)

    n = _kill_after_games(db_copy, args, 3)
    assert 3 <= n < 10, f"the run should have been killed part-way ({n} games stored)"
    runs = json.loads(sumo(db_copy, "runs", "--json").stdout)
    # a killed run never got to say more; `sumo runs` sees that its process is gone
    assert runs[0]["status"] == "interrupted" and runs[0]["done"] < 10
    resumed = json.loads(sumo(db_copy, "tournament", "--resume", runs[0]["id"], "-j", 2, "--json").stdout)
    assert [(r["agent"], r["mu"], r["sigma"], r["wins"], r["draws"], r["losses"]) for r in resumed["leaderboard"]] == \
           [(r["agent"], r["mu"], r["sigma"], r["wins"], r["draws"], r["losses"]) for r in ref["leaderboard"]]
    assert _leaderboard(db_copy) == _leaderboard(reference)
    again = sumo(db_copy, "tournament", "--resume", runs[0]["id"], check=False)
    assert again.returncode == 2 and "already finished" in again.stderr


def test_evolution_keeps_size_records_lineage_and_resumes(db_copy, tmp_path):
    from sqlalchemy import create_engine, text

    reference = tmp_path / "reference.sqlite"
    shutil.copy(db_copy, reference)
    args = ("evolve", "--agents", ZOO3, "--copies", 2, "--generations", 2, "--matches", 4, "--rounds", 1,
            "--episodes", 1, "--seed", 5, "--json")
    ref = json.loads(sumo(reference, *args, "-j", 1).stdout)
    assert len(ref["generations"]) == 3
    for gen in ref["generations"]:
        assert sum(gen["body"].values()) == pytest.approx(1.0)
    engine = create_engine(f"sqlite:///{reference}")
    with engine.connect() as conn:
        sizes = conn.execute(text("SELECT generation, count(*) FROM members GROUP BY generation")).all()
        lineage = conn.execute(text(
            "SELECT m.slot, m.parent_slot, m.cloned_by_match, m.version_id FROM members m WHERE m.generation = 1")).all()
        start = dict(conn.execute(text("SELECT slot, version_id FROM members WHERE generation = 0")).all())
    engine.dispose()
    assert [s for _, s in sizes] == [8, 8, 8]
    for slot, parent, by_match, version_id in lineage:
        # A cloned slot holds its parent's agent as it was at the generation's start.
        assert version_id == start[parent]
        assert (by_match is None) == (parent == slot)

    # Interrupt after the first generation's games by killing the process, then resume.
    _kill_after_games(db_copy, args, 5)
    run_id = json.loads(sumo(db_copy, "runs", "--json").stdout)[0]["id"]
    resumed = json.loads(sumo(db_copy, "evolve", "--resume", run_id, "--json").stdout)
    assert resumed["generations"] == ref["generations"]


def test_tournament_and_evolution_are_the_same_whatever_the_concurrency(db_copy):
    """Runs with the same seed played one game at a time and several games per engine store the
    same games (every round) and ratings; an evolution the same generations."""
    from sqlalchemy import text

    from sumo_cli.compete import evolution as EV
    from sumo_cli.compete import population as pop
    from sumo_cli.compete import tournament as T
    from sumo_cli.runtime.executor import InlineExecutor
    from sumo_cli.store.database import open_database

    db = open_database(str(db_copy))
    members = pop.explicit_population(db, ZOO3.split(","))

    def stored(run_id: int) -> tuple:
        with db.read() as s:
            rounds = s.execute(text(
                "SELECT m.run_index, m.outcome, r.\"index\", r.outcome, r.wins_a, r.wins_b, r.draws FROM matches m "
                "JOIN rounds r ON r.match_id = m.id WHERE m.run_id = :r ORDER BY m.run_index, r.\"index\""), {"r": run_id}).all()
            ratings = s.execute(text("SELECT after_index, version_id, mu, sigma FROM ratings WHERE run_id = :r "
                                     "ORDER BY after_index, version_id"), {"r": run_id}).all()
        return [tuple(x) for x in rounds], [tuple(x) for x in ratings]

    config = T.tournament_config(members, 6, 3, 2, "fast", None)
    runs = []
    for concurrency in (1, 6):
        run_id = T.create_tournament(db, members, config, seed=3)
        T.TournamentRunner(db, run_id).run(InlineExecutor(), concurrency=concurrency)
        runs.append(stored(run_id))
    assert runs[0] == runs[1] and len(runs[0][0]) == 6 * 3

    evo = EV.evolution_config(members, copies=2, generations=2, matches=4, rounds=2, episodes=1, physics="fast")
    histories = []
    for concurrency in (1, 4):
        run_id = EV.EvolutionRunner.create(db, evo, seed=5)
        histories.append((EV.EvolutionRunner(db, run_id).run(InlineExecutor(), concurrency=concurrency),
                          stored(run_id)[0]))
    assert histories[0] == histories[1]
    db.dispose()
