"""Half-precision shipping: a policy stored as float16 loads upcast to float32 and acts within
ACTION_TOL of the full-precision one; its SHA-256 is still checked; scripts/ship_policy.py ships a
run's consecutive versions range that way, with its provenance in the manifest."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

from sumo_cli.store import shipped
from sumo_cli.errors import UserError
from sumo_cli.nets import normalizer as N
from sumo_cli.nets import policy as P
from sumo_cli.nets.checkpoint import checkpoint_paths, checkpoint_tensors, load_checkpoint, save_checkpoint
from sumo_cli.nets.half import ACTION_TOL, save_half
from sumo_cli.store import registry
from sumo_cli.store.database import Database
from sumo_cli.store.models import Iteration, Run

SPEC = P.PolicySpec("lstm", 177, 12, hidden=64, features="ego")  # a Bug's LSTM
SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "ship_policy.py"


def _full(tmp_path: Path, version: int) -> tuple[Path, str]:
    g = torch.Generator().manual_seed(version)
    params = P.init_params(SPEC, g)
    params = {k: v * 1.5 + 0.05 * torch.randn(v.shape, generator=g) for k, v in params.items()}  # off the init
    stats = N.update(N.new_stats(SPEC.obs_dim), 3 * torch.randn(500, SPEC.obs_dim, generator=g, dtype=torch.float64))
    base = tmp_path / "run" / f"v{version:05d}"
    base.parent.mkdir(parents=True, exist_ok=True)
    sha = save_checkpoint(base, checkpoint_tensors(params, stats), SPEC, body="bug", strategy="none",
                          metadata={"agent": "ego-bug-lstm", "version": version})
    return base, sha


def _actions(ck, obs: torch.Tensor) -> torch.Tensor:
    state = P.initial_state(SPEC, (obs.shape[1],))
    out = []
    for t in range(obs.shape[0]):  # a sequence, so the LSTM state carries the rounding forward
        mean, state = P.policy_mean(SPEC, ck.params, N.normalize(ck.obs_stats, obs[t]).float(), state)
        out.append(mean)
    return torch.stack(out)


def test_a_policy_round_trips_through_float16_within_the_tolerance(tmp_path):
    base, sha = _full(tmp_path, 3)
    digest = save_half(base, sha, tmp_path / "half" / "v00003")
    full, half = load_checkpoint(base, sha), load_checkpoint(tmp_path / "half" / "v00003", digest)
    assert half.metadata["stored_dtype"] == "float16" and half.metadata["full_precision_sha256"] == sha
    assert half.metadata["agent"] == "ego-bug-lstm" and half.metadata["version"] == 3
    for k in P.param_shapes(SPEC):
        assert half.metadata["tensors"][k]["dtype"] == "float16", k  # as stored
        assert half.tensors[k].dtype == torch.float32, k  # as loaded
    assert half.metadata["tensors"]["obs_norm/sumsq"]["dtype"] == "float64"  # statistics keep their precision
    assert torch.equal(half.obs_stats["sumsq"], full.obs_stats["sumsq"])
    st_full, json_half = checkpoint_paths(base)[0], checkpoint_paths(tmp_path / "half" / "v00003")[1]
    assert checkpoint_paths(tmp_path / "half" / "v00003")[0].stat().st_size < 0.55 * st_full.stat().st_size
    assert json.loads(json_half.read_text())["stored_dtype"] == "float16"
    obs = 3 * torch.randn(200, 16, SPEC.obs_dim, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    a, b = _actions(full, obs), _actions(half, obs)
    diff = (a - b).abs().max().item()
    print("largest action difference", diff)
    assert 0 < diff < ACTION_TOL, diff


def test_a_tampered_float16_file_is_refused(tmp_path):
    base, sha = _full(tmp_path, 4)
    digest = save_half(base, sha, tmp_path / "half" / "v00004")
    path = checkpoint_paths(tmp_path / "half" / "v00004")[0]
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x01  # one bit of a parameter
    path.write_bytes(bytes(data))
    with pytest.raises(UserError, match="corrupt or was modified"):
        load_checkpoint(path, digest)
    with pytest.raises(UserError, match="one of the two files was modified"):
        load_checkpoint(path, None)  # the JSON copy records the hash too
    with pytest.raises(UserError, match="corrupt or was modified"):
        save_half(base, "0" * 64, tmp_path / "half" / "again")  # a source that is not the recorded one


def _script():
    spec = importlib.util.spec_from_file_location("ship_policy_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def trained(tmp_path: Path) -> Path:
    """A database holding a training run's agent with versions 1..6 and 9 (7 and 8 not stored)."""
    path = tmp_path / "train.sqlite"
    db = Database(f"sqlite:///{path}")
    with db.write() as s:
        run = Run(kind="train", config={"train": {"body": "bug", "arch": "lstm"}}, seed=11, code_version="t")
        s.add(run)
        s.flush()
        for i in range(1, 10):
            s.add(Iteration(run_id=run.id, iteration=i, env_steps=1000 * i, wall_seconds=2.0))
        agent = registry.create_agent(s, "ego-bug-lstm", "bug", "lstm", "none", "trained", {"run_id": run.id})
        for v in (1, 2, 3, 4, 5, 6, 9):
            base, sha = _full(tmp_path, v)
            registry.add_version(s, agent, v, str(base), sha, iteration=v)
    return path


def test_the_script_ships_a_consecutive_range_in_half_precision(trained, tmp_path, monkeypatch, capsys):
    to = tmp_path / "policies"
    rc = _script().main(["--db", str(trained), "--agent", "ego-bug-lstm", "--versions", "2..5", "--half",
                         "--as", "bug-lstm-2", "--command", "sumo train --body bug", "--code-commit", "abc1234",
                         "--to", str(to)])
    assert rc == 0
    assert "versions 2..5 (4) in float16" in capsys.readouterr().out
    doc = json.loads((to / "manifest.json").read_text())
    (entry,) = doc["agents"]
    assert [v["version"] for v in entry["versions"]] == [2, 3, 4, 5] and entry["default_version"] == 5
    prov = entry["provenance"]
    assert prov["stored_dtype"] == "float16" and prov["seed"] == 11 and prov["code_commit"] == "abc1234"
    assert prov["env_steps"] == 5000 and prov["wall_seconds"] == 10.0
    monkeypatch.setenv("SUMO_POLICIES", str(to))
    db = Database(f"sqlite:///{tmp_path / 'user.sqlite'}")
    assert shipped.register_shipped(db) == ["bug-lstm-2"]
    from sumo_cli.store.library import load_agent

    agent = load_agent(db, "bug-lstm-2@3")
    assert agent.version == 3 and all(t.dtype == torch.float32 for t in agent.params.values())
    assert agent.metadata["stored_dtype"] == "float16"


@pytest.mark.parametrize("versions", ["5..8", "6..2", "a..b"])
def test_the_script_refuses_a_range_it_cannot_ship_and_writes_nothing(trained, tmp_path, versions, capsys):
    to = tmp_path / "policies"
    rc = _script().main(["--db", str(trained), "--agent", "ego-bug-lstm", "--versions", versions, "--half",
                         "--as", "x", "--command", "c", "--code-commit", "c", "--to", str(to)])
    assert rc == 2 and not to.exists()
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    if versions == "5..8":
        assert "lacks 2 of the versions asked for (7, 8)" in err
