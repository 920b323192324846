"""NAME[@V][:STRATEGY]: every command that plays agents plays a policy with the strategy asked for,
so a shipped policy adapts without a training run; the strategy is kept with the games."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sumo_cli import names
from sumo_cli.store import shipped
from sumo_cli.errors import UserError

GAME = ("--rounds", "2", "--episodes", "1", "--physics", "fast")


@pytest.fixture
def policies(shipped_ants: Path) -> Path:
    return shipped_ants


def test_the_grammar_takes_a_strategy_after_the_name_and_version():
    ref = names.parse("bug-lstm@20:META")
    assert (ref.name, ref.version, ref.strategy, ref.played_as) == ("bug-lstm", 20, "none", "meta")
    assert ref.display == "bug-lstm@20:meta"
    assert names.parse("ant-lstm:track").played_as == "track" and names.parse("ant-lstm").played_as is None
    assert names.parse("zoo-ant-lstm-v3:none").name == "zoo-ant-lstm-v3"
    for bad in ("ant-lstm:rl2", "ant-lstm:fast", "ant-lstm:"):
        with pytest.raises(UserError, match="after ':'"):
            names.parse(bad)
    with pytest.raises(UserError, match="':'"):
        names.validate_custom_name("mine:track")
    with pytest.raises(UserError, match="drop ':track'"):
        names.without_strategy("ant-lstm:track", "--opponents")


def test_play_adapts_a_shipped_policy_and_the_match_keeps_the_strategy(policies, cli):
    code, out, err = cli("play", "ant-mlp:track", "sparring-ant:meta", *GAME, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["a"], doc["b"]) == ("ant-mlp@7:track", "sparring-ant@7:meta")
    # meta on a policy that learnt no step sizes plays with the stated defaults, said in one line
    assert "sparring-ant@7:meta learnt no step sizes" in " ".join(err.split())
    code, out, err = cli("matches", "--json")
    assert code == 0, err
    row = json.loads(out)[0] if isinstance(json.loads(out), list) else json.loads(out)["matches"][0]
    assert (row["a"], row["b"]) == ("ant-mlp@7:track", "sparring-ant@7:meta")
    # the agent's own strategy is the plain name
    code, out, err = cli("play", "ant-mlp:none", "sparring-ant", *GAME, "--json")
    assert code == 0, err
    assert json.loads(out)["a"] == "ant-mlp@7"


def test_the_strategy_is_played(policies, tmp_path):
    from sumo_cli.compete.game import AgentData
    from sumo_cli.store.library import load_agent
    from sumo_cli.store.database import Database

    db = Database(f"sqlite:///{tmp_path / 'a.sqlite'}")
    shipped.register_shipped(db)
    a = AgentData.from_loaded(load_agent(db, "ant-mlp@7:track"))
    assert a.strategy == "track" and a.player().strategy == "track" and a.display == "ant-mlp@7:track"
    assert AgentData.from_loaded(load_agent(db, "ant-mlp")).strategy == "none"


def test_tournament_and_evolve_take_strategies_and_refuse_one_version_twice(policies, cli):
    code, out, err = cli("tournament", "--agents", "ant-mlp:track,sparring-ant", "--matches", "1", *GAME, "-j", "1",
                         "--json")
    assert code == 0, err
    assert sorted(r["agent"] for r in json.loads(out)["leaderboard"]) == ["ant-mlp@7:track", "sparring-ant@7"]
    for command in ("tournament", "evolve"):
        code, out, err = cli(command, "--agents", "ant-mlp,ant-mlp:meta", "--matches", "1", *GAME)
        assert code == 2 and "twice" in err and "Traceback" not in err, err


@pytest.mark.parametrize("args", [
    ("play", "ant-mlp:rl2", "sparring-ant"),
    ("eval", "sumo", "ant-mlp:track", "--versions", "7"),
    ("eval", "sumo", "ant-mlp", "--versions", "7", "--against", "sparring-ant:meta"),
    ("train", "--body", "ant", "--arch", "mlp", "--name", "fresh", "--opponents", "sparring-ant:track"),
])
def test_a_strategy_where_none_can_apply_is_one_sentence(policies, cli, args):
    code, out, err = cli(*args)
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2, err


def test_bench_game_measures_the_strategy_named_after_a(policies, cli):
    code, out, err = cli("bench", "game", "--agents", "ant-mlp:track,sparring-ant:meta", "--rounds", "1",
                         "--episodes", "1", "--concurrent", "1", "--reference-games", "0", "--physics", "fast", "--json")
    assert code == 0, err
    assert list(json.loads(out)["strategies"]) == ["track"]
    code, out, err = cli("bench", "game", "--agents", "ant-mlp:track,sparring-ant", "--strategies", "none")
    assert code == 2 and "given twice" in err, err
