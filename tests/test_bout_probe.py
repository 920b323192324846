"""benchmarks/bout_probe.py: seeded bouts with one thing changed, at tiny settings."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks import bout_probe
from sumo_cli.compete.bouts import play_bouts
from sumo_cli.compete.game import AgentData
from sumo_cli.store.library import load_agent
from sumo_cli.store.shipped import register_shipped
from sumo_cli.sim import sumo_env
from sumo_cli.sim.bodies import body_spec
from sumo_cli.store.database import Database

POLICIES = Path(__file__).resolve().parents[1] / "policies"


def test_each_agent_gets_its_own_gear_and_the_builder_is_restored():
    plain = sumo_env.build_model("ant", "bug", "fast").actuator_gear[:, 0].copy()
    n_ant = body_spec("ant").n_actions
    with bout_probe.scaled_gears(2.0, 0.5):
        with sumo_env.BatchedSumo("ant", "bug", 1, physics="fast", n_threads=1) as env:
            scaled = env.model.actuator_gear[:, 0].copy()
    np.testing.assert_allclose(scaled[:n_ant], 2.0 * plain[:n_ant])
    np.testing.assert_allclose(scaled[n_ant:], 0.5 * plain[n_ant:])
    np.testing.assert_allclose(sumo_env.build_model("ant", "bug", "fast").actuator_gear[:, 0], plain)


def test_settings_parse_and_bad_ones_exit_2():
    assert bout_probe.parse_setting("gear=2") == {"kind": "gear", "gear_a": 2.0, "gear_b": 1.0}
    assert bout_probe.parse_setting("hold=4") == {"kind": "hold", "every": 4}
    assert bout_probe.parse_setting("swap=2") == {"kind": "swap", "every": 2}
    assert bout_probe.parse_setting("window=3") == {"kind": "window", "every": 3}
    assert bout_probe.parse_setting("erase=qvel:3") == {"kind": "erase", "part": "qvel", "every": 3}
    for bad in ("gear=1:0", "reset=0", "swap=x", "window=0", "erase=qvel", "erase=legs:3", "erase=qvel:1", "louder=2"):
        with pytest.raises(SystemExit) as e:
            bout_probe.main(["--a", "ant-mlp", "--b", "bug-mlp", "--settings", bad])
        assert e.value.code == 2


def test_an_unknown_agent_exits_2(tmp_path, monkeypatch):
    monkeypatch.setenv("SUMO_POLICIES", str(POLICIES))
    with pytest.raises(SystemExit) as e:
        bout_probe.main(["--db", str(tmp_path / "sumo.sqlite"), "--a", "ant-mlp", "--b", "no-such-agent"])
    assert e.value.code == 2


@pytest.mark.slow
def test_unchanged_bouts_are_those_of_sumo_eval_and_changes_change_them(tmp_path, monkeypatch):
    monkeypatch.setenv("SUMO_POLICIES", str(POLICIES))  # the shipped agents play
    db = Database(f"sqlite:///{tmp_path / 'sumo.sqlite'}")
    register_shipped(db)
    a, b = (AgentData.from_loaded(load_agent(db, name)) for name in ("ant-mlp", "ant-lstm"))
    n, seed = 8, 3
    bouts = play_bouts(a, b, n, seed)
    same = bout_probe.play(a, b, {"kind": "none"}, n, seed)
    assert (same["won"], same["drawn"], same["lost"]) == tuple(
        sum(bout.outcome == o for bout in bouts) for o in ("win", "draw", "loss"))
    assert same["lengths"] == [bout.length for bout in bouts]
    # the shipped LSTM's memory shapes its play: forgotten or swapped, the bouts go otherwise
    for change in ("reset", "swap"):
        other = bout_probe.play(a, b, {"kind": change, "every": 1}, n, seed)
        assert other["won"] + other["drawn"] + other["lost"] == n
        assert other["lengths"] != same["lengths"], change


@pytest.mark.slow
def test_a_window_of_one_step_is_a_reset_and_one_longer_than_the_bouts_changes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("SUMO_POLICIES", str(POLICIES))
    db = Database(f"sqlite:///{tmp_path / 'sumo.sqlite'}")
    register_shipped(db)
    a, b = (AgentData.from_loaded(load_agent(db, name)) for name in ("ant-mlp", "ant-lstm"))
    n, seed = 6, 5
    same = bout_probe.play(a, b, {"kind": "none"}, n, seed)
    longest = bout_probe.play(a, b, {"kind": "window", "every": max(same["lengths"]) + 1}, n, seed)
    assert longest == same
    assert bout_probe.play(a, b, {"kind": "window", "every": 1}, n, seed) == \
        bout_probe.play(a, b, {"kind": "reset", "every": 1}, n, seed)
    assert bout_probe.play(a, b, {"kind": "window", "every": 3}, n, seed)["lengths"] != same["lengths"]


def test_the_parts_of_an_observation_tile_it():
    for body in ("ant", "bug", "spider"):
        n = body_spec(body).obs_size
        covered = np.concatenate([np.arange(n)[bout_probe.part_slice(body, p)] for p in bout_probe.PARTS])
        np.testing.assert_array_equal(covered, np.arange(n))
    assert bout_probe.part_slice("ant", "opponent") == slice(107, None)  # pose 7 and torso forces 6


def test_erasing_a_part_of_the_past_changes_what_the_window_remembers(tmp_path, monkeypatch):
    """The shipped LSTM with its own joint positions' past replaced by their present values plays
    other bouts than with its plain 3-step window."""
    monkeypatch.setenv("SUMO_POLICIES", str(POLICIES))
    db = Database(f"sqlite:///{tmp_path / 'sumo.sqlite'}")
    register_shipped(db)
    a, b = (AgentData.from_loaded(load_agent(db, name)) for name in ("ant-mlp", "ant-lstm"))
    n, seed = 6, 5
    window = bout_probe.play(a, b, {"kind": "window", "every": 3}, n, seed)
    erased = bout_probe.play(a, b, {"kind": "erase", "part": "qpos", "every": 3}, n, seed)
    assert erased["lengths"] != window["lengths"]


def test_the_report_has_a_row_per_setting(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SUMO_POLICIES", str(POLICIES))
    bout_probe.main(["--db", str(tmp_path / "sumo.sqlite"), "--a", "ant-mlp", "--b", "bug-mlp",
                     "--settings", "none,gear=1:0.25,hold=3", "--bouts", "2", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert [r["setting"] for r in doc["rows"]] == ["none", "gear=1:0.25", "hold=3"]
    assert all(r["won"] + r["drawn"] + r["lost"] == 2 for r in doc["rows"])
