"""`sumo play A B --opponent-learning` on an opponent without consecutive stored versions steps
through the ones it has, as `sumo experiment adaptation` does, and says so in one line; an opponent
with one version is refused in one sentence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sumo_cli.compete.learning_opponent import opponent_versions
from sumo_cli.compete.learning_opponent import learning_schedule
from sumo_cli.errors import UserError

GAME = ("--episodes", "1", "--physics", "fast", "--json")


def test_consecutive_versions_grow_by_one_every_round():
    s = learning_schedule("b", list(range(1, 301)), 105, True, 100)
    assert s.versions == list(range(105, 205)) and s.note is None


def test_stored_versions_are_stepped_through_as_the_experiment_does():
    have = [8, 16, 24, 32, 40]
    s = learning_schedule("bug-lstm", have, 40, False, 100)  # the default version is the highest: the paper's start
    assert s.versions == opponent_versions(have, 100)
    assert s.versions[0] == 8 and s.versions[-1] == 40 and s.versions == sorted(s.versions)
    assert "steps through its stored ones" in s.note and "from 14 to 40" in s.note and "\n" not in s.note
    named = learning_schedule("bug-lstm", have, 16, True, 9)  # B@16: from there to the highest
    assert named.versions == [16, 16, 16, 24, 24, 24, 32, 32, 40]  # targets 16, 19, ..., 40
    assert "meeting 4 versions (16, 24, 32, 40)" in named.note


@pytest.mark.parametrize("have, start, match", [([40], 40, "only version 40"), ([8, 40], 40, "its highest is 40"),
                                              ([8, 40], 50, "no stored version lies above it")])
def test_an_opponent_that_cannot_learn_is_refused(have, start, match):
    with pytest.raises(UserError, match=match):
        learning_schedule("bug-lstm", have, start, True, 100)


@pytest.fixture
def policies(tmp_path: Path, monkeypatch) -> Path:  # noqa: ANN001
    """``ant-mlp`` (version 7) and ``sparring-ant`` with versions 8, 16, 24, 32, 40 (fresh Ant MLPs)."""
    import torch

    from sumo_cli.store import shipped
    from sumo_cli.nets import policy as P
    from sumo_cli.nets.checkpoint import checkpoint_tensors, save_checkpoint
    from sumo_cli.nets.normalizer import new_stats

    folder = tmp_path / "policies"
    spec = P.PolicySpec("mlp", 133, 8, features="ego")
    for name, versions in (("ant-mlp", (7,)), ("sparring-ant", (8, 16, 24, 32, 40))):
        rows = []
        for v in versions:
            base = tmp_path / "run" / name / f"v{v:05d}"
            base.parent.mkdir(parents=True, exist_ok=True)
            sha = save_checkpoint(base, checkpoint_tensors(P.init_params(spec, torch.Generator().manual_seed(v)),
                                                           new_stats(133)), spec, body="ant", strategy="none",
                                  metadata={"agent": name, "version": v})
            rows.append((v, base, sha, v, 100 * v))
        shipped.ship(folder, name, "ant", "mlp", "none", rows, {"command": "test"}, default_version=versions[-1])
    monkeypatch.setenv("SUMO_POLICIES", str(folder))
    return folder


def test_play_steps_through_the_stored_versions_and_says_so(policies, cli):
    code, out, err = cli("play", "ant-mlp", "sparring-ant@16", "--opponent-learning", "--rounds", "3", *GAME)
    assert code == 0, err
    doc = json.loads(out)
    assert [r["version_b"] for r in doc["rounds"]] == [16, 24, 40]
    note = [line for line in err.splitlines() if "steps through" in line]
    assert len(note) == 1 and "sparring-ant does not have versions 16..18" in note[0]
    assert "meeting 3 versions (16, 24, 40)" in note[0]


def test_play_refuses_a_single_version_opponent_and_writes_nothing(policies, cli):
    code, out, err = cli("play", "sparring-ant", "ant-mlp", "--opponent-learning", "--rounds", "3", *GAME)
    assert code == 2 and out == ""
    assert "needs an opponent with several stored versions; ant-mlp has only version 7" in " ".join(err.split())
    assert cli("matches", "--json")[:2] == (0, "[]\n")


def test_the_help_no_longer_promises_one_version_a_round(cli):
    code, out, _ = cli("play", "--help")
    assert code == 0
    text = " ".join(out.replace("│", " ").split())
    assert "grows by one every round, as if" not in text and "steps through its stored versions" in text
