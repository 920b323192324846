"""The policy-model interface of the meta-learner (:class:`PolicyModel`, :class:`GaussianModel` over
the pure-function policies of :mod:`sumo_cli.nets.policy`) and its per-step sizes ``alpha``."""

from __future__ import annotations

import math
from typing import Protocol

import torch
from torch import Tensor

from sumo_cli.nets import policy as P
from sumo_cli.meta.config import MetaConfig, Params
from sumo_cli.meta.batch import TrajBatch


class PolicyModel(Protocol):
    """What the meta-learner needs from a policy: its parameter layout and, for a batch, the
    log-probabilities of the stored actions and the value estimates (``(T, *G, N)`` each)."""

    def param_shapes(self) -> dict[str, tuple[int, ...]]: ...

    def evaluate(self, params: Params, batch: TrajBatch) -> tuple[Tensor, Tensor]: ...

    def entropy(self, params: Params) -> Tensor: ...


class GaussianModel:
    """:mod:`sumo_cli.nets.policy` (MLP / LSTM, diagonal Gaussian) as a :class:`PolicyModel`.

    ``bptt_chunk`` = L (recurrent nets): truncated BPTT. If the batch carries the behaviour's states
    at every L-th step (``batch.chunk_states`` with ``chunk_len == L``), the windows of L steps are
    unrolled in parallel from those stored (constant) states, as PPO does; otherwise the whole
    sequence is unrolled with the current parameters and the state is detached every L steps.
    None: full backpropagation through the whole batch."""

    def __init__(self, spec: P.PolicySpec, bptt_chunk: int | None = None):
        if spec.arch == "rl2":
            raise ValueError("the meta-learner adapts MLP and LSTM policies (RL^2 adapts through its state)")
        self.spec = spec
        self.bptt_chunk = bptt_chunk

    def param_shapes(self) -> dict[str, tuple[int, ...]]:
        return P.param_shapes(self.spec)

    def evaluate(self, params: Params, batch: TrajBatch) -> tuple[Tensor, Tensor]:
        spec = self.spec
        n_agent = len(batch.agent_shape)
        if spec.recurrent and self.bptt_chunk and batch.chunk_states and batch.chunk_len == self.bptt_chunk:
            mean, value = self._windowed(params, batch)
        elif spec.recurrent:
            state = batch.state0 or P.initial_state(spec, (*batch.agent_shape, batch.num_cols), batch.x.dtype)
            T = batch.num_steps
            chunk = self.bptt_chunk or T
            means, values = [], []
            for s in range(0, T, chunk):
                if s > 0:
                    state = {k: v.detach() for k, v in state.items()}
                m, v, state = P.forward_sequence(spec, params, batch.x[s : s + chunk], state, batch.first[s : s + chunk])
                means.append(m)
                values.append(v)
            mean, value = torch.cat(means), torch.cat(values)
        else:
            mean, value, _ = P.forward_sequence(spec, params, batch.x, {})
        m = torch.movedim(mean, 0, n_agent)
        a = torch.movedim(batch.actions, 0, n_agent)
        lp = torch.movedim(P.log_prob(m, params["logstd"], a), n_agent, 0)
        return lp, value

    def entropy(self, params: Params) -> Tensor:
        return P.entropy(params["logstd"])

    def _windowed(self, params: Params, batch: TrajBatch) -> tuple[Tensor, Tensor]:
        L, T, N = batch.chunk_len, batch.num_steps, batch.num_cols
        G = batch.agent_shape
        ng = len(G)
        C = -(-T // L)
        pad = C * L - T

        def win(t: Tensor, fill) -> Tensor:  # (T, *G, N, ...) -> (L, *G, C * N, ...)
            if pad:
                t = torch.cat([t, torch.full((pad, *t.shape[1:]), fill, dtype=t.dtype)], 0)
            rest = t.shape[2 + ng :]
            t = torch.movedim(t.reshape(C, L, *t.shape[1:]), 0, 1 + ng)
            return t.reshape(L, *G, C * N, *rest)

        def unwin(t: Tensor) -> Tensor:  # (L, *G, C * N, ...) -> (T, *G, N, ...)
            rest = t.shape[2 + ng :]
            t = torch.movedim(t.reshape(L, *G, C, N, *rest), 1 + ng, 0)
            return t.reshape(C * L, *G, N, *rest)[:T]

        st = {k: torch.movedim(v, 0, ng).reshape(*G, C * N, v.shape[-1]) for k, v in batch.chunk_states.items()}
        mean, value, _ = P.forward_sequence(self.spec, params, win(batch.x, 0), st, win(batch.first, False))
        return unwin(mean), unwin(value)


def as_model(model_or_spec, cfg: "MetaConfig | None" = None) -> PolicyModel:
    """A :class:`PolicySpec` becomes a :class:`GaussianModel` (with ``cfg.bptt_chunk``)."""
    if isinstance(model_or_spec, P.PolicySpec):
        return GaussianModel(model_or_spec, None if cfg is None else cfg.bptt_chunk)
    return model_or_spec


def expand_params(model: PolicyModel, params: Params, agent_shape: tuple[int, ...]) -> Params:
    """Broadcast parameters without agent dims (or with some) to ``agent_shape`` (a view)."""
    shapes = model.param_shapes()
    out = {}
    for k, s in shapes.items():
        v = params[k]
        lead = tuple(v.shape[: v.dim() - len(s)])
        if lead == tuple(agent_shape):
            out[k] = v
        elif lead == ():
            out[k] = v.expand(*agent_shape, *s)
        else:
            raise ValueError(f"parameter {k!r} has agent shape {lead}, the batch has {tuple(agent_shape)}")
    return out


def init_log_alpha(cfg: MetaConfig, model: PolicyModel | None = None, agent_shape: tuple[int, ...] = (), dtype=torch.float32) -> Tensor:
    """``log(alpha_init)`` of shape ``(*agent_shape, M)`` or ``(*agent_shape, M, n_tensors)``."""
    shape = (cfg.num_steps,)
    if cfg.alpha_per == "tensor":
        if model is None:
            raise ValueError("alpha_per='tensor' needs the model to count parameter tensors")
        shape = (cfg.num_steps, len(model.param_shapes()))
    elif cfg.alpha_per == "net":
        shape = (cfg.num_steps, 2)
    return torch.full((*agent_shape, *shape), math.log(cfg.alpha_init), dtype=dtype)


def alpha_metrics(alphas) -> dict[str, float]:
    """``meta_alpha_<m>``: the step size of inner step m (the geometric mean over its tensors when
    there is one per tensor), for the stored training metrics."""
    a = torch.as_tensor(alphas, dtype=torch.float64)
    a = a.reshape(a.shape[0], -1)
    return {f"meta_alpha_{m}": float(torch.exp(torch.log(a[m]).mean())) for m in range(a.shape[0])}
