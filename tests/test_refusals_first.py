"""Refusals come before anything is written: a SUMO_POLICIES folder that is not there creates no
database, and sizes far beyond the paper's (rounds, episodes, matches, repeats, generations, copies)
are one sentence naming the limit."""

from __future__ import annotations

import pytest


def test_a_missing_policies_folder_creates_no_database(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("SUMO_POLICIES", str(tmp_path / "missing"))
    for args in (("agents",), ("play", "ant-mlp", "bug-mlp", "--rounds", "2")):
        code, out, err = cli("--db", tmp_path / "new.sqlite", *args)
        assert code == 2 and "SUMO_POLICIES=" in err and "does not exist" in err, err
        assert out == "" and not (tmp_path / "new.sqlite").exists()


@pytest.mark.parametrize("args, sentence", [
    (("play", "ant-mlp", "bug-mlp", "--rounds", "99999999999"), "--rounds must be at most 10,000, got 99,999,999,999"),
    (("play", "ant-mlp", "bug-mlp", "--episodes", "5000"), "--episodes must be at most 1,000, got 5,000"),
    (("tournament", "--rounds", "99999999999"), "--rounds must be at most 10,000"),
    (("tournament", "--matches", "1000000000"), "--matches must be at most 1,000,000, got 1,000,000,000"),
    (("evolve", "--generations", "100000"), "--generations must be at most 10,000"),
    (("evolve", "--copies", "5000"), "--copies must be at most 1,000"),
    (("experiment", "adaptation", "--agents", "ant-mlp", "--rounds", "999999999999"), "--rounds must be at most 10,000"),
    (("experiment", "calibration", "--agents", "ant-mlp,bug-mlp", "--repeats", "999999999"),
     "--repeats must be at most 100,000"),
    (("experiment", "sample-complexity", "--agents", "ant-mlp", "--episodes", "3,99999"), "--episodes must be at most 1,000"),
    (("eval", "locomotion", "loco-mlp", "--repeats", "999999999"), "--repeats must be at most 100,000"),
    (("eval", "sumo", "ant-mlp", "--rounds", "999999999"), "--rounds must be at most 10,000"),
])
def test_a_size_beyond_its_limit_is_one_sentence_before_anything_is_written(cli, tmp_path, args, sentence):
    code, out, err = cli(*args)
    assert code == 2 and sentence in " ".join(err.split()) and out == "", err
    assert not (tmp_path / "db").exists()


def test_sumo_policies_is_read_for_a_database_that_registered_the_agents_from_elsewhere(cli, tmp_path, monkeypatch):
    import json
    import shutil
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    monkeypatch.setenv("SUMO_POLICIES", str(repo / "policies"))
    code, out, err = cli("agents", "show", "ant-mlp", "--json")
    assert code == 0, err
    shipped = {v["version"]: v["checkpoint"] for v in json.loads(out)["versions"]}
    # a copy of the shipped folder: ant-mlp's files copied (one of them tampered with), the rest linked
    copy = tmp_path / "my-policies"
    copy.mkdir()
    for entry in (repo / "policies").iterdir():
        if entry.name == "ant-mlp":
            shutil.copytree(entry, copy / entry.name)
        else:
            (copy / entry.name).symlink_to(entry)
    monkeypatch.setenv("SUMO_POLICIES", str(copy))
    code, out, err = cli("agents", "show", "ant-mlp", "--json")
    assert code == 0, err
    now = {v["version"]: v["checkpoint"] for v in json.loads(out)["versions"]}
    assert now.keys() == shipped.keys() and all(p.startswith(str(copy)) for p in now.values()), now
    default = json.loads(out)["default_version"]
    target = Path(now[default] + ".safetensors")
    data = bytearray(target.read_bytes())
    data[-1] ^= 0xFF
    target.write_bytes(bytes(data))
    code, _, err = cli("play", "ant-mlp", "bug-mlp", "--rounds", "1", "--episodes", "1")
    assert code == 2 and "ant-mlp" in err and "Traceback" not in err, err  # the copy is read, and refused
