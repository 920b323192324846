"""`sumo runs` and `sumo runs show RUN`: the listing unchanged, one run's header and per-iteration
metrics as a table, as JSON and as a figure; bad input refused with exit 2 and nothing written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# 2 envs x 40 steps = 80 env steps per iteration, one PPO epoch: a few seconds per run
TINY = ["--recipe", "paper", "--body", "ant", "--arch", "mlp", "--envs", "2", "--steps", "40", "--physics", "fast", "--epochs", "1",
        "--minibatches", "2", "--anneal", "2"]


@pytest.fixture(autouse=True)
def restore_torch_threads():
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


def _tournament_run(tmp_path: Path) -> int:
    """A (game-less) tournament run row, written through the store like `sumo tournament` does."""
    from sumo_cli.store import runs as store_runs
    from sumo_cli.store.database import open_database

    db = open_database(str(tmp_path / "db" / "sumo.sqlite"))
    config = {"members": [{"name": "ant-mlp@1", "body": "ant", "arch": "mlp", "strategy": "none"},
                          {"name": "ant-mlp@3", "body": "ant", "arch": "mlp", "strategy": "none"}],
              "matches": 4, "game": {"rounds": 2, "episodes": 1, "physics": "fast", "threads": 1}}
    with db.write() as s:
        run_id = store_runs.create_run(s, "tournament", config, 5, 4, "test")
    db.dispose()
    return run_id


def test_show_training_run_as_table_json_and_plot(cli, tmp_path):
    code, out, err = cli("train", *TINY, "--iterations", "3", "--json")
    assert code == 0, err
    trained = json.loads(out)
    run_id, per_iteration = trained["run_id"], trained["steps_per_iteration"]
    assert per_iteration == 80

    # the listing is unchanged: table on stderr, --json and --limit as before
    code, out, err = cli("runs")
    assert code == 0 and out == "" and "train" in err and "3/3" in err
    listed = json.loads(cli("runs", "--json")[1])
    assert [(r["id"], r["kind"], r["status"], r["done"], r["total"]) for r in listed] == [(run_id, "train", "finished", 3, 3)]
    assert json.loads(cli("runs", "--limit", "1", "--json")[1]) == listed

    # JSON: the run, and one entry per iteration with env steps = iteration x steps per iteration
    code, out, err = cli("runs", "show", run_id, "--json")
    assert code == 0, err
    doc = json.loads(out)
    run = doc["run"]
    assert (run["id"], run["kind"], run["status"], run["done"], run["total"], run["env"]) == \
        (run_id, "train", "finished", 3, 3, "sumo")
    assert run["config"]["agent"] == "ant-mlp" and run["config"]["train"]["n_envs"] == 2
    its = doc["iterations"]
    assert [it["iteration"] for it in its] == [1, 2, 3]
    assert [it["env_steps"] for it in its] == [k * per_iteration for k in (1, 2, 3)]
    assert [it["metrics"]["alpha"] for it in its] == [1.0, 0.5, 0.0]
    for key in ("win_rate", "draw_rate", "loss_rate", "mean_return", "mean_min_dist", "steps_per_second"):
        assert key in its[-1]["metrics"], key

    # human output: header and table on stderr, nothing on stdout; --every keeps the last iteration
    code, out, err = cli("runs", "show", run_id)
    assert code == 0 and out == "", err
    assert f"#{run_id} training run (sumo): finished, 3/3 iterations" in err and "agent ant-mlp" in err
    assert "3 iterations" in err and "alpha" in err and "closest" in err
    code, out, err = cli("runs", "show", run_id, "--every", "2")
    assert code == 0 and "one in 2" in err
    body = err.split("one in 2", 1)[1]
    shown = [int(n) for n in re.findall(r"^│\s*(\d+)\s*│", body, re.M)]
    assert shown == [2, 3], body

    # the figure: a PNG, and its path in the JSON when both are asked for
    code, out, err = cli("runs", "show", run_id, "--plot", "curves/train.png")
    assert code == 2 and "the folder curves of --plot curves/train.png does not exist" in err  # as for --db
    assert not (tmp_path / "curves").exists()
    (tmp_path / "curves").mkdir()
    code, out, err = cli("runs", "show", run_id, "--plot", "curves/train.png")
    assert code == 0, err
    png = tmp_path / "curves" / "train.png"
    assert png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 10_000
    code, out, err = cli("runs", "show", run_id, "--plot", "again.png", "--json")
    assert code == 0 and json.loads(out)["plot"].endswith("again.png")
    assert (tmp_path / "again.png").read_bytes()[:8] == PNG_MAGIC

    # bad input: exit 2, one sentence, no traceback, nothing written
    tournament = _tournament_run(tmp_path)
    before = cli("runs", "--json")[1]
    cases = [
        (("runs", "show", 999, "--plot", "missing.png"), "no run with id 999"),
        (("runs", "show", 999, "--json"), "no run with id 999"),
        (("runs", "show", run_id, "--every", 0), "--every must be at least 1"),
        (("runs", "show", run_id, "--plot", "curve.jpg"), "PNG"),
        (("runs", "show", tournament, "--plot", "tournament.png"), "draws training runs and evolutions"),
    ]
    for args, needle in cases:
        code, out, err = cli(*args)
        assert code == 2, (args, err)
        assert needle in err and "Traceback" not in err and out == "", (args, err)
    assert cli("runs", "--json")[1] == before
    assert not any((tmp_path / name).exists() for name in ("missing.png", "curve.jpg", "tournament.png"))

    # a tournament run shows its header, without iterations
    code, out, err = cli("runs", "show", tournament)
    assert code == 0 and f"#{tournament} tournament run: running, 0/4 games" in err and "ant-mlp@1" in err
    doc = json.loads(cli("runs", "show", tournament, "--json")[1])
    assert doc["run"]["kind"] == "tournament" and "iterations" not in doc


def test_show_locomotion_run_plots_its_returns(cli, tmp_path):
    args = ["train", "--env", "locomotion", "--envs", "2", "--horizon", "10", "--hidden", "8", "--epochs", "1",
            "--minibatches", "2", "--iterations", "2", "--json"]
    code, out, err = cli(*args)
    assert code == 0, err
    trained = json.loads(out)
    code, out, err = cli("runs", "show", trained["run_id"], "--plot", "loco.png", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["run"]["env"] == "locomotion"
    assert [it["env_steps"] for it in doc["iterations"]] == [trained["steps_per_iteration"] * k for k in (1, 2)]
    assert (tmp_path / "loco.png").read_bytes()[:8] == PNG_MAGIC
    code, out, err = cli("runs", "show", trained["run_id"])
    assert code == 0 and "training run (locomotion)" in err and "ep7" in err


def test_pick_rows_and_plot_skip_missing_values(tmp_path):
    from sumo_cli.cli.runs_cmd import MAX_ROWS, pick_rows
    from sumo_cli.report.training_plot import series, training_curves

    its = [{"iteration": k, "env_steps": 100 * k, "wall_seconds": 1.0,
            "metrics": {"alpha": 1 - k / 1000, "win_rate": None if k % 7 == 0 else 0.5, "loss_rate": 0.5,
                        "draw_rate": 0.0, "mean_return": float("nan") if k == 3 else -k, "mean_min_dist": 1.0}}
           for k in range(1, 1001)]
    rows, every = pick_rows(its, None)
    assert every == 40 and len(rows) <= MAX_ROWS + 1 and rows[-1]["iteration"] == 1000
    assert [r["iteration"] for r in rows[:3]] == [40, 80, 120]
    rows, every = pick_rows(its[:10], 3)
    assert [r["iteration"] for r in rows] == [3, 6, 9, 10]
    assert [r["iteration"] for r in pick_rows(its[:5], None)[0]] == [1, 2, 3, 4, 5]

    xs, ys = series(its, "win_rate")
    assert len(xs) == 1000 - 142 and None not in ys
    assert 300 not in series(its, "mean_return")[0]
    run = {"id": 1, "kind": "train", "status": "running", "done": 1000, "total": 2000, "env": "sumo",
           "config": {"agent": "ant-mlp"}}
    path = training_curves(run, its, tmp_path / "curve.png")
    assert path.read_bytes()[:8] == PNG_MAGIC
