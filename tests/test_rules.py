import pytest

from sumo_cli.compete.rules import game_outcome, round_outcome, wilson_interval


def test_round_goes_to_more_episode_wins():
    assert round_outcome(2, 1) == "a"
    assert round_outcome(0, 1) == "b"
    assert round_outcome(1, 1) == "draw"
    assert round_outcome(0, 0) == "draw"  # three drawn episodes


@pytest.mark.parametrize(
    "a, b, played, expected",
    [
        (50, 45, 100, "a"),  # exactly 5% of 100
        (49, 45, 100, "draw"),  # 4 < 5
        (45, 50, 100, "b"),
        (1, 0, 2, "a"),  # 5% of 2 rounds = 0.1: any lead wins
        (0, 0, 2, "draw"),
        (10, 9, 20, "a"),  # 5% of 20 = 1
        (30, 28, 60, "draw"),  # needs 3
        (31, 28, 60, "a"),
    ],
)
def test_game_margin_is_five_percent_of_rounds_played(a, b, played, expected):
    assert game_outcome(a, b, played) == expected


def test_game_needs_rounds():
    with pytest.raises(ValueError):
        game_outcome(0, 0, 0)


def test_wilson_interval_contains_estimate_and_shrinks():
    small = wilson_interval(3, 10)
    large = wilson_interval(300, 1000)
    assert small.low < 0.3 < small.high
    assert large.high - large.low < small.high - small.low
    zero = wilson_interval(0, 25)
    assert zero.low == 0.0 and 0.0 < zero.high < 0.2
    # Matches the textbook value for 8/10: (0.4902, 0.9433).
    iv = wilson_interval(8, 10)
    assert iv.low == pytest.approx(0.4902, abs=1e-3) and iv.high == pytest.approx(0.9433, abs=1e-3)
