"""`sumo experiment adaptation` pairs each adaptive agent with itself unadapted (NAME:none) on the
same seeds, and `sumo report`'s Fig. 5 states the paired difference (rounds won adapted minus
unadapted, mean and 95% interval over the paired games) as its first verdict."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sumo_cli.compete.experiment import layout
from sumo_cli.compete.pairing import pairs, seed_indexes, twins_to_add
from sumo_cli.report.paired import META_CLAIM, mean_ci


def _p(name: str, strategy: str, label: str | None = None) -> dict:
    agent = name.split("@")[0]
    return {"name": name, "agent": agent, "body": "ant", "arch": "lstm", "strategy": strategy, "label": label or name}


def test_twins_pairs_and_shared_seeds():
    players = [_p("ant-lstm-meta@1", "meta"), _p("ant-lstm@1", "track", "ant-lstm@1:track"), _p("ant-rl2@1", "rl2")]
    assert twins_to_add(players) == ["ant-lstm-meta@1:none", "ant-lstm@1:none"]  # RL^2 has no unadapted twin
    players += [_p("ant-lstm-meta@1", "none", "ant-lstm-meta@1:none"), _p("ant-lstm@1", "none")]
    assert twins_to_add(players) == []
    assert pairs(players) == [(0, 3), (1, 4)]
    cfg = {"kind": "adaptation", "agents": players, "opponents": [_p("bug-lstm@9", "none"), _p("spider-lstm@9", "none")],
           "episodes": [3], "repeats": 2}
    games = layout(cfg)
    seeds = seed_indexes({**cfg, "paired": True}, games)
    key = {(g["a"], g["b"], g["repeat"]): g["index"] for g in games}
    for b in (0, 1):
        for k in (0, 1):
            assert seeds[key[(3, b, k)]] == seeds[key[(0, b, k)]] == key[(0, b, k)]  # the twin plays the meta's seed
            assert seeds[key[(4, b, k)]] == key[(1, b, k)]
            assert seeds[key[(2, b, k)]] == key[(2, b, k)]
    assert len({seeds[key[(0, b, k)]] for b in (0, 1) for k in (0, 1)}) == 4  # other opponents, repeats: other seeds
    assert seed_indexes(cfg, games) == {g["index"]: g["index"] for g in games}  # a run made before pairing


def test_the_interval_is_a_t_interval():
    m, lo, hi = mean_ci(np.array([-3.0, -13.0, -7.0, -5.0, -9.0, -8.0]))
    assert m == pytest.approx(-7.5) and hi < 0 and (hi - lo) / 2 == pytest.approx(2.571 * np.std([-3, -13, -7, -5, -9, -8], ddof=1) / 6 ** 0.5, rel=1e-3)


def _generated_db(path: Path, gain: float) -> str:
    """An adaptation run (paired) whose meta-learner leads by ``gain`` log-odds adapted and drifts 0.1
    a round the same way, while unadapted it starts even and drifts the other way; 6 repeats against
    two opponents, generated without simulation."""
    from test_report import _game

    from sumo_cli.store import matches as SM
    from sumo_cli.store import runs as SG
    from sumo_cli.store import registry
    from sumo_cli.store.database import open_database

    db = open_database(f"sqlite:///{path}")
    rng = np.random.default_rng(3)
    vids = {}
    with db.write() as s:
        for name, body, strategy in (("ant-lstm-meta", "ant", "meta"), ("bug-lstm", "bug", "none"),
                                     ("spider-lstm", "spider", "none")):
            agent = registry.create_agent(s, name, body, "lstm", strategy, "trained", {})
            vids[name] = registry.add_version(s, agent, 1, f"/nowhere/{name}", "0" * 64).id
    meta = _p("ant-lstm-meta@1", "meta")
    twin = _p("ant-lstm-meta@1", "none", "ant-lstm-meta@1:none")
    cfg = {"kind": "adaptation", "agents": [meta, twin], "opponents": [_p("bug-lstm@1", "none"), _p("spider-lstm@1", "none")],
           "rounds": 20, "episodes": [3], "repeats": 6, "physics": "fast", "start_fraction": 0.35, "paired": True}
    with db.write() as s:
        run = SG.create_run(s, "adaptation", cfg, 5, 0, "test")
        for g in layout(cfg):
            adapted = cfg["agents"][g["a"]]["strategy"] == "meta"
            opp = cfg["opponents"][g["b"]]["agent"]
            SM.record_game(s, _game(rng, gain if adapted else 0.0, 0.0, cfg["rounds"], 3, (0.1 if adapted else -0.1) * np.sign(gain)), vids["ant-lstm-meta"], vids[opp],
                           code_version="test", mujoco_version="test", run_id=run, run_index=g["index"])
        SG.set_run_status(s, run, "finished", done=len(layout(cfg)))
    db.dispose()
    return str(path)


@pytest.mark.parametrize("gain, status", [(1.0, "agrees"), (-1.0, "disagrees")])
def test_the_report_states_the_paired_difference_as_fig5s_verdict(cli, tmp_path, gain, status):
    db = _generated_db(tmp_path / "gen.sqlite", gain)
    out = tmp_path / "results"
    code, stdout, err = cli("--db", db, "report", "--out", out, "--json")
    assert code == 0, err
    fig5 = next(p for p in json.loads(stdout)["parts"] if p["key"] == "fig5")
    first = fig5["verdicts"][0]
    assert first["claim"] == META_CLAIM and first["status"] == status
    assert "over 12 paired games on the same seeds" in first["reason"] and "rounds won of 20" in first["reason"]
    text = (out / "report.md").read_text()
    assert "| agent | strategy | opponent | paired games | adapted - unadapted (95%) |" in text
    assert "| ant-lstm-meta@1 | meta | all | 12 |" in text


def test_a_run_without_pairs_says_so(cli, tmp_path):
    from test_report import make_db

    db = make_db(tmp_path / "gen.sqlite", tournament=False, evolution=False, locomotion=False, calibration=False)
    code, stdout, err = cli("--db", db, "report", "--out", tmp_path / "r", "--json")
    assert code == 0, err
    fig5 = next(p for p in json.loads(stdout)["parts"] if p["key"] == "fig5")
    assert fig5["verdicts"][0]["status"] == "cannot tell" and "pairs them" in fig5["verdicts"][0]["reason"]


def test_experiment_adaptation_plays_the_unadapted_twin_on_the_same_seeds(cli, tmp_path, monkeypatch):

    import torch

    from sumo_cli.store import shipped
    from sumo_cli.nets import policy as P
    from sumo_cli.nets.checkpoint import checkpoint_tensors, save_checkpoint
    from sumo_cli.nets.normalizer import new_stats

    folder = tmp_path / "policies"
    spec = P.PolicySpec("mlp", 133, 8, features="ego")
    for name, versions in (("ant-mlp", (7,)), ("sparring-ant", (8, 16))):
        rows = []
        for v in versions:
            base = tmp_path / "run" / name / f"v{v:05d}"
            base.parent.mkdir(parents=True, exist_ok=True)
            sha = save_checkpoint(base, checkpoint_tensors(P.init_params(spec, torch.Generator().manual_seed(v)),
                                                           new_stats(133)), spec, body="ant", strategy="none")
            rows.append((v, base, sha, v, 100 * v))
        shipped.ship(folder, name, "ant", "mlp", "none", rows, {"command": "test"}, default_version=versions[-1])
    monkeypatch.setenv("SUMO_POLICIES", str(folder))
    code, out, err = cli("experiment", "adaptation", "--agents", "ant-mlp:track", "--opponents", "sparring-ant",
                         "--rounds", "2", "--episodes", "1", "--repeats", "2", "--physics", "fast", "--json")
    assert code == 0, err
    assert "paired with the same weights unadapted, on the same seeds: ant-mlp@7:none" in " ".join(err.split())
    run_id = json.loads(out)["run_id"]
    code, out, err = cli("runs", "show", run_id, "--json")
    cfg = json.loads(out)["run"]["config"]
    assert [(p["label"], p["strategy"]) for p in cfg["agents"]] == [("ant-mlp@7:track", "track"), ("ant-mlp@7", "none")]
    assert cfg["paired"] is True
    from sumo_cli.store import reports
    from sumo_cli.store.database import open_database

    db = open_database(str(tmp_path / "db" / "sumo.sqlite"))
    with db.read() as s:
        seeds = {g["index"]: g["seed"] for g in reports.run_games(s, run_id)}
    db.dispose()
    games = layout(cfg)
    by = {(g["a"], g["repeat"]): g["index"] for g in games}
    assert seeds[by[(0, 0)]] == seeds[by[(1, 0)]] and seeds[by[(0, 1)]] == seeds[by[(1, 1)]]
    assert seeds[by[(0, 0)]] != seeds[by[(0, 1)]]
