"""A first training run on a fresh clone starts although a shipped agent holds the canonical name:
it trains the first free numbered name and says so in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from sumo_cli import names
from sumo_cli.store import shipped
from sumo_cli.nets import policy as P
from sumo_cli.nets.checkpoint import checkpoint_tensors, save_checkpoint
from sumo_cli.nets.normalizer import new_stats

TINY = ["--recipe", "paper", "--envs", "2", "--steps", "20", "--physics", "fast", "--epochs", "1", "--minibatches", "1",
        "--anneal", "2", "--iterations", "1"]


# tiny tensors: the shared one-thread fixture of conftest.py for every test here
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def shipped_ant_mlp(tmp_path: Path, monkeypatch) -> Path:  # noqa: ANN001
    spec = P.PolicySpec("mlp", 133, 8, features="ego")
    base = tmp_path / "run" / "v00007"
    base.parent.mkdir(parents=True)
    sha = save_checkpoint(base, checkpoint_tensors(P.init_params(spec, torch.Generator().manual_seed(7)), new_stats(133)),
                          spec, body="ant", strategy="none", metadata={})
    folder = tmp_path / "policies"
    shipped.ship(folder, "ant-mlp", "ant", "mlp", "none", [(7, base, sha, 7, 700)], {"command": "test"})
    monkeypatch.setenv("SUMO_POLICIES", str(folder))
    return folder


def test_numbered_names_are_agent_names_of_their_combination():
    ref = names.parse("ant-lstm-meta-3@2")
    assert (ref.name, ref.body, ref.arch, ref.strategy, ref.version) == ("ant-meta-3", "ant", "lstm", "meta", 2)
    for bad in ("ant-mlp-1", "ant-mlp-0", "ant-gru-2"):
        with pytest.raises(Exception):
            names.parse(bad)


def test_first_run_trains_the_first_free_numbered_name(shipped_ant_mlp, cli):
    code, out, err = cli("train", "--body", "ant", "--arch", "mlp", *TINY, "--json")
    assert code == 0, err
    assert json.loads(out)["agent"] == "ant-mlp-2"
    assert "ant-mlp is a shipped agent, so this run trains ant-mlp-2" in " ".join(err.split())
    code, out, err = cli("train", "--body", "ant", "--arch", "mlp", *TINY, "--json")
    assert code == 0, err
    assert json.loads(out)["agent"] == "ant-mlp-3"
    # the user's own agent of a name is never taken over: --name still refuses it
    code, out, err = cli("train", "--body", "bug", "--arch", "mlp", *TINY, "--name", "mine")
    assert code == 0, err
    code, out, err = cli("train", "--body", "bug", "--arch", "mlp", *TINY, "--name", "mine")
    assert code == 2 and "already exists" in err
    code, out, err = cli("agents", "--json")
    listed = json.loads(out)
    listed = listed["agents"] if isinstance(listed, dict) else listed
    assert {"ant-mlp", "ant-mlp-2", "ant-mlp-3", "mine"} <= {a["name"] for a in listed}
