"""The zoo LSTM's recurrence over a window, with a hand-written backward pass (first order only).

Autograd through a step-by-step unroll records about fifteen small operations per step and runs
their backward one by one; on the small nets of this project that per-operation cost, not the
arithmetic, dominates an update. :func:`lstm_unroll` runs the same forward loop, keeps the gate
activations, and in backward runs one reverse loop of a few operations per step (the gates' local
derivatives are formed for blocks of steps at once), then the recurrent kernel's gradient as a
single batched product over all steps.

Where it gains: many agents' small batches, as in the stacked tracking update
(:mod:`sumo_cli.ppo.stacked_ppo`), where autograd's per-step kernel gradient is a product over a
handful of rows per agent. For one agent's large batch (PPO training) it was slower than autograd's
unroll, and PyTorch's own LSTM kernel is faster still (``forward_sequence(fused=True)``).

The cell is the zoo's (see :mod:`sumo_cli.nets.policy`): ``z = gx[t] + h @ kh`` with ``gx`` the
input half of the gates plus the bias, gates i, j, f, o; ``c' = c * sigmoid(f + FORGET_BIAS) +
sigmoid(i) * tanh(j)``, ``h' = tanh(c') * sigmoid(o)``; before step t the state is multiplied by
``keep[t]`` (0 at an episode start). The caller passes the cell's elementwise part (``cell``), so
the forward computes exactly what the caller's own step computes (bit for bit); the backward needs
only products and sums of the saved activations.

Not twice differentiable: the backward is ``once_differentiable`` (a ``create_graph`` backward
through it raises), so the meta-learner's second-order paths keep the autograd unroll.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

#: Size (in floats) of the gates' local derivatives that backward forms at once: a block of steps
#: of about a megabyte, which stays in a core's cache (all steps at once took 1.7x the autograd
#: backward for one agent's 416 windows, whose elementwise work runs step by step).
_BLOCK_FLOATS = 1 << 18

#: ``cell(z, c) -> (h', c', (i, j, f, o), tanh(c'))``: the elementwise part of one step, on the
#: pre-activation gates ``z`` ``(N, B, 4H)`` and the (already reset) cell state ``c`` ``(N, B, H)``;
#: the gate activations returned are sigmoid(i), tanh(j), sigmoid(f + FORGET_BIAS), sigmoid(o).
Cell = Callable[[Tensor, Tensor], tuple[Tensor, Tensor, tuple[Tensor, Tensor, Tensor, Tensor], Tensor]]


class _LSTMUnroll(torch.autograd.Function):
    @staticmethod
    def forward(ctx, gx: Tensor, h0: Tensor, c0: Tensor, kh: Tensor, keep: Tensor | None, cell: Cell):  # noqa: ANN001, ANN205
        T = gx.shape[1]
        # the steps at which some state is reset (a product with ones is exact: skipped elsewhere)
        resets = [False] * T if keep is None else (keep == 0).flatten(1).any(1).tolist()
        h, c = h0, c0
        hs, cs, gates, tcs = [], [], [], []
        for t in range(T):
            if resets[t]:
                h, c = h * keep[t], c * keep[t]
            h, c, g, tc = cell(torch.baddbmm(gx[:, t], h, kh), c)
            hs.append(h)
            cs.append(c)
            gates.append(g)
            tcs.append(tc)
        out = torch.stack(hs, 1)
        ctx.cell_state = (cs, gates, tcs)
        ctx.keep, ctx.resets = keep, resets
        ctx.save_for_backward(h0, c0, kh, out)
        return out, h, c

    @staticmethod
    @once_differentiable
    def backward(ctx, d_out: Tensor, d_h: Tensor, d_c: Tensor):  # noqa: ANN001, ANN205
        h0, c0, kh, out = ctx.saved_tensors
        cs, gates, tcs = ctx.cell_state
        keep, resets = ctx.keep, ctx.resets
        N, T, B, H = out.shape
        kt = None if keep is None else keep.movedim(0, 1)  # (N, T, B, 1)
        c_prev = [c0, *cs[:-1]]

        def local(t0: int, t1: int) -> tuple[Tensor, Tensor, Tensor]:
            """The cell's local derivatives at steps t0..t1-1, as (N, t1 - t0, B, .) tensors:
            dz = [dc, dc, dc, dh] * q, dc += dh * r (through h' = tanh(c') o), dc_prev = dc * fk."""
            i, j, f, o = (torch.stack([g[k] for g in gates[t0:t1]], 1) for k in range(4))
            tc = torch.stack(tcs[t0:t1], 1)
            c_in = torch.stack(c_prev[t0:t1], 1)  # the state the step started from, after its reset
            if any(resets[t0:t1]):
                c_in, f_keep = c_in * kt[:, t0:t1], f * kt[:, t0:t1]
            else:
                f_keep = f
            q = torch.cat([j * (i * (1 - i)), i * (1 - j * j), c_in * (f * (1 - f)), tc * (o * (1 - o))], -1)
            return q, o * (1 - tc * tc), f_keep

        # the local derivatives in blocks of steps that stay in cache (all steps at once for small
        # batches: fewer operations)
        span = max(1, min(T, _BLOCK_FLOATS // (N * B * 4 * H)))
        kh_t = kh.transpose(1, 2)
        dzs: list[Tensor | None] = [None] * T
        dh, dc = d_h, d_c
        for t1 in range(T, 0, -span):
            t0 = max(0, t1 - span)
            q, r, fk = local(t0, t1)
            for t in range(t1 - 1, t0 - 1, -1):
                dh = dh + d_out[:, t]
                dc = dc + dh * r[:, t - t0]
                dz = torch.cat([dc, dc, dc, dh], -1) * q[:, t - t0]
                dzs[t] = dz
                dh = torch.bmm(dz, kh_t)
                if resets[t]:
                    dh = dh * kt[:, t]
                dc = dc * fk[:, t - t0]
        dgx = torch.stack(dzs, 1)  # (N, T, B, 4H)
        dkh = None
        if ctx.needs_input_grad[3]:
            h_in = torch.cat([h0.unsqueeze(1), out[:, :-1]], 1)
            if any(resets):
                h_in = h_in * kt
            dkh = torch.bmm(h_in.reshape(N, T * B, H).transpose(1, 2), dgx.reshape(N, T * B, 4 * H))
        return dgx, dh, dc, dkh, None, None


def lstm_unroll(gx: Tensor, h0: Tensor, c0: Tensor, kh: Tensor, keep: Tensor | None, cell: Cell) -> tuple[Tensor, Tensor, Tensor]:
    """Unroll ``N`` LSTM cells (any stack of nets and agents) over ``T`` steps.

    ``gx`` ``(N, T, B, 4H)``: the input half of the gates, bias included; ``h0``, ``c0`` ``(N, B, H)``;
    ``kh`` ``(N, H, 4H)``: the recurrent kernels; ``keep`` ``(T, N, B, 1)`` or None: multiplies the
    state before each step (not differentiated). Returns the hidden states of every step
    ``(N, T, B, H)`` and the final ``h``, ``c``. Differentiable (first order) wrt ``gx``, ``h0``,
    ``c0`` and ``kh``."""
    return _LSTMUnroll.apply(gx, h0, c0, kh, keep, cell)
