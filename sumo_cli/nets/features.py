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

Indices into the original observation (see the environment spec): own torso x, y at 0-1 and its
quaternion (w, x, y, z) at 3-6; the opponent's torso x, y, z and quaternion are the 13th to 7th
numbers from the end.
"""

from __future__ import annotations

import numpy as np

from sumo_cli.sim.arena import RING_OUT

NONE = "none"
EGO = "ego"
_EXTRA = {NONE: 0, EGO: 13}
FEATURES = tuple(_EXTRA)


def extra_dims(features: str) -> int:
    """How many numbers ``features`` appends to the original observation."""
    if features not in _EXTRA:
        raise ValueError(f"unknown observation features {features!r}; expected one of {FEATURES}")
    return _EXTRA[features]


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
    """The observation a policy with ``features`` sees: ``obs`` itself for ``"none"``, else the
    original numbers followed by the extra ones (same dtype as ``obs``)."""
    if extra_dims(features) == 0:
        return obs
    obs = np.asarray(obs)
    return np.concatenate([obs, ego(obs).astype(obs.dtype, copy=False)], axis=-1)
