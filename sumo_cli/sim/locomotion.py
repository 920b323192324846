"""Nonstationary locomotion (paper Sec. 4.1): the six-legged Bug on flat ground, one pair of legs
losing its strength over 7 consecutive episodes. Batched: N independent envs, one ``MjData`` each,
stepped on native threads (``mj_step`` releases the GIL), arrays in and out, implementing the
:class:`~sumo_cli.sim.vec_env.VecEnv` protocol.

The scene: a plane (world z = 0) and one Bug (``bodies.body_spec("bug")``, MJCF from
``bodies.agent_xml``, prefix ``bug/``); no tatami, no borders. 0.01 s physics step, ``FRAME_SKIP`` = 5
physics steps per env step (0.05 s); ``physics="fast"`` (implicitfast, default) or ``"faithful"``
(RK4, as the RoboSumo reference).

Legs are numbered 0..5 in the body's order (leg ``i`` has joints/actuators ``hip_{i+1}`` and
``knee_{i+1}``, action columns ``2i`` and ``2i+1``). The Bug's azimuths are (45, 135, 180, 0, 225,
315) degrees; the rewarded direction is +y, so by the y coordinate of each leg's direction
(computed from the body spec, :func:`leg_groups`):

* front pair  = legs (0, 1)   (azimuths 45, 135: y = +0.71)
* middle pair = legs (2, 3)   (azimuths 180, 0:  y = 0, pointing along -x / +x)
* back pair   = legs (4, 5)   (azimuths 225, 315: y = -0.71)

Design choices (the paper gives none of these numbers):

* observation (37 = 19 + 18): the qpos of the Bug (torso position x, y, z in world coordinates,
  torso quaternion w, x, y, z, then hip_1, knee_1, ..., hip_6, knee_6) followed by its qvel (torso
  linear velocity (world frame), angular velocity (body frame), then the 12 joint velocities);
* action: 12 torques in [-1, 1] (clipped), motor gear 150 as in RoboSumo;
* reward per env step = ``(y_after - y_before) / DT`` (torso velocity along +y, averaged over the
  env step) ``- CTRL_COST * sum(a^2)``, with ``CTRL_COST = 0.01`` and ``a`` the clipped action the
  *policy* outputs (before the paralysis factor: commanding a paralysed leg still costs); no
  survival bonus;
* episode: ``horizon`` env steps (default ``HORIZON`` = 100, i.e. 5 s), then truncation; no
  termination (a flipped Bug simply stops earning reward), so every episode has the same length,
  which the execution-time buffers of Algorithm 2 rely on;
* reset: torso at (0, 0, ``START_Z``) upright, leg joints ``U(-0.1, 0.1)``, qvel ``N(0, 0.1^2)``;
* unstable physics (MuJoCo's bad-state reset or a non-finite state): that step's velocity reward
  is 0, the body restarts from a fresh pose and the episode's clock runs on (lengths stay fixed);
  ``unstable_count`` counts them.

Nonstationarity: env ``n`` has a pair of legs ``pair[n]`` and an episode index ``k`` in 1..7 within
its current sequence; the ctrl of both joints of both legs is multiplied by
``factor(k) = 1 - (k - 1) / 6`` (episode 1: 1, episode 7: 0 -- paralysed, though the policy still
outputs torques). With ``auto_advance`` (the default) each episode end moves the env to episode
``k + 1``; after episode 7 the sequence restarts at episode 1 (a full reset) and, with
``resample_pairs``, a new pair is drawn from the env's pool. ``step`` reports in ``info``:
``episode_in_sequence`` (the episode the step belonged to), ``factor`` (its factor), ``pair_index``
(index into :data:`PAIRS`) and ``task_changed`` (True where the episode just ended was the 7th: the
returned observation starts a new sequence). Without ``auto_advance`` the episode index is set from
outside (:meth:`LocomotionEnv.set_episode`), which is what the meta-learning adapter does.
"""

from __future__ import annotations

import itertools
import math
import weakref
from itertools import combinations

import mujoco
import numpy as np

from sumo_cli.sim.vec_env import StepOut

from .arena import ARENA_FRICTION, FRAME_SKIP, TIMESTEP
from .bodies import BodySpec, agent_xml, body_spec
from .sumo_env import default_threads
from .workers import ForkJoinPool

BODY = "bug"
PREFIX = "bug/"
DT = TIMESTEP * FRAME_SKIP
HORIZON = 100
CTRL_COST = 0.01
SEQUENCE_LEN = 7
START_Z = 0.75
QPOS_NOISE = 0.1
QVEL_NOISE = 0.1
FORWARD = np.array([0.0, 1.0])  # rewarded direction (+y)
_BAD_WARNINGS = np.array([int(mujoco.mjtWarning.mjWARN_BADQPOS), int(mujoco.mjtWarning.mjWARN_BADQVEL),
                          int(mujoco.mjtWarning.mjWARN_BADQACC)])
PHYSICS_MODES = {"fast": "implicitfast", "faithful": "RK4"}


def factor(k) -> np.ndarray | float:
    """Torque factor of episode ``k`` (1..7) of a sequence: 1 - (k - 1) / 6."""
    return 1.0 - (np.asarray(k, dtype=np.float64) - 1.0) / (SEQUENCE_LEN - 1)


def leg_groups(spec: BodySpec | None = None, direction=FORWARD) -> dict[str, tuple[int, int]]:
    """Front/middle/back pairs of a six-legged body: legs sorted by the component of their
    horizontal direction along ``direction``; the two largest are the front pair, the two
    smallest the back pair. Pairs are sorted tuples of 0-based leg indices."""
    spec = spec or body_spec(BODY)
    if spec.n_legs != 6:
        raise ValueError("front/middle/back pairs need a six-legged body")
    d = np.asarray(direction, dtype=np.float64)
    along = np.array([math.cos(math.radians(l.azimuth_deg)) * d[0]
                      + math.sin(math.radians(l.azimuth_deg)) * d[1] for l in spec.legs])
    order = np.argsort(-along, kind="stable")
    pair = lambda a, b: tuple(sorted((int(a), int(b))))  # noqa: E731
    return {"front": pair(*order[:2]), "middle": pair(*order[2:4]), "back": pair(*order[4:])}


PAIRS: tuple[tuple[int, int], ...] = tuple(combinations(range(6), 2))
_G = leg_groups()
TEST_PAIRS: dict[str, tuple[int, int]] = {"back": _G["back"], "middle": _G["middle"], "front": _G["front"]}
TRAIN_PAIRS: tuple[tuple[int, int], ...] = tuple(p for p in PAIRS if p not in TEST_PAIRS.values())
del _G


def pair_index(pair) -> int:
    """Index into :data:`PAIRS` of a pair (order of the two legs irrelevant) or of a test-pair name."""
    if isinstance(pair, str):
        pair = TEST_PAIRS[pair]
    p = tuple(sorted(int(x) for x in pair))
    if p not in PAIRS:
        raise ValueError(f"not a pair of distinct legs 0..5: {pair!r}")
    return PAIRS.index(p)


def scene_xml(physics: str = "fast", body: str = BODY) -> str:
    """The flat-ground scene with one creature: ``body`` (default the Bug; any of
    :data:`bodies.BODIES`, e.g. "ant" for the locomotion-direction benchmark), names prefixed
    ``{body}/``, torso at (0, 0, ``START_Z``)."""
    if physics not in PHYSICS_MODES:
        raise ValueError(f"unknown physics mode {physics!r}; expected one of {tuple(PHYSICS_MODES)}")
    spec = body_spec(body)
    creature, acts = agent_xml(spec, f"{body}/", (0.0, 0.0, START_Z), contype=2, conaffinity=1,
                               rgba="0.85 0.6 0.25 1")
    fr = " ".join(f"{v:g}" for v in ARENA_FRICTION)
    return f"""<mujoco model="locomotion_{body}">
<compiler angle="degree" inertiafromgeom="true" autolimits="true"/>
<option timestep="{TIMESTEP:g}" integrator="{PHYSICS_MODES[physics]}"/>
<default>
  <joint limited="true" armature="1" damping="1"/>
</default>
<visual><global offwidth="1280" offheight="720"/></visual>
<worldbody>
<light name="sun" pos="0 0 6" dir="0 0 -1" directional="true"/>
<geom name="floor" type="plane" pos="0 0 0" size="100 100 0.1" rgba="0.3 0.35 0.4 1"
      friction="{fr}" contype="1" conaffinity="1"/>
{creature}
</worldbody>
<actuator>
{acts}
</actuator>
</mujoco>
"""


def build_model(physics: str = "fast", body: str = BODY) -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(scene_xml(physics, body))


def reset_pose(model: mujoco.MjModel, data: mujoco.MjData, rng: np.random.Generator) -> None:
    """The reset of the module notes: torso at (0, 0, START_Z) upright, joints ``U(-QPOS_NOISE,
    QPOS_NOISE)`` around the model's pose, velocities ``N(0, QVEL_NOISE^2)``; forward kinematics run."""
    mujoco.mj_resetData(model, data)
    qpos = model.qpos0.copy()
    qpos[:3] = (0.0, 0.0, START_Z)
    qpos[3:7] = (1.0, 0.0, 0.0, 0.0)
    qpos[7:] += rng.uniform(-QPOS_NOISE, QPOS_NOISE, model.nq - 7)
    data.qpos[:] = qpos
    data.qvel[:] = rng.normal(0.0, QVEL_NOISE, model.nv)
    mujoco.mj_forward(model, data)


class LocomotionEnv:
    """N nonstationary-locomotion envs stepped together (a VecEnv).

    Args:
        num_envs: batch size.
        pairs: the pool of leg pairs (default :data:`TRAIN_PAIRS`); env ``n`` starts with
            ``pairs[n % len(pairs)]``.
        resample_pairs: draw a new pair uniformly from the pool (env's own rng) at every new
            sequence; otherwise an env keeps its pair.
        horizon: env steps per episode.
        auto_advance: move to the next episode of the sequence at each episode end.
        physics: "fast" (implicitfast) or "faithful" (RK4).
        seed: seeds one numpy Generator per env (SeedSequence(seed).spawn(num_envs)).
        n_threads: physics threads including the caller (default: usable cores, at most N).
    """

    def __init__(self, num_envs: int, pairs=None, *, resample_pairs: bool = False,
                 horizon: int = HORIZON, auto_advance: bool = True, physics: str = "fast",
                 seed: int | None = 0, n_threads: int | None = None):
        self.num_envs = n = int(num_envs)
        if n < 1:
            raise ValueError("num_envs must be at least 1")
        self.spec = body_spec(BODY)
        self.model = m = build_model(physics)
        self.data = [mujoco.MjData(m) for _ in range(n)]
        self.nq, self.nv, self.nu = m.nq, m.nv, m.nu
        assert self.nq == self.spec.nq and self.nv == self.spec.nv and self.nu == self.spec.n_actions
        for k in range(self.nu):  # actuator k drives joint k of the legs (hip_1, knee_1, ...)
            assert m.actuator(k).name == f"{PREFIX}{'hip' if k % 2 == 0 else 'knee'}_{k // 2 + 1}"
            assert m.jnt_qposadr[m.actuator_trnid[k, 0]] == 7 + k
        self.obs_dim = self.nq + self.nv
        self.act_dim = self.nu
        self.horizon = int(horizon)
        self.auto_advance = bool(auto_advance)
        self.resample_pairs = bool(resample_pairs)
        pool = TRAIN_PAIRS if pairs is None else pairs
        self.pool = np.array([pair_index(p) for p in pool], dtype=np.int64)
        if len(self.pool) == 0:
            raise ValueError("empty pair pool")
        self.pair_idx = self.pool[np.arange(n) % len(self.pool)].copy()
        self.episode = np.ones(n, dtype=np.int64)   # index within the sequence, 1..7
        self.t = np.zeros(n, dtype=np.int64)
        self._state = np.zeros((n, self.obs_dim))   # qpos | qvel per env, written by the threads
        self._ctrl = np.zeros((n, self.nu))
        self._bad = np.zeros(n, dtype=bool)
        self.n_threads = default_threads(n) if n_threads is None else max(1, int(n_threads))
        self._pool = ForkJoinPool(self.n_threads, "locomotion") if self.n_threads > 1 else None
        if self._pool is not None:
            weakref.finalize(self, self._pool.close)
        self.unstable_count = 0
        self._seed(seed)
        self._reset_rows(np.arange(n))

    # ------------------------------------------------------------------ pairs and factors
    @property
    def pairs(self) -> list[tuple[int, int]]:
        """The current leg pair of every env."""
        return [PAIRS[i] for i in self.pair_idx]

    def factors(self) -> np.ndarray:
        return factor(self.episode)

    def scale_matrix(self) -> np.ndarray:
        """(N, act_dim) multipliers applied to the policy's actions: the factor on the 4 actuators
        of the env's pair, 1 elsewhere."""
        s = np.ones((self.num_envs, self.nu))
        legs = np.array([PAIRS[i] for i in self.pair_idx])            # (N, 2)
        cols = np.concatenate([2 * legs, 2 * legs + 1], axis=1)       # hips and knees
        np.put_along_axis(s, cols, self.factors()[:, None], axis=1)
        return s

    def set_pairs(self, pairs) -> None:
        """Set the pair of every env (a list of N pairs or one pair for all)."""
        if len(pairs) == 2 and np.isscalar(pairs[0]):
            pairs = [pairs] * self.num_envs
        if len(pairs) != self.num_envs:
            raise ValueError("need one pair per env")
        self.pair_idx = np.array([pair_index(p) for p in pairs], dtype=np.int64)

    def set_episode(self, k) -> None:
        """Set the episode index (1..7, scalar or per env) without touching the physics."""
        k = np.broadcast_to(np.asarray(k, dtype=np.int64), (self.num_envs,)).copy()
        if k.min() < 1 or k.max() > SEQUENCE_LEN:
            raise ValueError(f"episode index must be in 1..{SEQUENCE_LEN}")
        self.episode = k

    # ------------------------------------------------------------------ reset
    def seed(self, seed: int | None) -> None:
        """Reseed the per-env generators (reset noise, pair draws) without resetting anything."""
        self._seed(seed)

    def _seed(self, seed: int | None) -> None:
        self.rngs = [np.random.Generator(np.random.PCG64(c))
                     for c in np.random.SeedSequence(seed).spawn(self.num_envs)]

    def _reset_one(self, i: int) -> None:
        d = self.data[i]
        reset_pose(self.model, d, self.rngs[i])
        self._state[i, :self.nq] = d.qpos
        self._state[i, self.nq:] = d.qvel
        self.t[i] = 0

    def _reset_rows(self, rows) -> None:
        for i in rows:
            self._reset_one(int(i))

    def reset(self, seed: int | None = None) -> np.ndarray:
        """Reseed (when ``seed`` is given), reset every env's physics and start a new sequence
        (episode 1; the pairs are kept, or redrawn with ``resample_pairs``)."""
        if seed is not None:
            self._seed(seed)
        if self.resample_pairs:
            self.pair_idx = np.array([self.pool[r.integers(len(self.pool))] for r in self.rngs])
        self.episode[:] = 1
        self._reset_rows(range(self.num_envs))
        return self._state.copy()

    def reset_physics(self) -> np.ndarray:
        """Reset every env's physics (a new episode) without changing pairs or episode indices."""
        self._reset_rows(range(self.num_envs))
        return self._state.copy()

    def observe(self) -> np.ndarray:
        return self._state.copy()

    # ------------------------------------------------------------------ step
    def _work(self, counter) -> None:
        m, n, data, ctrl, st = self.model, self.num_envs, self.data, self._ctrl, self._state
        nq, bad, warn = self.nq, self._bad, _BAD_WARNINGS
        for i in counter:
            if i >= n:
                return
            d = data[i]
            d.ctrl[:] = ctrl[i]
            w0 = int(d.warning.number[warn].sum())
            mujoco.mj_step(m, d, FRAME_SKIP)   # releases the GIL
            st[i, :nq] = d.qpos
            st[i, nq:] = d.qvel
            # MuJoCo resets an MjData whose state went bad (and counts a warning)
            bad[i] = int(d.warning.number[warn].sum()) != w0

    def step(self, actions) -> StepOut:
        n = self.num_envs
        a = np.asarray(actions, dtype=np.float64)
        if a.shape != (n, self.act_dim):
            raise ValueError(f"expected actions of shape {(n, self.act_dim)}, got {a.shape}")
        a = np.clip(np.nan_to_num(a), -1.0, 1.0)
        fac = self.factors()
        self._ctrl[:] = a * self.scale_matrix()
        y0 = self._state[:, :2] @ FORWARD
        if self._pool is None:
            self._work(itertools.count())
        else:
            self._pool.run(self._work)
        bad = self._bad | ~np.isfinite(self._state).all(axis=1)
        if bad.any():   # physics blew up: zero velocity reward on this step, see below
            self.unstable_count += int(bad.sum())
        y1 = np.where(bad, y0, np.nan_to_num(self._state[:, :2] @ FORWARD))
        reward = (y1 - y0) / DT - CTRL_COST * np.sum(a * a, axis=1)
        self.t += 1
        episode = self.episode.copy()
        truncated = self.t >= self.horizon
        obs = np.nan_to_num(self._state)       # a new array
        broken = np.flatnonzero(bad & ~truncated)
        if len(broken):   # restart the body from a fresh pose; the episode's clock runs on
            t = self.t[broken].copy()
            self._reset_rows(broken)
            self.t[broken] = t
            obs[broken] = self._state[broken]
        final_obs = obs
        task_changed = np.zeros(n, dtype=bool)
        if truncated.any():
            idx = np.flatnonzero(truncated)
            if self.auto_advance:
                task_changed[idx] = self.episode[idx] >= SEQUENCE_LEN
                self.episode[idx] += 1
                restart = idx[task_changed[idx]]
                self.episode[restart] = 1
                if self.resample_pairs:
                    for i in restart:
                        self.pair_idx[i] = self.pool[self.rngs[i].integers(len(self.pool))]
            self._reset_rows(idx)
            obs = self._state.copy()
        return StepOut(
            obs=obs, reward=reward, terminated=np.zeros(n, dtype=bool), truncated=truncated,
            final_obs=final_obs,
            info={"episode_in_sequence": episode, "factor": fac, "pair_index": self.pair_idx.copy(),
                  "task_changed": task_changed},
        )

    def close(self) -> None:
        pool, self._pool = getattr(self, "_pool", None), None
        if pool is not None:
            pool.close()
        self.n_threads = 1
