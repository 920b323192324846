"""Execution time (Algorithm 2, Eq. 7): adaptation from ``theta*`` on an experience buffer, and the
per-agent adapters that keep that buffer over rounds."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from sumo_cli.meta.config import MetaConfig, Params
from sumo_cli.meta.batch import TrajBatch, cat_columns, select_columns
from sumo_cli.meta.model import as_model, expand_params
from sumo_cli.meta.adaptation import _denominator, _grad, adapt_trace, inner_terms, seg_sum, segments


def adapt_execution(model, theta: Params, log_alpha: Tensor, buffer: TrajBatch, cfg: MetaConfig) -> Params:
    """``phi_i`` from ``theta*``, ``alpha*`` on the experience buffer collected with earlier
    policies (``buffer.logp`` = their log-probs), every step importance-weighted (Eq. 7 and its
    multi-step extension). No graph. Batched over the agent dims of ``buffer`` (``theta``/``log_alpha``
    stacked with the same leading dims, or shared)."""
    return adapt_trace(model, theta, log_alpha, [buffer], cfg, create_graph=False, behaviour="data").phi


class ExecutionAdapter:
    """Algorithm 2 for G agents at once: a per-agent buffer of the last ``capacity`` complete
    episodes (same count for every agent; columns of a :class:`TrajBatch` ``(L, G, K)``) and the
    adapted parameters ``phi`` computed from ``theta*``, ``alpha*`` on it.

    What stays fixed is reused: ``theta*`` never changes, so an episode's log-weight at the first
    step ``log pi_theta*(tau) - log pi_beh(tau)`` and its inner-loss gradient at ``theta*`` are fixed
    once it is in the buffer. The first step's gradient ``sum_k u_k grad L_k(theta*)`` is therefore
    kept as a running sum and updated with one backward pass over the added and evicted episodes
    only (signed weights), instead of a pass over the whole buffer; it is recomputed from scratch
    when evictions cancel most of it (relative precision). Steps 2..M run on the whole buffer."""

    def __init__(self, model, theta: Params, log_alpha: Tensor, cfg: MetaConfig, capacity: int | None = None, cache_first_step: bool = True, recompute_ratio: float = 1e-6):
        self.model = as_model(model, cfg)
        self.cfg = cfg
        self.theta = {k: v.detach() for k, v in theta.items()}
        self.log_alpha = log_alpha.detach()
        self.capacity = capacity or cfg.buffer_episodes
        # a baseline refitted on (or advantages standardised over) the whole buffer change every
        # buffered episode's gradient when the buffer changes: no running sum then
        self.cache = cache_first_step and cfg.inner_adv == "value" and not cfg.inner_norm_adv
        self.recompute_ratio = recompute_ratio
        self.buffer: TrajBatch | None = None
        self._lw0: Tensor | None = None  # (G, K) first-step log weights of the buffered episodes
        self._S: Params | None = None  # running sum of u_k grad L_k(theta*)
        self._m: Tensor | None = None  # (G,) log scale of u
        self.recomputes = 0

    def reset(self) -> None:
        self.buffer, self._lw0, self._S, self._m = None, None, None, None

    def _theta_for(self, b: TrajBatch) -> Params:
        return expand_params(self.model, self.theta, b.agent_shape)

    def _log_w0(self, b: TrajBatch) -> Tensor:
        with torch.no_grad():
            lp, _ = self.model.evaluate(self._theta_for(b), b)
        seg = segments(b.first, b.mask)
        lw = seg_sum(lp - b.logp, seg, b.mask)  # (G, K): one trajectory per column
        return lw.clamp(max=80.0) if self.cfg.iw == "raw" else lw  # as normalised_weights does

    def _u(self, lw: Tensor, m: Tensor) -> Tensor:
        if self.cfg.iw == "none":
            return torch.ones_like(lw)
        if self.cfg.iw == "truncated":
            return torch.exp(torch.clamp(lw, max=math.log(self.cfg.iw_truncate)))
        return torch.exp(lw - m.unsqueeze(-1))

    @torch.enable_grad()
    def _weighted_grad(self, b: TrajBatch, u: Tensor) -> Params:
        """``sum_k u_k grad L_k(theta*)`` per agent, columns of ``b`` weighted by ``u`` (G, K)."""
        th = {k: v.detach().contiguous().requires_grad_(True) for k, v in self._theta_for(b).items()}
        lp, v = self.model.evaluate(th, b)
        terms = inner_terms(lp, v, b, self.cfg) * u.reshape(1, *u.shape).to(lp.dtype)
        g = _grad(terms.sum(), th, False)
        return {k: x.to(torch.float64) for k, x in g.items()}

    def add(self, episodes: TrajBatch) -> None:
        """Append complete episodes (columns, one trajectory each, ``first[0]`` true), evicting the
        oldest beyond ``capacity``."""
        if not bool(episodes.first[0].all()):
            raise ValueError("execution-time episodes must start at step 0 of their column")
        lw_new = self._log_w0(episodes)
        if self.buffer is None:
            buf, lw = episodes, lw_new
        else:
            buf, lw = cat_columns(self.buffer, episodes), torch.cat([self._lw0, lw_new], -1)
        K = buf.num_cols
        n_evict = max(0, K - self.capacity)
        old_buf = buf
        if n_evict:
            keep = torch.arange(n_evict, K)
            buf, lw_ev, lw = select_columns(buf, keep), lw[..., :n_evict], lw[..., n_evict:]
        self.buffer, self._lw0 = buf, lw
        if not self.cache:
            return
        if self._S is None:
            self._full_recompute()
            return
        m_old = self._m
        m_new = torch.maximum(m_old, lw_new.max(-1).values) if self._scaled else m_old
        scale = torch.exp(m_old - m_new)
        S = {k: v * scale.reshape(-1, *([1] * (v.dim() - 1))).to(v.dtype) for k, v in self._S.items()}
        parts, us = [episodes], [self._u(lw_new, m_new)]
        mass_before = self._u(torch.cat([lw, lw_ev], -1) if n_evict else lw, m_new).sum(-1)
        if n_evict:
            ev = select_columns(old_buf, torch.arange(n_evict))
            u_ev = self._u(lw_ev, m_new)
            parts.append(ev)
            us.append(-u_ev)
            mass_after = self._u(lw, m_new).sum(-1)
            if bool((mass_after < self.recompute_ratio * mass_before).any()):
                self._full_recompute()
                return
        b = parts[0] if len(parts) == 1 else cat_columns(parts[0], parts[1])
        d = self._weighted_grad(b, torch.cat(us, -1))
        self._S = {k: S[k] + d[k] for k in S}
        self._m = m_new

    @property
    def _scaled(self) -> bool:
        """Whether the running sums are kept relative to exp(m) (self-normalised and raw weights)."""
        return self.cfg.iw in ("snis", "raw")

    def _full_recompute(self) -> None:
        self.recomputes += 1
        lw = self._lw0
        m = lw.max(-1).values if self._scaled else torch.zeros_like(lw[..., 0])
        self._m = m
        self._S = self._weighted_grad(self.buffer, self._u(lw, m))

    def first_grad(self) -> Params:
        """The first step's inner gradient at ``theta*`` from the running sum."""
        lw, m, cfg = self._lw0, self._m, self.cfg
        seg = segments(self.buffer.first, self.buffer.mask)
        den = _denominator(seg, cfg, torch.float64)
        if cfg.iw == "snis":
            s = seg.K.to(torch.float64) / torch.exp(lw - m.unsqueeze(-1)).to(torch.float64).sum(-1)
        elif cfg.iw == "raw":
            s = torch.exp(m).to(torch.float64)
        else:
            s = torch.ones_like(den)
        f = s / den
        dtype = next(iter(self.theta.values())).dtype
        return {k: (v * f.reshape(-1, *([1] * (v.dim() - 1)))).to(dtype) for k, v in self._S.items()}

    def compute(self) -> Params:
        """Adapted parameters ``phi`` for the next round (``theta*`` if the buffer is empty)."""
        if self.buffer is None:
            return dict(self.theta)
        fg = self.first_grad() if self.cache else None
        return adapt_trace(self.model, self.theta, self.log_alpha, [self.buffer], self.cfg, create_graph=False, behaviour="data", first_grad=fg).phi


class ContinueAdapter:
    """The execution-time default (``cfg.execution="continue"``): after round r (r = 1, 2, ...), one
    learnt step from the current parameters on that round's episodes, with the step size of inner
    step ``min(r, M)``; on-policy, so the importance weights are exactly 1. Same interface as
    :class:`ExecutionAdapter` (:meth:`add` a round's episodes ``(L, *G, K)``, :meth:`compute`)."""

    def __init__(self, model, theta: Params, log_alpha: Tensor, cfg: MetaConfig):
        self.model = as_model(model, cfg)
        self.cfg = cfg
        self.theta = {k: v.detach() for k, v in theta.items()}
        self.log_alpha = log_alpha.detach()
        self.reset()

    def reset(self) -> None:
        self.phi: Params = dict(self.theta)
        self.rounds = 0

    def add(self, episodes: TrajBatch) -> None:
        tail = 1 if self.cfg.alpha_per == "step" else 2
        dim = self.log_alpha.dim() - tail
        m = min(self.rounds, self.cfg.num_steps - 1)
        la = self.log_alpha.narrow(dim, m, 1)
        phi = expand_params(self.model, self.phi, episodes.agent_shape)
        self.phi = adapt_trace(self.model, phi, la, [episodes], self.cfg.replace(num_steps=1), create_graph=False, behaviour="data").phi
        self.rounds += 1

    def compute(self) -> Params:
        return dict(self.phi)


def execution_adapter(model, theta: Params, log_alpha: Tensor, cfg: MetaConfig):
    """The adapter ``cfg.execution`` asks for (:class:`ContinueAdapter` or :class:`ExecutionAdapter`)."""
    if cfg.execution == "continue":
        return ContinueAdapter(model, theta, log_alpha, cfg)
    return ExecutionAdapter(model, theta, log_alpha, cfg)
