"""One PPO update for each of many agents of one policy spec, computed together with stacked
parameters: what the ``track`` strategy runs between the rounds of all the games of a process.

Agent k brings its own rollout, parameters, Adam moments and step count, and minibatch generator;
:func:`stacked_ppo_update` does for every agent what :func:`sumo_cli.ppo.ppo.ppo_update` does for
one (GAE and advantage normalisation on the agent's own steps, ``epochs`` passes in
``num_minibatches`` random minibatches of BPTT windows or steps, clipped surrogate + value loss,
gradient-norm clip, Adam), with each minibatch step of the whole group as one batched forward and
backward pass. Each agent's loss is a mean over its own minibatch entries, so the gradient of their
sum wrt the stacked parameters is, slice by slice, each agent's own gradient; the norm clip and
Adam (with its own step count) are applied per agent.

Same results whatever the group: the data of an agent is padded to a shape that depends on its own
rollout only (its sample count rounded up by :func:`padded_count`, plus one padding sample that
minibatches fill up with), and agents are grouped by that shape. Every batched operation reads, for
slice k, agent k's data only, reductions run over each agent's own contiguous row, and a value head
of one output is evaluated as two (a matrix product with a single output column takes another BLAS
path for one agent than for several). Transcendental functions (exp, tanh, sigmoid) take a
vectorised path for whole vectors of a contiguous run and a scalar one, which may round
differently, for its tail, so they run on each agent's elements laid out as a row padded to a
multiple of :data:`ROW` floats (:func:`rowwise`): every element takes the vectorised path whatever
the group. So an agent updated alone, a group of one, computes exactly what it computes in any
group (tests/test_tracking.py, and whole games in tests/test_engine.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor

from sumo_cli.ppo.ppo import PPOConfig, _chunk, _stored_chunk_states, rollout_inputs, update_targets
from sumo_cli.ppo.rollout import Rollout
from sumo_cli.nets import policy as P
from sumo_cli.nets.lstm_bptt import Cell, lstm_unroll

#: Row length (in floats) that every agent's elements are padded to for transcendental functions:
#: a multiple of two vectors of the widest x86 vector unit (2 x 16 floats with AVX-512).
ROW = 64

#: Adam's moment decays (torch's defaults, which :func:`sumo_cli.ppo.ppo.make_optimizer` uses).
ADAM_BETAS = (0.9, 0.999)


@dataclass
class AgentState:
    """What one agent's updates carry from one to the next (within a game): Adam's moments and step
    count, and the generator that orders the minibatches."""

    generator: torch.Generator
    exp_avg: dict[str, Tensor] = field(default_factory=dict)
    exp_avg_sq: dict[str, Tensor] = field(default_factory=dict)
    steps: int = 0


def padded_count(n: int) -> int:
    """``n`` rounded up to the next of 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, ... (four sizes per doubling):
    at most 25% padding, and few distinct shapes, so that agents with similar rollouts share a group."""
    if n <= 4:
        return 4
    p = 1 << (n.bit_length() - 3)
    return -(-n // p) * p


@dataclass
class _Prepared:
    """One agent's update data, unpadded: ``n`` samples (BPTT windows (L, n, ...) or steps (n, ...))."""

    n: int
    num_mb: int
    x: Tensor
    actions: Tensor
    logp: Tensor
    adv: Tensor
    ret: Tensor
    mask: Tensor | None = None  # (L, n) valid steps of the windows
    resets: Tensor | None = None  # (L, n)
    states: dict[str, Tensor] = field(default_factory=dict)  # (n, H)
    explained_variance: float = float("nan")


def _prepare(spec: P.PolicySpec, rollout: Rollout, obs_norm, cfg: PPOConfig, dtype: torch.dtype) -> _Prepared:  # noqa: ANN001
    r = rollout
    if r.num_envs != 1:
        raise ValueError("the stacked PPO update takes one column per agent")
    T = r.num_steps
    x = rollout_inputs(spec, r, obs_norm, dtype)
    adv, ret, ev = update_targets(spec, r, cfg)
    if spec.recurrent:
        L = cfg.bptt_len
        states = _stored_chunk_states(r, L)
        mask = _chunk(torch.ones(T, 1, dtype=torch.bool), L, False)
        n = mask.shape[1]
        return _Prepared(n, min(cfg.num_minibatches, n), _chunk(x, L), _chunk(r.actions.to(dtype), L),
                         _chunk(r.logp.to(dtype), L), _chunk(adv, L), _chunk(ret, L), mask,
                         _chunk(r.resets, L, False), states, ev)
    return _Prepared(T, min(cfg.num_minibatches, T), x[:, 0], r.actions[:, 0].to(dtype), r.logp[:, 0].to(dtype),
                     adv[:, 0], ret[:, 0], explained_variance=ev)


def rowwise(fn, x: Tensor, G: int) -> Tensor:  # noqa: ANN001
    """``fn(x)`` for an elementwise ``fn``, computed on each of the G agents' elements (``x``'s
    leading dim, or its first G * k rows) as one row padded to a multiple of :data:`ROW` floats."""
    flat = x.reshape(G, -1)
    n = flat.shape[1]
    pad = -n % ROW
    if pad:
        flat = torch.cat([flat, flat.new_zeros(G, pad)], 1)
    return fn(flat)[:, :n].reshape(x.shape)


def _log_prob(mean: Tensor, logstd: Tensor, action: Tensor) -> Tensor:
    """:func:`sumo_cli.nets.policy.log_prob` for agent-first ``mean``/``action`` ``(G, ..., A)`` and
    stacked ``logstd`` ``(G, A)``, its exp taken row-wise."""
    G = logstd.shape[0]
    ls = logstd.reshape(G, *([1] * (mean.dim() - 2)), logstd.shape[-1])
    z = (action - mean) * rowwise(torch.exp, -ls, G)
    return (-0.5 * z * z - ls - P._LOG_SQRT_2PI).sum(-1)


def _mlp(params: P.Params, net: str, x: Tensor) -> Tensor:
    G = x.shape[0]
    for layer in ("fc0", "fc1"):
        x = rowwise(torch.tanh, torch.baddbmm(params[f"{net}/{layer}/b"].unsqueeze(1), x, params[f"{net}/{layer}/w"]), G)
    return torch.baddbmm(params[f"{net}/out/b"].unsqueeze(1), x, params[f"{net}/out/w"])


def _cell(G: int, H: int, dtype: torch.dtype) -> Cell:
    """The zoo's LSTM cell (elementwise part) for ``G * n`` stacked cells of width ``H`` (``n`` per
    agent, e.g. the two nets), its transcendental functions taken row-wise: see
    :data:`sumo_cli.nets.lstm_bptt.Cell`."""
    shift = torch.zeros(4 * H, dtype=dtype)
    shift[2 * H:3 * H] = P.FORGET_BIAS

    def cell(z: Tensor, c: Tensor):  # noqa: ANN202
        sig = rowwise(torch.sigmoid, z + shift, G)
        j = rowwise(torch.tanh, z[..., H:2 * H], G)
        c = c * sig[..., 2 * H:3 * H] + sig[..., :H] * j
        tc = rowwise(torch.tanh, c, G)
        return tc * sig[..., 3 * H:], c, (sig[..., :H], j, sig[..., 2 * H:3 * H], sig[..., 3 * H:]), tc

    return cell


@torch.no_grad()
def lstm_states(spec: P.PolicySpec, params: P.Params, x: Tensor,
                record: dict[int, list[tuple[int, int, int]]]) -> tuple[list[dict], Tensor]:
    """Unroll stacked LSTM (or RL^2) nets (``params`` with a leading agent dim G) over ``x``
    ``(T, G, E, D)`` from a zero state. Returns, per agent, the states before the steps that
    ``record[t]`` names as ``(agent, slot, column)``: ``{key: [state (H,) per slot]}``; and the
    value net's output at every step, ``(G, T, E)``."""
    T, G, E = x.shape[:3]
    H = spec.hidden
    gx, kh = _input_gates(spec, params, x)
    h = torch.zeros(G * 2, E, H, dtype=x.dtype)
    c = torch.zeros(G * 2, E, H, dtype=x.dtype)
    out: list[dict] = [{} for _ in range(G)]
    cell = _cell(G, H, x.dtype)
    wide = _with_wide_value_head(params)
    values = []
    for t in range(T):
        for g, slot, col in record.get(t, ()):
            for n, net in enumerate(("pi", "vf")):
                out[g].setdefault(f"{net}/h", {})[slot] = h[2 * g + n, col].clone()
                out[g].setdefault(f"{net}/c", {})[slot] = c[2 * g + n, col].clone()
        h, c, _, _ = cell(torch.baddbmm(gx[:, t], h, kh), c)
        # per step: a product over all T steps at once would take another BLAS path for some T
        values.append(torch.baddbmm(wide["vf/out/b"].unsqueeze(1), h.view(G, 2, E, H)[:, 1], wide["vf/out/w"])[..., 0])
    states = [{k: [v[i] for i in sorted(v)] for k, v in o.items()} for o in out]
    return states, torch.stack(values, 1)


def _input_gates(spec: P.PolicySpec, params: P.Params, x: Tensor) -> tuple[Tensor, Tensor]:
    """For stacked LSTM nets on ``x`` ``(T, G, B, D)``: the input half of both nets' gates at every
    step, ``(2G, T, B, 4H)`` (agent g's policy net at row 2g, its value net at 2g + 1), and
    the recurrent kernels ``(2G, H, 4H)`` in the same order."""
    T, G, B = x.shape[:3]
    H = spec.hidden
    xg = x.movedim(0, 1).reshape(G, T * B, x.shape[-1])
    gates_x, kernels_h = [], []
    for net in ("pi", "vf"):
        e = torch.relu(torch.baddbmm(params[f"{net}/fc/b"].unsqueeze(1), xg, params[f"{net}/fc/w"]))
        kernel = params[f"{net}/lstm/kernel"]
        gates_x.append(torch.baddbmm(params[f"{net}/lstm/bias"].unsqueeze(1), e, kernel[:, :H]).reshape(G, T, B, 4 * H))
        kernels_h.append(kernel[:, H:])
    gx = torch.stack(gates_x, 1).reshape(G * 2, T, B, 4 * H)
    return gx, torch.stack(kernels_h, 1).reshape(G * 2, H, 4 * H)


def _pad(t: Tensor, dim: int, size: int) -> Tensor:
    extra = size - t.shape[dim]
    if extra <= 0:
        return t
    shape = list(t.shape)
    shape[dim] = extra
    return torch.cat([t, torch.zeros(shape, dtype=t.dtype)], dim)


def _with_wide_value_head(params: P.Params) -> P.Params:
    """The value head's single output evaluated as the first of two (see the module docstring)."""
    out = dict(params)
    w, b = params["vf/out/w"], params["vf/out/b"]
    out["vf/out/w"] = torch.cat([w, torch.zeros_like(w)], -1)
    out["vf/out/b"] = torch.cat([b, torch.zeros_like(b)], -1)
    return out


def _lstm_windows(spec: P.PolicySpec, params: P.Params, x: Tensor, state0: dict[str, Tensor],
                  resets: Tensor) -> tuple[Tensor, Tensor]:
    """The policy means ``(G, L, B, A)`` and values ``(G, L, B)`` of stacked LSTM (or RL^2) nets on
    windows ``x`` ``(L, G, B, D)`` from the states ``state0`` ``(G, B, H)``, zeroed where ``resets``
    ``(L, G, B)``. The same function as :func:`sumo_cli.nets.policy.forward_sequence` in fewer and
    larger operations: embeddings and the input half of the gates for all L steps at once, the two
    nets' cells stepped together (with a hand-written backward, :mod:`sumo_cli.nets.lstm_bptt`), the
    output layers after the loop."""
    L, G, B = x.shape[:3]
    H = spec.hidden
    gx, kh = _input_gates(spec, params, x)
    h = torch.stack([state0["pi/h"], state0["vf/h"]], 1).reshape(G * 2, B, H)
    c = torch.stack([state0["pi/c"], state0["vf/c"]], 1).reshape(G * 2, B, H)
    keep = (~resets).to(x.dtype)[:, :, None].expand(L, G, 2, B).reshape(L, G * 2, B, 1)
    hs, _, _ = lstm_unroll(gx, h, c, kh, keep, _cell(G, H, x.dtype))
    out = hs.reshape(G, 2, L * B, H)
    mean = torch.baddbmm(params["pi/out/b"].unsqueeze(1), out[:, 0], params["pi/out/w"])
    value = torch.baddbmm(params["vf/out/b"].unsqueeze(1), out[:, 1], params["vf/out/w"])[..., 0]
    return mean.reshape(G, L, B, -1), value.reshape(G, L, B)


def _row_mean(x: Tensor, m: Tensor) -> Tensor:
    """Per agent mean of ``x`` over its valid entries; ``x``, ``m`` ``(G, ...)``."""
    G = x.shape[0]
    m = m.reshape(G, -1).to(x.dtype)
    return (x.reshape(G, -1) * m).sum(1) / m.sum(1).clamp_min(1.0)


def _adam(p: Tensor, g: Tensor, m: Tensor, v: Tensor, steps: list[int], cfg: PPOConfig, scratch: tuple[Tensor, Tensor]) -> None:
    """Adam (torch's formula, eps outside the square root) on the agents' flat parameter rows ``p``
    ``(G, P)``, in place, with each agent's own step count for the bias corrections; ``scratch``: two
    buffers of ``p``'s shape (fresh tensors of this size cost more than the arithmetic)."""
    b1, b2 = ADAM_BETAS
    c1 = torch.tensor([cfg.lr / (1 - b1**s) for s in steps], dtype=p.dtype)[:, None]
    c2 = torch.tensor([1.0 / math.sqrt(1 - b2**s) for s in steps], dtype=p.dtype)[:, None]
    denom, step = scratch
    m.mul_(b1).add_(g, alpha=1 - b1)
    v.mul_(b2).addcmul_(g, g, value=1 - b2)
    torch.sqrt(v, out=denom).mul_(c2).add_(cfg.adam_eps)
    p.sub_(torch.mul(m, c1, out=step).div_(denom))


def _flat(tensors: list[dict[str, Tensor]], keys: list[str]) -> Tensor:
    """One row per agent: its tensors under ``keys``, flattened and concatenated, padded with zeros
    to a multiple of :data:`ROW` floats (so that every element of a row takes the vectorised path of
    elementwise operations whatever the group)."""
    rows = [torch.stack([t[k] for t in tensors]).reshape(len(tensors), -1) for k in keys]
    n = sum(r.shape[1] for r in rows)
    return torch.cat(rows + [rows[0].new_zeros(len(tensors), -n % ROW)], 1)


def _views(flat: Tensor, shapes: dict[str, torch.Size]) -> dict[str, Tensor]:
    """The per-key stacked tensors ``(G, *shape)`` that share the rows of :func:`_flat`'s result."""
    out, offset = {}, 0
    for k, shape in shapes.items():
        n = math.prod(shape)
        out[k] = flat[:, offset : offset + n].view(flat.shape[0], *shape)
        offset += n
    return out


def _update_group(spec: P.PolicySpec, params: list[P.Params], states: list[AgentState], data: list[_Prepared],
                  cfg: PPOConfig) -> list[dict[str, float]]:
    G = len(params)
    keys = list(params[0])
    dtype = params[0]["logstd"].dtype
    n_pad = padded_count(max(d.n for d in data)) + 1  # the last sample is padding for every agent
    num_mb = data[0].num_mb
    nb = -(-(n_pad - 1) // num_mb)
    sd = 1 if spec.recurrent else 0  # the sample dim of an agent's tensors
    stack = {name: torch.stack([_pad(getattr(d, name), sd, n_pad) for d in data], sd)
             for name in ("x", "actions", "logp", "adv", "ret")}  # (L, G, n_pad, ...) or (G, n_pad, ...)
    if spec.recurrent:
        mask = torch.stack([_pad(d.mask, 1, n_pad) for d in data], 1)
        resets = torch.stack([_pad(d.resets, 1, n_pad) for d in data], 1)
        chunk_states = {k: torch.stack([_pad(d.states[k], 0, n_pad) for d in data]) for k in data[0].states}
    else:
        mask = torch.stack([_pad(torch.ones(d.n, dtype=torch.bool), 0, n_pad) for d in data])
    # parameters and Adam's moments as one row per agent, so that Adam is a few vector operations;
    # the parameters autograd differentiates are views of their row (updated in place by Adam)
    shapes = {k: params[0][k].shape for k in keys}
    flat = _flat(params, keys)
    leaves = {k: t.requires_grad_(True) for k, t in _views(flat, shapes).items()}
    plist = [leaves[k] for k in keys]
    for s in states:
        if not s.exp_avg:
            s.exp_avg = {k: torch.zeros_like(params[0][k]) for k in keys}
            s.exp_avg_sq = {k: torch.zeros_like(params[0][k]) for k in keys}
    m = _flat([s.exp_avg for s in states], keys)
    v = _flat([s.exp_avg_sq for s in states], keys)
    grad = torch.zeros_like(flat)  # its padding stays zero
    grad_rows = list(_views(grad, shapes).values())
    scratch = (torch.empty_like(flat), torch.empty_like(flat))
    steps = [s.steps for s in states]
    rows = torch.arange(G)[:, None]
    max_norm = cfg.max_grad_norm if cfg.max_grad_norm is not None else float("inf")
    stat_names = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm")
    log: dict[str, list[Tensor]] = {k: [] for k in stat_names}
    for _ in range(cfg.epochs):
        splits = [torch.tensor_split(torch.randperm(d.n, generator=s.generator), num_mb) for d, s in zip(data, states)]
        for j in range(num_mb):
            idx = torch.full((G, nb), n_pad - 1, dtype=torch.long)
            for k, sp in enumerate(splits):
                idx[k, : len(sp[j])] = sp[j]
            pv = _with_wide_value_head(leaves)
            if spec.recurrent:
                st = {k: t[rows, idx] for k, t in chunk_states.items()}
                means, values = _lstm_windows(spec, pv, stack["x"][:, rows, idx], st, resets[:, rows, idx])
                pick = lambda t: t[:, rows, idx].movedim(1, 0)  # noqa: E731
            else:
                xb = stack["x"][rows, idx]
                means, values = _mlp(pv, "pi", xb), _mlp(pv, "vf", xb)[..., 0]
                pick = lambda t: t[rows, idx]  # noqa: E731
            mb_mask, acts, logp_old, adv, ret = (pick(t) for t in (mask, *(stack[k] for k in ("actions", "logp", "adv", "ret"))))
            logp = _log_prob(means, leaves["logstd"], acts)
            ratio = rowwise(torch.exp, logp - logp_old, G)
            surr = torch.minimum(ratio * adv, torch.clamp(ratio, 1.0 - cfg.clip, 1.0 + cfg.clip) * adv)
            pg = -_row_mean(surr, mb_mask)
            vl = 0.5 * _row_mean((values - ret) ** 2, mb_mask)
            ent = P.entropy(leaves["logstd"])
            loss = (pg + cfg.vf_coef * vl - cfg.ent_coef * ent).sum()
            torch._foreach_copy_(grad_rows, torch.autograd.grad(loss, plist))
            total = torch.linalg.vector_norm(grad, dim=1)
            grad.mul_(torch.clamp(max_norm / (total + 1e-6), max=1.0)[:, None])
            steps = [s + 1 for s in steps]
            with torch.no_grad():
                _adam(flat, grad, m, v, steps, cfg, scratch)
                log_ratio = logp.detach() - logp_old
                ratio_now = rowwise(torch.exp, log_ratio, G)
                log["policy_loss"].append(pg.detach())
                log["value_loss"].append(vl.detach())
                log["entropy"].append(ent.detach())
                log["approx_kl"].append(_row_mean((ratio_now - 1) - log_ratio, mb_mask))
                log["clip_fraction"].append(_row_mean(((ratio_now - 1).abs() > cfg.clip).to(dtype), mb_mask))
                log["grad_norm"].append(total)
    out = []
    for k, (s, d) in enumerate(zip(states, data)):
        s.exp_avg = {key: t[k].clone() for key, t in _views(m, shapes).items()}
        s.exp_avg_sq = {key: t[k].clone() for key, t in _views(v, shapes).items()}
        s.steps = steps[k]
        params[k].clear()
        params[k].update({key: t[k].clone() for key, t in _views(flat, shapes).items()})
        row = {name: float(torch.stack(vals)[:, k].mean()) for name, vals in log.items()}
        row.update(explained_variance=d.explained_variance, num_grad_steps=cfg.epochs * num_mb, epochs=cfg.epochs)
        out.append(row)
    return out


def stacked_ppo_update(spec: P.PolicySpec, params: list[P.Params], states: list[AgentState], rollouts: list[Rollout],
                       obs_norms: list, cfg: PPOConfig) -> list[dict[str, float]]:
    """One PPO update of every agent's ``params`` (updated in place: new tensors under the same
    keys) on its one-column ``rollout``, observations normalised with ``rollout.norm_stats`` (else
    the agent's ``obs_norm``); ``states`` carry Adam and the minibatch generator. Returns each
    agent's statistics, as :func:`~sumo_cli.ppo.ppo.ppo_update` does."""
    if cfg.target_kl is not None or (spec.recurrent and cfg.recompute_chunk_states):
        raise ValueError("the stacked PPO update supports neither target_kl nor recompute_chunk_states")
    if not params:
        return []
    dtype = params[0]["logstd"].dtype
    data = [_prepare(spec, r, o, cfg, dtype) for r, o in zip(rollouts, obs_norms)]
    groups: dict[tuple[int, int], list[int]] = {}
    for i, d in enumerate(data):
        groups.setdefault((d.num_mb, padded_count(d.n)), []).append(i)
    out: list = [None] * len(params)
    for idx in groups.values():
        stats = _update_group(spec, [params[i] for i in idx], [states[i] for i in idx], [data[i] for i in idx], cfg)
        for i, s in zip(idx, stats):
            out[i] = s
    return out
