"""`sumo report`: the game-theoretic ranking (Nash averaging), Bradley-Terry, and the report itself on
a small generated database (every section, computed verdicts, the commands for what is missing), its
refusals, and `--run --quick` on the shipped agents."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from sumo_cli.compete import ratings as R
from sumo_cli.report import gametheory as G

REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------ game theory


def test_nash_averaging_of_rock_paper_scissors_is_uniform():
    p = np.array([[0.5, 0.9, 0.1], [0.1, 0.5, 0.9], [0.9, 0.1, 0.5]])
    nash = G.nash_averaging(p)
    assert np.allclose(nash["weights"], 1 / 3, atol=1e-6)
    assert np.allclose(nash["skill"], 0, atol=1e-6)


def test_nash_averaging_gives_copies_equal_shares_and_rates_the_dominated_below():
    # rock, paper, scissors, a copy of rock, and an agent every other one beats
    p = np.array([[.5, .9, .1, .5, .8], [.1, .5, .9, .1, .8], [.9, .1, .5, .9, .8], [.5, .9, .1, .5, .8],
                  [.2, .2, .2, .2, .5]])
    nash = G.nash_averaging(p)
    w = nash["weights"]
    assert w[0] == pytest.approx(w[3], abs=1e-4)  # the copies share rock's weight
    assert w[0] + w[3] == pytest.approx(1 / 3, abs=1e-4) and w[1] == pytest.approx(1 / 3, abs=1e-4)
    assert w[4] < 1e-6 and nash["skill"][4] < -1.0
    assert np.allclose(nash["skill"][:4], 0, atol=1e-5)


def test_nash_averaging_of_a_transitive_game_puts_all_weight_on_the_strongest():
    s = np.exp([2.0, 1.0, 0.0, -1.0])
    p = s[:, None] / (s[:, None] + s[None, :])
    nash = G.nash_averaging(p)
    assert nash["weights"][0] == pytest.approx(1.0, abs=1e-6)
    assert list(G.ranks(nash["skill"])) == [1, 2, 3, 4]


def test_bradley_terry_recovers_known_strengths():
    rng = np.random.default_rng(0)
    truth = np.array([1.0, 0.5, 0.0, -0.5, -1.0])
    games = []
    for _ in range(6000):
        a, b = rng.choice(5, 2, replace=False)
        pa = 1 / (1 + np.exp(truth[b] - truth[a]))
        games.append((int(a), int(b), "a" if rng.random() < pa else "b"))
    est = R.bradley_terry(5, games)
    assert np.max(np.abs(est - (truth - truth.mean()))) < 0.1


def test_the_win_rate_matrix_is_antisymmetric_and_fills_unmet_pairs_from_bradley_terry():
    # 0 beats 1 in most bouts, 1 beats 2; 0 and 2 never met
    wins, bouts = G.bout_counts(3, [(0, 1, 8, 2, 0), (1, 2, 7, 2, 1)])
    p, observed = G.win_rate_matrix(wins, bouts)
    assert np.allclose(p + p.T, 1.0)
    assert p[0, 1] == pytest.approx((8 + 1) / (10 + 2))
    assert p[1, 2] == pytest.approx((7.5 + 1) / (10 + 2))
    assert not observed[0, 2] and p[0, 2] > p[0, 1]  # predicted: 0 beats 2 by more than it beats 1
    a = G.log_odds(p)
    assert np.allclose(a, -a.T)
    assert G.nontransitive_cycles(p, observed, ["x", "y", "z"]) == []
    # a circle whose majorities are a coin's noise is not one
    pw = np.array([[0.5, 0.55, 0.45], [0.45, 0.5, 0.55], [0.55, 0.45, 0.5]])
    w = pw * 20
    assert G.nontransitive_cycles(pw, np.ones((3, 3), bool), ["x", "y", "z"], wins=w, bouts=np.full((3, 3), 20.0)) == []


def test_a_circle_is_found():
    p = np.array([[0.5, 0.8, 0.3], [0.2, 0.5, 0.7], [0.7, 0.3, 0.5]])
    assert G.nontransitive_cycles(p, np.ones((3, 3), bool), ["x", "y", "z"]) == ["x > y > z > x"]


def test_the_learning_opponent_strides_from_a_third_of_its_history_to_its_last_version():
    from sumo_cli.compete.learning_opponent import opponent_versions

    assert opponent_versions(list(range(1, 101)), 5) == [35, 51, 67, 83, 100]
    # few stored versions: the highest not above the target, the lowest while none is
    assert opponent_versions([120, 300, 600], 4) == [120, 300, 300, 600]
    assert opponent_versions([10, 20], 3) == [10, 10, 20]
    assert opponent_versions([7], 1) == [7]


# ------------------------------------------------------------------------------ a generated database

BODY_OF = {"ant": "ant", "bug": "bug", "spider": "spider"}
#: (name, body, arch, strategy, strength): the meta-learners strongest in each body/arch category
AGENTS = [("ant-lstm-meta", "ant", "lstm", "meta", 1.5), ("ant-lstm", "ant", "lstm", "none", 0.5),
          ("ant-mlp-meta", "ant", "mlp", "meta", 0.8), ("ant-mlp", "ant", "mlp", "none", -0.2),
          ("bug-lstm-meta", "bug", "lstm", "meta", 1.2), ("bug-lstm", "bug", "lstm", "none", 0.0),
          ("spider-mlp", "spider", "mlp", "none", -1.0)]


def _game(rng, sa: float, sb: float, rounds: int, episodes: int, trend: float = 0.0) -> dict:
    """A generated game: A wins each bout with the logistic of its strength lead, plus ``trend``
    log-odds per round (adaptation over the game)."""
    from sumo_cli.compete.rules import game_outcome

    rds = []
    for k in range(rounds):
        pa = 1 / (1 + np.exp(sb - sa - trend * (k - rounds / 2)))
        eps = ["win" if rng.random() < pa else "loss" for _ in range(episodes)]
        wa, wb = eps.count("win"), eps.count("loss")
        rds.append({"index": k, "version_a": 1, "version_b": 1, "outcome": "a" if wa > wb else "b" if wb > wa else "draw",
                    "wins_a": wa, "wins_b": wb, "draws": 0,
                    "episodes": [{"outcome": e, "reason": "ring_out", "length": 100} for e in eps]})
    ra, rb = sum(r["outcome"] == "a" for r in rds), sum(r["outcome"] == "b" for r in rds)
    return {"settings": {"rounds": rounds, "episodes": episodes, "physics": "fast", "threads": 1}, "seed": 0,
            "outcome": game_outcome(ra, rb, rounds), "rounds_won_a": ra, "rounds_won_b": rb,
            "rounds_drawn": rounds - ra - rb, "rounds": rds, "timing": {}, "wall_seconds": 0.0}


def make_db(path: Path, tournament: bool = True, evolution: bool = True, locomotion: bool = True,
            adaptation: bool = True, calibration: bool = True) -> str:
    """A database with generated results (no simulation): a tournament, an evolution, a locomotion
    evaluation, an adaptation experiment and a calibration, in which the meta-learners are the
    strongest and adapt over a game while the others fall behind."""
    from sumo_cli.compete.schedule import random_pairs
    from sumo_cli.store import matches as store_matches
    from sumo_cli.store import runs as store_runs
    from sumo_cli.store import registry
    from sumo_cli.store.database import open_database
    from sumo_cli.store.models import Member as MemberRow

    url = f"sqlite:///{path}"
    db = open_database(url)
    rng = np.random.default_rng(1)
    vids, members = [], []
    with db.write() as s:
        for name, body, arch, strategy, _ in AGENTS:
            agent = registry.create_agent(s, name, body, arch, strategy, "trained", {})
            vids.append(registry.add_version(s, agent, 1, f"/nowhere/{name}", "0" * 64).id)
            members.append({"name": f"{name}@1", "body": body, "arch": arch, "strategy": strategy})
    strength = [a[4] for a in AGENTS]
    if tournament:
        config = {"members": members, "matches": 60, "game": {"rounds": 5, "episodes": 3, "physics": "fast", "threads": 1},
                  "draw_probability": R.equal_agents_draw_probability(5, 3)}
        with db.write() as s:
            run = store_runs.create_run(s, "tournament", config, 3, 60, "test")
            for g in random_pairs(len(members), 60, 3):
                store_matches.record_game(s, _game(rng, strength[g.a], strength[g.b], 5, 3), vids[g.a], vids[g.b],
                               code_version="test", mujoco_version="test", run_id=run, run_index=g.index)
            store_runs.set_run_status(s, run, "finished", done=60)
    if evolution:
        config = {"members": members, "copies": 2, "generations": 2, "matches": 4,
                  "game": {"rounds": 5, "episodes": 3, "physics": "fast", "threads": 1}}
        slots = [[i // 2 for i in range(14)], [0, 0, 1, 0, 2, 2, 4, 4, 4, 5, 0, 4, 1, 6],
                 [0, 0, 0, 0, 4, 2, 4, 4, 4, 4, 0, 4, 0, 4]]
        with db.write() as s:
            run = store_runs.create_run(s, "evolution", config, 0, 8, "test")
            for gen, row in enumerate(slots):
                for slot, m in enumerate(row):
                    s.add(MemberRow(run_id=run, generation=gen, slot=slot, version_id=vids[m], parent_slot=slot))
            store_runs.set_run_status(s, run, "finished", done=8)
    if locomotion:
        results = []
        for agent, strategy, late in (("loco-mlp@5", "none", 20.0), ("loco-mlp-track@5", "track", 21.0),
                                      ("loco-mlp-meta@5", "meta", 60.0)):
            for pair in ("back", "middle", "front"):
                mean = [50.0, 45.0, 40.0, 35.0, 30.0, late, late]
                results.append({"agent": agent, "arch": "mlp", "strategy": strategy, "pair": pair, "legs": [0, 1],
                                "mean": mean, "ci95": [3.0] * 7, "returns": [], "seconds": 0.1})
        with db.write() as s:
            run = store_runs.create_run(s, "locomotion-eval", {"agents": ["loco-mlp", "loco-mlp-track", "loco-mlp-meta"],
                                                       "repeats": 5, "pairs": ["back", "middle", "front"], "episodes": 7},
                                11, len(results), "test")
            store_runs.set_run_status(s, run, "finished", done=len(results), state={"results": results})
    def player(i: int, strategy: str | None = None) -> dict:
        m = members[i]
        return {"name": m["name"], "agent": m["name"].split("@")[0], "body": m["body"], "arch": m["arch"],
                "strategy": strategy or m["strategy"], "label": m["name"]}

    def experiment(kind: str, cfg: dict, trend_of) -> None:  # noqa: ANN001
        from sumo_cli.compete.experiment import layout

        with db.write() as s:
            run = store_runs.create_run(s, kind, cfg, 5, 0, "test")
            for g in layout(cfg):
                a, b = cfg["agents"][g["a"]], cfg["opponents"][g["b"]]
                ia, ib = members.index(next(m for m in members if m["name"] == a["name"])), \
                    members.index(next(m for m in members if m["name"] == b["name"]))
                store_matches.record_game(s, _game(rng, 0.0, 0.0, cfg["rounds"], g["episodes"], trend_of(a)), vids[ia], vids[ib],
                               code_version="test", mujoco_version="test", run_id=run, run_index=g["index"])
            store_runs.set_run_status(s, run, "finished", done=len(layout(cfg)))

    if adaptation:  # the meta-learner gains 0.25 log-odds a round, the other loses as much
        cfg = {"kind": "adaptation", "agents": [player(0), player(1)], "opponents": [player(4), player(6)],
               "rounds": 12, "episodes": [3], "repeats": 6, "physics": "fast", "start_fraction": 0.35}
        experiment("adaptation", cfg, lambda a: 0.25 if a["strategy"] == "meta" else -0.25)
    if calibration:  # equal bodies
        ps = [player(1), player(5), player(6)]
        cfg = {"kind": "calibration", "agents": ps, "opponents": ps, "rounds": 10, "episodes": [3], "repeats": 8,
               "physics": "fast", "start_fraction": 0.35}
        experiment("calibration", cfg, lambda a: 0.0)
    db.dispose()
    return str(path)


def test_the_report_draws_every_stored_experiment_with_computed_verdicts(cli, tmp_path):
    db = make_db(tmp_path / "gen.sqlite")
    out = tmp_path / "results"
    code, stdout, err = cli("--db", db, "report", "--out", out, "--json")
    assert code == 0, err
    doc = json.loads(stdout)
    keys = [p["key"] for p in doc["parts"]]
    assert keys == ["fig3", "fig5", "fig7", "top5", "nash", "fig8", "calibration"]
    status = {(p["key"], v["claim"]): v["status"] for p in doc["parts"] for v in p["verdicts"]}
    assert status[("fig7", "meta-learners top every body x policy category")] == "agrees"
    assert status[("fig3", "meta-updated policies are best by episodes 6-7")] == "agrees"
    assert status[("fig3", "tracking does not improve on no adaptation")] == "agrees"
    assert status[("fig8", "meta-learners end up dominating")] == "agrees"
    assert status[("fig5", "meta-learned adaptation improves its win rate over the game")] == "agrees"
    assert status[("fig5", "the baselines' win rates deteriorate over the game")] == "agrees"
    assert ("calibration", "the paper's densities balance the bodies here") in status
    text = (out / "report.md").read_text()
    for heading in ("## Fig. 3", "## Fig. 5", "## Fig. 7", "## Top-5 table", "## Beyond the paper: win-rate matrix",
                    "## Fig. 8", "## Calibration of the bodies"):
        assert heading in text
    assert "sumo tournament --agents ant-lstm-meta@1," in text and "--matches 60 --rounds 5 --episodes 3" in text
    assert "Nash averaging skill (95%)" in text and "Kendall's τ" in text
    assert "| paper, calibrated (13, 10, 39) | 50.6% | 51.6% | 51.7% |" in text and "Proposed densities" in text
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert len(pngs) == 8 and all(0 < (out / p).stat().st_size < 200_000 for p in pngs)
    for p in pngs:
        assert f"]({p})" in text
    assert [m["key"] for m in doc["missing"]] == ["fig6"]
    assert "sumo experiment sample-complexity --agents" in doc["missing"][0]["command"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".results")]  # no staging left


def test_the_report_prints_the_commands_for_what_is_missing(cli, tmp_path):
    db = make_db(tmp_path / "gen.sqlite", evolution=False, locomotion=False, adaptation=False, calibration=False)
    out = tmp_path / "results"
    code, _, err = cli("--db", db, "report", "--out", out)
    assert code == 0, err
    flat = " ".join(err.split())
    assert "sumo eval locomotion loco-mlp loco-mlp-track loco-mlp-meta --repeats 50" in flat
    assert "sumo evolve --copies 10 --generations 10 --matches 1000" in flat
    assert "or a small version: sumo evolve --agents" in flat  # the database has the agents for a small one
    text = (out / "report.md").read_text()
    assert "## Not yet run" in text and "### Fig. 8: evolution of a population" in text
    assert "sumo evolve --copies 10" in text


def test_the_report_refuses_bad_input_and_writes_nothing(cli, tmp_path):
    db = make_db(tmp_path / "gen.sqlite", tournament=False, evolution=False, locomotion=False, adaptation=False,
                 calibration=False)
    code, _, err = cli("--db", db, "report", "--quick", "--out", tmp_path / "r")
    assert code == 2 and "add --run" in err and not (tmp_path / "r").exists()
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep")
    code, _, err = cli("--db", db, "report", "--out", other)
    assert code == 2 and "holds files that no earlier report wrote there (notes.txt)" in " ".join(err.split())
    assert [p.name for p in other.iterdir()] == ["notes.txt"]
    code, _, err = cli("--db", db, "report", "--out", tmp_path / "r", "-j", "0")
    assert code == 2 and "--workers" in err


@pytest.mark.slow
def test_report_run_quick_plays_small_experiments_on_the_shipped_agents(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("SUMO_POLICIES", str(REPO / "policies"))
    db = tmp_path / "q.sqlite"
    out = tmp_path / "results"
    t0 = time.perf_counter()
    code, stdout, err = cli("--db", db, "report", "--run", "--quick", "-j", "1", "--out", out, "--json")
    assert code == 0, err
    assert time.perf_counter() - t0 < 120
    doc = json.loads(stdout)
    keys = {p["key"] for p in doc["parts"]}
    assert keys == {"fig3", "fig5", "fig6", "fig7", "top5", "nash", "fig8", "calibration"}
    assert doc["missing"] == []
    # no locomotion agent ships: the quick Fig. 3 trained toy ones under names of their own
    code, stdout, err = cli("--db", db, "agents", "--json")
    assert {"toy-loco-mlp", "toy-loco-mlp-track", "toy-loco-mlp-meta"} <= {a["name"] for a in json.loads(stdout)}, stdout
    assert (out / "report.md").is_file()
    # a second report reads the same runs and runs nothing more
    code, stdout, err = cli("--db", db, "report", "--run", "--quick", "-j", "1", "--out", out, "--json")
    assert code == 0 and "running" not in err, err
    assert os.path.getsize(out / "report.md") > 1000


def test_experiment_commands_refuse_bad_input_in_one_sentence_and_write_nothing(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("SUMO_POLICIES", str(REPO / "policies"))
    db = tmp_path / "e.sqlite"
    cases = [(("adaptation", "--agents", "ant-lstm:fly"), "strategy after ':'"),
             (("adaptation", "--agents", "ant-lstm,ant-lstm"), "same player twice"),
             (("adaptation",), "--agents"),
             (("adaptation", "--agents", "ant-lstm", "--rounds", "0"), "--rounds must be at least 1"),
             (("sample-complexity", "--agents", "ant-lstm", "--episodes", "3,x"), "whole numbers"),
             (("calibration", "--agents", "ant-lstm,ant-mlp"), "at least two bodies"),
             (("adaptation", "--resume", "99"), "no run with id 99")]
    for args, words in cases:
        code, _, err = cli("--db", db, "experiment", *args)
        assert code == 2 and words in " ".join(err.split()), (args, err)
    code, out, err = cli("--db", db, "runs", "--json")
    assert code == 0 and json.loads(out) == [], out


@pytest.mark.slow
def test_ctrl_c_during_report_run_exits_130_with_the_resume_command_and_writes_no_report(tmp_path):
    import signal
    import subprocess
    import sys

    from sqlalchemy import create_engine, text

    db, out = tmp_path / "c.sqlite", tmp_path / "results"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200", "SUMO_POLICIES": str(REPO / "policies"),
           "PYTHONPATH": str(REPO)}
    env.pop("SUMO_DB", None)
    proc = subprocess.Popen([sys.executable, "-m", "sumo_cli", "--db", str(db), "report", "--run", "--quick", "-j", "1",
                             "--out", str(out)], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    def stored() -> int:
        engine = create_engine(f"sqlite:///{db}")
        try:
            with engine.connect() as conn:
                return conn.execute(text("SELECT count(*) FROM matches")).scalar()
        except Exception:  # noqa: BLE001 - not created yet
            return 0
        finally:
            engine.dispose()

    deadline = time.time() + 120
    while stored() < 2 and time.time() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    flat = " ".join(err.split())
    assert "Resume with: sumo --db" in flat and "tournament --resume " in flat, err
    assert "the report was not written" in flat
    assert not out.exists() and not list(tmp_path.glob(".results*"))


def test_report_run_at_paper_scale_skips_what_the_database_lacks_the_agents_for(cli, tmp_path):
    db = make_db(tmp_path / "gen.sqlite", tournament=False, evolution=False, locomotion=False, adaptation=False,
                 calibration=False)
    code, stdout, err = cli("--db", db, "report", "--run", "--out", tmp_path / "r", "--json")
    assert code == 0, err
    flat = " ".join(err.split())
    assert "running" not in flat
    assert "skipped Fig. 3: nonstationary locomotion: the database lacks 3 of the agents" in flat
    assert "skipped Fig. 8: evolution of a population: the database lacks" in flat
    doc = json.loads(stdout)
    assert {m["key"] for m in doc["missing"]} == {"fig3", "fig5", "fig6", "fig7", "fig8", "calibration"}
    assert "spider-lstm" in next(m for m in doc["missing"] if m["key"] == "calibration")["lacking"]
