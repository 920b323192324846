"""The fast paths. The NumPy collection path (policy mean and recurrent states per step in NumPy, noise as
policy.sample draws it, values and log-probabilities in one torch pass after the rollout) equals the general
per-step torch path within float error; PPO's gradient clip equals torch's bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sumo_cli.ppo import collect as C
from benchmarks.toy_envs import PendulumVecEnv
from sumo_cli.nets import normalizer as nz
from sumo_cli.nets import policy as P


def _params(spec, seed):
    g = torch.Generator().manual_seed(seed)
    p = P.init_params(spec, g)
    return {k: v + 0.3 * torch.randn(v.shape, generator=g) for k, v in p.items()}


def _norm(dim):
    norm = nz.RunningNormalizer(dim)
    norm.update(torch.randn(50, dim, generator=torch.Generator().manual_seed(7)) * 2 + 1)
    return norm


def _run(path, spec, params, norm, deterministic, T=23, seed=0):
    env = PendulumVecEnv(3, max_steps=7)
    carry = C.new_carry(env, spec, seed=0)
    frozen = {k: v.clone() for k, v in norm.stats.items()}
    gen = torch.Generator().manual_seed(seed)
    ro = path(env, spec, {k: v.detach() for k, v in params.items()}, frozen, T, carry, gen, chunk_len=10,
              reset_on="episode", end_task=False, deterministic=deterministic)
    return ro, carry


def test_numpy_path_is_taken_for_one_agent_in_float32_only():
    spec = P.PolicySpec("mlp", 3, 1)
    assert C._numpy_path(spec, _params(spec, 0), None)
    assert not C._numpy_path(spec, {k: v.double() for k, v in _params(spec, 0).items()}, None)
    lstm = P.PolicySpec("lstm", 3, 1, hidden=8)
    assert C._numpy_path(lstm, _params(lstm, 0), None)
    stacked = P.stack_params([_params(spec, 0), _params(spec, 1)])
    assert not C._numpy_path(spec, stacked, None)


@pytest.mark.parametrize("deterministic", [True, False])
@pytest.mark.parametrize("arch", ["mlp", "lstm", "rl2"])
def test_post_rollout_values_and_logps_equal_the_per_step_ones(arch, deterministic):
    """Both paths see the same trajectory (the mean, or the same noise stream): every stored quantity
    agrees within 1e-5, the bookkeeping exactly (recurrent: the stored window states too)."""
    spec = P.PolicySpec(arch, 3, 2, hidden=16)
    params, norm = _params(spec, 1), _norm(3)
    fast, cf = _run(C._collect_numpy, spec, params, norm, deterministic, seed=4)
    ref, cr = _run(C._collect_torch, spec, params, norm, deterministic, seed=4)
    for k in ref.chunk_states:
        assert torch.allclose(fast.chunk_states[k], ref.chunk_states[k], atol=1e-5), k
        assert torch.allclose(cf.state[k], cr.state[k], atol=1e-5), k
    assert set(fast.chunk_states) == set(ref.chunk_states) and set(fast.state0) == set(ref.state0)
    for name in ("obs", "actions", "logp", "values", "rewards", "final_values", "last_values", "prev_rewards",
                 "prev_dones"):
        a, b = getattr(fast, name), getattr(ref, name)
        assert a.shape == b.shape and a.dtype == b.dtype, name
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-5), name
    for name in ("terminated", "truncated", "first", "state_reset", "task_end"):
        assert torch.equal(getattr(fast, name), getattr(ref, name)), name
    assert (fast.final_values != 0).sum() == 3 * 3 and fast.truncated.sum() == 3 * 3
    assert cf.finished_lengths == cr.finished_lengths and np.allclose(cf.finished_returns, cr.finished_returns, atol=1e-4)
    assert cf.total_steps == cr.total_steps and cf.total_episodes == cr.total_episodes
    assert np.array_equal(cf.reset, cr.reset) and np.array_equal(cf.first, cr.first)
    assert torch.allclose(cf.prev_reward, cr.prev_reward, atol=1e-5) and torch.equal(cf.prev_done, cr.prev_done)


@pytest.mark.parametrize("arch", ["mlp", "lstm"])
def test_sampled_actions_are_the_mean_plus_the_noise_of_policy_sample(arch):
    spec = P.PolicySpec(arch, 3, 2, hidden=16)
    params, norm = _params(spec, 2), _norm(3)
    ro, _ = _run(C._collect_numpy, spec, params, norm, False, seed=5)
    x = torch.clamp((ro.obs - nz.mean_std(ro.norm_stats)[0].float()) / nz.mean_std(ro.norm_stats)[1].float(), -5, 5)
    with torch.no_grad():
        mean, value, _ = P.forward_sequence(spec, params, x, ro.state0, ro.resets)
        g = torch.Generator().manual_seed(5)  # P.sample's draws, one per step
        noise = torch.stack([torch.randn(ro.actions.shape[1:], generator=g) for _ in range(ro.num_steps)])
        noise = noise * params["logstd"].exp()
        assert torch.allclose(ro.actions, mean + noise, atol=1e-5)
        assert torch.allclose(ro.logp, P.log_prob(mean, params["logstd"], ro.actions), atol=1e-5)
        assert torch.allclose(ro.values, value, atol=1e-5)


@pytest.mark.parametrize("arch", ["mlp", "rl2"])
@pytest.mark.parametrize("deterministic", [True, False])
def test_collect_is_deterministic_for_a_seed(arch, deterministic):
    spec = P.PolicySpec(arch, 3, 2, hidden=16)
    params, norm = _params(spec, 3), _norm(3)
    a, _ = _run(C._collect_numpy, spec, params, norm, deterministic, seed=9)
    b, _ = _run(C._collect_numpy, spec, params, norm, deterministic, seed=9)
    for name in ("actions", "logp", "values", "final_values", "last_values", "rewards"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name


@pytest.mark.parametrize("max_norm", [0.5, 100.0, float("inf")])
def test_gradient_clip_equals_torch_clip_grad_norm_bit_for_bit(max_norm):
    from sumo_cli.ppo.ppo import _clip_grad_norm

    g = torch.Generator().manual_seed(0)
    grads = [torch.randn(s, generator=g) for s in ((120, 64), (64,), (64, 8), (8,))]
    params = [torch.nn.Parameter(torch.zeros_like(x)) for x in grads]
    for p, x in zip(params, grads):
        p.grad = x.clone()
    ref = torch.nn.utils.clip_grad_norm_(params, max_norm)
    total = _clip_grad_norm(grads, max_norm)
    assert torch.equal(total, ref)
    assert all(torch.equal(p.grad, x) for p, x in zip(params, grads))
