"""The NumPy actor that games call at every step computes what the torch policy computes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sumo_cli.nets import normalizer as nz
from sumo_cli.nets import policy as P
from sumo_cli.nets.numpy_actor import NumpyActor


@pytest.mark.parametrize("arch", ["mlp", "lstm", "rl2"])
def test_numpy_actor_equals_torch_policy_mean_over_a_sequence(arch):
    spec = P.PolicySpec(arch, 12, 4, hidden=16)
    g = torch.Generator().manual_seed(3)
    params = P.init_params(spec, g)
    # Non-zero biases and a larger output head, so every term of the nets matters.
    params = {k: v + 0.3 * torch.randn(v.shape, generator=g) for k, v in params.items()}
    stats = nz.new_stats(12)
    data = torch.randn(50, 12, generator=g, dtype=torch.float64) * 2 + 1
    stats = {"sum": data.sum(0), "sumsq": (data ** 2).sum(0), "count": torch.tensor(50.0, dtype=torch.float64)}
    mean, std = (x.float() for x in nz.mean_std(stats))
    actor = NumpyActor(spec, params, mean, std)
    E, T = 3, 20
    state_t = P.initial_state(spec, E)
    state_n = actor.initial_state(E)
    obs = torch.randn(T, E, 12, generator=g) * 4  # some inputs beyond the +-5 clip
    prev_r, prev_d = torch.randn(T, E, generator=g), (torch.rand(T, E, generator=g) < 0.2).float()
    for t in range(T):
        x = torch.clamp((obs[t] - mean) / std, -nz.CLIP, nz.CLIP)
        if arch == "rl2":
            x = P.rl2_input(x, prev_r[t], prev_d[t])
        with torch.no_grad():
            m_t, state_t = P.policy_mean(spec, params, x, state_t)
        m_n, state_n = actor.step(obs[t].numpy(), state_n, prev_r[t].numpy(), prev_d[t].numpy())
        assert m_n.dtype == np.float32 and m_n.shape == (E, 4)
        np.testing.assert_allclose(m_n, m_t.numpy(), rtol=1e-4, atol=1e-5)
        if arch != "mlp":
            np.testing.assert_allclose(state_n[0], state_t["pi/h"].numpy(), rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(state_n[1], state_t["pi/c"].numpy(), rtol=1e-4, atol=1e-5)


def test_sigmoid_has_no_overflow_at_extreme_gate_values():
    from sumo_cli.nets.numpy_actor import _sigmoid

    with np.errstate(all="raise"):
        y = _sigmoid(np.array([-1e4, -50.0, 0.0, 50.0, 1e4], dtype=np.float32))
    np.testing.assert_allclose(y, [0.0, 0.0, 0.5, 1.0, 1.0], atol=1e-7)
