"""Running observation normaliser: zoo formula, std floor, clipping, batched agents, numpy/torch."""

import numpy as np
import pytest
import torch

from sumo_cli.nets import normalizer as N


def test_mean_std_match_population_statistics():
    rng = np.random.default_rng(0)
    x = rng.normal(3.0, 2.0, size=(500, 4)) * np.array([1.0, 0.5, 3.0, 1.0])
    st = N.update(N.new_stats(4), torch.from_numpy(x))
    mean, std = N.mean_std(st)
    np.testing.assert_allclose(mean.numpy(), x.mean(0), rtol=1e-12)
    np.testing.assert_allclose(std.numpy(), x.std(0), rtol=1e-9)
    assert float(st["count"]) == 500


def test_std_floor_and_clip():
    st = N.update(N.new_stats(3), torch.full((10, 3), 2.0, dtype=torch.float64))
    mean, std = N.mean_std(st)
    assert torch.equal(std, torch.full((3,), 0.1, dtype=torch.float64))
    z = N.normalize(st, torch.tensor([2.05, 2.0 + 10.0, 2.0 - 10.0]))
    torch.testing.assert_close(z, torch.tensor([0.5, 5.0, -5.0]))
    assert z.dtype == torch.float32
    # empty statistics: mean 0, std at the floor, no NaN
    z0 = N.normalize(N.new_stats(2), torch.tensor([0.3, -1.0]))
    torch.testing.assert_close(z0, torch.tensor([3.0, -5.0]))


def test_incremental_updates_and_merge_equal_one_update():
    rng = np.random.default_rng(1)
    x = torch.from_numpy(rng.normal(size=(3, 7, 5)))
    whole = N.update(N.new_stats(5), x.reshape(-1, 5))
    step = N.new_stats(5)
    for chunk in x:
        step = N.update(step, chunk)
    merged = N.merge(N.update(N.new_stats(5), x[0]), N.update(N.new_stats(5), x[1:]))
    for k in N.KEYS:
        torch.testing.assert_close(step[k], whole[k])
        torch.testing.assert_close(merged[k], whole[k])


def test_batched_agents_equal_per_agent_loop_and_numpy():
    rng = np.random.default_rng(2)
    G, B, D = 3, 6, 4
    obs = rng.normal(size=(G, B, D)) * rng.uniform(0.05, 3, size=(G, 1, D)) + rng.normal(size=(G, 1, D))
    st = N.update(N.new_stats(D, (G,)), torch.from_numpy(obs))
    assert st["sum"].shape == (G, D) and st["count"].shape == (G,)
    query = torch.from_numpy(rng.normal(size=(G, 2, 5, D)) * 4).float()
    z = N.normalize(st, query)
    st_np = N.update(N.new_stats(D, (G,), backend="numpy"), obs)
    z_np = N.normalize(st_np, query.numpy())
    for g in range(G):
        one = N.update(N.new_stats(D), torch.from_numpy(obs[g]))
        for k in N.KEYS:
            torch.testing.assert_close(st[k][g], one[k])
        torch.testing.assert_close(z[g], N.normalize(one, query[g]))
    np.testing.assert_allclose(z_np, z.numpy(), rtol=1e-6, atol=1e-6)
    assert z.abs().max() <= 5.0


def test_running_normalizer_object_and_shape_errors():
    norm = N.RunningNormalizer(2)
    norm.update(np.array([[1.0, 2.0], [3.0, 4.0]]))
    torch.testing.assert_close(norm.mean_std()[0], torch.tensor([2.0, 3.0], dtype=torch.float64))
    sd = norm.state_dict()
    assert set(sd) == {"obs_norm/sum", "obs_norm/sumsq", "obs_norm/count"}
    again = N.RunningNormalizer.from_state_dict(sd)
    torch.testing.assert_close(again(torch.tensor([2.0, 3.0])), torch.zeros(2))
    with pytest.raises(ValueError):
        norm.update(torch.zeros(4, 3))
