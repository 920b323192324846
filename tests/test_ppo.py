"""PPO and rollout collection: configuration, collection bookkeeping (truncation bootstraps, frozen
normaliser, RL^2 inputs and reset modes), chunked recurrent evaluation against the full unroll, the
first-epoch importance ratio, and determinism. Fast; the learning tests are in test_ppo_learning.py."""

import dataclasses

import numpy as np
import pytest
import torch

from sumo_cli.ppo import collect as C
from sumo_cli.ppo.ppo import (
    PPOConfig,
    advantages_and_returns,
    chunked_evaluation,
    make_optimizer,
    ppo_update,
    rollout_inputs,
    train_ppo,
)
from benchmarks.toy_envs import BernoulliBanditVecEnv, PendulumVecEnv
from sumo_cli.nets import normalizer as nz
from sumo_cli.nets import policy as P

torch.set_num_threads(1)


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _randomised(spec, seed):
    """Parameters with every tensor perturbed (init's policy head is ~0, which would hide errors)."""
    p = P.init_params(spec, _gen(seed))
    g = _gen(seed + 1000)
    return {k: (v + 0.3 * torch.randn(v.shape, generator=g)).requires_grad_(True) for k, v in p.items()}


def _norm_with_data(dim, seed):
    norm = nz.RunningNormalizer(dim)
    norm.update(torch.randn(50, dim, generator=_gen(seed)) * 2 + 1)
    return norm


def test_config_defaults_are_the_papers():
    cfg = PPOConfig()
    assert cfg.clip == 0.2 and cfg.lr == 3e-4 and cfg.gamma == 0.995 and cfg.gae_lambda == 0.95
    assert cfg.bptt_len == 10 and cfg.target_kl is None and cfg.reward_scale == 1.0
    assert set(cfg.to_dict()) >= {"epochs", "num_minibatches", "ent_coef", "vf_coef", "max_grad_norm", "norm_adv", "num_steps"}
    with pytest.raises(ValueError):
        PPOConfig(clip=0.0)
    with pytest.raises(ValueError):
        PPOConfig(bptt_len=0)


def test_pendulum_env_matches_gymnasium():
    gym = pytest.importorskip("gymnasium")
    ref = gym.make("Pendulum-v1").unwrapped
    ref.reset(seed=0)
    env = PendulumVecEnv(1)
    env.reset(seed=0)
    env.th[:], env.thdot[:] = ref.state[0], ref.state[1]
    rng = np.random.default_rng(0)
    for _ in range(50):
        u = rng.uniform(-3, 3, size=(1, 1)).astype(np.float32)
        o_ref, r_ref, *_ = ref.step(u[0])
        out = env.step(u)
        assert np.allclose(out.obs[0], o_ref, atol=1e-5) and out.reward[0] == pytest.approx(r_ref, abs=1e-4)


def test_collect_pendulum_bookkeeping_truncation_and_frozen_normaliser():
    spec = P.PolicySpec("mlp", 3, 1)
    env = PendulumVecEnv(4, max_steps=7)
    params = _randomised(spec, 0)
    norm = _norm_with_data(3, 0)
    before = {k: v.clone() for k, v in norm.stats.items()}
    carry = C.new_carry(env, spec, seed=0)
    ro, carry = C.collect(env, spec, params, norm, 20, carry, _gen(0))
    assert ro.obs.shape == (20, 4, 3) and ro.actions.shape == (20, 4, 1) and ro.logp.shape == (20, 4)
    # every 7th step is truncated (never terminated), the step after starts an episode
    assert ro.truncated[6::7].all() and ro.truncated.sum() == 2 * 4 and not ro.terminated.any()
    assert ro.first[0].all() and ro.first[7].all() and ro.first[14].all() and ro.first.sum() == 3 * 4
    # V(final obs) exactly where truncated, equal to the value net on the final observation
    assert (ro.final_values != 0).sum() == 8 and (ro.final_values[~ro.truncated] == 0).all()
    assert carry.finished_lengths == [7] * 8 and len(carry.finished_returns) == 8
    assert np.allclose(sorted(carry.finished_returns), sorted(ro.rewards[:7].sum(0).tolist() + ro.rewards[7:14].sum(0).tolist()), atol=1e-4)
    # the statistics were frozen during collection, then updated with the rollout's observations
    assert all(torch.equal(ro.norm_stats[k], before[k]) for k in before)
    assert norm.stats["count"].item() == before["count"].item() + 80
    assert torch.allclose(norm.stats["sum"], before["sum"] + ro.obs.double().sum((0, 1)))
    # the stored log-probs and values are those of the stored inputs
    x = rollout_inputs(spec, ro, None)
    mean, value, _ = P.forward(spec, params, x, {})
    assert torch.allclose(P.log_prob(mean, params["logstd"], ro.actions), ro.logp, atol=1e-5)
    assert torch.allclose(value, ro.values, atol=1e-5)
    # continuing the carry: episode counting goes on
    ro2, carry = C.collect(env, spec, params, norm, 10, carry, _gen(1))
    assert ro2.truncated[0].all() and carry.total_steps == 30


def test_rl2_inputs_and_task_resets_from_env_info():
    spec = P.PolicySpec("rl2", 5, 5, hidden=16)
    env = BernoulliBanditVecEnv(3, pulls_per_task=10)
    carry = C.new_carry(env, spec, seed=0)
    ro, carry = C.collect(env, spec, _randomised(spec, 0), None, 25, carry, _gen(0), chunk_len=10)
    # every pull is an episode, but the state resets only at task starts
    assert ro.first.all() and ro.terminated.all()
    expected_reset = torch.zeros(25, 3, dtype=torch.bool)
    expected_reset[[0, 10, 20]] = True
    assert torch.equal(ro.state_reset, expected_reset) and torch.equal(ro.resets, expected_reset)
    assert torch.equal(ro.task_end[[9, 19]], torch.ones(2, 3, dtype=torch.bool)) and ro.task_end.sum() == 6
    # previous reward / done: zero at a task start, else those of the previous step
    assert (ro.prev_rewards[expected_reset] == 0).all() and (ro.prev_dones[expected_reset] == 0).all()
    assert torch.equal(ro.prev_rewards[1:10], ro.rewards[0:9]) and (ro.prev_dones[1:10] == 1).all()
    # the plain LSTM resets at every episode start instead
    spec_l = P.PolicySpec("lstm", 5, 5, hidden=16)
    carry = C.new_carry(env, spec_l, seed=0)
    ro_l, _ = C.collect(env, spec_l, _randomised(spec_l, 0), None, 12, carry, _gen(0))
    assert ro_l.state_reset.all() and (ro_l.prev_dones == 0).all()


def test_rl2_caller_controlled_task_changes():
    spec = P.PolicySpec("rl2", 3, 1, hidden=16)
    env = PendulumVecEnv(2, max_steps=5)  # no task_changed info: the state lives until the caller says
    params = _randomised(spec, 1)
    carry = C.new_carry(env, spec, seed=0)
    ro, carry = C.collect(env, spec, params, None, 12, carry, _gen(0))
    assert ro.state_reset[0].all() and ro.state_reset[1:].sum() == 0 and ro.task_end.sum() == 0
    assert ro.first[5].all() and (ro.prev_dones[5] == 1).all()  # episode ends are seen, not reset
    C.mark_task_change(carry, np.array([True, False]))
    ro, carry = C.collect(env, spec, params, None, 6, carry, _gen(1), end_task=True)
    assert ro.state_reset[0].tolist() == [True, False] and ro.state_reset[1:].sum() == 0
    assert ro.task_end[-1].all() and ro.task_end[:-1].sum() == 0
    assert ro.prev_rewards[0, 0] == 0 and ro.prev_rewards[0, 1] != 0
    ro, carry = C.collect(env, spec, params, None, 3, carry, _gen(2))
    assert ro.state_reset[0].all()
    # state carried over the call boundary: the first step's stored state is the last step's output
    assert all((v[0].abs().sum(-1) == 0).all() for v in ro.chunk_states.values())


@pytest.mark.parametrize("arch", ["lstm", "rl2"])
@pytest.mark.parametrize("chunk", [10, 4])
def test_chunked_evaluation_equals_full_unroll(arch, chunk):
    """Windows of bptt_len steps from the stored states reproduce the behaviour log-probs and a
    full-sequence unroll (T = 23: a padded last window; episodes of 7 steps: resets inside windows)."""
    spec = P.PolicySpec(arch, 3, 2, hidden=16)
    env = PendulumVecEnv(3, max_steps=7)
    params = _randomised(spec, 2)
    norm = _norm_with_data(3, 1)
    carry = C.new_carry(env, spec, seed=0)
    C.collect(env, spec, params, norm, 5, carry, _gen(0))  # start mid-episode, non-zero state0
    ro, _ = C.collect(env, spec, params, norm, 23, carry, _gen(1), chunk_len=chunk)
    assert any(v.abs().sum() > 0 for v in ro.state0.values())
    x = rollout_inputs(spec, ro, norm)
    means, values, _ = P.forward_sequence(spec, params, x, ro.state0, ro.resets)
    full_logp = P.log_prob(means, params["logstd"], ro.actions)
    with torch.no_grad():
        logp, vals = chunked_evaluation(spec, params, ro, norm, chunk)
        logp_re, _ = chunked_evaluation(spec, params, ro, norm, chunk, recompute_states=True)
    assert torch.allclose(logp, full_logp, atol=1e-6) and torch.allclose(vals, values, atol=1e-6)
    assert torch.allclose(logp, ro.logp, atol=1e-6) and torch.allclose(vals, ro.values, atol=1e-6)
    assert torch.allclose(logp_re, logp, atol=1e-6)
    if chunk == 4:  # bptt_len a multiple of the stored interval works too
        with torch.no_grad():
            logp8, _ = chunked_evaluation(spec, params, ro, norm, 8)
        assert torch.allclose(logp8, ro.logp, atol=1e-6)
    # a chunk with the wrong start state differs: the test can fail
    bad = dataclasses.replace(ro, chunk_states={k: torch.zeros_like(v) for k, v in ro.chunk_states.items()})
    with torch.no_grad():
        assert not torch.allclose(chunked_evaluation(spec, params, bad, norm, chunk)[0], ro.logp, atol=1e-3)


@pytest.mark.parametrize("arch", ["mlp", "lstm", "rl2"])
def test_first_epoch_ratio_is_one_and_update_changes_params(arch):
    spec = P.PolicySpec(arch, 3, 2, hidden=16)
    env = PendulumVecEnv(4, max_steps=9)
    params = _randomised(spec, 3)
    norm = _norm_with_data(3, 2)
    carry = C.new_carry(env, spec, seed=0)
    ro, _ = C.collect(env, spec, params, norm, 30, carry, _gen(0))
    # the normaliser moved after collection; the update must still use the frozen statistics
    assert not torch.equal(norm.stats["count"], ro.norm_stats["count"])
    cfg = PPOConfig(lr=0.0, epochs=1, num_minibatches=2)
    old = {k: v.detach().clone() for k, v in params.items()}
    stats = ppo_update(spec, params, make_optimizer(params, cfg), ro, norm, cfg, _gen(0))
    assert stats["approx_kl"] < 1e-10 and stats["clip_fraction"] == 0.0
    assert all(torch.equal(old[k], params[k]) for k in old)
    cfg = PPOConfig(epochs=2, num_minibatches=3, lr=1e-3)
    stats = ppo_update(spec, params, make_optimizer(params, cfg), ro, norm, cfg, _gen(0))
    assert stats["num_grad_steps"] == 6 and stats["approx_kl"] > 0
    assert all(np.isfinite(v) for v in stats.values())
    assert not torch.equal(old["pi/out/w"], params["pi/out/w"]) and not torch.equal(old["vf/out/w"], params["vf/out/w"])


@pytest.mark.parametrize("arch", ["lstm", "rl2"])
def test_recurrent_update_step_is_the_gradient_of_the_loss_stepped_by_forward(arch):
    """One plain gradient step (SGD, lr 1, no clipping, one minibatch) of ppo_update, whose
    windows run through the fused sequence unroll, moves the parameters by exactly minus the
    gradient of the PPO loss computed step by step with P.forward from the stored window states
    (float64; 23 steps: a padded last window; 7-step episodes: resets inside windows; parameters
    moved after collection, so ratios differ from 1 and some are clipped)."""
    spec = P.PolicySpec(arch, 3, 2, hidden=16)
    env = PendulumVecEnv(4, max_steps=7)
    params = {k: v.detach().double().requires_grad_(True) for k, v in _randomised(spec, 5).items()}
    norm = _norm_with_data(3, 4)
    carry = C.new_carry(env, spec, seed=0)
    C.collect(env, spec, params, norm, 5, carry, _gen(0))  # start mid-episode: non-zero state0
    ro, _ = C.collect(env, spec, params, norm, 23, carry, _gen(1), update_norm=False)
    with torch.no_grad():
        g = _gen(6)
        for v in params.values():
            v.add_(0.2 * torch.randn(v.shape, generator=g, dtype=v.dtype))
    cfg = PPOConfig(epochs=1, num_minibatches=1, max_grad_norm=None)

    ref = {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}
    x = rollout_inputs(spec, ro, norm, torch.float64)
    means, values = [], []
    L = cfg.bptt_len
    for c, t0 in enumerate(range(0, ro.num_steps, L)):
        state = {k: v[c].double() for k, v in ro.chunk_states.items()}
        for t in range(t0, min(t0 + L, ro.num_steps)):
            m, v, state = P.forward(spec, ref, x[t], state, ro.resets[t])
            means.append(m)
            values.append(v)
    logp = P.log_prob(torch.stack(means), ref["logstd"], ro.actions.double())
    adv, ret = advantages_and_returns(spec, ro, cfg)
    from sumo_cli.ppo.losses import clipped_surrogate, normalise, value_loss

    pg = clipped_surrogate(logp, ro.logp.double(), normalise(adv.double()), cfg.clip)
    vl = value_loss(torch.stack(values), ret.double())
    grads = torch.autograd.grad(pg + cfg.vf_coef * vl, list(ref.values()))

    before = {k: v.detach().clone() for k, v in params.items()}
    stats = ppo_update(spec, params, torch.optim.SGD(list(params.values()), lr=1.0), ro, norm, cfg, _gen(7))
    assert stats["clip_fraction"] > 0  # the clip is exercised
    assert stats["policy_loss"] == pytest.approx(float(pg.detach()), rel=1e-12)
    assert stats["value_loss"] == pytest.approx(float(vl.detach()), rel=1e-12)
    for (k, gr) in zip(ref, grads):
        assert gr.abs().max() > 0, k
        torch.testing.assert_close(before[k] - params[k].detach(), gr, rtol=1e-9, atol=1e-12, msg=k)


def test_rl2_trial_returns_cut_only_at_task_ends():
    spec = P.PolicySpec("rl2", 5, 5, hidden=16)
    env = BernoulliBanditVecEnv(4, pulls_per_task=10)
    carry = C.new_carry(env, spec, seed=0)
    ro, _ = C.collect(env, spec, _randomised(spec, 0), None, 25, carry, _gen(0))
    ro = dataclasses.replace(ro, values=torch.zeros_like(ro.values), last_values=torch.full_like(ro.last_values, 7.0))
    g = 0.9
    _, ret = advantages_and_returns(spec, ro, PPOConfig(gamma=g, gae_lambda=1.0))
    disc = torch.tensor([g**k for k in range(10)])
    # a full task: the discounted sum of its 10 rewards, no bootstrap past its end
    assert torch.allclose(ret[10], (disc[:, None] * ro.rewards[10:20]).sum(0), atol=1e-5)
    assert torch.allclose(ret[19], ro.rewards[19], atol=1e-6)
    # the unfinished task at the end bootstraps with last_values
    assert torch.allclose(ret[20], (disc[:5, None] * ro.rewards[20:25]).sum(0) + g**5 * 7.0, atol=1e-5)
    # per-episode returns (each pull an episode) would just be the immediate reward
    _, ret_ep = advantages_and_returns(spec, ro, PPOConfig(gamma=g, gae_lambda=1.0, rl2_trial_returns=False))
    assert torch.allclose(ret_ep, ro.rewards)


def test_train_ppo_is_deterministic():
    spec = P.PolicySpec("lstm", 3, 1, hidden=16)
    cfg = PPOConfig(num_steps=20, epochs=2, num_minibatches=2)

    def run(seed):
        res = train_ppo(PendulumVecEnv(2), spec, cfg, 2, seed)
        return res.params, res.history

    (a, ha), (b, hb), (c, _) = run(0), run(0), run(1)
    assert all(torch.equal(a[k], b[k]) for k in a)
    np.testing.assert_equal(ha, hb)  # nan-aware (no episode finished: mean_return is nan)
    assert not torch.equal(a["pi/fc/w"], c["pi/fc/w"])
    assert ha[-1]["env_steps"] == 80


def test_train_ppo_callback_can_stop():
    spec = P.PolicySpec("mlp", 3, 1, hidden=8)
    seen = []
    res = train_ppo(PendulumVecEnv(2), spec, PPOConfig(num_steps=8, epochs=1, num_minibatches=1), 5, 0,
                    lambda it, s, r: seen.append(it) or it == 1)
    assert seen == [0, 1] and len(res.history) == 2
