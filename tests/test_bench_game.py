"""`sumo bench game` at tiny settings: the report's structure and its arithmetic (no timing thresholds)."""

import json

import pytest


@pytest.mark.slow
def test_bench_game_reports_breakdown_and_projection(cli):
    code, out, err = cli("bench", "game", "--rounds", "2", "--episodes", "1", "--strategies", "none,track,meta", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert set(doc["strategies"]) == {"none", "track", "meta"}
    for name, row in doc["strategies"].items():
        parts = row["physics_s"] + row["policy_s"] + row["adapt_s"] + row["bookkeeping_s"]
        assert parts <= row["wall_seconds"] * 1.01 + 1e-3
        assert row["env_steps"] > 0 and row["physics_s"] > 0
        assert row["games_per_hour_short"] == pytest.approx(3600 / row["wall_seconds"])
    assert doc["strategies"]["none"]["adapt_seconds_per_round"] < doc["strategies"]["track"]["adapt_seconds_per_round"]
    hours = doc["projection"]["tournament_hours_per_core_count"]
    counts = sorted(hours, key=int)
    assert all(hours[a] > hours[b] for a, b in zip(counts, counts[1:]))  # more cores, less time


def test_bench_game_rejects_unknown_strategy(cli):
    code, _, err = cli("bench", "game", "--strategies", "none,greedy")
    assert code == 2 and "--strategies" in err
