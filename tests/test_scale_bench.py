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


def test_synthetic_population_is_the_papers_grid():
    from sumo_cli.bench.scale_bench import synthetic_population
    from sumo_cli.names import BODIES, COMBINATIONS

    pop = synthetic_population(105)
    kinds = {(a.body, a.spec["arch"], a.strategy) for a in pop}
    expected = {(b, "rl2" if s == "rl2" else a, s) for b in BODIES for a, s in COMBINATIONS}
    assert kinds == expected
    assert len({a.display for a in pop}) == 105  # 21 kinds x 5 stages, each its own version


@pytest.mark.slow
def test_bout_lengths_reports_each_pair():
    from sumo_cli.bench.scale_bench import bout_lengths

    a, b = random_agent("ant", "none", 1), random_agent("bug", "none", 2)
    out = bout_lengths({"x": (a, b), "y": (b, a)}, games=2, rounds=1, episodes=1, physics="fast")
    x, y = out["pairs"]["x"], out["pairs"]["y"]
    assert x["games_per_hour_over_first"] == 1.0 and y["games_per_hour"] > 0
    assert 1 <= x["mean_bout_steps"] <= 500 and 0 <= x["bouts_at_the_limit"] <= 1
