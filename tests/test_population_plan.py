"""The population plan (policies/population.toml) and `sumo population train`: parsing and its
refusals, the shipped plan's shape, a tiny plan run end to end, skipped when done, and continued
after Ctrl-C or kill -9 of the runner."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sumo_cli import names
from sumo_cli.compete.population import stage_versions
from sumo_cli.errors import UserError
from sumo_cli.runs.population_plan import default_plan_path, load_plan, parse_plan

HEADER = 'format = "sumo-population-plan"\nformat_version = 1\n'
TINY = "--recipe paper --envs 2 --steps 40 --physics fast --epochs 1 --minibatches 1 --seed 1"


def _plan(tmp_path: Path, body: str, name: str = "plan.toml") -> Path:
    p = tmp_path / name
    p.write_text(HEADER + body)
    return p


def test_the_shipped_plan_fills_every_slot_of_the_papers_population_from_fresh_weights():
    plan = load_plan()
    assert plan.path == default_plan_path()
    assert sorted(plan.members()) == sorted(names.all_combination_names())  # 21 slots, 105 with 5 stages
    by = {s.name: s for s in plan.steps}
    order = [s.name for s in plan.ordered()]
    for step in plan.steps:
        assert all(order.index(d) < order.index(step.name) for d in step.depends)
        assert not any(t.startswith("zoo-") for t in step.train)
        if step.strategy == "track":
            assert not step.trains and by[step.weights_of].strategy == "none" and by[step.weights_of].arch == step.arch
    assert set(by["pop-spider-mlp"].depends) == {"pop-ant-mlp", "pop-bug-mlp"}
    # a body's pool MLP: the step filling its MLP slot, or the first one (which may still teach the others)
    pool_mlps = {b: {f"pop-{b}-mlp", plan.members()[f"{b}-mlp"]} for b in ("ant", "bug", "spider")}
    for s in plan.steps:
        if s.strategy == "rl2":  # RL^2 learners train against the three-body pool
            assert all(pool_mlps[b] & set(s.depends) for b in pool_mlps), s.name
        if s.strategy == "meta":  # from fresh weights against the learning opponents shipped beside the population,
            assert s.option("--init-from") is None, s.name  # taught, if at all, by its body's pool MLP
            teacher = s.option("--teacher")
            assert teacher is None or teacher.split("@")[0] in pool_mlps[s.body] & set(s.depends), s.name
            assert s.option("--opponents") == "learn-ant-lstm,learn-bug-lstm,learn-spider-lstm", s.name


def test_every_option_of_the_shipped_plan_is_an_option_of_sumo_train():
    import typer

    from sumo_cli.cli.app import app

    train = typer.main.get_command(app).commands["train"]
    known = {o for p in train.params for o in (*p.opts, *p.secondary_opts)}
    for step in load_plan().steps:
        for tok in step.train:
            if tok.startswith("-"):
                assert tok.split("=", 1)[0] in known, (step.name, tok)


@pytest.mark.parametrize("body, sentence", [
    ('[[steps]]\nname = "a"\ntrain = "--body ant --teacher b"\n[[steps]]\nname = "b"\ntrain = "--body ant --init-from a"\n',
     "depend on each other in a cycle"),
    ('[[steps]]\nname = "a"\ntrain = "--body ant --opponents zoo-ant-lstm-v3"\n', "original RoboSumo policy"),
    ('[[steps]]\nname = "a"\ntrain = "--body ant --name x"\n', "--name is set by `sumo population train`"),
    ('[[steps]]\nname = "a"\nmember = "ant-meta"\ntrain = "--body ant --arch mlp"\n', "cannot fill ant-meta"),
    ('[[steps]]\nname = "a"\nmember = "ant-mlp"\ntrain = "--body ant --arch mlp"\n'
     '[[steps]]\nname = "b"\nmember = "ant-mlp"\ntrain = "--body ant --arch mlp"\n', "both fill ant-mlp"),
    ('[[steps]]\nname = "a"\nweights_of = "nothing"\n', "not a training step of the plan"),
    ('[[steps]]\nname = "ant-mlp"\ntrain = "--body ant"\n', "cannot be a custom agent name"),
    ('[[steps]]\nname = "a"\ntrain = "--body ant"\nweights_of = "a"\n', "exactly one of 'train'"),
    ('[[steps]]\nname = "a"\ntrain = "--body ant"\ncolour = "red"\n', "unknown keys: colour"),
])
def test_a_bad_plan_is_one_sentence_and_exit_2(cli, tmp_path, body, sentence):
    code, _, err = cli("population", "show", "--plan", _plan(tmp_path, body))
    assert code == 2 and sentence in " ".join(err.split()), err
    assert not (tmp_path / "db" / "sumo.sqlite").exists()  # refused before the database is opened


def test_a_file_that_is_no_plan_is_refused(cli, tmp_path):
    (tmp_path / "x.toml").write_text('format = "something"\n')
    code, _, err = cli("population", "train", "--plan", tmp_path / "x.toml")
    assert code == 2 and "is not a sumo-population-plan v1 file" in err
    code, _, err = cli("population", "train", "--plan", tmp_path / "missing.toml")
    assert code == 2 and "no plan file at" in err
    code, _, err = cli("population", "train", "-j", "0")
    assert code == 2 and "--workers must be at least 1" in err


def test_stage_versions_are_five_distinct_versions_spread_over_the_run():
    assert stage_versions(list(range(1, 301))) == [60, 120, 180, 240, 300]
    assert stage_versions([20, 36, 48, 69, 120, 240, 345]) == [48, 69, 120, 240, 345]
    assert stage_versions([4, 8]) == [4, 8]


TINY_PLAN = f"""
[[steps]]
name = "t-ant"
member = "ant-mlp"
train = "--body ant --arch mlp {TINY} --iterations 3"

[[steps]]
name = "t-ant-track"
member = "ant-mlp-track"
weights_of = "t-ant"

[[steps]]
name = "t-warm"
train = "--body ant --arch mlp {TINY} --init-from t-ant --iterations 2"
"""


def _db_state(db_path: Path) -> dict:
    from sumo_cli.store import registry
    from sumo_cli.store.database import Database
    from sumo_cli.store.models import Iteration, Run

    db = Database(f"sqlite:///{db_path}")
    out = {}
    with db.read() as s:
        for name in ("t-ant", "t-ant-track", "t-warm"):
            a = registry.get_agent(s, name)
            out[name] = None if a is None else (a.strategy, {v.version: v.sha256 for v in a.versions})
        out["runs"] = len(s.query(Run).all())
        out["iterations"] = sorted((i.run_id, i.iteration) for i in s.query(Iteration).all())
    db.dispose()
    return out


@pytest.mark.slow
def test_a_plan_runs_in_dependency_order_and_a_second_run_skips_it(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("SUMO_CHECKPOINTS", str(tmp_path / "ckpt"))
    plan = _plan(tmp_path, TINY_PLAN)
    code, _, err = cli("population", "train", "--plan", plan, "-j", "2")
    assert code == 0, err
    state = _db_state(tmp_path / "db" / "sumo.sqlite")
    assert state["t-ant"][0] == "none" and sorted(state["t-ant"][1]) == [1, 2, 3]
    assert state["t-ant-track"] == ("track", state["t-ant"][1])  # the sibling's files, played with tracking
    assert sorted(state["t-warm"][1]) == [1, 2] and state["runs"] == 2
    assert "the plan is done" in err and len(list((tmp_path / "ckpt" / "population-logs").glob("*/t-ant.log"))) == 1
    code, out, err = cli("population", "show", "--plan", plan, "--json")
    import json

    doc = json.loads(out)
    assert code == 0 and [s["state"] for s in doc["steps"]] == ["done"] * 3 and doc["eta_seconds"] == 0
    code, _, err = cli("population", "train", "--plan", plan)
    assert code == 0 and _db_state(tmp_path / "db" / "sumo.sqlite") == state  # nothing trained twice
    # the trained population plays: its slots filled by the plan's steps
    from sumo_cli.compete.population import paper_population
    from sumo_cli.store.database import Database

    db = Database(f"sqlite:///{tmp_path / 'db' / 'sumo.sqlite'}")
    members = paper_population(db, ["ant"], ["mlp-none", "mlp-track"], load_plan(plan).members())
    assert [m.name for m in members] == ["t-ant@1", "t-ant@2", "t-ant@3", "t-ant-track@1", "t-ant-track@2", "t-ant-track@3"]
    with pytest.raises(UserError, match="agents are missing"):
        paper_population(db, ["ant"], None, load_plan(plan).members())
    db.dispose()


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_the_plan_continues_exactly_after_ctrl_c_or_kill_9_of_the_runner(tmp_path, sig):
    plan = _plan(tmp_path, TINY_PLAN.replace("--iterations 3", "--iterations 6"))
    db_path = tmp_path / "db" / "sumo.sqlite"
    env = {**os.environ, "SUMO_CHECKPOINTS": str(tmp_path / "ckpt")}
    cmd = [sys.executable, "-m", "sumo_cli", "--db", str(db_path), "population", "train", "--plan", str(plan), "-j", "1"]
    proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # Ctrl-C as on a terminal
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        time.sleep(0.5)
        if db_path.exists() and any(it == 2 for _, it in _db_state(db_path)["iterations"]):
            break
    else:
        proc.kill()
        pytest.fail("the first step never stored two iterations")
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=180)
    if sig == signal.SIGINT:
        assert proc.returncode == 130, err
        line = next(x for x in err.splitlines() if "Continue with:" in x)
        assert "population train --plan" in line
    else:
        # the step's training process gets SIGTERM when the runner dies: it saves and lets go of its run
        deadline = time.monotonic() + 60
        from sumo_cli.store.database import Database
        from sumo_cli.store.models import Run

        while time.monotonic() < deadline:
            db = Database(f"sqlite:///{db_path}")
            with db.read() as s:
                status = [r.status for r in s.query(Run).all()]
            db.dispose()
            if "running" not in status:
                break
            time.sleep(0.5)
        assert "running" not in status
    again = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=400)
    assert again.returncode == 0, again.stderr
    state = _db_state(db_path)
    assert sorted(state["t-ant"][1]) == list(range(1, 7)) and sorted(state["t-warm"][1]) == [1, 2]
    assert state["runs"] == 2  # the interrupted run was resumed, not started again
    its = state["iterations"]
    assert len(its) == len(set(its)) == 8  # every iteration stored once


def test_what_a_meta_step_does_instead_of_the_paper_is_read_from_its_options():
    from sumo_cli.runs.population_shipped import PAPER_DID, paper_did

    plan = parse_plan(HEADER + '[[steps]]\nname = "m"\nmember = "bug-meta"\ntrain = "--body bug --arch lstm --strategy meta '
                      '--teacher t@5 --alpha-init 0.005 --iterations 9 --opponents a,b"\n'
                      '[[steps]]\nname = "r"\nmember = "bug-rl2"\ntrain = "--body bug --strategy rl2"\n', Path("p.toml"))
    said = paper_did(plan.step("m"))
    assert said.startswith(PAPER_DID["meta"]) and "kickstarted by t@5, 9 meta-updates against a,b" in said
    assert said.endswith("the step sizes starting at 0.005")
    assert paper_did(plan.step("r")) == PAPER_DID["rl2"]


def test_what_a_pool_step_does_instead_of_the_paper_is_read_from_its_length_and_teacher():
    from sumo_cli.runs.population_shipped import PAPER_DID, paper_did

    plan = parse_plan(HEADER + '[[steps]]\nname = "l"\nmember = "bug-lstm"\ntrain = "--body bug --arch lstm --teacher t@5 '
                      '--iterations 200"\n[[steps]]\nname = "p"\nmember = "ant-mlp"\ntrain = "--body ant --arch mlp"\n', Path("p.toml"))
    said = paper_did(plan.step("l"))
    assert said.startswith(PAPER_DID["none"].split("; here")[0]) and said.endswith("; here 200 updates of 32,768 env steps, "
                                                                                   "kickstarted by t@5 on 2 cores")
    assert paper_did(plan.step("p")) == PAPER_DID["none"]
