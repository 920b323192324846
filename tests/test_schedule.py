from sumo_cli.compete.schedule import ScheduledGame, apply_generation, game_seed, random_pairs


def test_schedule_is_a_function_of_the_seed():
    a = random_pairs(105, 1000, seed=7)
    assert a == random_pairs(105, 1000, seed=7)
    assert a != random_pairs(105, 1000, seed=8)
    assert all(g.a != g.b for g in a) and len({g.seed for g in a}) > 990
    assert random_pairs(1050, 10, 7, 3) != random_pairs(1050, 10, 7, 4)  # generations differ
    assert game_seed(1, 2) == game_seed(1, 2) != game_seed(1, 3)


def test_pairs_cover_the_population_uniformly():
    games = random_pairs(10, 20000, seed=0)
    counts = [0] * 10
    for g in games:
        counts[g.a] += 1
        counts[g.b] += 1
    assert max(counts) / min(counts) < 1.1


def test_generation_rule_keeps_size_and_clones_from_the_start_state():
    slots = [100, 101, 102, 103]
    games = [ScheduledGame(0, 0, 1, 0), ScheduledGame(1, 1, 2, 0), ScheduledGame(2, 2, 3, 0)]
    # 0 beats 1; then 2 beats 1 (1 gets 2's start agent, not 0's); 2 and 3 draw.
    nxt, clones = apply_generation(slots, games, {0: "a", 1: "b", 2: "draw"})
    assert nxt == [100, 102, 102, 103]
    assert clones == [(1, 2, 1)]
    assert len(nxt) == len(slots)
    # A winner's own slot that lost elsewhere receives the other winner's start agent.
    nxt, _ = apply_generation(slots, [ScheduledGame(0, 0, 1, 0), ScheduledGame(1, 2, 0, 0)], {0: "a", 1: "a"})
    assert nxt == [102, 100, 102, 103]
