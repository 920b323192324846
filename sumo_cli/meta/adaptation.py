"""The inner loss and adaptation ``phi^m = phi^{m-1} - clip(alpha_m * grad L_in)``: trajectories as
segments, importance weights, the inner gradient (see :mod:`sumo_cli.meta.config` for the design)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from sumo_cli.meta.config import MetaConfig, Params
from sumo_cli.meta.batch import TrajBatch
from sumo_cli.meta.model import PolicyModel, as_model, expand_params


@dataclass
class Segments:
    """Trajectory bookkeeping for a batch: ids ``(T, Gf, N)`` into ``(Gf, S)`` slots (agent dims
    flattened to ``Gf``), which slots hold a trajectory, and K per agent."""

    flat_idx: Tensor  # (T, Gf, N) long: g * S + local id
    S: int
    valid: Tensor  # (Gf, S) bool
    K: Tensor  # (Gf,) number of trajectories
    n_steps: Tensor  # (Gf,) number of valid steps
    starts_episode: Tensor  # (Gf, S) bool: the trajectory begins with first=True
    start_t: Tensor  # (Gf, S) long: time index of the trajectory's first step (where valid)
    start_n: Tensor  # (Gf, S) long


def segments(first: Tensor, mask: Tensor) -> Segments:
    T, N = first.shape[0], first.shape[-1]
    f = first.reshape(T, -1, N).long()
    mk = mask.reshape(T, -1, N)
    Gf = f.shape[1]
    seg_in_col = torch.cumsum(f, 0) - f[0:1]  # (T, Gf, N)
    n_in_col = seg_in_col[-1] + 1  # (Gf, N)
    col_off = torch.cumsum(n_in_col, -1) - n_in_col
    local = col_off.unsqueeze(0) + seg_in_col
    S = int(n_in_col.sum(-1).max())
    flat = local + (torch.arange(Gf) * S).reshape(1, Gf, 1)
    cnt = torch.zeros(Gf * S, dtype=torch.long).index_add_(0, flat[mk], torch.ones_like(flat[mk]))
    valid = (cnt > 0).reshape(Gf, S)
    # start of each trajectory: first valid step of its id
    t_idx = torch.arange(T).reshape(T, 1, 1).expand(T, Gf, N)
    n_idx = torch.arange(N).reshape(1, 1, N).expand(T, Gf, N)
    big = T * N + 1
    key = torch.where(mk, t_idx * N + n_idx, torch.full_like(t_idx, big))
    start_key = torch.full((Gf * S,), big, dtype=torch.long).scatter_reduce(0, flat.reshape(-1), key.reshape(-1), "amin")
    start_key = start_key.clamp_max(T * N - 1).reshape(Gf, S)
    start_t, start_n = start_key // N, start_key % N
    g_idx = torch.arange(Gf).reshape(Gf, 1).expand(Gf, S)
    starts_episode = f.bool()[start_t, g_idx, start_n] & valid
    return Segments(flat, S, valid, valid.sum(-1), mk.sum((0, 2)), starts_episode, start_t, start_n)


def seg_sum(x: Tensor, seg: Segments, mask: Tensor) -> Tensor:
    """Per-trajectory sums ``(Gf, S)`` of ``x`` ``(T, *G, N)`` over valid steps (differentiable)."""
    T, N = x.shape[0], x.shape[-1]
    xf = x.reshape(T, -1, N)
    mk = mask.reshape(T, -1, N)
    Gf = xf.shape[1]
    out = torch.zeros(Gf * seg.S, dtype=x.dtype).index_add(0, seg.flat_idx[mk], xf[mk])
    return out.reshape(Gf, seg.S)


def seg_broadcast(v: Tensor, seg: Segments, like: Tensor) -> Tensor:
    """Per-trajectory values ``(Gf, S)`` back onto steps, shaped like ``like`` ``(T, *G, N)``."""
    return v.reshape(-1)[seg.flat_idx].reshape(like.shape)


def normalised_weights(log_w: Tensor, seg: Segments, cfg: MetaConfig) -> Tensor:
    """Per-trajectory importance weights ``(Gf, S)`` from log ratios, see :class:`MetaConfig.iw`.
    Invalid slots get weight 0."""
    if cfg.iw == "snis":
        lw = log_w.masked_fill(~seg.valid, float("-inf"))
        w = torch.softmax(lw, -1) * seg.K.unsqueeze(-1).to(log_w.dtype)
    elif cfg.iw == "truncated":
        w = torch.exp(torch.clamp(log_w, max=math.log(cfg.iw_truncate)))
    elif cfg.iw == "raw":
        w = torch.exp(torch.clamp(log_w, max=80.0))
    else:
        w = torch.ones_like(log_w)
    return torch.where(seg.valid, w, torch.zeros_like(w))


# ----------------------------------------------------------------------------------------------
# inner loss and adaptation


def inner_terms(logp: Tensor, values: Tensor, batch: TrajBatch, cfg: MetaConfig) -> Tensor:
    """Per-step inner loss ``-log pi * adv + c_v * 0.5 (V - R)^2`` on valid steps, ``(T, *G, N)``."""
    t = -logp * batch.adv
    if cfg.inner_vf_coef:
        sq = 0.5 * (values - batch.returns) ** 2
        if cfg.inner_vf_norm:
            sq = sq / _return_variance(batch)
        t = t + cfg.inner_vf_coef * sq
    return torch.where(batch.mask, t, torch.zeros_like(t))


def _return_variance(batch: TrajBatch) -> Tensor:
    """Per-agent variance of the return targets over the valid steps, broadcast to ``(T, *G, N)``
    (data: it scales the inner value regression to unit size, whatever the reward scale)."""
    T, N = batch.returns.shape[0], batch.returns.shape[-1]
    r = batch.returns.detach().reshape(T, -1, N)
    mk = batch.mask.reshape(T, -1, N).to(r.dtype)
    n = mk.sum((0, 2)).clamp_min(1)
    mu = (r * mk).sum((0, 2)) / n
    var = (((r - mu.reshape(1, -1, 1)) ** 2) * mk).sum((0, 2)) / n + 1e-8
    return var.reshape(1, -1, 1).expand(T, -1, N).reshape(batch.returns.shape)


def step_index(first: Tensor, mask: Tensor) -> Tensor:
    """Index of every step within its trajectory (0 at an episode start or at the first valid step
    of a column), ``(T, *G, N)`` long."""
    T = first.shape[0]
    out = torch.zeros(first.shape, dtype=torch.long)
    run = torch.zeros(first.shape[1:], dtype=torch.long)
    for t in range(T):
        run = torch.where(first[t], torch.zeros_like(run), run + 1) if t else torch.zeros_like(run)
        out[t] = run
    return out


def linear_baseline(batch: TrajBatch, reg: float = 1e-5) -> Tensor:
    """Per-agent least-squares fit of ``batch.returns`` on the features ``[x, x^2, t, t^2, t^3, 1]``
    (``t`` = step index within the trajectory / 100), as MAML-RL's ``LinearFeatureBaseline``: the
    fitted values ``(T, *G, N)``. Data only (no graph); the ridge term grows until the solve is finite."""
    T, N = batch.num_steps, batch.num_cols
    x = batch.x.detach().to(torch.float64)
    D = x.shape[-1]
    xf = x.reshape(T, -1, N, D)
    Gf = xf.shape[1]
    t = (step_index(batch.first, batch.mask).reshape(T, Gf, N, 1).to(torch.float64)) / 100.0
    feats = torch.cat([xf, xf**2, t, t**2, t**3, torch.ones_like(t)], -1)  # (T, Gf, N, F)
    m = batch.mask.reshape(T, Gf, N, 1).to(torch.float64)
    y = batch.returns.detach().reshape(T, Gf, N, 1).to(torch.float64)
    X = (feats * m).permute(1, 0, 2, 3).reshape(Gf, T * N, -1)
    Y = (y * m).permute(1, 0, 2, 3).reshape(Gf, T * N, 1)
    F = X.shape[-1]
    A, B = X.transpose(1, 2) @ X, X.transpose(1, 2) @ Y
    eye = torch.eye(F, dtype=torch.float64)
    r = reg
    for _ in range(8):
        beta = torch.linalg.solve(A + r * eye, B)
        if bool(torch.isfinite(beta).all()):
            break
        r *= 10
    fit = (feats.unsqueeze(-2) @ beta.reshape(1, Gf, 1, F, 1)).reshape(T, Gf, N)
    return fit.reshape(batch.returns.shape).to(batch.returns.dtype)


def prepare_inner(batch: TrajBatch, cfg: MetaConfig) -> TrajBatch:
    """The inner batch with the advantages ``cfg.inner_adv`` / ``cfg.inner_norm_adv`` ask for
    (unchanged for the defaults): a function of the data only, so the inner step stays a plain
    function of the parameters."""
    if cfg.inner_adv == "value" and not cfg.inner_norm_adv:
        return batch
    adv = batch.adv
    if cfg.inner_adv == "linear":
        adv = batch.returns - linear_baseline(batch)
    adv = torch.where(batch.mask, adv, torch.zeros_like(adv))
    if cfg.inner_norm_adv:
        T, N = adv.shape[0], adv.shape[-1]
        a = adv.reshape(T, -1, N)
        mk = batch.mask.reshape(T, -1, N).to(adv.dtype)
        n = mk.sum((0, 2)).clamp_min(1)
        mu = (a * mk).sum((0, 2)) / n
        sd = torch.sqrt((((a - mu.reshape(1, -1, 1)) ** 2) * mk).sum((0, 2)) / n) + 1e-8
        a = (a - mu.reshape(1, -1, 1)) / sd.reshape(1, -1, 1)
        adv = torch.where(batch.mask, a.reshape(adv.shape), torch.zeros_like(adv))
    return TrajBatch(
        x=batch.x, actions=batch.actions, logp=batch.logp, values=batch.values, returns=batch.returns, adv=adv.detach(),
        first=batch.first, mask=batch.mask, state0=batch.state0, chunk_states=batch.chunk_states, chunk_len=batch.chunk_len,
    )


def _denominator(seg: Segments, cfg: MetaConfig, dtype) -> Tensor:
    d = seg.K if cfg.inner_reduce == "episode" else seg.n_steps
    return d.clamp_min(1).to(dtype)


def inner_loss(
    model: PolicyModel,
    params: Params,
    batch: TrajBatch,
    cfg: MetaConfig,
    log_w: Tensor | None = None,
) -> Tensor:
    """The inner loss, summed over agents (each agent's loss depends only on its own slice, so
    the gradient wrt stacked params is the per-agent gradient). ``log_w`` ``(Gf, S)``: per-trajectory
    log importance weights (normalised per ``cfg.iw``); None: unweighted. For reference/tests; the
    adaptation uses :func:`inner_grad`."""
    batch = prepare_inner(batch, cfg)
    seg = segments(batch.first, batch.mask)
    lp, v = model.evaluate(params, batch)
    terms = inner_terms(lp, v, batch, cfg)
    if log_w is not None:
        terms = terms * seg_broadcast(normalised_weights(log_w, seg, cfg), seg, terms)
    per_agent = terms.reshape(terms.shape[0], -1, terms.shape[-1]).sum((0, 2))
    return (per_agent / _denominator(seg, cfg, terms.dtype)).sum()


def _grad(loss: Tensor, params: Params, create_graph: bool) -> Params:
    keys = list(params)
    gs = torch.autograd.grad(loss, [params[k] for k in keys], create_graph=create_graph, allow_unused=True)
    return {k: (torch.zeros_like(params[k]) if g is None else g) for k, g in zip(keys, gs)}


@dataclass
class InnerGrad:
    grad: Params
    logp: Tensor  # (T, *G, N) log pi_params(a|s) on the batch (with graph when create_graph)


def inner_grad(
    model: PolicyModel,
    params: Params,
    batch: TrajBatch,
    cfg: MetaConfig,
    *,
    create_graph: bool,
    ref_logp: Tensor | None = None,
    seg: Segments | None = None,
) -> InnerGrad:
    """Gradient of the inner loss at ``params``. With ``ref_logp`` (the behaviour log-probs,
    ``(T, *G, N)``), trajectories are importance-weighted by ``pi_params(tau) / exp(sum ref_logp)``.

    The weight multiplies the gradient (paper Eq. 7: ``w_k * grad L(tau_k)``), it is not itself
    differentiated by the inner gradient; but for the meta-gradient the step is a function of
    ``params`` through ``w`` too. With ``create_graph`` that is done by differentiating wrt a copy
    ``psi`` of ``params`` while ``w`` is computed from ``params`` (two forward passes)."""
    seg = seg or segments(batch.first, batch.mask)
    den = None
    if ref_logp is None or cfg.iw == "none":
        lp, v = model.evaluate(params, batch)
        terms = inner_terms(lp, v, batch, cfg)
        wrt = params
    elif not create_graph:
        lp, v = model.evaluate(params, batch)
        log_w = seg_sum((lp - ref_logp).detach(), seg, batch.mask)
        w = normalised_weights(log_w, seg, cfg)
        terms = inner_terms(lp, v, batch, cfg) * seg_broadcast(w, seg, lp)
        wrt = params
    else:
        lp, _ = model.evaluate(params, batch)
        log_w = seg_sum(lp - ref_logp, seg, batch.mask)
        w = normalised_weights(log_w, seg, cfg)
        psi = {k: t.view_as(t) for k, t in params.items()}
        lp_psi, v_psi = model.evaluate(psi, batch)
        terms = inner_terms(lp_psi, v_psi, batch, cfg) * seg_broadcast(w, seg, lp_psi)
        wrt = psi
    den = _denominator(seg, cfg, terms.dtype)
    per_agent = terms.reshape(terms.shape[0], -1, terms.shape[-1]).sum((0, 2))
    loss = (per_agent / den).sum()
    return InnerGrad(_grad(loss, wrt, create_graph), lp)


def _alpha_for(alpha_m: Tensor, key_index: int, cfg: MetaConfig, tensor: Tensor, n_agent: int) -> Tensor:
    """alpha of one step for one parameter tensor, broadcastable against it (agent dims first)."""
    if cfg.alpha_per == "tensor":
        a = alpha_m[..., key_index]
    elif cfg.alpha_per == "net":
        a = alpha_m[..., key_index]  # key_index is the net index here (0 policy, 1 value)
    else:
        a = alpha_m
    extra = tensor.dim() - a.dim()
    return a.reshape(*a.shape, *([1] * extra))


def take_step(phi: Params, grad: Params, alpha_m: Tensor, cfg: MetaConfig, n_agent: int) -> Params:
    """``phi - clip(alpha_m * grad)`` (or ``alpha_m * clip(grad)``, per ``cfg.clip_mode``)."""
    out = {}
    for i, (k, p) in enumerate(phi.items()):
        if cfg.inner_params is not None and k not in cfg.inner_params:
            out[k] = p
            continue
        idx = (1 if k.startswith("vf/") else 0) if cfg.alpha_per == "net" else i
        a = _alpha_for(alpha_m, idx, cfg, p, n_agent)
        g = grad[k]
        c = cfg.clip_value
        if c is None:
            d = a * g
        elif cfg.clip_mode == "step":
            d = torch.clamp(a * g, -c, c)
        else:
            d = a * torch.clamp(g, -c, c)
        out[k] = p - d
    return out


def _alphas(log_alpha: Tensor, cfg: MetaConfig, agent_shape: tuple[int, ...]) -> Tensor:
    """exp(log_alpha) broadcast to ``(*agent_shape, M[, P])``."""
    tail = 1 if cfg.alpha_per == "step" else 2
    a = torch.exp(log_alpha)
    lead = tuple(a.shape[: a.dim() - tail])
    if lead != tuple(agent_shape):
        if lead != ():
            raise ValueError(f"log_alpha has agent shape {lead}, the batch has {tuple(agent_shape)}")
        a = a.expand(*agent_shape, *a.shape)
    if a.shape[len(agent_shape)] != cfg.num_steps:
        raise ValueError(f"log_alpha has {a.shape[len(agent_shape)]} steps, cfg.num_steps = {cfg.num_steps}")
    return a


@dataclass
class AdaptTrace:
    phi: Params  # adapted parameters phi^M
    phis: list[Params]  # phi^0 .. phi^M
    logps: list[Tensor]  # log pi_{phi^{m-1}}(a|s) on the batch used by step m, (T, *G, N), with graph
    batches: list[TrajBatch]  # the batch of each step

    def score_logps(self, fresh: bool) -> list[Tensor]:
        """Per pre-update batch, the sum of its trajectories' log-probabilities under the policy
        that sampled them, per agent ``(Gf,)``, differentiable: ``[sum_k log pi_theta(tau^k)]``
        (reuse) or ``[sum_k log pi_{phi^m}(tau^k_m) for m = 0 .. M-1]`` (fresh)."""
        out = []
        for m in range(len(self.logps) if fresh else 1):
            lp, b = self.logps[m], self.batches[m]
            s = torch.where(b.mask, lp, torch.zeros_like(lp))
            out.append(s.reshape(s.shape[0], -1, s.shape[-1]).sum((0, 2)))
        return out


@torch.enable_grad()
def adapt_trace(
    model,
    theta: Params,
    log_alpha: Tensor,
    batches: list[TrajBatch] | TrajBatch,
    cfg: MetaConfig,
    *,
    create_graph: bool = False,
    behaviour: str = "data",
    first_grad: Params | None = None,
) -> AdaptTrace:
    """``M`` adaptation steps from ``theta`` (see the module docstring).

    ``batches``: one batch (reused by every step) or ``M`` batches (``fresh``: step m uses
    ``batches[m-1]``, sampled with ``phi^{m-1}``, no importance weights). With one reused batch,
    step m is importance-weighted by ``pi_{phi^{m-1}}(tau) / pi_beh(tau)`` where ``behaviour`` is
    ``"data"`` (``batch.logp``: the policy that actually collected it, as at execution time, Eq. 7)
    or ``"theta"`` (training-time reuse: the batch was sampled by ``pi_theta``, so the weight of step
    1 is identically 1 and the others are differentiable in numerator and denominator).
    ``first_grad``: a precomputed gradient for step 1 (see :class:`ExecutionAdapter`).
    ``create_graph``: keep the graph for the meta-gradient (second derivatives)."""
    model = as_model(model, cfg)
    if isinstance(batches, TrajBatch):
        batches = [batches]
    batches = [prepare_inner(b, cfg) for b in batches]
    M = cfg.num_steps
    if len(batches) not in (1, M):
        raise ValueError(f"adapt needs 1 batch (reused) or M={M} batches (fresh), got {len(batches)}")
    fresh = len(batches) == M and M > 1
    agent_shape = batches[0].agent_shape
    n_agent = len(agent_shape)
    phi = expand_params(model, theta, agent_shape)
    if not create_graph:
        phi = {k: v.detach().contiguous().requires_grad_(True) for k, v in phi.items()}
    alphas = _alphas(log_alpha if create_graph else log_alpha.detach(), cfg, agent_shape)
    phis, logps, used = [phi], [], []
    seg0 = None if fresh else segments(batches[0].first, batches[0].mask)
    for m in range(M):
        b = batches[m] if fresh else batches[0]
        seg = seg0 if not fresh else None
        if fresh or cfg.iw == "none":
            ref = None
        elif behaviour == "theta":
            ref = None if m == 0 else logps[0]
        elif behaviour == "data":
            ref = b.logp
        else:
            raise ValueError(f"behaviour must be 'data' or 'theta', got {behaviour!r}")
        if m == 0 and first_grad is not None:
            g = first_grad
            lp = None
        else:
            ig = inner_grad(model, phi, b, cfg, create_graph=create_graph, ref_logp=ref, seg=seg)
            g, lp = ig.grad, ig.logp
        alpha_m = alphas.select(n_agent, m)
        new = take_step(phi, g, alpha_m, cfg, n_agent)
        if not create_graph:
            new = {k: v.detach().requires_grad_(True) for k, v in new.items()}
        phi = new
        phis.append(phi)
        logps.append(lp)
        used.append(b)
    if not create_graph:
        phi = {k: v.detach() for k, v in phi.items()}
        phis[-1] = phi
    return AdaptTrace(phi, phis, logps, used)


def adapt(
    model,
    theta: Params,
    log_alpha: Tensor,
    batch: list[TrajBatch] | TrajBatch,
    cfg: MetaConfig,
    create_graph: bool = False,
    behaviour: str = "data",
) -> Params:
    """Adapted parameters ``phi`` (``M`` steps from ``theta``); see :func:`adapt_trace`.
    ``model``: a :class:`PolicyModel` or a :class:`PolicySpec`."""
    return adapt_trace(model, theta, log_alpha, batch, cfg, create_graph=create_graph, behaviour=behaviour).phi
