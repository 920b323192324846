"""The LSTM recurrence's hand-written backward (nets.lstm_bptt) against autograd through the step by
step unroll, in float64."""

from __future__ import annotations

import pytest
import torch

from sumo_cli.learn import stacked_ppo as S
from sumo_cli.nets import policy as P
from sumo_cli.nets.lstm_bptt import lstm_unroll


def reference(gx, h, c, kh, keep, cell):
    """Autograd through one ``cell`` step at a time: what lstm_unroll computes."""
    hs = []
    for t in range(gx.shape[1]):
        if keep is not None:
            h, c = h * keep[t], c * keep[t]
        h, c, _, _ = cell(torch.baddbmm(gx[:, t], h, kh), c)
        hs.append(h)
    return torch.stack(hs, 1), h, c


def inputs(N, T, B, H, resets, seed):
    g = torch.Generator().manual_seed(seed)
    rand = lambda *shape, scale=1.0: (scale * torch.randn(*shape, generator=g, dtype=torch.float64)).requires_grad_(True)  # noqa: E731
    keep = None
    if resets:
        keep = (torch.rand(T, N, B, 1, generator=g) > 0.3).to(torch.float64)
    return rand(N, T, B, 4 * H), rand(N, B, H), rand(N, B, H), rand(N, H, 4 * H, scale=0.5), keep


CELLS = {"policy": lambda N, H: P._zoo_cell, "stacked": lambda N, H: S._cell(N // 2, H, torch.float64)}


@pytest.mark.parametrize("cell_name", sorted(CELLS))
@pytest.mark.parametrize("N,T,B,H,resets", [(2, 1, 1, 3, False), (2, 10, 5, 4, True), (6, 7, 3, 8, True), (4, 10, 1, 16, False)])
def test_gradients_equal_autograd_through_the_steps(cell_name, N, T, B, H, resets):
    cell = CELLS[cell_name](N, H)
    gx, h0, c0, kh, keep = inputs(N, T, B, H, resets, seed=N * 100 + T)
    g = torch.Generator().manual_seed(1)
    out = lstm_unroll(gx, h0, c0, kh, keep, cell)
    ref = reference(gx, h0, c0, kh, keep, cell)
    for a, b in zip(out, ref):
        assert torch.equal(a, b)  # the forward is the caller's own step, bit for bit
    # upstream gradients on every output (hidden states of all steps, final h and c)
    ups = [torch.randn(t.shape, generator=g, dtype=torch.float64) for t in out]
    wrt = (gx, h0, c0, kh)
    mine = torch.autograd.grad(sum((u * t).sum() for u, t in zip(ups, out)), wrt)
    theirs = torch.autograd.grad(sum((u * t).sum() for u, t in zip(ups, ref)), wrt)
    for name, a, b in zip(("gx", "h0", "c0", "kh"), mine, theirs):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12, msg=name)


@pytest.mark.parametrize("resets", [False, True])
def test_gradcheck(resets):
    gx, h0, c0, kh, keep = inputs(2, 3, 2, 2, resets, seed=3)
    assert torch.autograd.gradcheck(lambda *a: lstm_unroll(*a, keep, P._zoo_cell), (gx, h0, c0, kh))


def test_gradient_of_the_hidden_states_only():
    """Unused final states (PPO reads the hidden states only) get zero gradients."""
    gx, h0, c0, kh, keep = inputs(4, 5, 3, 4, True, seed=5)
    hs, _, _ = lstm_unroll(gx, h0, c0, kh, keep, P._zoo_cell)
    hr, _, _ = reference(gx, h0, c0, kh, keep, P._zoo_cell)
    mine = torch.autograd.grad(hs.square().sum(), (gx, h0, c0, kh))
    theirs = torch.autograd.grad(hr.square().sum(), (gx, h0, c0, kh))
    for a, b in zip(mine, theirs):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def sequence_case(arch, agents=()):
    spec = P.PolicySpec(arch, 5, 2, hidden=8)
    g = torch.Generator().manual_seed(2)
    stacked = [P.init_params(spec, g, torch.float64) for _ in range(max(1, len(agents) and agents[0]))]
    params = P.stack_params(stacked) if agents else stacked[0]
    params = {k: v.requires_grad_(True) for k, v in params.items()}
    T, B = 6, 3
    x = torch.randn(T, *agents, B, spec.input_dim, generator=g, dtype=torch.float64)
    dones = torch.rand(T, *agents, B, generator=g) < 0.3
    state0 = {k: torch.randn(*agents, B, 8, generator=g, dtype=torch.float64).requires_grad_(True) for k in P.STATE_KEYS}
    return spec, params, x, state0, dones


@pytest.mark.parametrize("arch,agents", [("lstm", ()), ("rl2", ()), ("lstm", (3,))])
def test_forward_sequence_first_order_is_the_same_function(arch, agents):
    spec, params, x, state0, dones = sequence_case(arch, agents)
    wrt = [v for k, v in params.items() if k != "logstd"] + list(state0.values())
    grads = []
    for first_order in (False, True):
        mean, value, state = P.forward_sequence(spec, params, x, state0, dones, first_order=first_order)
        loss = mean.square().sum() + value.sin().sum() + sum(v.cos().sum() for v in state.values())
        grads.append((mean.detach(), value.detach(), torch.autograd.grad(loss, wrt)))
    (m0, v0, g0), (m1, v1, g1) = grads
    assert torch.equal(m0, m1) and torch.equal(v0, v1)
    for a, b in zip(g0, g1):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_second_order_through_the_first_order_path_is_refused():
    """The meta-learner's create_graph backward must take the autograd unroll (the default)."""
    spec, params, x, state0, dones = sequence_case("lstm")
    mean, _, _ = P.forward_sequence(spec, params, x, state0, dones, first_order=True)
    (g,) = torch.autograd.grad(mean.square().sum(), [params["pi/lstm/kernel"]], create_graph=True)
    with pytest.raises(RuntimeError):
        torch.autograd.grad(g.square().sum(), [params["pi/lstm/kernel"]])
