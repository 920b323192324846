"""benchmarks/track_epochs.py: tracking's epochs compared in seeded games, at tiny settings."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import track_epochs

POLICIES = Path(__file__).resolve().parents[1] / "policies"


def test_settings_share_their_first_round_and_only_tracking_adapts(tmp_path, one_torch_thread, monkeypatch):
    monkeypatch.setenv("SUMO_POLICIES", str(POLICIES))  # the shipped agents play
    out = tmp_path / "epochs.json"
    track_epochs.main(["--db", str(tmp_path / "sumo.sqlite"), "--a", "ant-mlp", "--b", "bug-mlp", "--epochs", "2,1",
                       "--games", "2", "--rounds", "3", "--physics", "fast", "--out", str(out)])
    doc = json.loads(out.read_text())
    settings = doc["settings"]
    assert list(settings) == ["none", "track-2", "track-1"]
    # round 1 is played before any adaptation, with the same seeds under every setting
    first = {name: s["rounds"][0]["won"] for name, s in settings.items()}
    assert len(set(first.values())) == 1, first
    assert settings["none"]["adapt_over_physics"] < 1e-2
    assert all(settings[n]["adapt_over_physics"] > 0.01 for n in ("track-2", "track-1"))
    for name in ("track-1", "none"):
        lo, hi = settings[name]["minus_track-2"]["ci95"]
        assert lo <= settings[name]["minus_track-2"]["mean"] <= hi
