"""Running observation normaliser, in the RoboSumo zoo's representation (sum, sum of squares, count).

    mean = sum / count
    std  = sqrt(max(sumsq / count - mean^2, 0.01))      (so std >= 0.1)
    z    = clip((obs - mean) / std, -5, 5)

Statistics are a dict ``{"sum": (*G, D), "sumsq": (*G, D), "count": (*G,)}``; the optional leading
agent dims ``G`` align with the left of the observations ``(*G, *batch, D)``, so one call
normalises (or updates) many agents, each with its own statistics. With ``count == 0`` the mean is
taken as 0 (and the std as the floor 0.1).

The functions are pure (they return new dicts) and accept torch tensors or numpy arrays (the
statistics and the observations must be of the same kind). Keep the statistics in float64: after
1e8+ observations ``sumsq / count - mean^2`` cancels badly in float32. :class:`RunningNormalizer`
wraps a statistics dict for code that prefers an object.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

VAR_FLOOR = 0.01
CLIP = 5.0
KEYS = ("sum", "sumsq", "count")

Stats = dict[str, Any]  # values: all torch.Tensor or all np.ndarray


def new_stats(
    dim: int, agent_shape: tuple[int, ...] = (), dtype: torch.dtype = torch.float64, backend: str = "torch"
) -> Stats:
    """Empty statistics (count 0) for observations of size ``dim``, per agent in ``agent_shape``."""
    if backend == "torch":
        z = lambda *s: torch.zeros(s, dtype=dtype)  # noqa: E731
    elif backend == "numpy":
        z = lambda *s: np.zeros(s, dtype=np.float64)  # noqa: E731
    else:
        raise ValueError(f"backend must be 'torch' or 'numpy', got {backend!r}")
    return {"sum": z(*agent_shape, dim), "sumsq": z(*agent_shape, dim), "count": z(*agent_shape)}


def _is_torch(x: Any) -> bool:
    return isinstance(x, torch.Tensor)


def _agent_ndim(stats: Stats) -> int:
    return stats["sum"].ndim - 1


def _expand(a: Any, ndim: int, n_agent: int) -> Any:
    """Reshape per-agent ``a`` (``(*G, *tail)``) to broadcast over ``ndim`` data dims
    ``(*G, *batch, *tail)``: insert singleton batch dims after the agent dims."""
    tail = a.shape[n_agent:]
    extra = ndim - a.ndim
    if extra <= 0:
        return a
    return a.reshape(*a.shape[:n_agent], *([1] * extra), *tail)


def update(stats: Stats, obs: Any) -> Stats:
    """New statistics after adding the batch ``obs`` of shape ``(*G, *batch, D)``; the batch
    dims are summed over, per agent. Observations are accumulated in the statistics' dtype."""
    n_agent = _agent_ndim(stats)
    dim = stats["sum"].shape[-1]
    if obs.shape[-1] != dim or tuple(obs.shape[:n_agent]) != tuple(stats["sum"].shape[:-1]):
        raise ValueError(f"observations of shape {tuple(obs.shape)} do not fit statistics of shape {tuple(stats['sum'].shape)}")
    if _is_torch(stats["sum"]):
        x = torch.as_tensor(obs).to(stats["sum"].dtype)
    else:
        x = np.asarray(obs, dtype=stats["sum"].dtype)
    x = x.reshape(*x.shape[:n_agent], -1, dim)
    n = x.shape[-2]
    return {
        "sum": stats["sum"] + x.sum(-2),
        "sumsq": stats["sumsq"] + (x * x).sum(-2),
        "count": stats["count"] + n,
    }


def merge(a: Stats, b: Stats) -> Stats:
    """Statistics of the union of two sets of observations (e.g. from parallel workers)."""
    return {k: a[k] + b[k] for k in KEYS}


def mean_std(stats: Stats) -> tuple[Any, Any]:
    """``(mean, std)`` with the zoo's floor ``std >= sqrt(0.01) = 0.1``; shape ``(*G, D)``."""
    s, ss, n = stats["sum"], stats["sumsq"], stats["count"]
    if _is_torch(s):
        n = n.unsqueeze(-1)
        safe = torch.where(n > 0, n, torch.ones_like(n))
        mean = torch.where(n > 0, s / safe, torch.zeros_like(s))
        var = torch.where(n > 0, ss / safe, torch.zeros_like(ss)) - mean * mean
        return mean, torch.sqrt(torch.clamp(var, min=VAR_FLOOR))
    n = np.asarray(n)[..., None]
    safe = np.where(n > 0, n, 1)
    mean = np.where(n > 0, s / safe, 0.0)
    var = np.where(n > 0, ss / safe, 0.0) - mean * mean
    return mean, np.sqrt(np.maximum(var, VAR_FLOOR))


def normalize(stats: Stats, obs: Any, clip: float = CLIP) -> Any:
    """``clip((obs - mean) / std, -clip, clip)`` for ``obs`` of shape ``(*G, *batch, D)``; the
    result has the dtype of ``obs`` (statistics are cast to it after computing mean and std)."""
    mean, std = mean_std(stats)
    n_agent = _agent_ndim(stats)
    mean, std = _expand(mean, obs.ndim, n_agent), _expand(std, obs.ndim, n_agent)
    if _is_torch(obs):
        mean, std = torch.as_tensor(mean).to(obs.dtype), torch.as_tensor(std).to(obs.dtype)
        return torch.clamp((obs - mean) / std, -clip, clip)
    obs = np.asarray(obs)
    if _is_torch(mean):
        mean, std = mean.numpy(), std.numpy()
    z = (obs - mean.astype(obs.dtype)) / std.astype(obs.dtype)
    return np.clip(z, -clip, clip)


def to_torch(stats: Stats, dtype: torch.dtype = torch.float64) -> dict[str, torch.Tensor]:
    return {k: torch.as_tensor(np.asarray(v) if not _is_torch(v) else v).to(dtype) for k, v in stats.items()}


def to_numpy(stats: Stats) -> dict[str, np.ndarray]:
    return {k: (v.detach().cpu().numpy() if _is_torch(v) else np.asarray(v)).copy() for k, v in stats.items()}


class RunningNormalizer:
    """Mutable wrapper around a statistics dict (torch, float64 by default)."""

    def __init__(self, dim: int, agent_shape: tuple[int, ...] = (), dtype: torch.dtype = torch.float64):
        self.stats: Stats = new_stats(dim, agent_shape, dtype)

    @classmethod
    def from_stats(cls, stats: Stats) -> "RunningNormalizer":
        self = cls.__new__(cls)
        self.stats = dict(stats)
        return self

    def update(self, obs: Any) -> None:
        self.stats = update(self.stats, obs)

    def normalize(self, obs: Any, clip: float = CLIP) -> Any:
        return normalize(self.stats, obs, clip)

    __call__ = normalize

    def mean_std(self) -> tuple[Any, Any]:
        return mean_std(self.stats)

    def state_dict(self, prefix: str = "obs_norm/") -> dict[str, Any]:
        """Tensors to put in a checkpoint: ``obs_norm/sum``, ``obs_norm/sumsq``, ``obs_norm/count``."""
        return {prefix + k: v for k, v in self.stats.items()}

    @classmethod
    def from_state_dict(cls, tensors: dict[str, Any], prefix: str = "obs_norm/") -> "RunningNormalizer":
        return cls.from_stats({k: tensors[prefix + k] for k in KEYS})
