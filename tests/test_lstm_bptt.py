"""The LSTM recurrence's hand-written backward (nets.lstm_bptt) against autograd through the step by
step unroll, in float64."""

from __future__ import annotations

import pytest
import torch

from sumo_cli.ppo import stacked_ppo as S
from sumo_cli.nets import policy as P
from sumo_cli.nets import lstm_bptt as LB
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


@pytest.mark.parametrize("arch", ["lstm", "rl2"])
def test_stacked_windows_are_forward_sequence_with_its_gradients(arch):
    """The tracking update's unroll (stacked_ppo._lstm_windows, through lstm_unroll) against the
    autograd unroll of policy.forward_sequence, values and gradients, float64."""
    G, L, B, H = 3, 10, 4, 8
    spec = P.PolicySpec(arch, 5, 2, hidden=H)
    g = torch.Generator().manual_seed(2)
    params = P.stack_params([P.init_params(spec, g, torch.float64) for _ in range(G)])
    params = {k: v.requires_grad_(True) for k, v in params.items()}
    x = torch.randn(L, G, B, spec.input_dim, generator=g, dtype=torch.float64)
    resets = torch.rand(L, G, B, generator=g) < 0.2
    state0 = {k: torch.randn(G, B, H, generator=g, dtype=torch.float64) for k in P.STATE_KEYS}
    wrt = [v for k, v in params.items() if k != "logstd"]
    mean, value = S._lstm_windows(spec, params, x, state0, resets)
    ref_mean, ref_value, _ = P.forward_sequence(spec, params, x, state0, resets)
    ref_mean, ref_value = ref_mean.movedim(0, 1), ref_value.movedim(0, 1)  # (G, L, B, ...)
    torch.testing.assert_close(mean, ref_mean, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(value, ref_value, rtol=1e-12, atol=1e-12)
    up = torch.randn(mean.shape, generator=g, dtype=torch.float64)
    mine = torch.autograd.grad((up * mean).sum() + value.sin().sum(), wrt)
    theirs = torch.autograd.grad((up * ref_mean).sum() + ref_value.sin().sum(), wrt)
    for a, b in zip(mine, theirs):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_second_order_is_refused():
    """Not twice differentiable: a create_graph backward through it cannot be differentiated again
    (the meta-learner's unroll is policy.forward_sequence, autograd throughout)."""
    gx, h0, c0, kh, keep = inputs(2, 3, 2, 2, True, seed=4)
    hs, _, _ = lstm_unroll(gx, h0, c0, kh, keep, P._zoo_cell)
    (d,) = torch.autograd.grad(hs.square().sum(), [kh], create_graph=True)
    with pytest.raises(RuntimeError):
        torch.autograd.grad(d.square().sum(), [kh])


@pytest.mark.parametrize("block", [1, 1 << 40])
def test_blocks_of_steps_give_the_same_gradients(block, monkeypatch):
    """Local derivatives formed step by step or all at once: bit for bit the same gradients (so
    the tracking update's result does not depend on how many agents share the block)."""
    gx, h0, c0, kh, keep = inputs(4, 10, 3, 8, True, seed=6)
    def grads():
        hs, h, c = lstm_unroll(gx, h0, c0, kh, keep, P._zoo_cell)
        return torch.autograd.grad(hs.sin().sum() + h.sum() + c.square().sum(), (gx, h0, c0, kh))
    base = grads()
    monkeypatch.setattr(LB, "_BLOCK_FLOATS", block)
    for a, b in zip(base, grads()):
        assert torch.equal(a, b)
