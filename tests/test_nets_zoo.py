"""Importer for the original RoboSumo policy zoo.

Tests marked ``zoo`` use the real files and find them only through SUMO_ZOO_DIR; the others build
synthetic files in the documented layout.
"""

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from sumo_cli.errors import UserError
from sumo_cli.nets import normalizer as N
from sumo_cli.nets import policy as P
from sumo_cli.nets import zoo

SIZES = {
    ("ant", "mlp"): 24645,
    ("ant", "lstm"): 82373,
    ("bug", "mlp"): 30629,
    ("bug", "lstm"): 88357,
    ("spider", "mlp"): 36613,
    ("spider", "lstm"): 94341,
}
DIMS = {"ant": (120, 8), "bug": (164, 12), "spider": (208, 16)}


@pytest.fixture
def zoo_dir() -> Path:
    d = os.environ.get("SUMO_ZOO_DIR")
    if not d:
        pytest.skip(reason="SUMO_ZOO_DIR is not set (point it at a folder of the original RoboSumo policies)")
    return Path(d)


def _layout(body, arch):
    """The README's order, written out independently of the loader."""
    D, A = DIMS[body]
    H = 64
    out = [("ret", (3,)), ("obs/sum", (D,)), ("obs/sumsq", (D,)), ("obs/count", (1,))]
    for net, o in (("vf", 1), ("pi", A)):
        if arch == "mlp":
            out += [(f"{net}/fc0/w", (D, H)), (f"{net}/fc0/b", (H,)), (f"{net}/fc1/w", (H, H)), (f"{net}/fc1/b", (H,))]
        else:
            out += [(f"{net}/fc/w", (D, H)), (f"{net}/fc/b", (H,)), (f"{net}/lstm/kernel", (2 * H, 4 * H)), (f"{net}/lstm/bias", (4 * H,))]
        out += [(f"{net}/out/w", (H, o)), (f"{net}/out/b", (o,))]
    return out + [("logstd", (A,))]


def _write_synthetic(path, body, arch, seed=0):
    rng = np.random.default_rng(seed)
    parts = {name: rng.normal(size=shape).astype(np.float32) for name, shape in _layout(body, arch)}
    parts["obs/count"] = np.array([1000.0], dtype=np.float32)
    parts["obs/sumsq"] = np.abs(parts["obs/sumsq"]) * 1000 + 1000
    np.save(path, np.concatenate([v.reshape(-1) for v in parts.values()]))
    return parts


@pytest.mark.parametrize("body,arch", sorted(SIZES))
def test_expected_sizes_match_the_readme(body, arch):
    assert zoo.expected_size(body, arch) == SIZES[(body, arch)]


@pytest.mark.parametrize("body,arch", [("bug", "mlp"), ("spider", "lstm")])
def test_synthetic_file_parses_in_the_documented_order(tmp_path, body, arch):
    f = tmp_path / f"{body}-{arch}-v2.npy"
    parts = _write_synthetic(f, body, arch)
    spec, params, stats, meta = zoo.load_zoo_file(f)
    assert spec == P.PolicySpec(arch, *DIMS[body], hidden=64)
    assert set(params) == set(P.param_shapes(spec))
    for k, v in params.items():
        assert v.dtype == torch.float32
        np.testing.assert_array_equal(v.numpy(), parts[k])
    np.testing.assert_array_equal(stats["sum"].numpy(), parts["obs/sum"])
    assert float(stats["count"]) == 1000.0 and stats["count"].shape == ()
    assert meta["body"] == body and meta["arch"] == arch and meta["version"] == 2
    assert meta["return_filter"]["sum"] == float(parts["ret"][0])


def test_wrong_size_is_rejected_with_the_file_name(tmp_path):
    f = tmp_path / "ant-mlp-v1.npy"
    np.save(f, np.zeros(24644, dtype=np.float32))
    with pytest.raises(UserError, match=r"ant-mlp-v1\.npy.*24644.*matches no zoo policy"):
        zoo.load_zoo_file(f)
    with pytest.raises(UserError, match=r"ant-mlp-v1\.npy has 24644 floats, expected 24645"):
        zoo.load_zoo_file(f, "ant", "mlp")
    g = tmp_path / "bug-lstm-v1.npy"
    np.save(g, np.zeros(82373, dtype=np.float32))  # an ant lstm's size
    with pytest.raises(UserError, match=r"bug-lstm-v1\.npy has 82373 floats, expected 88357"):
        zoo.load_zoo_file(g, "bug", "lstm")


def test_bad_files_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        zoo.load_zoo_file(tmp_path / "nope.npy")
    (tmp_path / "junk.npy").write_bytes(b"not an npy file")
    with pytest.raises(UserError, match="junk.npy"):
        zoo.load_zoo_file(tmp_path / "junk.npy")
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(UserError, match="obj.npy"):
        zoo.load_zoo_file(tmp_path / "obj.npy")
    np.save(tmp_path / "f64.npy", np.zeros(24645, dtype=np.float64))
    with pytest.raises(UserError, match="float32"):
        zoo.load_zoo_file(tmp_path / "f64.npy")


def test_find_in_repository_layout_and_flat_folder(tmp_path):
    repo = tmp_path / "robosumo-copy"
    for body, arch, k in [("ant", "lstm", 2), ("ant", "mlp", 1), ("spider", "mlp", 3)]:
        d = repo / "robosumo" / "policy_zoo" / "assets" / body / arch
        d.mkdir(parents=True)
        _write_synthetic(d / f"agent-params-v{k}.npy", body, arch)
    found = zoo.find_zoo_files(repo)
    assert [(b, a, v) for b, a, v, _ in found] == [("ant", "mlp", 1), ("ant", "lstm", 2), ("spider", "mlp", 3)]
    assert zoo.find_zoo_files(repo / "robosumo" / "policy_zoo" / "assets") == found
    spec, _, _, meta = zoo.load_zoo_file(found[1][3])
    assert spec.arch == "lstm" and meta["version"] == 2
    flat = tmp_path / "flat"
    flat.mkdir()
    _write_synthetic(flat / "bug-mlp-v3.npy", "bug", "mlp")
    (flat / "README.md").write_text("x")
    assert [(b, a, v) for b, a, v, _ in zoo.find_zoo_files(flat)] == [("bug", "mlp", 3)]
    with pytest.raises(UserError, match="no zoo policies"):
        zoo.find_zoo_files(tmp_path / "flat" / ".." / "robosumo-copy" / "robosumo")
    with pytest.raises(UserError, match="does not exist"):
        zoo.find_zoo_files(tmp_path / "missing")


@pytest.mark.zoo
def test_all_18_zoo_files_load_with_the_right_shapes(zoo_dir):
    found = zoo.find_zoo_files(zoo_dir)
    assert len(found) == 18
    assert {(b, a) for b, a, _, _ in found} == set(SIZES)
    for body, arch, version, path in found:
        spec, params, stats, meta = zoo.load_zoo_file(path, body, arch)
        D, A = DIMS[body]
        assert (spec.arch, spec.obs_dim, spec.act_dim, spec.hidden) == (arch, D, A, 64)
        assert P.check_params(spec, params) == ()
        assert params["logstd"].shape == (A,) and params["pi/out/w"].shape == (64, A)
        assert stats["sum"].shape == (D,) and float(stats["count"]) > 0
        assert meta["version"] == version
        mean, std = N.mean_std(stats)
        assert bool(torch.isfinite(mean).all()) and float(std.min()) >= 0.1


@pytest.mark.zoo
def test_zoo_policies_act_finitely_on_a_zero_observation(zoo_dir):
    found = [f for f in zoo.find_zoo_files(zoo_dir) if f[2] == 1]
    for body, arch, _, path in found:
        spec, params, stats, _ = zoo.load_zoo_file(path)
        obs = torch.zeros(2, spec.obs_dim)
        state = P.initial_state(spec, (2,))
        for _ in range(5):
            mean, value, state = P.forward(spec, params, N.normalize(stats, obs), state)
            action = P.sample(mean, params["logstd"], torch.Generator().manual_seed(0))
            assert bool(torch.isfinite(mean).all() and torch.isfinite(value).all() and torch.isfinite(action).all())
            assert mean.shape == (2, spec.act_dim)
        if spec.recurrent:
            assert float(state["pi/h"].abs().max()) > 0


@pytest.mark.zoo
def test_zoo_agents_of_one_body_batch_together(zoo_dir):
    found = [f for f in zoo.find_zoo_files(zoo_dir) if f[0] == "ant" and f[1] == "lstm"]
    loaded = [zoo.load_zoo_file(p) for *_, p in found]
    spec = loaded[0][0]
    stacked = P.stack_params([p for _, p, _, _ in loaded])
    stats = P.stack_params([s for _, _, s, _ in loaded])
    obs = torch.randn(len(loaded), 4, spec.obs_dim, generator=torch.Generator().manual_seed(1)) * 3
    mean, _, _ = P.forward(spec, stacked, N.normalize(stats, obs), P.initial_state(spec, (len(loaded), 4)))
    for i, (_, params, st, _) in enumerate(loaded):
        one, _, _ = P.forward(spec, params, N.normalize(st, obs[i]), P.initial_state(spec, (4,)))
        torch.testing.assert_close(mean[i], one, atol=1e-6, rtol=1e-6)
