"""The scaling benchmark at tiny settings: its report, and the same games on every worker count."""

import pytest

from sumo_cli.bench.game_bench import random_agent
from sumo_cli.bench.scale_bench import measure


@pytest.mark.slow
def test_scale_bench_reports_ratios_and_same_games():
    agents = [random_agent("ant", "none", 1), random_agent("bug", "track", 2), random_agent("ant", "meta", 3)]
    out = measure(agents, games=4, rounds=2, episodes=1, physics="fast", workers=(1, 2), concurrency=2)
    runs = out["runs"]
    assert list(runs) == ["1 local", "2 local"]
    assert all(r["same_games_as_first"] for r in runs.values())
    assert runs["1 local"]["throughput_over_first"] == 1.0
    assert runs["2 local"]["games_per_hour"] > 0
