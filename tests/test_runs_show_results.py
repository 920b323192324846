"""`sumo runs show RUN` shows a finished tournament or evolution as it ended: the same leaderboard,
Bradley-Terry strengths, summaries and shares as the run printed, and its figures."""

from __future__ import annotations

import json

import pytest

AGENTS = "zoo-ant-mlp-v3,zoo-bug-mlp-v3,zoo-spider-mlp-v3"
GAMES = ["--rounds", "1", "--episodes", "1", "--physics", "fast", "-j", "1", "--seed", "4"]


@pytest.fixture
def three_agents(cli, zoo_dir):
    code, _, err = cli("zoo", "import", zoo_dir)
    assert code == 0, err


def test_a_finished_tournament_is_shown_as_it_ended(cli, tmp_path, three_agents):
    code, out, err = cli("tournament", "--agents", AGENTS, "--matches", "4", *GAMES, "--json")
    assert code == 0, err
    ended = json.loads(out)
    code, out, err = cli("runs", "show", ended["run_id"], "--json", "--heatmap", tmp_path / "heat.png")
    assert code == 0, err
    shown = json.loads(out)
    assert shown["run"]["status"] == "finished"
    assert shown["results"]["leaderboard"] == ended["leaderboard"]
    assert shown["results"]["categories"] == ended["categories"]
    assert all("bradley_terry" in r for r in shown["results"]["leaderboard"])
    assert (tmp_path / "heat.png").stat().st_size > 1000
    code, _, err = cli("runs", "show", ended["run_id"])
    assert code == 0 and "leaderboard" in err and "by body" in err and "zoo-spider-mlp-v3@1" in err, err
    # resuming a finished run names a command that shows it
    code, _, err = cli("tournament", "--resume", ended["run_id"])
    assert code == 2 and f"sumo runs show {ended['run_id']}" in " ".join(err.split()), err


def test_a_finished_evolution_is_shown_as_it_ended(cli, tmp_path, three_agents):
    code, out, err = cli("evolve", "--agents", AGENTS, "--copies", "2", "--generations", "2",
                         "--matches", "3", *GAMES, "--json")
    assert code == 0, err
    ended = json.loads(out)
    code, out, err = cli("runs", "show", ended["run_id"], "--json", "--plot", tmp_path / "shares.png", "--by", "body")
    assert code == 0, err
    assert json.loads(out)["generations"] == ended["generations"]
    assert (tmp_path / "shares.png").stat().st_size > 1000
    code, _, err = cli("runs", "show", ended["run_id"])
    assert code == 0 and "share of the population" in err, err
    code, _, err = cli("evolve", "--resume", ended["run_id"])
    assert code == 2 and f"sumo runs show {ended['run_id']}" in " ".join(err.split()), err
    code, _, err = cli("runs", "show", ended["run_id"], "--heatmap", tmp_path / "h.png")
    assert code == 2 and "tournaments only" in err


def test_an_evolution_in_play_shows_what_its_played_games_give(cli, tmp_path, three_agents):
    """Before a generation is complete, `runs show` gives the shares its played games give; with all
    of them played, those are the shares the generation ends with."""
    from sqlalchemy import create_engine, text

    code, out, err = cli("evolve", "--agents", AGENTS, "--copies", "2", "--generations", "1",
                         "--matches", "4", *GAMES, "--json")
    assert code == 0, err
    ended = json.loads(out)
    run_id = ended["run_id"]
    code, out, _ = cli("runs", "show", run_id, "--json")
    assert json.loads(out)["current"] is None  # finished: nothing in play
    # As if the run had stopped after its games, before it stored the next generation.
    engine = create_engine(f"sqlite:///{tmp_path / 'db' / 'sumo.sqlite'}")
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM members WHERE generation = 1"))
        conn.execute(text("UPDATE runs SET status = 'interrupted'"))
    code, out, err = cli("runs", "show", run_id, "--json")
    assert code == 0, err
    current = json.loads(out)["current"]
    assert (current["generation"], current["played"], current["games"]) == (1, 4, 4)
    assert current["shares"] == ended["generations"][1]
    with engine.begin() as conn:  # fewer games played: the shares move back toward the start
        last = conn.execute(text("SELECT max(run_index) FROM matches")).scalar()
        ids = [r[0] for r in conn.execute(text(f"SELECT id FROM matches WHERE run_index < {last}"))]
        conn.execute(text(f"DELETE FROM episodes WHERE round_id IN (SELECT id FROM rounds WHERE match_id IN ({','.join(map(str, ids))}))"))
        conn.execute(text(f"DELETE FROM rounds WHERE match_id IN ({','.join(map(str, ids))})"))
        conn.execute(text(f"DELETE FROM matches WHERE run_index < {last}"))
    engine.dispose()
    code, out, err = cli("runs", "show", run_id, "--json")
    current = json.loads(out)["current"]
    assert current["played"] == 1
    moved = sum(abs(current["shares"]["kind"][k] - v) for k, v in ended["generations"][0]["kind"].items())
    assert moved == pytest.approx(0.0) or moved == pytest.approx(2 / 6)  # one game: one slot of 6 changes hands
    code, _, err = cli("runs", "show", run_id)
    assert code == 0 and "generation 1 in play: 1 of 4 games played" in " ".join(err.split()), err
    # the report draws it too, with no verdict before a generation is complete
    code, out, err = cli("report", "--out", tmp_path / "results", "--json")
    assert code == 0, err
    part = next(p for p in json.loads(out)["parts"] if p["key"] == "fig8")
    assert {v["status"] for v in part["verdicts"]} == {"cannot tell"}
    text = (tmp_path / "results" / "report.md").read_text()
    assert "generation 1 in play: 1 of 4 games played" in text and "| generation 1 so far |" in text
