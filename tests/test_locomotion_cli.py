"""`sumo train --env locomotion` and `sumo eval locomotion` end to end at tiny settings: runs,
iterations and versions written; exact resume after an interruption; evaluation printed, plotted,
stored and reproducible; bad input refused with exit 2 and nothing written."""

from __future__ import annotations

import json

import pytest
import torch

from tests.test_train import final_tensors, rows

# 2 envs (or task pairs), 10-step episodes, 8 hidden units, one PPO epoch of 2 minibatches
TINY = ["--env", "locomotion", "--envs", "2", "--horizon", "10", "--hidden", "8", "--epochs", "1",
        "--minibatches", "2"]


@pytest.fixture(autouse=True)
def restore_torch_threads():
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


def test_train_writes_run_iterations_and_versions(cli, tmp_path):
    code, out, err = cli("train", *TINY, "--iterations", "2", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["agent"], doc["env"], doc["strategy"], doc["latest_version"]) == ("loco-mlp", "locomotion", "none", 2)
    assert doc["steps_per_iteration"] == 2 * 7 * 10 and doc["env_steps"] == 2 * 140
    r = rows(tmp_path)
    (agent,) = r["Agent"]
    assert (agent.body, agent.arch, agent.strategy, agent.provenance) == ("loco", "mlp", "none", "trained")
    (run,) = r["Run"]
    assert (run.kind, run.status, run.progress_done, run.config["env"]) == ("train", "finished", 2, "locomotion")
    assert sorted(v.version for v in r["Version"]) == [1, 2]
    its = sorted(r["Iteration"], key=lambda i: i.iteration)
    assert [i.env_steps for i in its] == [140, 280]
    for key in ("mean_return", "return_ep1", "return_ep7", "policy_loss", "wall_seconds"):
        assert key in its[-1].metrics, key
    assert its[-1].metrics["episodes"] == 2 * 7
    # `sumo agents` lists it like any trained agent
    code, out, _ = cli("agents", "--json")
    assert code == 0 and "loco-mlp" in out


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["rl2", "meta"])
def test_resume_after_interruption_ends_identical(cli, tmp_path, monkeypatch, strategy):
    from sumo_cli.runs import training

    args = ["train", *TINY, "--strategy", strategy, "--iterations", "3", "--seed", "5"]
    assert cli(*args, "--name", "straight")[0] == 0

    def interrupt(p):
        if p.k == 1:
            raise KeyboardInterrupt

    monkeypatch.setattr(training, "_after_iteration", interrupt)
    code, out, err = cli(*args, "--name", "bumpy")
    assert code == 130 and out == ""
    assert "1 of 3 iterations saved" in err
    # the database by its absolute path: the command runs as printed from any directory
    assert f"Resume with: sumo --db {tmp_path / 'db' / 'sumo.sqlite'} train --resume 2" in " ".join(err.split())
    monkeypatch.setattr(training, "_after_iteration", lambda p: None)
    code, out, err = cli("train", "--resume", "2", "--json")
    assert code == 0, err
    assert json.loads(out)["resumed_from"] == 1
    a, b = final_tensors(tmp_path, "straight"), final_tensors(tmp_path, "bumpy")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    its = {(i.run_id, i.iteration): i.metrics for i in rows(tmp_path)["Iteration"]}
    for k in (1, 2, 3):
        assert its[(1, k)]["mean_return"] == its[(2, k)]["mean_return"], k
    code, _, err = cli("train", "--resume", "2")
    assert code == 2 and "already finished" in err and "--iterations N" in err
    code, out, err = cli("train", "--resume", "2", "--iterations", "4", "--json")  # trained further
    assert code == 0, err
    assert json.loads(out)["resumed_from"] == 3 and sorted(k for r, k in
                                                           ((i.run_id, i.iteration) for i in rows(tmp_path)["Iteration"]) if r == 2) == [1, 2, 3, 4]


@pytest.mark.slow
def test_eval_prints_plots_stores_and_repeats(cli, tmp_path):
    for extra in (["--strategy", "track"], ["--strategy", "rl2"], ["--strategy", "meta"]):
        assert cli("train", *TINY, *extra, "--iterations", "1")[0] == 0
    agents = ["loco-mlp-track", "loco-rl2", "loco-mlp-meta", "loco-mlp-track:none"]
    png = tmp_path / "fig.png"
    code, out, err = cli("eval", "locomotion", *agents, "--repeats", "3", "--seed", "4", "--plot", str(png))
    assert code == 0, err
    assert out == ""
    text = " ".join(err.split())
    assert "loco-rl2@1 (rl2)" in text and "middle" in text and "ep 7" in text
    assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, out, err = cli("eval", "locomotion", *agents, "--repeats", "3", "--seed", "4", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert len(doc["results"]) == 12
    runs = [r for r in rows(tmp_path)["Run"] if r.kind == "locomotion-eval"]
    assert len(runs) == 2 and all(r.status == "finished" for r in runs)
    first, second = (r.state["results"] for r in sorted(runs, key=lambda r: r.id))
    assert first == [{**x, "seconds": first[i]["seconds"]} for i, x in enumerate(second)]  # same seed, same numbers
    for row in second:
        assert len(row["mean"]) == len(row["ci95"]) == 7 and len(row["returns"]) == 7
        assert all(len(ep) == 3 for ep in row["returns"])
    assert {(r["agent"], r["strategy"]) for r in second} == {("loco-mlp-track@1", "track"), ("loco-rl2@1", "rl2"),
                                                             ("loco-mlp-meta@1", "meta"), ("loco-mlp-track@1", "none")}
    # the same policy with and without tracking: identical first episodes (same seed), then they differ
    by = {(r["agent"], r["strategy"], r["pair"]): r for r in second}
    none, track = by[("loco-mlp-track@1", "none", "back")], by[("loco-mlp-track@1", "track", "back")]
    assert none["returns"][0] == track["returns"][0] and none["returns"][1:] != track["returns"][1:]
    assert {r["pair"] for r in second} == {"back", "middle", "front"}


@pytest.mark.slow
def test_bad_input_exits_2_and_writes_nothing(cli, tmp_path):
    cases = [
        (["train", *TINY, "--opponents", "self"], "--opponents"),
        (["train", *TINY, "--body", "bug"], "--body"),
        (["train", "--body", "ant", "--horizon", "10"], "--env locomotion"),
        (["train", "--env", "walk"], "sumo or locomotion"),
        (["train", *TINY, "--strategy", "rl2", "--arch", "mlp"], "rl2"),
        (["train", *TINY, "--strategy", "fancy"], "strategy"),
        (["train", *TINY, "--iterations", "0"], "iterations"),
        (["eval", "locomotion", "loco-mlp"], "unknown agent"),
    ]
    for args, words in cases:
        code, out, err = cli(*args)
        assert code == 2, (args, err)
        assert words in " ".join(err.split()), (args, err)
        assert "Traceback" not in err
    assert not (tmp_path / "db" / "sumo.sqlite").exists() or not rows(tmp_path)["Run"]
    # a sumo agent is not a locomotion agent; repeats must be positive; a plot must be a PNG
    assert cli("train", "--body", "ant", "--arch", "mlp", "--iterations", "1", "--envs", "2", "--steps", "20",
               "--physics", "fast", "--epochs", "1", "--minibatches", "1")[0] == 0
    assert cli("train", *TINY, "--iterations", "1")[0] == 0
    before = len(rows(tmp_path)["Run"])
    for args, words in [
        (["eval", "locomotion", "loco-mlp", "ant-mlp"], "is a sumo agent"),
        (["eval", "locomotion", "loco-mlp", "--repeats", "0"], "--repeats must be at least 1"),
        (["eval", "locomotion", "loco-mlp", "--plot", "fig.pdf"], ".png"),
        (["eval", "locomotion", "loco-mlp:fancy"], "must be one of none, track, meta"),
    ]:
        code, out, err = cli(*args)
        assert code == 2 and words in " ".join(err.split()), (args, err)
    assert len(rows(tmp_path)["Run"]) == before
