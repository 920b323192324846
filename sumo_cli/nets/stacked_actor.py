"""The policy means of many agents of one architecture in one call: what concurrent games use.

:class:`StackedActor` stacks the arrays of K :class:`~sumo_cli.nets.numpy_actor.NumpyActor` s
(each agent's own parameters and normaliser) and evaluates the same functions on inputs
``(K, E, ...)`` with batched matmuls. Every operation is either elementwise or a matmul whose
slice k reads only agent k's rows and parameters (NumPy hands each slice of a stacked matmul to the
same BLAS call a single agent's step makes), so slice k equals ``actors[k].step`` bit for bit
whatever the other slices hold or how many there are (tests/test_engine.py checks it in whole
games).
"""

from __future__ import annotations

import numpy as np

from sumo_cli.nets import normalizer as nz
from sumo_cli.nets.numpy_actor import NumpyActor, _sigmoid


def _stack(arrays: list[np.ndarray]) -> np.ndarray:
    return np.ascontiguousarray(np.stack(arrays))


class StackedActor:
    """``means, state = actor.step(obs, state, prev_reward, prev_done)`` for K agents of one spec,
    E bouts each: ``obs`` ``(K, E, obs_dim)`` (what each agent's ``spec.viewer`` gives), ``state``
    ``(h, c)`` of shape ``(K, E, H)`` (None for the MLP), the RL^2 inputs ``(K, E)``."""

    def __init__(self, actors: list[NumpyActor]):
        if not actors:
            raise ValueError("a stacked actor needs at least one agent")
        spec = actors[0].spec
        if any(a.spec != spec for a in actors):
            raise ValueError("every stacked agent must have the same policy spec")
        self.spec = spec
        self.K = len(actors)
        self.mean_ = _stack([a.mean_ for a in actors])[:, None]
        self.inv_std = _stack([a.inv_std for a in actors])[:, None]
        if spec.arch == "mlp":
            self.layers = [(_stack([a.layers[i][0] for a in actors]), _stack([a.layers[i][1] for a in actors])[:, None])
                           for i in range(len(actors[0].layers))]
        else:
            self.fc = (_stack([a.fc[0] for a in actors]), _stack([a.fc[1] for a in actors])[:, None])
            self.w_x = _stack([a.w_x for a in actors])
            self.w_h = _stack([a.w_h for a in actors])
            self.bias = _stack([a.bias for a in actors])[:, None]
        self.out = (_stack([a.out[0] for a in actors]), _stack([a.out[1] for a in actors])[:, None])

    def step(self, obs: np.ndarray, state, prev_reward: np.ndarray | None = None,  # noqa: ANN001, ANN201
             prev_done: np.ndarray | None = None):
        x = (obs.astype(np.float32) - self.mean_) * self.inv_std
        np.clip(x, -nz.CLIP, nz.CLIP, out=x)
        if self.spec.arch == "rl2":
            x = np.concatenate([x, prev_reward[..., None], prev_done[..., None]], axis=2).astype(np.float32)
        if self.spec.arch == "mlp":
            for w, b in self.layers:
                x = np.tanh(np.matmul(x, w) + b)
            w, b = self.out
            return np.matmul(x, w) + b, None
        h, c = state
        w, b = self.fc
        e = np.maximum(np.matmul(x, w) + b, 0.0)
        z = np.matmul(e, self.w_x) + np.matmul(h, self.w_h) + self.bias
        H = self.spec.hidden
        i, j, f, o = z[..., :H], z[..., H:2 * H], z[..., 2 * H:3 * H], z[..., 3 * H:]
        c = c * _sigmoid(f) + _sigmoid(i) * np.tanh(j)
        h = np.tanh(c) * _sigmoid(o)
        w, b = self.out
        return np.matmul(h, w) + b, (h, c)
