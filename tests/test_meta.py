"""The meta-learner (sumo_cli.meta): derivatives of the adapted loss, importance weights,
batched execution-time adaptation, the first-step cache, and an end-to-end smoke run."""

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from sumo_cli import meta as ML
from sumo_cli.meta import adaptation as ML_adaptation
from sumo_cli.meta import learner as ML_learner
from sumo_cli.nets import policy as P

DT = torch.float64


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _theta(spec, seed, dtype=DT, requires_grad=True):
    g = _gen(seed)
    p = P.init_params(spec, g, dtype)
    p = {k: v + 0.3 * torch.randn(v.shape, generator=g, dtype=dtype) for k, v in p.items()}
    return {k: v.requires_grad_(requires_grad) for k, v in p.items()}


def _batch(spec, seed, T=6, G=2, N=3, dtype=DT, episode_starts=True, chunk=None):
    """Random (T, G, N) data with episode starts inside the batch and a continuing first trajectory
    (``chunk``: with random stored recurrent states at every chunk-th step)."""
    g = _gen(seed)
    first = torch.zeros(T, G, N, dtype=torch.bool)
    first[0] = True
    if episode_starts:
        first[3, 0, 1] = True
        first[2, 1, 2] = True
        first[0, 1, 0] = False  # a trajectory that began before the batch
    st = P.initial_state(spec, (G, N), dtype)
    st = {k: 0.1 * torch.randn(v.shape, generator=g, dtype=dtype) for k, v in st.items()}
    r = lambda *s: torch.randn(*s, generator=g, dtype=dtype)  # noqa: E731
    b = ML.TrajBatch(
        x=r(T, G, N, spec.obs_dim), actions=r(T, G, N, spec.act_dim), logp=r(T, G, N) - 3.0, values=r(T, G, N),
        returns=r(T, G, N), adv=r(T, G, N), first=first, mask=torch.ones(T, G, N, dtype=torch.bool), state0=st,
    )
    if chunk:
        C = -(-T // chunk)
        b.chunk_states = {k: torch.cat([v.unsqueeze(0), 0.1 * r(C - 1, *v.shape)]) for k, v in st.items()}
        b.chunk_len = chunk
    return b


def _post_for(model, theta, log_alpha, pre, post, cfg, behaviour, seed):
    """Give the post batch behaviour log-probs near pi_phi (ratios around 1, some clipped)."""
    with torch.no_grad():
        phi = ML.adapt(model, theta, log_alpha, pre, cfg, behaviour=behaviour)
        lp, _ = model.evaluate(phi, post)
    post.logp = lp + 0.15 * torch.randn(lp.shape, generator=_gen(seed), dtype=lp.dtype)
    return post


def _fd_check(fn, theta, log_alpha, seed, n_dirs=2, eps=1e-6, rtol=1e-6):
    loss = fn()
    keys = list(theta)
    grads = torch.autograd.grad(loss, [theta[k] for k in keys] + [log_alpha])
    g_theta, g_alpha = grads[:-1], grads[-1]
    gen = _gen(seed)
    for _ in range(n_dirs):
        d = {k: torch.randn(theta[k].shape, generator=gen, dtype=DT) for k in keys}
        analytic = sum(float((gt * d[k]).sum()) for gt, k in zip(g_theta, keys))
        with torch.no_grad():
            for k in keys:
                theta[k] += eps * d[k]
            fp = float(fn())
            for k in keys:
                theta[k] -= 2 * eps * d[k]
            fm = float(fn())
            for k in keys:
                theta[k] += eps * d[k]
        numeric = (fp - fm) / (2 * eps)
        assert math.isclose(analytic, numeric, rel_tol=rtol, abs_tol=1e-9), (analytic, numeric)
    # each alpha_m separately (random directions when there is one alpha per step and tensor)
    n = log_alpha.numel()
    dirs = torch.eye(n, dtype=DT) if n <= 3 else torch.randn(2, n, generator=gen, dtype=DT)
    for m, d in enumerate(dirs):
        d = d.reshape(log_alpha.shape)
        with torch.no_grad():
            log_alpha += eps * d
            fp = float(fn())
            log_alpha -= 2 * eps * d
            fm = float(fn())
            log_alpha += eps * d
        numeric = (fp - fm) / (2 * eps)
        analytic = float((g_alpha * d).sum())
        assert math.isclose(analytic, numeric, rel_tol=rtol, abs_tol=1e-9), (m, analytic, numeric)
    return g_alpha


CASES = [
    # arch, behaviour ("theta": training-time reuse, IW at steps 2..M; "data": execution-time IW at every step)
    ("mlp", "theta", {}),
    ("mlp", "data", {}),
    ("lstm", "theta", {}),
    ("lstm", "data", {}),
    ("mlp", "data", {"iw": "truncated", "iw_truncate": 2.0}),
    ("mlp", "theta", {"clip_value": 0.004, "clip_mode": "step"}),
    ("mlp", "theta", {"clip_value": 0.05, "clip_mode": "grad"}),
    ("mlp", "theta", {"alpha_per": "tensor"}),
    ("mlp", "theta", {"inner_reduce": "step", "ent_coef": 0.01}),
    ("lstm", "theta", {"bptt_chunk": 4}),  # windows of 4 steps from stored states (T = 6: one padded window)
    ("lstm", "data", {"bptt_chunk": 2, "alpha_per": "net"}),
    # the point task's recipe: refitted linear baseline, standardised advantages, bias-only steps
    ("mlp", "theta", {"inner_adv": "linear", "inner_norm_adv": True, "inner_params": ("pi/out/b", "pi/out/w"), "inner_vf_coef": 0.0}),
    ("mlp", "data", {"inner_adv": "linear", "inner_norm_adv": True}),
    # the default configuration (per-tensor alphas, step mean, linear baseline, scaled value regression)
    ("mlp", "theta", {"default": True}),
    ("lstm", "data", {"default": True, "bptt_chunk": 2}),
]


@pytest.mark.parametrize("arch,behaviour,extra", CASES)
def test_adapted_loss_matches_finite_differences(arch, behaviour, extra):
    """d/d theta (random directions) and d/d log alpha_m of the outer loss after 3 adaptation
    steps on fixed data, in float64, against central differences."""
    spec = P.PolicySpec(arch, obs_dim=3, act_dim=2, hidden=5)
    extra = dict(extra)
    make = ML.MetaConfig if extra.pop("default", False) else ML.MetaConfig.paper
    cfg = make(alpha_init=0.05, score_term=False, **extra)
    model = ML.as_model(spec, cfg)
    theta = _theta(spec, 1)
    log_alpha = ML.init_log_alpha(cfg, model, (), DT)
    log_alpha = (log_alpha + 0.1 * torch.randn(log_alpha.shape, generator=_gen(2), dtype=DT)).requires_grad_(True)
    pre = _batch(spec, 3, chunk=cfg.bptt_chunk)
    post = _post_for(model, theta, log_alpha, pre, _batch(spec, 4, chunk=cfg.bptt_chunk), cfg, behaviour, 5)

    def fn():
        return ML.meta_loss(model, theta, log_alpha, pre, post, cfg, behaviour=behaviour).loss

    g_alpha = _fd_check(fn, theta, log_alpha, seed=6)
    if extra.get("clip_mode") != "step":
        assert bool((g_alpha.abs() > 1e-8).all()), g_alpha  # every step size gets a gradient


@pytest.mark.parametrize("arch", ["mlp", "lstm"])
def test_fresh_batches_and_score_term_match_finite_differences(arch):
    """Fresh data per inner step (appendix) with the score-function term included (its weights
    are data): the whole surrogate is a function of theta and alpha."""
    spec = P.PolicySpec(arch, obs_dim=3, act_dim=2, hidden=4)
    model = ML.GaussianModel(spec)
    cfg = ML.MetaConfig.paper(alpha_init=0.05, inner_data="fresh", score_baseline="loo")
    theta = _theta(spec, 11)
    log_alpha = ML.init_log_alpha(cfg, model, (), DT).requires_grad_(True)
    pre = [_batch(spec, 12 + m) for m in range(3)]
    post = _post_for(model, theta, log_alpha, pre, _batch(spec, 20), cfg, "theta", 21)
    R, Lbar = ML.post_returns(post)

    def fn():
        return ML.meta_loss(model, theta, log_alpha, pre, post, cfg, post_stats=(R, Lbar), adv_stats=(torch.tensor(0.1, dtype=DT), torch.tensor(1.3, dtype=DT))).loss

    _fd_check(fn, theta, log_alpha, seed=22)


def _fresh_step_batches(cfg, seed: int):
    """A small MLP's theta and alpha, the batches sampled by phi^0..phi^2 (also the outer-target
    ``mids`` with their advantage statistics) and a post batch sampled by phi^3, seeded."""
    spec = P.PolicySpec("mlp", obs_dim=3, act_dim=2, hidden=4)
    model = ML.GaussianModel(spec)
    theta = _theta(spec, seed)
    log_alpha = ML.init_log_alpha(cfg, model, (), DT).requires_grad_(True)
    pre = [_batch(spec, seed + 1 + m) for m in range(3)]
    post = _post_for(model, theta, log_alpha, pre, _batch(spec, seed + 9), cfg, "theta", seed + 10)
    mids = [(b, ML.adv_stats_of(b)) for b in pre]
    stats = dict(post_stats=ML.post_returns(post), adv_stats=ML.adv_stats_of(post))
    return model, theta, log_alpha, pre, post, mids, stats


def test_every_step_objective_matches_finite_differences():
    """outer_steps="all" (MAML-style steps on fresh batches): the returns of theta, phi^1 and phi^2
    on the batches they sampled join the objective; the surrogate stays a function of theta
    and alpha, and the intermediate terms change the gradient (they are not dropped)."""
    cfg = ML.MetaConfig(alpha_init=0.05, inner_data="fresh", outer_steps="all")
    model, theta, log_alpha, pre, post, mids, stats = _fresh_step_batches(cfg, 31)

    def fn(with_mids=True):
        return ML.meta_loss(model, theta, log_alpha, pre, post, cfg, mids=mids if with_mids else None, **stats).loss

    g_alpha = _fd_check(fn, theta, log_alpha, seed=42)
    g_last = torch.autograd.grad(fn(False), [log_alpha])[0]
    assert not torch.allclose(g_alpha, g_last)


def test_post_step_objective_leaves_theta_out_and_matches_finite_differences():
    """outer_steps="post" (MAML++'s multi-step loss): the returns of phi^1 .. phi^M are the targets,
    theta's own return is not. Its loss is the "all" loss with theta's PPO and value terms removed
    and the mean taken over one term fewer; the gradient still matches finite differences."""
    cfg_all = ML.MetaConfig(alpha_init=0.05, inner_data="fresh", outer_steps="all", score_term=False)
    cfg_post = cfg_all.replace(outer_steps="post")
    model, theta, log_alpha, pre, post, mids, stats = _fresh_step_batches(cfg_all, 51)
    with torch.no_grad():
        loss_all = ML.meta_loss(model, theta, log_alpha, pre, post, cfg_all, mids=mids, **stats).loss
        loss_post = ML.meta_loss(model, theta, log_alpha, pre, post, cfg_post, mids=mids[1:], **stats).loss
        p0, v0, _ = ML_learner._ppo_terms(model, theta, pre[0], cfg_all, mids[0][1], None)
    torch.testing.assert_close(loss_post, (4 * loss_all - (p0 + cfg_all.vf_coef * v0)) / 3, rtol=1e-10, atol=1e-12)

    def fn():
        return ML.meta_loss(model, theta, log_alpha, pre, post, cfg_post.replace(score_term=True), mids=mids[1:], **stats).loss

    _fd_check(fn, theta, log_alpha, seed=62)
    with pytest.raises(ValueError, match="fresh"):
        ML.MetaConfig(outer_steps="post", inner_data="reuse")


def test_importance_weight_is_differentiated_in_the_meta_gradient():
    """The weight multiplies the inner gradient but is itself a function of the parameters; if it
    were treated as a constant (a common shortcut), the meta-gradient would be wrong."""
    spec = P.PolicySpec("mlp", obs_dim=3, act_dim=2, hidden=5)
    model = ML.GaussianModel(spec)
    cfg = ML.MetaConfig.paper(alpha_init=0.05, score_term=False)
    theta = _theta(spec, 31)
    log_alpha = ML.init_log_alpha(cfg, model, (), DT).requires_grad_(True)
    pre = _batch(spec, 32)
    post = _post_for(model, theta, log_alpha, pre, _batch(spec, 33), cfg, "data", 34)
    g_full = torch.autograd.grad(ML.meta_loss(model, theta, log_alpha, pre, post, cfg, behaviour="data").loss, [theta["pi/fc0/w"]])[0]
    orig = ML_adaptation.seg_sum
    try:
        ML_adaptation.seg_sum = lambda x, seg, mask: orig(x.detach(), seg, mask)  # the shortcut
        g_short = torch.autograd.grad(ML.meta_loss(model, theta, log_alpha, pre, post, cfg, behaviour="data").loss, [theta["pi/fc0/w"]])[0]
    finally:
        ML_adaptation.seg_sum = orig
    assert float((g_full - g_short).norm() / g_full.norm()) > 1e-3


@pytest.mark.parametrize("iw", ["snis", "truncated", "raw", "none"])
@pytest.mark.parametrize("arch", ["mlp", "lstm"])
def test_importance_weights_at_behaviour_give_the_plain_gradient(arch, iw):
    """Data collected by theta itself: weight 1 everywhere, the weighted inner gradient equals the
    plain policy gradient, and the whole execution-time update equals the training-time one."""
    spec = P.PolicySpec(arch, obs_dim=3, act_dim=2, hidden=5)
    model = ML.GaussianModel(spec)
    cfg = ML.MetaConfig.paper(alpha_init=0.05, iw=iw)
    theta = _theta(spec, 41, requires_grad=False)
    b = _batch(spec, 42)
    with torch.no_grad():
        b.logp, _ = model.evaluate(ML.expand_params(model, theta, (2,)), b)
    th = {k: v.expand(2, *v.shape).clone().requires_grad_(True) for k, v in theta.items()}
    plain = ML.inner_grad(model, th, b, cfg, create_graph=False).grad
    weighted = ML.inner_grad(model, th, b, cfg, create_graph=False, ref_logp=b.logp).grad
    weighted_graph = ML.inner_grad(model, th, b, cfg, create_graph=True, ref_logp=b.logp).grad
    for k in plain:
        torch.testing.assert_close(weighted[k], plain[k], rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(weighted_graph[k], plain[k], rtol=1e-12, atol=1e-12)
    log_alpha = ML.init_log_alpha(cfg, model, (), DT)
    a = ML.adapt_execution(model, theta, log_alpha, b, cfg)
    t = ML.adapt(model, theta, log_alpha, b, cfg, behaviour="theta")
    for k in a:
        torch.testing.assert_close(a[k], t[k], rtol=1e-12, atol=1e-12)


def test_long_trajectory_weights_stay_finite():
    """Products of 500 per-step ratios over many episodes overflow; the log-space, self-normalised
    weights do not, and are invariant to a common shift of the behaviour log-probs."""
    spec = P.PolicySpec("mlp", obs_dim=3, act_dim=2, hidden=5)
    model = ML.GaussianModel(spec)
    cfg = ML.MetaConfig.paper(alpha_init=0.01)
    theta = _theta(spec, 51, dtype=torch.float32, requires_grad=False)
    b = _batch(spec, 52, T=500, G=1, N=6, dtype=torch.float32, episode_starts=False)
    b.logp = b.logp * 3.0  # log ratios of order +-1000 per trajectory
    la = ML.init_log_alpha(cfg, model)
    phi = ML.adapt_execution(model, theta, la, b, cfg)
    assert all(bool(torch.isfinite(v).all()) for v in phi.values())
    b2 = b.map(lambda t: t)
    b2.logp = b.logp + 0.5  # a common factor exp(250) per trajectory
    phi2 = ML.adapt_execution(model, theta, la, b2, cfg)
    for k in phi:
        torch.testing.assert_close(phi2[k], phi[k], rtol=1e-5, atol=1e-6)


def _agents(spec, G, seed, dtype):
    thetas = [_theta(spec, seed + g, dtype=dtype, requires_grad=False) for g in range(G)]
    las = [torch.log(torch.tensor([0.02, 0.03, 0.01], dtype=dtype)) + 0.1 * g for g in range(G)]
    return thetas, las


def _episodes(spec, G, K, seed, dtype, L=12):
    g = _gen(seed)
    lengths = torch.randint(4, L + 1, (G, K), generator=g)
    r = lambda *s: torch.randn(*s, generator=g, dtype=dtype)  # noqa: E731
    return ML.episode_batch(
        r(L, G, K, spec.obs_dim), r(L, G, K, spec.act_dim), r(L, G, K) - 2.0, r(L, G, K), r(L, G, K), lengths,
        gamma=0.995, terminated=torch.rand(G, K, generator=g) > 0.5, final_values=r(G, K),
    )


@pytest.mark.parametrize("arch", ["mlp", "lstm"])
def test_batched_execution_adaptation_equals_per_agent_loop(arch):
    spec = P.PolicySpec(arch, obs_dim=4, act_dim=2, hidden=16)
    model = ML.GaussianModel(spec)
    cfg = ML.MetaConfig.paper()
    G = 3
    # float64: batched and looped calls sum in different orders (float32 differs by ~1e-6 on some CPUs)
    thetas, las = _agents(spec, G, 60, torch.float64)
    buf = _episodes(spec, G, 5, 61, torch.float64)
    batched = ML.adapt_execution(model, P.stack_params(thetas), torch.stack(las), buf, cfg)
    for g in range(G):
        single = buf.select_agents(slice(g, g + 1))
        ref = ML.adapt_execution(model, P.stack_params([thetas[g]]), las[g].unsqueeze(0), single, cfg)
        for k in ref:
            torch.testing.assert_close(batched[k][g], ref[k][0], rtol=1e-10, atol=1e-12)
        # and the un-stacked call (no agent dims at all)
        flat = single.map(lambda t: t) if False else ML.TrajBatch(
            **{f: getattr(single, f)[:, 0] for f in ("x", "actions", "logp", "values", "returns", "adv", "first", "mask")},
            state0={k2: v[0] for k2, v in single.state0.items()},
        )
        ref2 = ML.adapt_execution(model, thetas[g], las[g], flat, cfg)
        for k in ref2:
            torch.testing.assert_close(batched[k][g], ref2[k], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("arch,iw", [("mlp", "snis"), ("mlp", "truncated"), ("mlp", "raw"), ("mlp", "none"), ("lstm", "snis")])
def test_execution_adapter_cache_equals_recomputation(arch, iw):
    """Rounds of 3 episodes into a buffer of 5 (evictions from round 2 on): the cached first step
    gives the same phi as adapting from scratch on the buffer."""
    spec = P.PolicySpec(arch, obs_dim=4, act_dim=2, hidden=8)
    model = ML.GaussianModel(spec)
    cfg = ML.MetaConfig.paper(iw=iw, buffer_episodes=5, alpha_init=0.05)
    G = 2
    thetas, las = _agents(spec, G, 70, DT)
    theta, la = P.stack_params(thetas), torch.stack(las)
    cached = ML.ExecutionAdapter(model, theta, la, cfg)
    always = ML.ExecutionAdapter(model, theta, la, cfg, recompute_ratio=2.0)  # recomputes every round
    plain = ML.ExecutionAdapter(model, theta, la, cfg, cache_first_step=False)
    for rnd in range(4):
        eps = _episodes(spec, G, 3, 80 + rnd, DT)
        for a in (cached, always, plain):
            a.add(eps)
        assert cached.buffer.num_cols == min(5, 3 * (rnd + 1))
        ref = ML.adapt_execution(model, theta, la, cached.buffer, cfg)
        for a in (cached, always, plain):
            phi = a.compute()
            for k in ref:
                torch.testing.assert_close(phi[k], ref[k], rtol=1e-10, atol=1e-10)
    assert cached.recomputes == 1 and always.recomputes >= 3


def test_value_function_adapts_through_the_regression_term():
    spec = P.PolicySpec("mlp", obs_dim=3, act_dim=2, hidden=5)
    model = ML.GaussianModel(spec)
    theta = _theta(spec, 91, requires_grad=False)
    b = _batch(spec, 92)
    for coef, moved in ((1.0, True), (0.0, False)):
        cfg = ML.MetaConfig.paper(alpha_init=0.05, inner_vf_coef=coef)
        phi = ML.adapt(model, theta, ML.init_log_alpha(cfg, dtype=DT), b, cfg)
        delta = float((phi["vf/out/w"] - theta["vf/out/w"]).abs().max())
        assert (delta > 1e-4) == moved
        assert float((phi["pi/out/w"] - theta["pi/out/w"]).abs().max()) > 1e-4


def test_config_documents_paper_values_and_validates():
    cfg = ML.MetaConfig.paper()
    assert (cfg.num_steps, cfg.alpha_init, cfg.clip_value, cfg.lr, cfg.lr_alpha) == (3, 1e-3, 0.1, 3e-4, 3e-4)
    assert (cfg.gamma, cfg.lam, cfg.ppo_clip, cfg.buffer_episodes) == (0.995, 0.95, 0.2, 75)
    assert ML.LOCOMOTION_BUFFER_EPISODES == 3
    with pytest.raises(ValueError):
        ML.MetaConfig.paper(iw="bogus")
    with pytest.raises(ValueError):
        ML.MetaConfig.paper(alpha_init=0.0)


def test_segments_bookkeeping():
    first = torch.tensor([[1, 0], [0, 0], [1, 1], [0, 0]], dtype=torch.bool)  # (T=4, N=2)
    mask = torch.tensor([[1, 1], [1, 1], [1, 1], [1, 0]], dtype=torch.bool)
    seg = ML.segments(first, mask)
    assert seg.K.tolist() == [4]  # col 0: 2 episodes; col 1: a continuation, then a new episode
    x = torch.arange(8, dtype=DT).reshape(4, 2)
    sums = ML.seg_sum(x, seg, mask)
    assert sorted(sums[0][seg.valid[0]].tolist()) == sorted([0 + 2, 4 + 6, 1 + 3, 5])
    assert seg.starts_episode[0][seg.valid[0]].tolist().count(True) == 3


def test_meta_training_smoke_and_rollout_integration():
    """Two meta-iterations on the drifting-goal point: the collected log-probs are what the
    learner recomputes (ratio 1 at the first outer epoch), alpha moves and stays positive."""
    from benchmarks import meta_envs
    from sumo_cli.adapt import chains
    from sumo_cli.meta import meta_train

    torch.set_num_threads(1)
    env = meta_envs.DriftingGoalPoint(num_groups=3, group_size=2, horizon=5)
    spec = P.PolicySpec("lstm", obs_dim=3, act_dim=2, hidden=8)
    cfg = ML.MetaConfig.paper(alpha_init=0.05, lr_alpha=0.05, outer_epochs=2, buffer_episodes=4)
    res = meta_train.meta_train(env, spec, cfg, 2, seed=0, steps_pre=10, steps_post=10)
    assert len(res.history) == 2 and all(np.isfinite(h["loss"]) for h in res.history)
    alpha = torch.exp(res.log_alpha)
    assert bool((alpha > 0).all()) and not torch.allclose(alpha, torch.full_like(alpha, 0.05))
    theta = res.theta
    stats = res.obs_norm.stats
    phi = ML.expand_params(ML.GaussianModel(spec), theta, (3,))
    ro, _ = meta_train.collect_stacked(env, spec, {k: v.contiguous() for k, v in phi.items()}, stats, env.sample_tasks(1), 10, _gen(0))
    b = ML.batch_from_rollout(ro, gamma=cfg.gamma, lam=cfg.lam, groups=3)
    lp, v = ML.GaussianModel(spec).evaluate(phi, b)
    torch.testing.assert_close(lp, b.logp, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(v, b.values, rtol=1e-5, atol=1e-5)
    # windows of 3 steps unrolled in parallel from the stored states: the same numbers
    bw = ML.batch_from_rollout(ro, gamma=cfg.gamma, lam=cfg.lam, groups=3, bptt_chunk=3)
    assert bw.chunk_len == 3 and bw.chunk_states["pi/h"].shape == (4, 3, 2, 8)
    lpw, vw = ML.GaussianModel(spec, bptt_chunk=3).evaluate(phi, bw)
    torch.testing.assert_close(lpw, b.logp, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(vw, b.values, rtol=1e-5, atol=1e-5)
    out = chains.run_adaptation(env, spec, "meta", theta, rounds=3, steps_per_round=10, seed=3, stats=stats, log_alpha=res.log_alpha, cfg=cfg)
    assert out.shape == (3, 3) and np.isfinite(out).all()


def test_linear_baseline_and_standardised_inner_advantages():
    """The refitted baseline reproduces (up to its ridge term) returns linear in its features (per agent, each
    with its own coefficients); standardised advantages have mean 0 and std 1 per agent over the
    valid steps; padding stays 0; the defaults leave the batch untouched."""
    spec = P.PolicySpec("mlp", obs_dim=3, act_dim=2, hidden=5)
    b = _batch(spec, 101, T=7, G=2, N=4)
    b.mask[5:, 1, 3] = False
    t = ML.step_index(b.first, b.mask).to(DT) / 100.0
    x = b.x
    coef = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.2, -0.3]], dtype=DT)  # (G, D)
    b.returns = (x * coef[None, :, None, :]).sum(-1) + 0.7 * x[..., 0] ** 2 + 3.0 * t - 2.0
    torch.testing.assert_close(torch.where(b.mask, ML.linear_baseline(b), 0 * b.returns), torch.where(b.mask, b.returns, 0 * b.returns), rtol=1e-3, atol=1e-3)  # ridge 1e-5
    assert ML.step_index(b.first, b.mask)[:, 0, 1].tolist() == [0, 1, 2, 0, 1, 2, 3]
    cfg = ML.MetaConfig.paper(inner_adv="linear", inner_norm_adv=True)
    b.returns = b.returns + torch.randn(b.returns.shape, generator=_gen(102), dtype=DT)
    a = ML.prepare_inner(b, cfg).adv
    for g in range(2):
        v = a[:, g][b.mask[:, g]]
        assert abs(float(v.mean())) < 1e-9 and abs(float(v.std(unbiased=False)) - 1.0) < 1e-6
    assert bool((a[~b.mask] == 0).all())
    assert ML.prepare_inner(b, ML.MetaConfig.paper()) is b


def test_inner_params_adapts_only_the_listed_tensors():
    spec = P.PolicySpec("mlp", obs_dim=3, act_dim=2, hidden=5)
    model = ML.GaussianModel(spec)
    theta = _theta(spec, 111, requires_grad=False)
    b = _batch(spec, 112)
    cfg = ML.MetaConfig.paper(alpha_init=0.05, inner_params=("pi/out/b",))
    phi = ML.adapt(model, theta, ML.init_log_alpha(cfg, dtype=DT), b, cfg)
    for k in theta:
        moved = float((phi[k] - theta[k]).abs().max()) > 1e-6
        assert moved == (k == "pi/out/b"), k


def test_execution_adapter_with_batch_refitted_advantages_equals_recomputation():
    """A baseline refitted on the whole buffer changes every buffered episode's gradient: the
    adapter then does not keep a running first-step sum, and equals adapting from scratch."""
    spec = P.PolicySpec("mlp", obs_dim=4, act_dim=2, hidden=8)
    model = ML.GaussianModel(spec)
    cfg = ML.MetaConfig.paper(buffer_episodes=5, alpha_init=0.05, inner_adv="linear", inner_norm_adv=True)
    thetas, las = _agents(spec, 2, 120, DT)
    theta, la = P.stack_params(thetas), torch.stack(las)
    ad = ML.ExecutionAdapter(model, theta, la, cfg)
    assert not ad.cache
    for rnd in range(3):
        ad.add(_episodes(spec, 2, 3, 130 + rnd, DT))
        ref = ML.adapt_execution(model, theta, la, ad.buffer, cfg)
        phi = ad.compute()
        for k in ref:
            torch.testing.assert_close(phi[k], ref[k], rtol=1e-10, atol=1e-10)


def test_training_chains_and_meta_update_from_the_current_policy():
    """train_rounds=3: every group plays 3 tasks per iteration, two pairs per outer update; at
    execution, meta_from="current" adapts from the current parameters (round 2 equals the
    Algorithm-2 run, which also starts from theta there)."""
    from benchmarks import meta_envs
    from sumo_cli.adapt import chains
    from sumo_cli.meta import meta_train

    env = meta_envs.DriftingGoalPoint(num_groups=2, group_size=3, horizon=4, terminal_at_horizon=True)
    spec = P.PolicySpec("mlp", obs_dim=3, act_dim=2, hidden=8)
    cfg = ML.MetaConfig.paper(alpha_init=0.1, train_rounds=3, outer_epochs=2, buffer_episodes=3, inner_adv="linear", inner_norm_adv=True, inner_params=("pi/out/b",))
    res = meta_train.meta_train(env, spec, cfg, 2, seed=0, steps_pre=4, steps_post=4)
    h = res.history[-1]
    assert len(h["round_returns"]) == 3 and len(h["post_returns"]) == 2 and np.isfinite(h["loss"])
    kw = dict(rounds=3, steps_per_round=4, seed=5, stats=res.obs_norm.stats, log_alpha=res.log_alpha, cfg=cfg)
    a = chains.run_adaptation(env, spec, "meta", res.theta, **kw)
    c = chains.run_adaptation(env, spec, "meta", res.theta, meta_from="current", **kw)
    np.testing.assert_allclose(a[:2], c[:2])
    assert np.isfinite(c).all()
    with pytest.raises(ValueError):
        ML.MetaConfig.paper(train_rounds=3, inner_data="fresh")


def _kl_by_hand(logp, behaviour_logp, mask):
    log_r = (logp - behaviour_logp).detach()[mask]
    return float(((log_r.exp() - 1) - log_r).mean())


def test_outer_epochs_stop_at_the_target_kl():
    """outer_target_kl: the loss reports the largest (r - 1) - log r over the sampling policies
    (phi^M on the post batch, phi^{m-1} on the batch of step m); an update stops after the first
    epoch whose mean KL exceeds the target, exactly as if it had been given that many epochs."""
    cfg = ML.MetaConfig(alpha_init=0.05, inner_data="fresh", outer_steps="post", outer_epochs=4)
    model, theta, log_alpha, pre, post, mids, stats = _fresh_step_batches(cfg, 71)
    with torch.no_grad():
        out = ML.meta_loss(model, theta, log_alpha, pre, post, cfg, mids=mids[1:], **stats)
        trace = ML.adapt_trace(model, theta, log_alpha, pre, cfg)
        lp_post, _ = model.evaluate(trace.phi, post)
    by_hand = [_kl_by_hand(lp_post, post.logp, post.mask)]
    by_hand += [_kl_by_hand(model.evaluate(trace.phis[m], b)[0], b.logp, b.mask) for m, b in enumerate(pre)]
    assert out.approx_kl == pytest.approx(max(by_hand), rel=1e-9) and out.approx_kl > 0

    def learner(c):
        lr = ML.MetaLearner(model, {k: v.detach() for k, v in theta.items()}, c, log_alpha)
        info = lr.update(pre, post, _gen(5), mids=pre[1:])
        return lr, info

    full, info_full = learner(cfg)
    assert info_full["outer_epochs"] == 4
    loose, info_loose = learner(cfg.replace(outer_target_kl=1e9))
    stopped, info_stopped = learner(cfg.replace(outer_target_kl=1e-12))
    one, _ = learner(cfg.replace(outer_epochs=1))
    assert info_loose["outer_epochs"] == 4 and info_stopped["outer_epochs"] == 1
    for k in theta:
        torch.testing.assert_close(loose.theta[k], full.theta[k], rtol=0, atol=0)
        torch.testing.assert_close(stopped.theta[k], one.theta[k], rtol=0, atol=0)
    assert not torch.equal(stopped.theta["pi/out/b"], full.theta["pi/out/b"])
    with pytest.raises(ValueError, match="outer_target_kl"):
        ML.MetaConfig(outer_target_kl=0.0)


def test_task_centred_outer_advantages_ignore_a_per_task_offset():
    """outer_adv="task": a constant added to every advantage of one task (what a value function blind
    to the task leaves) changes nothing in the update; with the default ("value") it does."""
    cfg = ML.MetaConfig(alpha_init=0.05, inner_data="fresh", outer_steps="post", outer_epochs=2)
    model, theta, log_alpha, pre, post, mids, stats = _fresh_step_batches(cfg, 79)
    G = post.agent_shape[0]
    offset = torch.linspace(-3.0, 5.0, G, dtype=post.adv.dtype).reshape(1, G, 1)

    def shifted(b):
        return replace(b, adv=torch.where(b.mask, b.adv + offset, b.adv))

    def updated(c, post_batch, mid_batches):
        lr = ML.MetaLearner(model, {k: v.detach() for k, v in theta.items()}, c, log_alpha)
        lr.update(pre, post_batch, _gen(5), mids=mid_batches)
        return lr.theta

    task = cfg.replace(outer_adv="task")
    a, b = updated(task, post, pre[1:]), updated(task, shifted(post), [shifted(m) for m in pre[1:]])
    for k in theta:
        torch.testing.assert_close(a[k], b[k], rtol=1e-9, atol=1e-12)
    c, d = updated(cfg, post, pre[1:]), updated(cfg, shifted(post), [shifted(m) for m in pre[1:]])
    assert not torch.allclose(c["pi/out/b"], d["pi/out/b"], rtol=1e-6, atol=1e-9)
    centred = ML.center_adv_per_task(shifted(post))
    for g in range(G):
        assert float(centred.adv[:, g][post.mask[:, g]].mean()) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="outer_adv"):
        ML.MetaConfig(outer_adv="linear")


def test_the_outer_learning_rate_follows_the_target_kl():
    """outer_kl_lr: after an iteration whose KL is below half the target theta's lr grows by 1.5,
    above twice the target it shrinks by 1.5, in between it stays; always within outer_lr_range;
    log alpha's rate never changes. Without a target the lr is MetaConfig.lr whatever the KL."""
    cfg = ML.MetaConfig(alpha_init=0.05, inner_data="fresh", outer_steps="post", outer_epochs=2)
    model, theta, log_alpha, pre, post, mids, stats = _fresh_step_batches(cfg, 73)

    def learner(c):
        return ML.MetaLearner(model, {k: v.detach() for k, v in theta.items()}, c, log_alpha)

    fixed = learner(cfg)
    for kl in (0.0, 1e-9, 5.0, float("nan")):
        assert fixed._adapt_lr(kl) == cfg.lr
    info = fixed.update(pre, post, _gen(5), mids=pre[1:])
    assert info["lr"] == cfg.lr and info["approx_kl"] > 0

    c = cfg.replace(outer_kl_lr=0.01, outer_lr_range=(1e-4, 1e-3))
    ad = learner(c)
    assert ad._adapt_lr(0.001) == pytest.approx(cfg.lr * 1.5)
    assert ad._adapt_lr(0.01) == pytest.approx(cfg.lr * 1.5)  # within [target/2, 2 target]: unchanged
    assert ad._adapt_lr(0.03) == pytest.approx(cfg.lr)
    for _ in range(10):
        ad._adapt_lr(0.0)
    assert ad.lr == 1e-3
    for _ in range(10):
        ad._adapt_lr(1.0)
    assert ad.lr == 1e-4 and ad.opt.param_groups[1]["lr"] == cfg.lr_alpha
    ad.lr = cfg.lr
    small = c.replace(outer_kl_lr=1e9)  # any iteration's KL is far below: the lr grows after the update
    info = learner(small).update(pre, post, _gen(5), mids=pre[1:])
    assert info["lr"] == pytest.approx(cfg.lr * 1.5)
    for bad in (dict(outer_kl_lr=0.0), dict(outer_lr_range=(1e-3, 1e-4)), dict(outer_lr_range=(0.0, 1e-3))):
        with pytest.raises(ValueError, match="outer_"):
            ML.MetaConfig(**bad)


def test_a_meta_player_is_executed_with_as_many_steps_as_it_learnt():
    """An agent meta-trained with another num_steps (MAML's one step, say) stores that many rows of
    step sizes; games execute it with that many learnt steps, the rest of the defaults unchanged."""
    from sumo_cli.adapt.meta_execution import GAME_BUFFER_EPISODES, LOG_ALPHA_KEY, config_of, game_config
    from sumo_cli.adapt.strategies import Player

    spec = P.PolicySpec("mlp", obs_dim=3, act_dim=2, hidden=4)
    model = ML.GaussianModel(spec)
    for m in (1, 3, 5):
        la = ML.init_log_alpha(ML.MetaConfig(num_steps=m), model, (), torch.float32)
        player = Player("a", "meta", spec, _theta(spec, 0, torch.float32, False), {}, {LOG_ALPHA_KEY: la})
        cfg = config_of(player)
        assert cfg.num_steps == m and cfg.replace(num_steps=ML.MetaConfig().num_steps) == game_config()
        assert cfg.execution == "paper" and cfg.buffer_episodes == GAME_BUFFER_EPISODES
    paper = Player("b", "meta", spec, _theta(spec, 0, torch.float32, False), {}, {LOG_ALPHA_KEY: torch.zeros(3)})
    assert config_of(paper) == ML.MetaConfig.paper()
