"""Bad input is refused before anything is written: a missing or corrupt checkpoint of an agent
in a tournament or evolution, or of an opponent of a training run, leaves the database as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

TINY = ["--recipe", "paper", "--envs", "2", "--steps", "40", "--physics", "fast", "--epochs", "2", "--minibatches", "2",
        "--anneal", "2", "--iterations", "1"]


def _counts(tmp_path: Path) -> dict:
    from sumo_cli.store.database import open_database
    from sumo_cli.store.models import Agent, Match, Member, Run, Version

    db = open_database(str(tmp_path / "db" / "sumo.sqlite"))
    with db.read() as s:
        out = {m.__name__: s.query(m).count() for m in (Agent, Version, Run, Match, Member)}
    db.dispose()
    return out


def _checkpoint(tmp_path: Path, agent: str) -> Path:
    from sumo_cli.nets.checkpoint import checkpoint_paths
    from sumo_cli.store.database import open_database
    from sumo_cli.store.registry import resolve

    db = open_database(str(tmp_path / "db" / "sumo.sqlite"))
    with db.read() as s:
        path = checkpoint_paths(resolve(s, agent).checkpoint_path)[0]  # the .safetensors file
    db.dispose()
    return path


def _spoil(path: Path, how: str) -> None:
    if how == "missing":
        path.unlink()
    else:
        path.write_bytes(path.read_bytes()[:-50] + b"x" * 50)


@pytest.fixture
def two_agents(cli):
    for extra in ([], ["--name", "other"]):
        code, _, err = cli("train", "--body", "ant", "--arch", "mlp", *TINY, *extra)
        assert code == 0, err


@pytest.mark.parametrize("how", ["missing", "corrupt"])
@pytest.mark.parametrize("command", [
    ("tournament", "--agents", "ant-mlp,other", "--matches", "2"),
    ("evolve", "--agents", "ant-mlp,other", "--generations", "1", "--matches", "2"),
])
def test_a_bad_checkpoint_in_the_population_writes_no_run(cli, tmp_path, two_agents, how, command):
    _spoil(_checkpoint(tmp_path, "other"), how)
    before = _counts(tmp_path)
    code, out, err = cli(*command, "--rounds", "1", "--episodes", "1", "-j", "1")
    assert code == 2 and "checkpoint" in err and out == "", err
    assert _counts(tmp_path) == before


@pytest.mark.parametrize("how", ["missing", "corrupt"])
def test_a_bad_opponent_checkpoint_writes_no_run_and_keeps_the_name_free(cli, tmp_path, two_agents, how):
    _spoil(_checkpoint(tmp_path, "other"), how)
    before = _counts(tmp_path)
    args = ["train", "--body", "ant", "--arch", "mlp", "--strategy", "track", *TINY]
    code, out, err = cli(*args, "--opponents", "other")
    assert code == 2 and "checkpoint" in err and out == "", err
    assert _counts(tmp_path) == before
    code, _, err = cli(*args, "--opponents", "ant-mlp")  # the name ant-mlp-track is still free
    assert code == 0, err


@pytest.mark.parametrize("command, bad", [
    ("tournament", ("-j", "0")), ("tournament", ("--leaderboard-every", "0")), ("tournament", ("--top", "0")),
    ("evolve", ("-j", "0")),  # the other two are tournament options
])
def test_a_bad_option_writes_no_run(cli, tmp_path, monkeypatch, command, bad):
    """-j 0 (and the other options) are refused before the run is written, not after."""
    monkeypatch.setenv("SUMO_POLICIES", str(Path(__file__).resolve().parents[1] / "policies"))
    code, out, err = cli(command, "--agents", "ant-mlp,bug-mlp", "--matches", "1", "--rounds", "1", *bad)
    assert code == 2 and "at least 1" in err, err
    assert _counts(tmp_path)["Run"] == 0
