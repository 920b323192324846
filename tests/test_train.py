"""`sumo train` end to end: versions, iterations and checkpoints written; exact resume after an
interruption; bad input refused with exit 2 and nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

TINY = ["--recipe", "paper", "--envs", "2", "--steps", "40", "--physics", "fast", "--epochs", "2", "--minibatches", "2", "--anneal", "2"]


@pytest.fixture(autouse=True)
def one_torch_thread():
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


def db(tmp_path: Path):
    from sumo_cli.store.database import open_database

    return open_database(str(tmp_path / "db" / "sumo.sqlite"))


def rows(tmp_path: Path):
    from sumo_cli.store.models import Agent, Iteration, Run, Version

    d = db(tmp_path)
    with d.read() as s:
        out = {m.__name__: s.query(m).all() for m in (Agent, Version, Run, Iteration)}
    d.dispose()
    return out


def final_tensors(tmp_path: Path, name: str) -> dict:
    from sumo_cli.store.library import load_agent

    d = db(tmp_path)
    a = load_agent(d, name)
    d.dispose()
    return {**a.params, **a.meta_params, **{"obs_norm/" + k: v for k, v in a.obs_stats.items()}}


def test_tiny_training_run_writes_versions_iterations_and_checkpoints(cli, tmp_path):
    code, out, err = cli("train", "--body", "ant", "--arch", "lstm", "--iterations", "3", *TINY, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["agent"] == "ant-lstm" and doc["status"] == "finished" and doc["latest_version"] == 3
    assert doc["env_steps"] == 3 * 80 and doc["steps_per_iteration"] == 80
    r = rows(tmp_path)
    (agent,) = r["Agent"]
    assert (agent.body, agent.arch, agent.strategy, agent.provenance) == ("ant", "lstm", "none", "trained")
    (run,) = r["Run"]
    assert (run.kind, run.status, run.progress_done, run.progress_total) == ("train", "finished", 3, 3)
    assert sorted(v.version for v in r["Version"]) == [1, 2, 3]
    assert all(v.run_id == run.id and v.iteration == v.version for v in r["Version"])
    its = sorted(r["Iteration"], key=lambda i: i.iteration)
    assert [i.iteration for i in its] == [1, 2, 3] and [i.env_steps for i in its] == [80, 160, 240]
    assert [i.metrics["alpha"] for i in its] == [1.0, 0.5, 0.0]  # annealed over 2 iterations
    for key in ("steps_per_second", "policy_loss", "value_loss", "mean_length", "wall_seconds"):
        assert key in its[-1].metrics, key
    # self-play opponents at iteration k: theta_0 .. theta_{k-1}
    for it in its:
        assert {int(o.split("@")[1]) for o in it.metrics["opponents"]} <= set(range(it.iteration))
    # every version's checkpoint verifies and plays: a loaded agent has an LSTM spec and statistics
    from sumo_cli.store.library import load_agent

    d = db(tmp_path)
    a = load_agent(d, "ant-lstm@2")
    assert a.spec.arch == "lstm" and a.spec.obs_dim == 120 and float(a.obs_stats["count"]) == 2 * 80
    d.dispose()
    ck = tmp_path / "db" / "sumo-checkpoints"
    assert (ck / "ant-lstm" / "v00000.safetensors").is_file()  # theta_0, self-play's first opponent
    assert sorted(p.name for p in (ck / "runs" / f"train-{run.id}").iterdir()) == ["learner-00003.json", "learner-00003.safetensors"]


def test_resume_after_interruption_ends_bit_identical(cli, tmp_path, monkeypatch):
    from sumo_cli.runs import training

    args = ["train", "--body", "ant", "--arch", "lstm", "--iterations", "4", "--seed", "7", *TINY]
    assert cli(*args, "--name", "straight")[0] == 0

    # 1. Ctrl-C right after iteration 2 was committed
    def interrupt(p):
        if p.k == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(training, "_after_iteration", interrupt)
    code, out, err = cli(*args, "--name", "bumpy")
    assert code == 130
    assert "2 of 4 iterations saved" in err
    # the database by its absolute path: the command runs as printed from any directory
    assert f"Resume with: sumo --db {tmp_path / 'db' / 'sumo.sqlite'} train --resume 2" in " ".join(err.split())
    assert out == ""
    run = {r.id: r for r in rows(tmp_path)["Run"]}[2]
    assert (run.status, run.progress_done) == ("interrupted", 2)

    # 2. killed between writing iteration 3's files and committing it: resume redoes iteration 3
    real_save = training.save_learner_state

    def killed_after_files(db_, run_id, k, learner):
        state = real_save(db_, run_id, k, learner)
        if k == 3:
            raise KeyboardInterrupt
        return state

    monkeypatch.setattr(training, "_after_iteration", lambda p: None)
    monkeypatch.setattr(training, "save_learner_state", killed_after_files)
    code, _, err = cli("train", "--resume", "2")
    assert code == 130 and "2 of 4 iterations saved" in err
    monkeypatch.setattr(training, "save_learner_state", real_save)

    code, out, err = cli("train", "--resume", "2", "--json")
    assert code == 0, err
    assert json.loads(out)["resumed_from"] == 2
    a, b = final_tensors(tmp_path, "straight"), final_tensors(tmp_path, "bumpy")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    its = {(i.run_id, i.iteration): i.metrics for i in rows(tmp_path)["Iteration"]}
    assert sorted(k for r, k in its if r == 2) == [1, 2, 3, 4]
    for k in range(1, 5):
        assert its[(1, k)]["mean_return"] == its[(2, k)]["mean_return"], k
        assert its[(1, k)]["policy_loss"] == its[(2, k)]["policy_loss"], k
    # a finished run cannot be resumed
    code, _, err = cli("train", "--resume", "2")
    assert code == 2 and "already finished" in err


def test_a_finished_run_trained_further_equals_the_longer_run(cli, tmp_path):
    """`--resume RUN --iterations N` extends a finished run: it goes on exactly as a run started with
    N iterations; fewer or as many iterations, or another option beside them, are refused with
    nothing written."""
    base = ["train", "--body", "ant", "--arch", "mlp", "--seed", "3", *TINY]
    assert cli(*base, "--iterations", "4", "--name", "long")[0] == 0
    assert cli(*base, "--iterations", "2", "--name", "short")[0] == 0
    for extra, msg in ((["--iterations", "2"], "already plans 2 iterations"), (["--iterations", "5", "--seed", "1"], "leave out --seed")):
        code, _, err = cli("train", "--resume", "2", *extra)
        assert code == 2 and msg in err, err
    run = {r.id: r for r in rows(tmp_path)["Run"]}[2]
    assert (run.status, run.progress_total, run.config["train"]["iterations"]) == ("finished", 2, 2)
    code, out, err = cli("train", "--resume", "2", "--iterations", "4", "--json")
    assert code == 0, err
    assert json.loads(out)["resumed_from"] == 2 and json.loads(out)["iterations"] == 4
    a, b = final_tensors(tmp_path, "long"), final_tensors(tmp_path, "short")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    run = {r.id: r for r in rows(tmp_path)["Run"]}[2]
    assert (run.status, run.progress_done, run.progress_total, run.config["train"]["iterations"]) == ("finished", 4, 4, 4)


def test_pool_of_stored_opponents(cli, tmp_path):
    assert cli("train", "--body", "ant", "--arch", "mlp", "--iterations", "2", *TINY)[0] == 0
    code, out, err = cli("train", "--body", "ant", "--arch", "mlp", "--strategy", "track", "--opponents", "ant-mlp",
                         "--iterations", "3", *TINY, "--json")
    assert code == 0, err
    its = sorted((i for i in rows(tmp_path)["Iteration"] if i.run_id == 2), key=lambda i: i.iteration)
    seen = set()
    for it in its:
        versions = {int(o.split("@")[1]) for o in it.metrics["opponents"]}
        assert all(o.startswith("ant-mlp@") for o in it.metrics["opponents"])
        assert versions <= set(range(1, min(it.iteration, 2) + 1))  # [1, k], capped at the pool's latest
        seen |= versions
    assert seen == {1, 2}
    assert json.loads(out)["agent"] == "ant-mlp-track"


@pytest.mark.parametrize(
    "args,message",
    [
        (["--body", "antelope"], "unknown body 'antelope'"),
        (["--body", "ant", "--iterations", "0"], "iterations must be at least 1"),
        (["--body", "ant", "--arch", "mlp", "--strategy", "rl2"], "not one of the paper's combinations"),
        (["--body", "ant", "--opponents", "bug-lstm"], "unknown agent 'bug-lstm'"),
        (["--body", "ant", "--name", "ant-lstm"], "cannot be a custom agent name"),
        (["--resume", "7"], "no train run with id 7"),
        (["--resume", "7", "--body", "ant"], "leave out --body"),
        ([], "--body is required"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(cli, tmp_path, args, message):
    code, out, err = cli("train", *args)
    assert code == 2, err
    assert message in " ".join(err.split()) and out == ""
    assert err.count("\n") <= 2  # one sentence, no traceback
    if (tmp_path / "db" / "sumo.sqlite").exists():
        assert all(not v for v in rows(tmp_path).values())
    assert not (tmp_path / "db" / "sumo-checkpoints").exists()


def test_unknown_opponent_lists_close_matches_and_existing_agent_is_kept(cli, tmp_path):
    assert cli("train", "--body", "ant", "--arch", "mlp", "--iterations", "1", *TINY)[0] == 0
    before = {k: len(v) for k, v in rows(tmp_path).items()}
    code, _, err = cli("train", "--body", "ant", "--opponents", "ant-lstm", *TINY)
    assert code == 2 and "close matches: ant-mlp" in err
    code, _, err = cli("train", "--body", "ant", "--arch", "mlp", *TINY)
    assert code == 2 and "already exists" in err and "--resume" not in err  # its run finished
    assert {k: len(v) for k, v in rows(tmp_path).items()} == before


def test_init_from_starts_version_0_at_a_stored_policy(cli, tmp_path):
    from sumo_cli.store.library import load_agent
    from sumo_cli.nets.checkpoint import load_checkpoint

    assert cli("train", "--body", "ant", "--arch", "mlp", "--iterations", "2", *TINY)[0] == 0
    before = {k: len(v) for k, v in rows(tmp_path).items()}
    # a policy of another shape is refused in one sentence, with nothing written
    code, out, err = cli("train", "--body", "ant", "--arch", "lstm", "--init-from", "ant-mlp@1", *TINY)
    assert code == 2 and "--init-from ant-mlp@1 is a ant mlp policy" in " ".join(err.split()), err
    assert {k: len(v) for k, v in rows(tmp_path).items()} == before
    code, out, err = cli("train", "--body", "ant", "--arch", "mlp", "--name", "warm", "--init-from", "bug-mlp", *TINY)
    assert code == 2 and "unknown agent 'bug-mlp'" in err
    # an unpinned name starts from the agent's latest version, pinned in the stored settings
    code, out, err = cli("train", "--body", "ant", "--arch", "mlp", "--strategy", "track", "--init-from", "ant-mlp",
                         "--iterations", "1", *TINY, "--json")
    assert code == 0, err
    (run,) = [r for r in rows(tmp_path)["Run"] if r.id == json.loads(out)["run_id"]]
    assert run.config["train"]["init_from"] == "ant-mlp@2"
    start = load_checkpoint(run.state["theta0"]["path"], run.state["theta0"]["sha256"])
    d = db(tmp_path)
    source = load_agent(d, "ant-mlp@2")
    d.dispose()
    for k, v in source.params.items():
        assert torch.equal(start.params[k], torch.as_tensor(v)), k
    for k, v in source.obs_stats.items():
        assert torch.equal(start.obs_stats[k].double(), torch.as_tensor(v).double()), k


def _run_row(tmp_path: Path, run_id: int):
    from sumo_cli.store.models import Run

    d = db(tmp_path)
    with d.read() as s:
        run = s.get(Run, run_id)
        out = (run.status, run.progress_done) if run else (None, 0)
    d.dispose()
    return out


def _ctrl_c_as_on_a_terminal() -> None:
    """In the child: Ctrl-C's default disposition. A suite started as a background job (``cmd &``
    in a script) inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _as_a_background_job() -> None:
    """In the child: SIGINT ignored, as for ``cmd &`` in a script."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _start(tmp_path: Path, *args: str, preexec=_ctrl_c_as_on_a_terminal):
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("SUMO_DB", None)
    return subprocess.Popen([sys.executable, "-m", "sumo_cli", "--db", str(tmp_path / "db" / "sumo.sqlite"), *args],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=preexec)


def _wait_for(tmp_path: Path, run_id: int, k: int, proc, timeout: float = 120.0) -> None:
    import time

    t0 = time.time()
    while _run_row(tmp_path, run_id)[1] < k:
        assert proc.poll() is None, proc.communicate()
        assert time.time() - t0 < timeout
        time.sleep(0.05)


@pytest.mark.slow
def test_killed_and_interrupted_processes_resume_exactly(cli, tmp_path):
    """A real process: SIGKILL after iteration 2 is committed, resume, and the result equals an
    uninterrupted run; SIGINT (Ctrl-C) exits 130 with the resume command."""
    import signal

    args = ["train", "--body", "ant", "--arch", "mlp", "--iterations", "5", "--seed", "3", *TINY, "--steps", "150"]
    assert cli(*args, "--name", "straight")[0] == 0
    proc = _start(tmp_path, *args, "--name", "killed")
    _wait_for(tmp_path, 2, 2, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    status, done = _run_row(tmp_path, 2)
    assert status == "running" and 2 <= done < 5  # nobody marked it: it was killed
    code, _, err = cli("train", "--resume", "2")
    assert code == 0, err
    a, b = final_tensors(tmp_path, "straight"), final_tensors(tmp_path, "killed")
    for k in a:
        assert torch.equal(a[k], b[k]), k

    # many iterations: were the signal lost, a short run would just finish and hide it
    long_args = [("200" if a == "5" else a) for a in args]
    proc = _start(tmp_path, *long_args, "--name", "ctrl-c")
    _wait_for(tmp_path, 3, 1, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Resume with: sumo --db" in err and "train --resume 3" in err and "Traceback" not in err
    status, done = _run_row(tmp_path, 3)
    assert status == "interrupted" and 1 <= done < 200

    # SIGTERM (kill PID, a batch scheduler) takes the same path, also for a background job (SIGINT ignored)
    proc = _start(tmp_path, "train", "--resume", "3", preexec=_as_a_background_job)
    _wait_for(tmp_path, 3, done + 1, proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "train --resume 3" in err and "Traceback" not in err
    status, done2 = _run_row(tmp_path, 3)
    assert status == "interrupted" and done < done2 < 200


@pytest.mark.slow
def test_worker_processes_do_not_change_the_result(cli, tmp_path):
    """The rollout shards run in 2 spawned processes or inline: the same run, bit for bit."""
    args = ["train", "--body", "ant", "--arch", "lstm", "--iterations", "2", "--seed", "5", *TINY]
    assert cli(*args, "--name", "inline", "-j", "1")[0] == 0
    code, _, err = cli(*args, "--name", "procs", "-j", "2")
    assert code == 0, err
    a, b = final_tensors(tmp_path, "inline"), final_tensors(tmp_path, "procs")
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_the_fight_recipe_is_the_default_and_typed_options_override_it(cli, tmp_path):
    from sumo_cli.selfplay.recipes import FIGHT, recipe_values
    from sumo_cli.selfplay.selfplay import TrainConfig

    code, _, err = cli("train", "--body", "ant", "--arch", "mlp", "--envs", "2", "--steps", "40", "--epochs", "1",
                       "--minibatches", "1", "--iterations", "1", "--approach-coef", "3")
    assert code == 0, err
    assert "recipe fight" in err
    (run,) = rows(tmp_path)["Run"]
    stored = run.config["train"]
    assert stored["recipe"] == "fight" and stored["approach_coef"] == 3.0 and stored["n_envs"] == 2
    for key, value in FIGHT.values.items():
        if key not in ("approach_coef", "n_envs", "iterations", "teacher"):
            assert stored[key] == value, key
    assert stored["teacher"] == ""  # the recipe's "auto" teacher, resolved: an MLP has none
    # the paper recipe is the dataclass defaults: runs stored before recipes resume unchanged
    assert TrainConfig(**recipe_values("paper")) == TrainConfig(recipe="paper")
    code, _, err = cli("train", "--body", "ant", "--recipe", "fast-one")
    assert code == 2 and "unknown recipe 'fast-one'; choose one of fight, meta, rl2, paper, push" in err


def test_the_spider_learns_against_ant_and_bug_agents_and_never_a_motionless_spider(cli, tmp_path, monkeypatch):
    """A motionless Spider sags below the fall line by itself: the fight recipe's motionless opponents
    for the Spider are the shipped Ant and Bug MLPs' bodies (its moving ones its own snapshots, those
    MLPs and still-spider), and a run that would face motionless Spiders only is refused with nothing
    written."""
    monkeypatch.setenv("SUMO_POLICIES", str(Path(__file__).resolve().parents[1] / "policies"))
    code, _, err = cli("train", "--body", "spider", "--arch", "mlp", "--opponents", "self", "--envs", "2", "--steps", "20",
                       "--name", "my-spider")
    assert code == 2 and "a motionless Spider sinks below the fall line by itself" in err, err
    assert rows(tmp_path)["Run"] == []
    code, _, err = cli("train", "--body", "spider", "--arch", "mlp", "--envs", "2", "--steps", "20", "--name", "recipe-spider")
    assert code == 2 and "--envs 2 cannot give each opponent body (ant, bug, spider) a bout slot" in err, err
    assert rows(tmp_path)["Run"] == []
    code, _, err = cli("train", "--body", "spider", "--arch", "mlp", "--envs", "3", "--steps", "20", "--epochs", "1",
                       "--minibatches", "1", "--iterations", "1", "--name", "recipe-spider")
    assert code == 0, err
    (run,) = rows(tmp_path)["Run"]
    stored = run.config["train"]
    assert stored["opponents"] == ["self", "ant-mlp", "bug-mlp"]
    assert (stored["motionless_iterations"], stored["motionless_fraction"]) == (100, 0.5)
    assert [(o["name"], o["body"], o["pinned"]) for o in run.config["opponents"]] == [
        ("self", "spider", None), ("ant-mlp", "ant", None), ("bug-mlp", "bug", None)]
    # with a standing body in the pool, motionless opponents are that body's and the Spiders play
    code, _, err = cli("train", "--body", "spider", "--arch", "mlp", "--opponents", "self,ant-mlp", "--envs", "2",
                       "--steps", "20", "--epochs", "1", "--minibatches", "1", "--iterations", "1", "--name", "mixed-spider")
    assert code == 0, err
    # without motionless opponents a Spider may play Spiders (self-play)
    code, _, err = cli("train", "--body", "spider", "--arch", "mlp", "--opponents", "self", "--motionless-iterations", "0",
                       "--motionless-fraction", "0", "--envs", "2", "--steps", "20", "--epochs", "1", "--minibatches", "1",
                       "--iterations", "1", "--name", "selfplay-spider")
    assert code == 0, err


def test_the_recipe_values_train_help_quotes_are_the_recipes():
    """`sumo train --help` says what the fight and paper recipes set (e.g. "fight 64, paper 8"): each
    quoted value is the recipe's, so the help cannot drift from the presets."""
    import re

    import typer

    from sumo_cli.cli.app import app
    from sumo_cli.selfplay.recipes import recipe_values
    from sumo_cli.selfplay.selfplay import TrainConfig

    configs = {r: TrainConfig(**recipe_values(r)) for r in ("fight", "paper")}
    field = {"envs": "n_envs", "anneal": "anneal_iterations"}
    quoted = 0
    for param in typer.main.get_command(app).commands["train"].params:
        for recipe, value in re.findall(r"\b(fight|paper) (-?[0-9][0-9.]*)\b", getattr(param, "help", None) or ""):
            assert float(getattr(configs[recipe], field.get(param.name, param.name))) == float(value), (param.name, recipe)
            quoted += 1
    assert quoted >= 18
