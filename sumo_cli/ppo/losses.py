"""The loss terms PPO and the meta-learner share."""

from __future__ import annotations

import torch
from torch import Tensor


def clipped_surrogate(logp_new: Tensor, logp_old: Tensor, advantages: Tensor, clip: float, mask: Tensor | None = None) -> Tensor:
    """PPO's clipped objective, returned as a loss to minimise (mean over unmasked entries)."""
    ratio = torch.exp(logp_new - logp_old)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip, 1.0 + clip) * advantages
    return -masked_mean(torch.minimum(unclipped, clipped), mask)


def value_loss(values: Tensor, targets: Tensor, mask: Tensor | None = None) -> Tensor:
    return 0.5 * masked_mean((values - targets) ** 2, mask)


def masked_mean(x: Tensor, mask: Tensor | None) -> Tensor:
    if mask is None:
        return x.mean()
    m = mask.to(x.dtype)
    return (x * m).sum() / m.sum().clamp_min(1.0)


def normalise(x: Tensor, mask: Tensor | None = None, eps: float = 1e-8) -> Tensor:
    mean = masked_mean(x, mask)
    std = masked_mean((x - mean) ** 2, mask).sqrt()
    return (x - mean) / (std + eps)
