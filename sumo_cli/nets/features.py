"""Fixed, parameter-free observation features that a policy may append to the original observation.

The environment's observation stays the original RoboSumo one (so the original agents play
unchanged); a policy whose :class:`~sumo_cli.nets.policy.PolicySpec` names ``features`` sees
``augment(features, obs)`` instead: the original numbers followed by the extra ones. Everything
after that (the observation normaliser, the nets, stored rollouts, adaptation buffers) treats the
augmented vector as the observation, so ``spec.obs_dim`` counts the extra numbers.

``"ego"`` (13 numbers) re-expresses the geometry of the bout in the agent's own heading frame, the
one fact an MLP finds hard to compute from world coordinates and a quaternion (rotating a vector by
the torso's yaw is a product of inputs). TimeChamber's Ant sumo gives its policy the opponent's
position relative to the agent for the same reason. With ``yaw`` the torso's heading about the
vertical (from its quaternion) and ``R`` the rotation by ``-yaw``:

====  =======================================================================================
0-1   ``R (opp_xy - own_xy)``: the opponent's torso in the agent's frame (m)
2-3   the same as a unit vector (where to turn; (0, 0) when the torsos coincide)
4     ``|opp_xy - own_xy|``: torso distance (m)
5-6   ``R (-own_xy)``: the centre of the tatami in the agent's frame (m)
7-8   ``R opp_xy``: the opponent's offset from the centre, in the agent's frame (m)
9     ``2.1 - max(|own_x|, |own_y|)``: the agent's margin to ring-out (m; the rule's max-norm)
10    ``2.1 - max(|opp_x|, |opp_y|)``: the opponent's margin to ring-out (m)
11-12 ``cos, sin`` of the opponent's heading relative to the agent's
====  =======================================================================================

``"ego-past"`` (13 + 2D numbers, D the original observation's size) adds to ``"ego"`` the last two
changes of the original observation, ``o_t - o_(t-1)`` and ``o_(t-1) - o_(t-2)`` (zero at a bout's
first step, where the past is taken to be the present): a few steps of the agent's own recent past
in its input, which an MLP has no other way to see (an experiment: the original LSTM agents,
probed with ``benchmarks/bout_probe.py``, turned out to play mostly from their present observation).
These features depend on the past, so a policy that uses them observes through a :class:`Viewer`,
one per stream of bouts, restarted at every bout's start.

Indices into the original observation (see the environment spec): own torso x, y at 0-1 and its
quaternion (w, x, y, z) at 3-6; the opponent's torso x, y, z and quaternion are the 13th to 7th
numbers from the end.
"""

from __future__ import annotations

import numpy as np

from sumo_cli.sim.arena import RING_OUT
from sumo_cli.vocabulary import FEATURES
from sumo_cli.vocabulary import FEATURES_EGO as EGO
from sumo_cli.vocabulary import FEATURES_EGO_PAST as EGO_PAST
from sumo_cli.vocabulary import FEATURES_NONE as NONE

PAST_STEPS = 2  # how many changes of the observation "ego-past" appends


def _check(features: str) -> None:
    if features not in FEATURES:
        raise ValueError(f"unknown observation features {features!r}; expected one of {', '.join(FEATURES)}")


def policy_dim(features: str, env_dim: int) -> int:
    """Size of what a policy with ``features`` observes of an original observation of ``env_dim``."""
    _check(features)
    return {NONE: env_dim, EGO: env_dim + 13, EGO_PAST: env_dim + 13 + PAST_STEPS * env_dim}[features]


def env_dim(features: str, n_seen: int) -> int:
    """The original observation's size for a policy with ``features`` observing ``n_seen`` numbers
    (ValueError if no original size gives that many)."""
    _check(features)
    d = {NONE: n_seen, EGO: n_seen - 13, EGO_PAST: (n_seen - 13) // (1 + PAST_STEPS)}[features]
    if d < 1 or policy_dim(features, d) != n_seen:
        raise ValueError(f"{n_seen} numbers are no observation with features {features!r}")
    return d


def stateful(features: str) -> bool:
    """Whether ``features`` depend on earlier observations (then observe through a :class:`Viewer`)."""
    _check(features)
    return features == EGO_PAST


def _yaw(q: np.ndarray) -> np.ndarray:
    """Heading about the vertical of quaternions ``(..., 4)`` in (w, x, y, z) order."""
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def ego(obs: np.ndarray) -> np.ndarray:
    """The 13 ``"ego"`` numbers of observations ``(..., D)`` (see the module docstring)."""
    own_xy = obs[..., 0:2]
    own_yaw = _yaw(obs[..., 3:7])
    opp_xy = obs[..., -13:-11]
    opp_yaw = _yaw(obs[..., -10:-6])
    c, s = np.cos(own_yaw), np.sin(own_yaw)

    def rot(v: np.ndarray) -> np.ndarray:
        return np.stack([c * v[..., 0] + s * v[..., 1], -s * v[..., 0] + c * v[..., 1]], axis=-1)

    rel = rot(opp_xy - own_xy)
    dist = np.hypot(rel[..., 0], rel[..., 1])
    unit = rel / np.where(dist > 1e-9, dist, 1.0)[..., None]
    dyaw = opp_yaw - own_yaw
    return np.concatenate([
        rel, unit, dist[..., None], rot(-own_xy), rot(opp_xy),
        (RING_OUT - np.abs(own_xy).max(-1))[..., None], (RING_OUT - np.abs(opp_xy).max(-1))[..., None],
        np.cos(dyaw)[..., None], np.sin(dyaw)[..., None],
    ], axis=-1)


def augment(features: str, obs: np.ndarray) -> np.ndarray:
    """The observation a policy with features that need no past sees: ``obs`` itself for ``"none"``,
    else the original numbers followed by the extra ones (same dtype as ``obs``)."""
    if stateful(features):
        raise ValueError(f"features {features!r} depend on earlier observations: observe through a Viewer")
    if features == NONE:
        return obs
    obs = np.asarray(obs)
    return np.concatenate([obs, ego(obs).astype(obs.dtype, copy=False)], axis=-1)


class Viewer:
    """What a policy with ``features`` observes of ``n`` streams of observations (one row each),
    bout after bout: :meth:`restart` the rows whose bout starts, then :meth:`view` every step's
    observations in order. Features without a past are :func:`augment` itself."""

    def __init__(self, features: str, n: int):
        self.features, self.n = features, int(n)
        self._past: np.ndarray | None = None  # (PAST_STEPS, n, D): o_(t-1), o_(t-2), ... per row
        self._fresh = np.ones(self.n, dtype=bool)  # rows whose next observation starts a bout

    def restart(self, rows=None) -> None:  # noqa: ANN001 - an index, a slice or a bool mask; None: all
        """The next observation of ``rows`` is the first of a bout."""
        self._fresh[slice(None) if rows is None else rows] = True

    def view(self, obs: np.ndarray, rows=None, record: bool = True) -> np.ndarray:  # noqa: ANN001
        """The policy's view of ``obs`` (``(n, D)``, or ``(len(rows), D)`` for the streams ``rows``).
        ``record=False`` looks without making ``obs`` the streams' latest: how a bout's final
        observation is seen when the stream's next bout follows at once (view it so, then restart)."""
        if not stateful(self.features):
            return augment(self.features, obs)
        obs = np.asarray(obs)
        rows = np.arange(self.n) if rows is None else np.arange(self.n)[rows]
        if self._past is None:
            self._past = np.zeros((PAST_STEPS, self.n, obs.shape[-1]), dtype=obs.dtype)
        past = self._past[:, rows]
        fresh = self._fresh[rows]
        past[:, fresh] = obs[fresh]  # a bout's first step: the past is taken to be the present
        frames = np.concatenate([obs[None], past])  # o_t, o_(t-1), ..., o_(t-PAST_STEPS)
        out = np.concatenate([obs, ego(obs).astype(obs.dtype, copy=False), *(frames[:-1] - frames[1:])], axis=-1)
        if record:
            self._past[:, rows] = frames[:-1]
            self._fresh[rows] = False
        return out
