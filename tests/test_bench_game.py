"""`sumo bench game` at tiny settings: the report's structure and its arithmetic (no timing thresholds)."""

import json

import pytest


@pytest.mark.slow
def test_bench_game_reports_breakdown_and_projection(cli):
    code, out, err = cli("bench", "game", "--rounds", "2", "--episodes", "1", "--strategies", "none,track,meta",
                         "--concurrent", "3", "--reference-games", "1", "--physics", "fast", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert set(doc["strategies"]) == {"none", "track", "meta"} and doc["concurrent_games"] == 3
    for name, row in doc["strategies"].items():
        for part, games in (("engine", 3), ("reference", 1)):
            x = row[part]
            assert x["games"] == games and x["env_steps"] > 0 and x["physics_s"] > 0
            assert x["physics_s"] + x["policy_s"] + x["adapt_s"] + x["bookkeeping_s"] == pytest.approx(x["wall_s"])
            assert x["overhead_over_physics"] == pytest.approx(
                x["policy_over_physics"] + x["bookkeeping_over_physics"] + x["adapt_over_physics"])
        assert row["paper_game_seconds_projected"] == pytest.approx(100 * row["engine"]["seconds_per_game_round"])
    assert doc["strategies"]["none"]["engine"]["adapt"] < doc["strategies"]["track"]["engine"]["adapt"]
    hours = doc["projection"]["tournament_hours_per_workers"]
    counts = sorted(hours, key=int)
    assert all(hours[a] > hours[b] for a, b in zip(counts, counts[1:]))  # more workers, less time
    assert doc["projection"]["evolution_hours_per_workers"]["1"] == pytest.approx(10 * hours["1"])


def test_bench_game_rejects_unknown_strategy(cli):
    code, _, err = cli("bench", "game", "--strategies", "none,greedy")
    assert code == 2 and "--strategies" in err


def test_bench_game_measures_the_shipped_agents_by_default(cli, monkeypatch):
    """Where the database has the shipped LSTMs, the default pair is theirs; RL^2, which none of them
    is, gets a fresh RL^2 agent of A's body in A's place."""
    from pathlib import Path

    monkeypatch.setenv("SUMO_POLICIES", str(Path(__file__).resolve().parents[1] / "policies"))
    code, out, err = cli("bench", "game", "--rounds", "1", "--episodes", "1", "--strategies", "none,rl2",
                         "--concurrent", "2", "--reference-games", "0", "--physics", "fast", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["agents"] == "ant-lstm,bug-lstm" and doc["bodies"] == ["ant", "bug"]
    assert set(doc["strategies"]) == {"none", "rl2"}
