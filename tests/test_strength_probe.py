"""benchmarks/strength_probe.py: bouts with either agent's motors scaled, at tiny settings."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks import strength_probe
from sumo_cli.sim import sumo_env
from sumo_cli.sim.bodies import body_spec

POLICIES = Path(__file__).resolve().parents[1] / "policies"


def test_each_agent_gets_its_own_factor_and_the_builder_is_restored():
    plain = sumo_env.build_model("ant", "bug", "fast").actuator_gear[:, 0].copy()
    n_ant = body_spec("ant").n_actions
    with strength_probe.scaled_gears(2.0, 0.5):
        with sumo_env.BatchedSumo("ant", "bug", 1, physics="fast", n_threads=1) as env:
            scaled = env.model.actuator_gear[:, 0].copy()
    np.testing.assert_allclose(scaled[:n_ant], 2.0 * plain[:n_ant])
    np.testing.assert_allclose(scaled[n_ant:], 0.5 * plain[n_ant:])
    np.testing.assert_allclose(sumo_env.build_model("ant", "bug", "fast").actuator_gear[:, 0], plain)


def test_settings_parse_and_bad_ones_exit_2(capsys):
    assert strength_probe.parse_gears("1:1,2,1:0.5") == [(1.0, 1.0), (2.0, 1.0), (1.0, 0.5)]
    with pytest.raises(SystemExit) as e:
        strength_probe.main(["--a", "ant-mlp", "--b", "bug-mlp", "--gears", "1:0"])
    assert e.value.code == 2


def test_every_setting_plays_the_same_count_of_bouts(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SUMO_POLICIES", str(POLICIES))  # the shipped agents play
    strength_probe.main(["--db", str(tmp_path / "sumo.sqlite"), "--a", "ant-mlp", "--b", "bug-mlp",
                         "--gears", "1:1,1:0.25", "--bouts", "2", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert [(r["gear_a"], r["gear_b"]) for r in doc["rows"]] == [(1.0, 1.0), (1.0, 0.25)]
    assert all(r["won"] + r["drawn"] + r["lost"] == 2 for r in doc["rows"])
