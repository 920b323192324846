"""The options of `sumo` itself (--db) are taken after the subcommand too."""

from __future__ import annotations

import json

from sumo_cli.cli.app import hoist_options


def test_global_options_after_the_subcommand(cli, tmp_path):
    db = tmp_path / "elsewhere" / "x.sqlite"
    db.parent.mkdir()
    code, out, err = cli("agents", "--json", "--db", str(db))
    assert code == 0, err
    json.loads(out)
    assert db.is_file() and not (tmp_path / "db" / "sumo.sqlite").exists()
    code, out, err = cli("runs", "show", "1", f"--db={db}")
    assert code == 2 and "no run with id 1" in err, err
    code, out, err = cli("play", "ant-mlp", "bug-mlp", "--rounds", "1", "--db", str(db))
    assert code == 2 and "unknown agent" in err and "No such option" not in err, err


def test_hoisting_keeps_everything_else_in_order():
    takes = {"--db": True, "--version": False}
    assert hoist_options(["play", "a", "b", "--db", "x", "--rounds", "3"], takes) == \
        ["--db", "x", "play", "a", "b", "--rounds", "3"]
    assert hoist_options(["runs", "--db=x", "--json"], takes) == ["--db=x", "runs", "--json"]
    assert hoist_options(["play", "--", "--db", "x"], takes) == ["play", "--", "--db", "x"]
    assert hoist_options(["agents", "--db"], takes) == ["agents", "--db"]  # no value: the parser says so
