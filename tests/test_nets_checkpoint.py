"""Checkpoints: safetensors + JSON, atomic, SHA-256 verified before parsing, no pickle."""

import hashlib
import json

import pytest
import torch
from safetensors.torch import save as st_save

import sumo_cli
from sumo_cli.errors import UserError
from sumo_cli.nets import checkpoint as C
from sumo_cli.nets import normalizer as N
from sumo_cli.nets import policy as P

SPEC = P.PolicySpec("lstm", obs_dim=6, act_dim=2, hidden=8)


def _tensors(seed=0):
    g = torch.Generator().manual_seed(seed)
    params = P.init_params(SPEC, g)
    params["logstd"] = torch.randn(2, generator=g)
    stats = N.update(N.new_stats(6), torch.randn(50, 6, generator=g, dtype=torch.float64))
    extra = {"meta/alpha_0": torch.tensor(0.001), "meta/alpha_1": torch.tensor([0.002]), "rng/step": torch.tensor([7], dtype=torch.int64)}
    return C.checkpoint_tensors(params, stats, extra)


def _save(tmp_path, **kw):
    tensors = _tensors()
    digest = C.save_checkpoint(tmp_path / "ant-lstm-v3", tensors, SPEC, body="ant", strategy="meta", metadata={"seed": 5, **kw})
    return tensors, digest


def test_round_trip_is_bit_exact(tmp_path):
    tensors, digest = _save(tmp_path)
    st_path, json_path = C.checkpoint_paths(tmp_path / "ant-lstm-v3")
    assert digest == hashlib.sha256(st_path.read_bytes()).hexdigest() == C.file_sha256(st_path)
    ck = C.load_checkpoint(tmp_path / "ant-lstm-v3.safetensors", digest)
    assert ck.spec == SPEC and ck.sha256 == digest
    assert set(ck.tensors) == set(tensors)
    for k, v in tensors.items():
        assert ck.tensors[k].dtype == v.dtype and ck.tensors[k].shape == v.shape
        assert ck.tensors[k].numpy().tobytes() == v.numpy().tobytes(), k
    assert set(ck.params) == set(P.param_shapes(SPEC))
    assert ck.obs_stats["sum"].dtype == torch.float64
    assert set(ck.meta_params) == {"meta/alpha_0", "meta/alpha_1"}
    md = ck.metadata
    assert md["body"] == "ant" and md["strategy"] == "meta" and md["seed"] == 5
    assert md["code_version"] == sumo_cli.__version__ and md["spec"] == SPEC.to_dict()
    assert "mujoco_version" in md and md["torch_version"] == torch.__version__
    readable = json.loads(json_path.read_text())
    assert readable["safetensors_sha256"] == digest
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    # the loaded agent acts exactly like the saved one
    obs = N.normalize(ck.obs_stats, torch.ones(3, 6))
    a = P.forward(SPEC, ck.params, obs, P.initial_state(SPEC, (3,)))[0]
    b = P.forward(SPEC, {k: tensors[k] for k in ck.params}, obs, P.initial_state(SPEC, (3,)))[0]
    assert torch.equal(a, b)


def test_saving_is_deterministic_and_overwrites(tmp_path):
    _, d1 = _save(tmp_path)
    _, d2 = _save(tmp_path)
    assert d1 == d2
    tensors = _tensors(seed=1)
    d3 = C.save_checkpoint(tmp_path / "ant-lstm-v3", tensors, SPEC, body="ant", strategy="meta", metadata={"seed": 5})
    assert d3 != d1
    assert C.load_checkpoint(tmp_path / "ant-lstm-v3", d3).sha256 == d3


def test_flipped_byte_is_detected(tmp_path):
    _, digest = _save(tmp_path)
    st_path, _ = C.checkpoint_paths(tmp_path / "ant-lstm-v3")
    data = bytearray(st_path.read_bytes())
    data[-5] ^= 0x01  # inside the tensor data, so the file still parses
    st_path.write_bytes(bytes(data))
    with pytest.raises(UserError, match=r"ant-lstm-v3\.safetensors is corrupt or was modified: SHA-256 [0-9a-f]{64}, expected " + digest):
        C.load_checkpoint(st_path, digest)
    # even without the recorded hash, the JSON copy's hash gives it away
    with pytest.raises(UserError, match="modified or replaced"):
        C.load_checkpoint(st_path, None)


def test_missing_files_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        C.load_checkpoint(tmp_path / "nobody", "0" * 64)
    _, digest = _save(tmp_path)
    (tmp_path / "ant-lstm-v3.json").unlink()
    with pytest.raises(UserError, match="no metadata file"):
        C.load_checkpoint(tmp_path / "ant-lstm-v3", digest)


def test_tampered_json_is_detected(tmp_path):
    _, digest = _save(tmp_path)
    json_path = tmp_path / "ant-lstm-v3.json"
    md = json.loads(json_path.read_text())
    md["strategy"] = "none"
    json_path.write_text(json.dumps(md))
    with pytest.raises(UserError, match=r"differs from the copy.*strategy"):
        C.load_checkpoint(tmp_path / "ant-lstm-v3", digest)
    json_path.write_text("{not json")
    with pytest.raises(UserError, match="not valid JSON"):
        C.load_checkpoint(tmp_path / "ant-lstm-v3", digest)


def test_unparsable_content_is_a_user_error(tmp_path):
    st_path = tmp_path / "junk.safetensors"
    st_path.write_bytes(b"\xff" * 100)
    (tmp_path / "junk.json").write_text("{}")
    with pytest.raises(UserError, match="not a readable sumo checkpoint"):
        C.load_checkpoint(st_path, hashlib.sha256(b"\xff" * 100).hexdigest())


def _write_raw(tmp_path, tensors, meta):
    data = st_save(tensors, metadata={C.EMBED_KEY: json.dumps(meta, sort_keys=True)})
    digest = hashlib.sha256(data).hexdigest()
    (tmp_path / "raw.safetensors").write_bytes(data)
    (tmp_path / "raw.json").write_text(json.dumps({**meta, "safetensors_sha256": digest}))
    return digest


def test_metadata_that_does_not_match_the_tensors_is_rejected(tmp_path):
    _save(tmp_path)
    good = json.loads((tmp_path / "ant-lstm-v3.json").read_text())
    del good["safetensors_sha256"]
    tensors = _tensors()
    # the listing claims a shape the file does not have
    bad = json.loads(json.dumps(good))
    bad["tensors"]["logstd"]["shape"] = [3]
    digest = _write_raw(tmp_path, tensors, bad)
    with pytest.raises(UserError, match=r"metadata does not match its tensors.*logstd"):
        C.load_checkpoint(tmp_path / "raw", digest)
    # consistent listing, but the spec says a different architecture
    other = json.loads(json.dumps(good))
    other["spec"]["arch"] = "mlp"
    digest = _write_raw(tmp_path, tensors, other)
    with pytest.raises(UserError, match="do not fit its policy spec"):
        C.load_checkpoint(tmp_path / "raw", digest)
    # unknown format version
    future = {**good, "format_version": 99}
    digest = _write_raw(tmp_path, tensors, future)
    with pytest.raises(UserError, match="version 99"):
        C.load_checkpoint(tmp_path / "raw", digest)


def test_save_rejects_incomplete_or_ambiguous_input(tmp_path):
    tensors = _tensors()
    no_norm = {k: v for k, v in tensors.items() if not k.startswith("obs_norm/")}
    with pytest.raises(ValueError, match="obs_norm/sum"):
        C.save_checkpoint(tmp_path / "a", no_norm, SPEC)
    with pytest.raises(ValueError, match="missing"):
        C.save_checkpoint(tmp_path / "a", {k: v for k, v in tensors.items() if k != "pi/out/b"}, SPEC)
    with pytest.raises(ValueError, match="reserved"):
        C.save_checkpoint(tmp_path / "a", tensors, SPEC, metadata={"spec": 1})
    with pytest.raises(ValueError, match="JSON"):
        C.save_checkpoint(tmp_path / "a", tensors, SPEC, metadata={"x": object()})
    assert list(tmp_path.iterdir()) == []
