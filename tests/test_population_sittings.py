"""A plan that spans sittings: ship what a sitting trained (scripts/ship_population.py), lose the local
database (a fresh machine), and `sumo population train` continues each step from its shipped final
stage for the iterations the plan asks beyond those shipped, counts a step done from shipped when it
asks no more, retrains nothing, and ships again only what changed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.test_population_plan import HEADER, TINY

PLAN = f"""
[[steps]]
name = "t-ant"
member = "ant-mlp"
train = "--body ant --arch mlp {TINY} --iterations ANT_ITERATIONS"

[[steps]]
name = "t-ant-track"
member = "ant-mlp-track"
weights_of = "t-ant"

[[steps]]
name = "t-bug"
member = "bug-mlp"
train = "--body bug --arch mlp {TINY} --iterations 2"
"""


def _plan(tmp_path: Path, ant_iterations: int) -> Path:
    p = tmp_path / f"plan-{ant_iterations}.toml"
    p.write_text(HEADER + PLAN.replace("ANT_ITERATIONS", str(ant_iterations)))
    return p


def _ship(db: Path, plan: Path, to: Path, commit: str, *extra: str) -> dict:
    import importlib.util

    script = Path(__file__).resolve().parents[1] / "scripts" / "ship_population.py"
    spec = importlib.util.spec_from_file_location("ship_population", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--db", str(db), "--plan", str(plan), "--code-commit", commit, "--to", str(to), *extra]) == 0
    return {a["name"]: a for a in json.loads((to / "manifest.json").read_text())["agents"]}


def _runs(db: Path) -> dict:
    """agent name -> (its run's init_from, iterations stored), for the agents training runs made."""
    from sumo_cli.store import registry
    from sumo_cli.store.database import Database
    from sumo_cli.store.models import Iteration, Run

    d = Database(f"sqlite:///{db}")
    out = {}
    with d.read() as s:
        agents = {n: registry.get_agent(s, n) for n in ("t-ant", "t-ant-track", "t-bug")}
        for name in ("t-ant", "t-bug"):
            run_id = (agents[name].origin or {}).get("run_id") if agents[name] else None
            if run_id is not None:
                n = s.query(Iteration).filter(Iteration.run_id == run_id).count()
                out[name] = (s.get(Run, run_id).config["train"]["init_from"], n)
        assert len(s.query(Run).all()) == len(out)  # no other run
        versions = {n: sorted(v.version for v in a.versions) if a else None for n, a in agents.items()}
    d.dispose()
    return out, versions


def _first_sitting(cli, tmp_path: Path, monkeypatch) -> tuple[Path, Path, dict]:  # noqa: ANN001
    """Sitting 1: the plan with the ant at 3 iterations trained and shipped; (database, policies, manifest)."""
    monkeypatch.setenv("SUMO_CHECKPOINTS", str(tmp_path / "ckpt"))
    db, policies = tmp_path / "db" / "sumo.sqlite", tmp_path / "policies"
    code, _, err = cli("population", "train", "--plan", _plan(tmp_path, 3), "-j", "2")
    assert code == 0, err
    return db, policies, _ship(db, _plan(tmp_path, 3), policies, "c1")


def _checkpoints(db: Path, name: str) -> list[str]:
    from sumo_cli.store import registry
    from sumo_cli.store.database import Database

    d = Database(f"sqlite:///{db}")
    with d.read() as s:
        out = [v.checkpoint_path for v in registry.get_agent(s, name).versions]
    d.dispose()
    return out


def _files(folder: Path) -> dict:
    return {str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.stat().st_ino) for p in folder.rglob("*")
            if p.is_file() and p.name != "manifest.json"}


def _fresh_machine(tmp_path: Path) -> None:
    shutil.rmtree(tmp_path / "db")
    shutil.rmtree(tmp_path / "ckpt")


@pytest.mark.slow
def test_a_plan_continues_from_what_shipped_on_a_fresh_machine(cli, tmp_path, monkeypatch):
    db, policies, first = _first_sitting(cli, tmp_path, monkeypatch)  # the ant to 3 iterations, the bug to 2
    assert [v["version"] for v in first["ant-mlp"]["versions"]] == [1, 2, 3]
    assert first["ant-mlp"]["provenance"]["iterations"] == 3
    assert [s["from_iteration"] for s in first["ant-mlp"]["provenance"]["sittings"]] == [0]
    # shipping one step again (--only) leaves the others' entries as they are, their commits included
    only_bug = _ship(db, _plan(tmp_path, 3), policies, "c1-bug", "--only", "t-bug")
    assert only_bug["ant-mlp"] == first["ant-mlp"] and only_bug["ant-mlp-track"] == first["ant-mlp-track"]
    assert only_bug["bug-mlp"]["provenance"]["code_commit"] == "c1-bug"
    first = _ship(db, _plan(tmp_path, 3), policies, "c1")
    # an agent shipped beside the population (scripts/ship_policy.py) keeps its entry through the next shipping
    manifest = json.loads((policies / "manifest.json").read_text())
    beside = {**first["ant-mlp"], "name": "beside-ant-mlp"}
    (policies / "manifest.json").write_text(json.dumps({**manifest, "agents": [*manifest["agents"], beside]}))
    files = _files(policies)

    # sitting 2, a fresh machine: only policies/ is left; the plan asks the ant for 5
    _fresh_machine(tmp_path)
    monkeypatch.setenv("SUMO_POLICIES", str(policies))
    code, out, err = cli("population", "show", "--plan", _plan(tmp_path, 5), "--json")
    assert code == 0, err
    rows = {r["step"]: r for r in json.loads(out)["steps"]}
    assert rows["t-ant"]["state"] == "to do" and rows["t-ant"]["continues"] == "from shipped"
    assert rows["t-ant"]["shipped"] == "ant-mlp@3" and (rows["t-ant"]["iterations"], rows["t-ant"]["of"]) == (3, 5)
    assert rows["t-bug"]["state"] == "done (from shipped)" and rows["t-bug"]["iterations"] == 2
    code, _, err = cli("population", "show", "--plan", _plan(tmp_path, 5))
    assert code == 0 and "from shipped" in err and "ant-mlp@3" in err and "done (from" in err  # the table may wrap
    code, _, err = cli("population", "train", "--plan", _plan(tmp_path, 5), "-j", "2")
    assert code == 0, err
    runs, versions = _runs(db)
    assert runs == {"t-ant": ("ant-mlp@3", 2)}  # 2 more iterations from the shipped final stage; the bug not retrained
    assert versions == {"t-ant": [1, 2], "t-ant-track": [1, 2], "t-bug": [1, 2]}  # the bug's are the shipped files
    code, out, _ = cli("population", "show", "--plan", _plan(tmp_path, 5), "--json")
    rows = {r["step"]: r for r in json.loads(out)["steps"]}
    assert [rows[n]["state"] for n in ("t-ant", "t-ant-track", "t-bug")] == ["done"] * 3
    assert (rows["t-ant"]["iterations"], rows["t-ant"]["of"]) == (5, 5)

    # a run that went on past its plan ships the plan's share (here to a copy: the plan asks 4 of its 5)
    shutil.copytree(policies, tmp_path / "policies-4")
    ant4 = _ship(db, _plan(tmp_path, 4), tmp_path / "policies-4", "c2")["ant-mlp"]
    assert [v["version"] for v in ant4["versions"]] == [1, 2, 3, 4] and ant4["default_version"] == 4
    assert ant4["provenance"]["iterations"] == 4 and "ships its first 1, 4 in all" in ant4["provenance"]["notes"]
    # retired first (the archives played its versions), the member ships its stages from the retired entry's files
    from sumo_cli.store import shipped

    shutil.copytree(policies, tmp_path / "policies-retired")
    shipped.retire(tmp_path / "policies-retired", ["ant-mlp", "ant-mlp-track"], "old", "replaced by its longer step")
    renewed = _ship(db, _plan(tmp_path, 5), tmp_path / "policies-retired", "c2")
    assert [v["version"] for v in renewed["ant-mlp"]["versions"]] == [1, 2, 3, 4, 5]
    assert [v["version"] for v in renewed["old-ant-mlp"]["versions"]] == [1, 2, 3]
    assert (tmp_path / "policies-retired" / "ant-mlp" / "v00001.safetensors").is_file()

    # shipped again: the ant's five stages over all its iterations, its sittings; the bug untouched
    second = _ship(db, _plan(tmp_path, 5), policies, "c2")
    ant = second["ant-mlp"]
    assert [v["version"] for v in ant["versions"]] == [1, 2, 3, 4, 5] and ant["default_version"] == 5
    assert [v["iteration"] for v in ant["versions"]] == [1, 2, 3, 4, 5]
    p = ant["provenance"]
    assert p["iterations"] == 5 and [(s["from_iteration"], s["iterations"]) for s in p["sittings"]] == [(0, 3), (3, 2)]
    assert p["sittings"][1]["continued_from"] == "ant-mlp@3" and p["sittings"][1]["code_commit"] == "c2"
    assert p["env_steps"] == sum(s["env_steps"] for s in p["sittings"]) == ant["versions"][-1]["env_steps"]
    assert second["bug-mlp"] == first["bug-mlp"] and second["ant-mlp-track"]["versions"] == ant["versions"]
    assert second["beside-ant-mlp"] == beside
    now = _files(policies)
    assert {k: v for k, v in now.items() if k in files} == files  # nothing shipped before was rewritten
    assert sorted(set(now) - set(files)) == ["ant-mlp/v00004.json", "ant-mlp/v00004.safetensors",
                                             "ant-mlp/v00005.json", "ant-mlp/v00005.safetensors"]

    # sitting 3, fresh again: the plan asks no more than shipped, so nothing trains
    _fresh_machine(tmp_path)
    code, _, err = cli("population", "train", "--plan", _plan(tmp_path, 5))
    assert code == 0, err
    runs, versions = _runs(db)
    assert runs == {} and versions == {"t-ant": [1, 2, 3, 4, 5], "t-ant-track": [1, 2, 3, 4, 5], "t-bug": [1, 2]}
    # the checkout moves (a new worktree): the steps registered from shipped follow the shipped files
    moved = tmp_path / "policies-moved"
    shutil.move(str(policies), str(moved))
    monkeypatch.setenv("SUMO_POLICIES", str(moved))
    code, _, err = cli("population", "train", "--plan", _plan(tmp_path, 5))
    assert code == 0, err
    assert _runs(db)[0] == {} and _checkpoints(db, "t-bug") and all(
        Path(c).is_relative_to(moved) for c in _checkpoints(db, "t-bug"))
    # ... and when the plan grows again, the step registered from shipped continues from its final stage
    code, _, err = cli("population", "train", "--plan", _plan(tmp_path, 6))
    assert code == 0, err
    runs, versions = _runs(db)
    assert runs == {"t-ant": ("ant-mlp@5", 1)} and versions["t-ant"] == [1]


def test_a_step_continues_with_options_of_sumo_train_from_its_shipped_final_stage():
    import typer

    from sumo_cli.cli.app import app
    from sumo_cli.runs.population_shipped import ShippedStep, continue_options
    from tests.test_population_plan import load_plan

    known = {o for p in typer.main.get_command(app).commands["train"].params for o in (*p.opts, *p.secondary_opts)}
    plan = load_plan()

    def last(opts: list[str], flag: str) -> str | None:
        values = [opts[i + 1] for i, t in enumerate(opts[:-1]) if t == flag]
        return values[-1] if values else None

    for member in ("spider-mlp", "ant-rl2", "ant-meta"):
        name = plan.members()[member]
        step = plan.step(name)
        opts = continue_options(step, ShippedStep(member, 150, 150, 0, (30, 60, 90, 120, 150)), 600)
        assert all(t.split("=", 1)[0] in known for t in opts if t.startswith("-"))
        assert last(opts, "--name") == name and last(opts, "--init-from") == f"{member}@150"
        assert last(opts, "--iterations") == "450" and last(opts, "--seed") == {"ant-meta": "7", "spider-mlp": "2"}.get(member, "1")
        opponents = last(opts, "--opponents").split(",")
        if member == "spider-mlp":  # self-play: its shipped history among its opponents, no beginner's start
            assert opponents == ["self", "pop-ant-mlp", "pop-bug-mlp", "spider-mlp"]
            assert last(opts, "--teacher") == "none" and last(opts, "--motionless-iterations") == "0"
        elif member == "ant-rl2":  # against the pool, as planned; its teacher taught the beginner only
            assert opponents == ["pop-ant-mlp", "pop-bug-mlp", "pop-spider-mlp"] and last(opts, "--teacher") == "none"
        else:  # the learning opponents and its teacher, as planned
            assert opponents == ["learn-ant-lstm", "learn-bug-lstm", "learn-spider-lstm"]
            assert last(opts, "--teacher") == "pop-ant-mlp@400"


@pytest.mark.slow
def test_a_sitting_run_under_another_name_ships_as_its_steps(cli, tmp_path, monkeypatch):
    """`ship_population --trained-as STEP=AGENT --only STEP`: a sitting that ran as a plain `sumo train`
    run, continued from the step's shipped final stage, ships as the step's next sitting."""
    db, policies, first = _first_sitting(cli, tmp_path, monkeypatch)
    monkeypatch.setenv("SUMO_POLICIES", str(policies))
    code, _, err = cli("train", "--body", "ant", "--arch", "mlp", *TINY.split(), "--name", "by-hand-ant",
                       "--init-from", "ant-mlp@3", "--iterations", "2")
    assert code == 0, err
    second = _ship(db, _plan(tmp_path, 5), policies, "c2", "--trained-as", "t-ant=by-hand-ant", "--only", "t-ant")
    ant = second["ant-mlp"]
    assert [v["version"] for v in ant["versions"]] == [1, 2, 3, 4, 5] and ant["provenance"]["iterations"] == 5
    last = ant["provenance"]["sittings"][-1]
    assert (last["from_iteration"], last["iterations"], last["continued_from"]) == (3, 2, "ant-mlp@3")
    assert "by-hand-ant" in last["trained_as"] and "by-hand-ant" in ant["provenance"]["command"]
    assert second["ant-mlp-track"]["versions"] == ant["versions"] and second["bug-mlp"] == first["bug-mlp"]
    # a run that did not continue from the step's shipped final stage is refused
    code, _, err = cli("train", "--body", "ant", "--arch", "mlp", *TINY.split(), "--name", "fresh-ant", "--iterations", "1")
    assert code == 0, err
    with pytest.raises(SystemExit, match="did not continue"):
        _ship(db, _plan(tmp_path, 5), policies, "c3", "--trained-as", "t-ant=fresh-ant", "--only", "t-ant")


@pytest.mark.slow
def test_a_step_whose_member_a_newer_step_took_over_is_found_from_shipped_under_its_retired_name(cli, tmp_path, monkeypatch):
    """A newer step fills the slot of an older one that still teaches it: the older member retired
    (scripts/retire_agents.py), a fresh machine counts the older step done from shipped under the
    retired name, so only the newer step trains, taught by the retired versions."""
    from sumo_cli.store import shipped

    db, policies, _ = _first_sitting(cli, tmp_path, monkeypatch)  # t-ant fills ant-mlp with 3 iterations
    shipped.retire(policies, ["ant-mlp", "ant-mlp-track"], "old", "a newer step fills the slot")
    plan = tmp_path / "plan-taken-over.toml"
    plan.write_text(HEADER + f"""
[[steps]]
name = "t-ant"
train = "--body ant --arch mlp {TINY} --iterations 3"

[[steps]]
name = "t-ant2"
member = "ant-mlp"
train = "--body ant --arch mlp {TINY} --teacher t-ant@3 --iterations 1"

[[steps]]
name = "t-ant-track"
member = "ant-mlp-track"
weights_of = "t-ant2"

[[steps]]
name = "t-bug"
member = "bug-mlp"
train = "--body bug --arch mlp {TINY} --iterations 2"
""")
    _fresh_machine(tmp_path)
    monkeypatch.setenv("SUMO_POLICIES", str(policies))
    code, out, err = cli("population", "show", "--plan", plan, "--json")
    assert code == 0, err
    rows = {r["step"]: r for r in json.loads(out)["steps"]}
    assert rows["t-ant"]["state"] == "done (from shipped)" and rows["t-ant"]["shipped"] == "old-ant-mlp@3"
    assert rows["t-ant2"]["state"] == "to do" and rows["t-bug"]["state"] == "done (from shipped)"
    code, _, err = cli("population", "train", "--plan", plan)
    assert code == 0, err
    from sumo_cli.store import registry
    from sumo_cli.store.database import Database
    from sumo_cli.store.models import Run

    d = Database(f"sqlite:///{db}")
    with d.read() as s:
        runs = {r.config["train"].get("init_from"): r.config["train"].get("teacher") for r in s.query(Run).all()}
        taught_by = registry.get_agent(s, "t-ant")
        assert sorted(v.version for v in taught_by.versions) == [1, 2, 3]  # the retired member's files
        assert all(Path(v.checkpoint_path).is_relative_to(policies / "old-ant-mlp") for v in taught_by.versions)
    d.dispose()
    assert runs == {"": "t-ant@3"}  # one run, the newer step's, taught by the older step's shipped versions


def _script(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_the_tracking_sibling_of_a_member_promoted_from_beside_the_population_ships_its_versions(cli, tmp_path, monkeypatch):
    """An agent trained beside the population (scripts/ship_policy.py) and promoted into a newer step's
    slot (scripts/promote_agent.py): shipping that step writes its tracking sibling, which plays the
    promoted versions, where the sibling of the retired member shipped before."""
    from sumo_cli.store import shipped

    db, policies, _ = _first_sitting(cli, tmp_path, monkeypatch)
    shipped.retire(policies, ["ant-mlp", "ant-mlp-track"], "old", "a newer step fills the slot")
    code, _, err = cli("train", "--body", "ant", "--arch", "mlp", *TINY.split(), "--iterations", "1", "--name", "cand")
    assert code == 0, err
    assert _script("ship_policy").main(["--db", str(db), "--agent", "cand", "--versions", "1", "--as", "cand",
                                        "--command", "sumo train ...", "--code-commit", "c2", "--to", str(policies)]) == 0
    plan = tmp_path / "plan-promoted.toml"
    plan.write_text(HEADER + PLAN.replace("ANT_ITERATIONS", "3").replace(
        'name = "t-ant"\nmember = "ant-mlp"', 'name = "t-ant"').replace('weights_of = "t-ant"', 'weights_of = "t-ant2"') + f"""
[[steps]]
name = "t-ant2"
member = "ant-mlp"
train = "--body ant --arch mlp --seed 1 --iterations 1"
""")
    assert _script("promote_agent").main(["cand", "--step", "t-ant2", "--plan", str(plan), "--to", str(policies)]) == 0
    _fresh_machine(tmp_path)
    monkeypatch.setenv("SUMO_POLICIES", str(policies))
    code, _, err = cli("population", "train", "--plan", plan)  # every step done from shipped: nothing trains
    assert code == 0, err
    agents = _ship(db, plan, policies, "c3", "--only", "t-ant2")
    track, member = agents["ant-mlp-track"], agents["ant-mlp"]
    assert track["strategy"] == "track" and track["versions"] == member["versions"]
    assert member["provenance"]["plan_step"]["name"] == "t-ant2"
    assert track["provenance"]["plan_step"] == {"name": "t-ant-track", "member": "ant-mlp-track", "weights_of": "t-ant2",
                                                "depends": ["t-ant2"]}
    assert track["provenance"]["trained_as"] == "cand" and "quality" not in track["provenance"]
    assert [v["version"] for v in agents["old-ant-mlp-track"]["versions"]] == [1, 2, 3]  # the retired sibling ships on
