"""The policy's action mean for one agent, step by step, in NumPy: what games call at every step.

A game acts for a handful of bouts at a time (3 per round), where a torch call costs far more in
dispatch than in arithmetic. This evaluates exactly the functions of :mod:`sumo_cli.nets.policy`
(:func:`~sumo_cli.nets.policy.policy_mean` of the MLP, LSTM and RL^2 nets, with the observation
normaliser applied first) on float32 arrays, with the LSTM kernel split into its input and
recurrent halves so a step needs no concatenation. Rollout collection uses it too (the policy
mean, and with ``net="vf"`` the value net's state and value, see :mod:`sumo_cli.ppo.collect`);
gradients and the log-probabilities the learner sees stay in torch.
"""

from __future__ import annotations

import numpy as np

from sumo_cli.nets import normalizer as nz
from sumo_cli.nets.policy import FORGET_BIAS, PolicySpec


def _np(t) -> np.ndarray:  # noqa: ANN001 - a torch tensor or an array
    return np.ascontiguousarray(t.detach().numpy() if hasattr(t, "detach") else t, dtype=np.float32)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # 0.5 (1 + tanh(x / 2)): the logistic function without exp overflow for large |x|.
    return 0.5 * (1.0 + np.tanh(0.5 * x))


class NumpyActor:
    """``mean, state = actor.step(obs, state, prev_reward, prev_done)`` for a batch of bouts.

    ``obs`` is the raw observation ``(E, obs_dim)``; ``state`` is ``(h, c)`` of the policy LSTM
    (``None`` for the MLP); the RL^2 extra inputs are used only by an ``rl2`` spec. ``net="vf"``
    evaluates the value net instead: ``step`` then returns the values ``(E, 1)`` and the value
    LSTM's state."""

    def __init__(self, spec: PolicySpec, params: dict, norm_mean, norm_std, net: str = "pi"):  # noqa: ANN001
        self.spec = spec
        self.mean_ = _np(norm_mean)
        self.inv_std = 1.0 / _np(norm_std)
        p = {k[len(net) + 1:]: _np(v) for k, v in params.items() if k.startswith(net + "/")}
        if spec.arch == "mlp":
            self.layers = [(p["fc0/w"], p["fc0/b"]), (p["fc1/w"], p["fc1/b"])]
        else:
            self.fc = (p["fc/w"], p["fc/b"])
            kernel = p["lstm/kernel"]
            H = spec.hidden
            self.w_x, self.w_h = np.ascontiguousarray(kernel[:-H]), np.ascontiguousarray(kernel[-H:])
            bias = p["lstm/bias"].copy()
            bias[2 * H:3 * H] += FORGET_BIAS  # gate order i, j, f, o
            self.bias = bias
        self.out = (p["out/w"], p["out/b"])

    def initial_state(self, E: int):  # noqa: ANN201
        if self.spec.arch == "mlp":
            return None
        z = np.zeros((E, self.spec.hidden), dtype=np.float32)
        return z, z.copy()

    def normalise(self, obs: np.ndarray) -> np.ndarray:
        x = (obs.astype(np.float32) - self.mean_) * self.inv_std
        return np.clip(x, -nz.CLIP, nz.CLIP, out=x)

    def net_input(self, obs: np.ndarray, prev_reward: np.ndarray | None = None,
                  prev_done: np.ndarray | None = None) -> np.ndarray:
        """The normalised observation, followed for RL^2 by the previous reward and done flag."""
        x = self.normalise(obs)
        if self.spec.arch == "rl2":
            x = np.concatenate([x, prev_reward[:, None], prev_done[:, None]], axis=1).astype(np.float32)
        return x

    def step(self, obs: np.ndarray, state, prev_reward: np.ndarray | None = None,  # noqa: ANN001
             prev_done: np.ndarray | None = None):  # noqa: ANN201
        return self.step_input(self.net_input(obs, prev_reward, prev_done), state)

    def step_input(self, x: np.ndarray, state):  # noqa: ANN001, ANN201
        """:meth:`step` on a prepared :meth:`net_input` (two nets on one input normalise once)."""
        if self.spec.arch == "mlp":
            for w, b in self.layers:
                x = np.tanh(x @ w + b)
            w, b = self.out
            return x @ w + b, None
        h, c = state
        w, b = self.fc
        e = np.maximum(x @ w + b, 0.0)
        z = e @ self.w_x + h @ self.w_h + self.bias
        H = self.spec.hidden
        i, j, f, o = z[:, :H], z[:, H:2 * H], z[:, 2 * H:3 * H], z[:, 3 * H:]
        c = c * _sigmoid(f) + _sigmoid(i) * np.tanh(j)
        h = np.tanh(c) * _sigmoid(o)
        w, b = self.out
        return h @ w + b, (h, c)
