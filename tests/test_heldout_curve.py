"""`sumo runs show RUN` of a meta run lists (and with --plot draws) its held-out gain over the
meta-updates with each measurement's 95% interval, and one line for the last 20% of meta-updates
(mean and 95% interval), on a generated run's metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sumo_cli.report.heldout import heldout_curve, last_share, verdict

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
#: meta-update -> (gain, half-width over the tasks), measured on the first and every tenth of 50
GAINS = {1: (-4.0, 3.0), 10: (-2.0, 2.5), 20: (0.5, 2.0), 30: (1.0, 2.0), 40: (3.0, 1.0), 50: (5.0, 1.5)}


def _metrics(k: int) -> dict:
    m = {"win_rate": 0.5, "draw_rate": 0.2, "loss_rate": 0.3, "mean_return": 10.0 + k, "meta_alpha_0": 0.01}
    if k in GAINS:
        gain, half = GAINS[k]
        m.update(heldout_return_adapted=20.0 + gain, heldout_return_unadapted=20.0, heldout_gain=gain,
                 heldout_gain_ci95=half, heldout_specific_gain=gain / 2, heldout_specific_gain_ci95=half)
    return m


def _iterations(n: int = 50) -> list[dict]:
    return [{"iteration": k, "env_steps": 1000 * k, "wall_seconds": 1.0, "metrics": _metrics(k)} for k in range(1, n + 1)]


def _meta_run(tmp_path: Path) -> int:
    """A finished meta training run of 50 meta-updates, written through the store."""
    from sumo_cli.store import runs as games
    from sumo_cli.store.database import open_database
    from sumo_cli.store.models import Iteration

    db = open_database(str(tmp_path / "db" / "sumo.sqlite"))
    with db.write() as s:
        run_id = games.create_run(s, "train", {"agent": "ant-meta-probe", "train": {"strategy": "meta"}}, 3, 50, "test")
        for it in _iterations():
            s.add(Iteration(run_id=run_id, iteration=it["iteration"], env_steps=it["env_steps"],
                            wall_seconds=it["wall_seconds"], metrics=it["metrics"]))
        games.set_run_status(s, run_id, "finished", done=50)
    db.dispose()
    return run_id


def test_the_curve_and_the_last_fifth():
    curve = heldout_curve(_iterations())
    assert [c["iteration"] for c in curve] == [1, 10, 20, 30, 40, 50]
    assert curve[0] == {"iteration": 1, "env_steps": 1000, "adapted": 16.0, "unadapted": 20.0, "gain": -4.0,
                        "ci95": 3.0, "low": -7.0, "high": -1.0}
    last = last_share(curve, 50)  # meta-updates 41-50: one measurement, its own interval over the tasks
    assert (last["from"], last["to"], last["n"], last["mean"], last["ci95"], last["over"]) == (41, 50, 1, 5.0, 1.5, "tasks")
    assert verdict(last) == "gain"
    last = last_share(curve, 50, share=0.4)  # 31-50: 40 and 50, the t-interval over the two
    assert last["n"] == 2 and last["mean"] == 4.0 and last["over"] == "measurements"
    assert last["ci95"] == pytest.approx(12.7062 * 1.0, rel=1e-4)  # t(1) x sd 1.414 / sqrt 2
    assert verdict(last) == "no gain yet"
    assert last_share([], 50) is None and verdict(None) == "not measured"


def test_runs_show_lists_and_draws_the_heldout_gain(cli, tmp_path):
    run_id = _meta_run(tmp_path)
    code, out, err = cli("runs", "show", run_id, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert [(c["iteration"], c["gain"], c["low"], c["high"]) for c in doc["heldout_curve"]] == \
        [(k, g, g - h, g + h) for k, (g, h) in GAINS.items()]
    assert doc["heldout_last"]["mean"] == 5.0 and doc["heldout_last"]["n"] == 1

    code, out, err = cli("runs", "show", run_id)
    assert code == 0, err
    text = " ".join(err.split())
    assert "held-out gain by meta-update (6 measurements" in text
    for k, (g, h) in GAINS.items():
        assert f"{g - h:.1f} to {g + h:.1f}" in text, k
    line = [ln for ln in err.splitlines() if ln.startswith("held-out gain, last 20%")]
    assert line == ["held-out gain, last 20% of meta-updates (41-50, 1 measurement): 5.0 +- 1.5 (95% interval 3.5 to "
                    "6.5, over the tasks of the one measurement) per episode: gain"]

    png = tmp_path / "meta.png"
    code, out, err = cli("runs", "show", run_id, "--plot", png)
    assert code == 0, err
    assert png.read_bytes()[:8] == PNG_MAGIC
    from PIL import Image

    with Image.open(png) as im:  # the third row: the held-out gain below the four training panels
        assert im.size[1] > im.size[0]


def test_a_run_without_heldout_measurements_shows_no_curve(cli, tmp_path):
    from sumo_cli.store import runs as games
    from sumo_cli.store.database import open_database
    from sumo_cli.store.models import Iteration

    db = open_database(str(tmp_path / "db" / "sumo.sqlite"))
    with db.write() as s:
        run_id = games.create_run(s, "train", {"agent": "ant-mlp-x"}, 3, 2, "test")
        for k in (1, 2):
            s.add(Iteration(run_id=run_id, iteration=k, env_steps=10 * k, wall_seconds=1.0, metrics={"win_rate": 0.5}))
    db.dispose()
    code, out, err = cli("runs", "show", run_id, "--json")
    assert code == 0, err
    assert "heldout_curve" not in json.loads(out)
