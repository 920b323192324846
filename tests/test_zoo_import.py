"""`sumo zoo import` end to end: names, verified checkpoints, tampering, idempotence, layouts."""

import json
import shutil

import numpy as np
import pytest
import torch

from sumo_cli.errors import UserError


def test_import_flat_folder_and_load_exactly(cli, zoo_dir, tmp_path):
    code, out, _ = cli("zoo", "import", zoo_dir, "--json")
    assert code == 0
    doc = json.loads(out)
    assert len(doc["imported"]) == 18 and "zoo-ant-lstm-v3" in doc["imported"]
    code, out, _ = cli("agents", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert rows["zoo-spider-mlp-v2"]["body"] == "spider" and rows["zoo-spider-mlp-v2"]["strategy"] == "none"

    from sumo_cli.store.library import load_agent
    from sumo_cli.nets.zoo import load_zoo_file
    from sumo_cli.store.database import open_database

    db = open_database(str(tmp_path / "db" / "sumo.sqlite"))
    agent = load_agent(db, "zoo-bug-lstm-v3")
    _, params, stats, _ = load_zoo_file(zoo_dir / "bug-lstm-v3.npy")
    for k, v in params.items():
        assert torch.equal(agent.params[k], v), k
    assert torch.equal(agent.obs_stats["sum"], stats["sum"])
    db.dispose()

    # The original training's length, as far as the file records it: its normaliser's count.
    code, out, _ = cli("agents", "show", "zoo-bug-lstm-v3", "--json")
    assert json.loads(out)["observations_seen"] == int(stats["count"]) > 10**6
    code, _, err = cli("agents", "show", "zoo-bug-lstm-v3")
    assert f"trained on {int(stats['count']):,} observations" in err

    # Importing again changes nothing.
    code, out, _ = cli("zoo", "import", zoo_dir, "--json")
    assert json.loads(out) == {"imported": [], "skipped": doc["imported"]}


def test_flipped_byte_in_a_checkpoint_is_refused(cli, zoo_dir, tmp_path):
    assert cli("zoo", "import", zoo_dir)[0] == 0
    from sumo_cli.store.library import load_agent
    from sumo_cli.store.database import open_database

    db = open_database(str(tmp_path / "db" / "sumo.sqlite"))
    path = next((tmp_path / "db" / "sumo-checkpoints" / "zoo-ant-mlp-v1").glob("*.safetensors"))
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(UserError, match="corrupt or was modified"):
        load_agent(db, "zoo-ant-mlp-v1")
    path.unlink()
    with pytest.raises(UserError, match="does not exist"):
        load_agent(db, "zoo-ant-mlp-v1")
    db.dispose()
    # Showing the agent still works without its file; only the normaliser's count is missing.
    code, out, _ = cli("agents", "show", "zoo-ant-mlp-v1", "--json")
    assert code == 0 and json.loads(out)["observations_seen"] is None


def test_repository_layout_and_bad_file(cli, zoo_dir, tmp_path):
    repo = tmp_path / "robosumo-copy"
    assets = repo / "robosumo" / "policy_zoo" / "assets"
    for body, arch, k in (("ant", "lstm", 3), ("bug", "mlp", 1)):
        d = assets / body / arch
        d.mkdir(parents=True)
        shutil.copy(zoo_dir / f"{body}-{arch}-v{k}.npy", d / f"agent-params-v{k}.npy")
    code, out, _ = cli("zoo", "import", repo, "--json")
    assert code == 0 and sorted(json.loads(out)["imported"]) == ["zoo-ant-lstm-v3", "zoo-bug-mlp-v1"]

    bad = tmp_path / "bad"
    bad.mkdir()
    np.save(bad / "ant-lstm-v1.npy", np.zeros(100, dtype=np.float32))
    code, out, err = cli("zoo", "import", bad)
    assert code == 2 and "ant-lstm-v1.npy" in err and out == ""
