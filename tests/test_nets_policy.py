"""Policies as pure functions: batching over agents, unrolling with resets, derivatives, Gaussians."""

import math

import pytest
import torch

from sumo_cli.nets import policy as P

ARCHS = ["mlp", "lstm", "rl2"]


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _spec(arch: str, obs_dim: int = 10, act_dim: int = 3, hidden: int = 64) -> P.PolicySpec:
    return P.PolicySpec(arch=arch, obs_dim=obs_dim, act_dim=act_dim, hidden=hidden)


def _randomised(spec, seed, dtype=torch.float32):
    """init_params with every tensor perturbed, so that heads and biases are not near zero."""
    p = P.init_params(spec, _gen(seed), dtype)
    g = _gen(seed + 1000)
    return {k: v + 0.3 * torch.randn(v.shape, generator=g, dtype=dtype) for k, v in p.items()}


def test_spec_validation_and_dims():
    assert _spec("rl2").input_dim == 12 and _spec("lstm").input_dim == 10
    assert P.PolicySpec.from_dict(_spec("lstm").to_dict()) == _spec("lstm")
    with pytest.raises(ValueError):
        P.PolicySpec("gru", 3, 2)
    with pytest.raises(ValueError):
        P.PolicySpec("mlp", 0, 2)


@pytest.mark.parametrize("arch", ARCHS)
def test_init_params_layout_and_determinism(arch):
    spec = _spec(arch)
    a = P.init_params(spec, _gen(0))
    b = P.init_params(spec, _gen(0))
    c = P.init_params(spec, _gen(1))
    assert {k: tuple(v.shape) for k, v in a.items()} == P.param_shapes(spec)
    assert all(v.dtype == torch.float32 for v in a.values())
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["pi/out/w"], c["pi/out/w"])
    assert P.check_params(spec, a) == ()
    # no shared parameters between policy and value nets
    assert {k.split("/")[0] for k in a} == {"pi", "vf", "logstd"}
    # small policy head, unit value head
    assert a["pi/out/w"].abs().max() <= 0.011
    d = P.init_params(spec, _gen(0), torch.float64)
    assert all(v.dtype == torch.float64 for v in d.values())
    assert all(torch.allclose(d[k].float(), a[k]) for k in a)


def test_initial_state_shapes():
    assert P.initial_state(_spec("mlp"), (4,)) == {}
    st = P.initial_state(_spec("lstm", hidden=8), (3, 4))
    assert set(st) == set(P.STATE_KEYS) and all(v.shape == (3, 4, 8) for v in st.values())
    with pytest.raises(ValueError, match="None"):
        P.forward(_spec("lstm"), P.init_params(_spec("lstm"), _gen(0)), torch.zeros(2, 10), None)


def _steps(spec, params, obs, state, masks):
    means, values = [], []
    for x, m in zip(obs, masks):
        mean, value, state = P.forward(spec, params, x, state, m)
        means.append(mean)
        values.append(value)
    return torch.stack(means), torch.stack(values), state


@pytest.mark.parametrize("arch", ARCHS)
def test_batched_agents_equal_per_agent_loop(arch):
    spec = _spec(arch)
    G, B, T = 3, 4, 4
    agents = [_randomised(spec, s) for s in range(G)]
    stacked = P.stack_params(agents)
    assert P.check_params(spec, stacked) == (G,)
    g = _gen(7)
    obs = torch.randn(T, G, B, spec.input_dim, generator=g)
    masks = torch.rand(T, G, B, generator=g) < 0.3
    mean_b, value_b, state_b = _steps(spec, stacked, obs, P.initial_state(spec, (G, B)), masks)
    seq_mean, seq_value, seq_state = P.forward_sequence(spec, stacked, obs, P.initial_state(spec, (G, B)), masks)
    for i, params in enumerate(agents):
        mean_i, value_i, state_i = _steps(spec, params, obs[:, i], P.initial_state(spec, (B,)), masks[:, i])
        torch.testing.assert_close(mean_b[:, i], mean_i, atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(value_b[:, i], value_i, atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(seq_mean[:, i], mean_i, atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(seq_value[:, i], value_i, atol=1e-6, rtol=1e-6)
        for k in state_i:
            torch.testing.assert_close(state_b[k][i], state_i[k], atol=1e-6, rtol=1e-6)
            torch.testing.assert_close(seq_state[k][i], state_i[k], atol=1e-6, rtol=1e-6)
    # log-probabilities with a stacked logstd (G, A) against (G, B, A) means
    act = torch.randn(G, B, spec.act_dim, generator=g)
    lp = P.log_prob(mean_b[0], stacked["logstd"], act)
    for i, params in enumerate(agents):
        torch.testing.assert_close(lp[i], P.log_prob(mean_b[0, i], params["logstd"], act[i]))
    assert [torch.equal(a["pi/out/w"], u["pi/out/w"]) for a, u in zip(agents, P.unstack_params(stacked))] == [True] * G


@pytest.mark.parametrize("arch", ARCHS)
def test_forward_sequence_resets_like_fresh_state(arch):
    """Reference: per batch element, a plain loop that restarts from initial_state at each done."""
    spec = _spec(arch, hidden=16)
    params = _randomised(spec, 3)
    T, B = 7, 3
    g = _gen(11)
    obs = torch.randn(T, B, spec.input_dim, generator=g)
    dones = torch.zeros(T, B, dtype=torch.bool)
    dones[2, 0] = dones[5, 0] = dones[3, 1] = dones[0, 2] = True
    state0 = P.initial_state(spec, (B,))
    if spec.recurrent:  # start from a non-zero state, as a later BPTT chunk does
        state0 = {k: torch.randn(v.shape, generator=g) for k, v in state0.items()}
    means, values, final = P.forward_sequence(spec, params, obs, state0, dones)
    assert means.shape == (T, B, spec.act_dim) and values.shape == (T, B)
    for b in range(B):
        state = {k: v[b : b + 1] for k, v in state0.items()}
        for t in range(T):
            if dones[t, b]:
                state = P.initial_state(spec, (1,))
            mean, value, state = P.forward(spec, params, obs[t, b : b + 1], state)
            torch.testing.assert_close(means[t, b], mean[0], atol=1e-6, rtol=1e-6)
            torch.testing.assert_close(values[t, b], value[0], atol=1e-6, rtol=1e-6)
        for k in final:
            torch.testing.assert_close(final[k][b], state[k][0], atol=1e-6, rtol=1e-6)


def test_lstm_cell_matches_torch_lstmcell():
    """The zoo's gate order (i, j, f, o; +1 forget bias; kernel (in+H, 4H)) mapped onto nn.LSTMCell."""
    H, In, B = 5, 4, 3
    g = _gen(5)
    kernel = torch.randn(In + H, 4 * H, generator=g, dtype=torch.float64)
    bias = torch.randn(4 * H, generator=g, dtype=torch.float64)
    x, h, c = (torch.randn(B, n, generator=g, dtype=torch.float64) for n in (In, H, H))
    i, j, f, o = kernel.chunk(4, dim=1)
    bi, bj, bf, bo = bias.chunk(4)
    ref = torch.nn.LSTMCell(In, H, dtype=torch.float64)
    with torch.no_grad():
        w = torch.cat([i, f, j, o], dim=1).T  # torch order: i, f, g, o
        ref.weight_ih.copy_(w[:, :In])
        ref.weight_hh.copy_(w[:, In:])
        ref.bias_ih.copy_(torch.cat([bi, bf + 1.0, bj, bo]))
        ref.bias_hh.zero_()
    h_ref, c_ref = ref(x, (h, c))
    h_new, c_new = P.lstm_cell(x, h, c, kernel, bias)
    torch.testing.assert_close(h_new, h_ref)
    torch.testing.assert_close(c_new, c_ref)


def _flat_fn(spec, keys, shapes, fn):
    def wrapped(*flat):
        return fn({k: t.reshape(s) for k, t, s in zip(keys, flat, shapes)})

    return wrapped


def _sequence_loss(spec, obs, dones, actions):
    def loss(params):
        means, values, _ = P.forward_sequence(spec, params, obs, P.initial_state(spec, (obs.shape[1],), torch.float64), dones)
        return P.log_prob(means, params["logstd"], actions).sum() + (values**2).sum()

    return loss


@pytest.mark.parametrize("arch", ARCHS)
def test_gradients_and_second_derivatives_match_finite_differences(arch):
    spec = P.PolicySpec(arch, obs_dim=3, act_dim=2, hidden=3)
    params = _randomised(spec, 21, torch.float64)
    T, B = 3, 2
    g = _gen(22)
    obs = torch.randn(T, B, spec.input_dim, generator=g, dtype=torch.float64)
    acts = torch.randn(T, B, spec.act_dim, generator=g, dtype=torch.float64)
    dones = torch.tensor([[False, False], [True, False], [False, False]])
    keys = list(params)
    shapes = [params[k].shape for k in keys]
    flat = [params[k].detach().reshape(-1).clone().requires_grad_(True) for k in keys]
    f = _flat_fn(spec, keys, shapes, _sequence_loss(spec, obs, dones, acts))
    assert torch.autograd.gradcheck(f, flat, eps=1e-6, atol=1e-5)
    assert torch.autograd.gradgradcheck(f, flat, eps=1e-6, atol=1e-5, fast_mode=True)


@pytest.mark.parametrize("arch", ["mlp", "lstm"])
def test_meta_gradient_through_an_inner_step(arch):
    """d/d(theta, alpha) of L_out(theta - alpha * grad L_in(theta)) against finite differences:
    the function itself calls autograd.grad(create_graph=True), so this checks second derivatives."""
    spec = P.PolicySpec(arch, obs_dim=2, act_dim=2, hidden=3)
    params = _randomised(spec, 31, torch.float64)
    g = _gen(32)
    obs_in, obs_out = (torch.randn(3, 2, spec.input_dim, generator=g, dtype=torch.float64) for _ in range(2))
    act_in, act_out = (torch.randn(3, 2, spec.act_dim, generator=g, dtype=torch.float64) for _ in range(2))
    no_dones = torch.zeros(3, 2, dtype=torch.bool)
    inner = _sequence_loss(spec, obs_in, no_dones, act_in)
    outer = _sequence_loss(spec, obs_out, no_dones, act_out)
    keys = list(params)
    shapes = [params[k].shape for k in keys]

    def adapted_loss(alpha, *flat):
        theta = {k: t.reshape(s) for k, t, s in zip(keys, flat, shapes)}
        grads = torch.autograd.grad(inner(theta), list(theta.values()), create_graph=True)
        phi = {k: theta[k] - alpha * gr for k, gr in zip(keys, grads)}
        return outer(phi)

    alpha = torch.tensor(0.05, dtype=torch.float64, requires_grad=True)
    flat = [params[k].detach().reshape(-1).clone().requires_grad_(True) for k in keys]
    assert torch.autograd.gradcheck(adapted_loss, [alpha, *flat], eps=1e-6, atol=1e-5, fast_mode=True)


def test_log_prob_and_entropy_match_torch_normal():
    g = _gen(41)
    G, B, A = 2, 5, 4
    mean = torch.randn(G, B, A, generator=g, dtype=torch.float64)
    logstd = torch.randn(G, A, generator=g, dtype=torch.float64)
    act = torch.randn(G, B, A, generator=g, dtype=torch.float64)
    ref = torch.distributions.Normal(mean, logstd.exp()[:, None, :])
    torch.testing.assert_close(P.log_prob(mean, logstd, act), ref.log_prob(act).sum(-1))
    torch.testing.assert_close(P.entropy(logstd), ref.entropy()[:, 0].sum(-1))
    ref1 = torch.distributions.Normal(mean[0], logstd[0].exp())
    torch.testing.assert_close(P.log_prob(mean[0], logstd[0], act[0]), ref1.log_prob(act[0]).sum(-1))
    assert P.log_prob(mean[0], logstd[0], act[0]).shape == (B,)


def test_sample_is_seeded_and_has_the_right_moments():
    mean = torch.full((20000, 2), 1.5)
    logstd = torch.tensor([0.0, math.log(0.25)])
    a = P.sample(mean, logstd, _gen(3))
    assert torch.equal(a, P.sample(mean, logstd, _gen(3)))
    torch.testing.assert_close(a.mean(0), torch.tensor([1.5, 1.5]), atol=0.03, rtol=0)
    torch.testing.assert_close(a.std(0), torch.tensor([1.0, 0.25]), atol=0.03, rtol=0)
    stacked = P.sample(torch.zeros(3, 7, 2), torch.zeros(3, 2), _gen(0))
    assert stacked.shape == (3, 7, 2)


def test_rl2_input_and_wrong_input_size():
    spec = _spec("rl2", obs_dim=4, act_dim=2, hidden=8)
    params = P.init_params(spec, _gen(0))
    obs = torch.randn(5, 4)
    x = P.rl2_input(obs, torch.ones(5), torch.zeros(5, dtype=torch.bool))
    assert x.shape == (5, 6) and torch.equal(x[:, 4], torch.ones(5))
    mean, value, state = P.forward(spec, params, x, P.initial_state(spec, (5,)))
    assert mean.shape == (5, 2) and value.shape == (5,)
    with pytest.raises(ValueError, match="rl2_input"):
        P.forward(spec, params, obs, P.initial_state(spec, (5,)))


def test_stack_params_rejects_mismatched_keys():
    a = P.init_params(_spec("mlp"), _gen(0))
    b = dict(a)
    del b["logstd"]
    with pytest.raises(ValueError):
        P.stack_params([a, b])


def _assert_same_outputs(fast, stepped):
    """(means, values, final state, gradients) of a fast path equal those of the stepped reference
    (a gradient the reference does not have must be absent or zero)."""
    (m1, v1, s1, g1), (m0, v0, s0, g0) = fast, stepped
    torch.testing.assert_close(m1, m0)
    torch.testing.assert_close(v1, v0)
    for k in s0:
        torch.testing.assert_close(s1[k], s0[k])
    for k in g0:
        if g0[k] is None:
            assert g1[k] is None or not g1[k].any(), k
        else:
            torch.testing.assert_close(g1[k], g0[k])


def _stepped(spec, params, obs, state0, dones):
    """forward() step by step over the T steps of ``obs``: (means, values, final state)."""
    state, ms, vs = state0, [], []
    for t in range(obs.shape[0]):
        m, v, state = P.forward(spec, params, obs[t], state, dones[t])
        ms.append(m)
        vs.append(v)
    return torch.stack(ms), torch.stack(vs), state


@pytest.mark.parametrize("agents", [(), (3,), (2, 2)], ids=["one-agent", "3-agents", "2x2-agents"])
@pytest.mark.parametrize("arch", ["lstm", "rl2"])
def test_sequence_fast_path_equals_stepping_forward_with_gradients(arch, agents):
    """forward_sequence of recurrent nets (its fused path), for one agent and for stacked agents,
    against forward() step by step: outputs, final state and the gradients of a loss on both, over
    a two-dim batch with resets."""
    spec = _spec(arch, hidden=8)
    T, batch = 6, (2, 3)
    g = _gen(5)
    obs = torch.randn(T, *agents, *batch, spec.input_dim, generator=g, dtype=torch.float64)
    dones = torch.rand(T, *agents, *batch, generator=g) < 0.3
    state0 = {k: torch.randn(v.shape, generator=g, dtype=torch.float64)
              for k, v in P.initial_state(spec, (*agents, *batch), torch.float64).items()}
    n = math.prod(agents)
    stacked = P.stack_params([_randomised(spec, 8 + i, torch.float64) for i in range(n)])
    stacked = {k: v.reshape(*agents, *v.shape[1:]) for k, v in stacked.items()}

    def run(fused: bool):
        params = {k: v.clone().requires_grad_(True) for k, v in stacked.items()}
        if fused:
            means, values, state = P.forward_sequence(spec, params, obs, state0, dones)
        else:
            means, values, state = _stepped(spec, params, obs, state0, dones)
        weights = torch.arange(T, dtype=torch.float64).reshape(T, *([1] * (values.dim() - 1)))
        loss = (means ** 2).sum() + (values * weights).sum() + state["pi/c"].sum()
        grads = torch.autograd.grad(loss, list(params.values()), allow_unused=True)
        return means, values, state, dict(zip(params, grads))

    _assert_same_outputs(run(True), run(False))


@pytest.mark.parametrize("resets", ["none", "first-step-only", "mixed", "every-window"])
def test_torch_lstm_path_equals_stepping_forward_with_gradients(resets):
    """forward_sequence(fused=True), PyTorch's LSTM kernel with the zoo cell's weights rearranged
    (the PPO update's path), against forward() step by step in float64: outputs, final state and
    gradients, whether no window, some or every window has a reset inside it."""
    spec = _spec("lstm", hidden=8)
    T, B = 6, 7
    g = _gen(11)
    obs = torch.randn(T, B, spec.input_dim, generator=g, dtype=torch.float64)
    dones = torch.zeros(T, B, dtype=torch.bool)
    if resets == "first-step-only":
        dones[0, ::2] = True
    elif resets == "mixed":
        dones[0, 1], dones[3, 2], dones[5, 4], dones[1, 4] = True, True, True, True
    elif resets == "every-window":
        dones[2] = True
    state0 = {k: torch.randn(v.shape, generator=g, dtype=torch.float64)
              for k, v in P.initial_state(spec, (B,), torch.float64).items()}
    base = _randomised(spec, 12, torch.float64)

    def run(fused: bool):
        params = {k: v.clone().requires_grad_(True) for k, v in base.items()}
        if fused:
            means, values, state = P.forward_sequence(spec, params, obs, state0, dones, fused=True)
        else:
            means, values, state = _stepped(spec, params, obs, state0, dones)
        weights = torch.arange(T, dtype=torch.float64).unsqueeze(1)
        loss = (means ** 2).sum() + (values * weights).sum() + state["pi/c"].sum() + state["vf/h"].square().sum()
        grads = torch.autograd.grad(loss, list(params.values()), allow_unused=True, materialize_grads=True)
        return means, values, state, dict(zip(params, grads))

    _assert_same_outputs(run(True), run(False))
