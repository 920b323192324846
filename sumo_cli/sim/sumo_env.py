"""Many RoboSumo bouts stepped at once: arrays in, arrays out.

``BatchedSumo(body_a, body_b, n_envs)`` holds one ``MjData`` per bout. ``step`` runs the physics on
native threads: the calling thread and ``n_threads - 1`` pool threads take bouts one at a time from a
shared counter and call ``mj_step`` (which releases the GIL), so every core runs physics; each
thread also copies its bouts' qpos, qvel and cfrc_ext into one preallocated state array. All
observation, reward and rule work then happens vectorised in numpy across the batch.

Rules, observation layout and rewards follow shared/spec/robosumo-env.md:
- 5 physics steps per env step; ``mj_rnePostConstraint`` after the last one (and after the reset's
  ``mj_forward``) so that ``cfrc_ext`` is filled;
- observation = own qpos (torso z relative to the surface), own qvel, abs(clip(cfrc_ext, ±100)) of
  each own body (torso first, then the legs in tree order), opponent torso pose (z relative),
  opponent torso forces. Torso positions and quaternions are read from qpos (the free joint);
- dense reward = control + push + move (reported separately too); sparse = ±2000 on a decision,
  -1000 to both on a draw; the step limit's draw penalty applies on step 501 even when someone also
  loses on that step (winner 2000 - 1000, loser -2000 - 1000);
- an agent loses when its torso is out (max-norm of x, y >= 2.1) or fallen (z - 0.5 < 0.29); both
  losing on one step is a draw; a bout ends on its 501st step.

A bout whose physics goes unstable (MuJoCo's bad qpos/qvel/qacc check fires, after which MuJoCo
resets that MjData by itself, or the state is non-finite) ends as a draw with reason "unstable",
zero dense and zero sparse reward on that step, and its last valid observation as the final one.
``unstable_count`` counts them. MuJoCo prints its own warning line when that happens.
"""

from __future__ import annotations

import itertools
import math
import os
import time
import weakref
from dataclasses import dataclass

import mujoco
import numpy as np

from .arena import (
    AGENT_PREFIXES, FALL_Z, FRAME_SKIP, RING_OUT, START_HEIGHT, START_RADIUS, SURFACE_Z, TIMESTEP,
    build_model,
)
from .bodies import BodySpec, body_spec
from .workers import ForkJoinPool

MAX_STEPS = 500          # the bout ends on the step where the counter exceeds this (the 501st)
DT = TIMESTEP * FRAME_SKIP
FORCE_CLIP = 100.0
WIN_REWARD = 2000.0
LOSE_REWARD = -2000.0
DRAW_REWARD = -1000.0
CONTROL_COST = 0.1
PUSH_SCALE = 10.0
MOVE_SCALE = 0.1
QPOS_NOISE = 0.1         # qpos += U(-0.1, 0.1), elementwise, quaternions included
QVEL_NOISE = 0.1         # qvel += N(0, 0.1^2)

# outcome codes
RUNNING, A_WINS, B_WINS, DRAW = 0, 1, 2, 3
OUTCOMES = ("running", "a_wins", "b_wins", "draw")
# reason codes
NONE, RING_OUT_REASON, FALL_REASON, TIMEOUT, UNSTABLE = 0, 1, 2, 3, 4
REASONS = ("none", "ring_out", "fall", "timeout", "unstable")

_BAD_WARNINGS = np.array([
    int(mujoco.mjtWarning.mjWARN_BADQPOS),
    int(mujoco.mjtWarning.mjWARN_BADQVEL),
    int(mujoco.mjtWarning.mjWARN_BADQACC),
])
_TIME_TOL = 1e-6
_HEAD_STATE = int(mujoco.mjtState.mjSTATE_TIME | mujoco.mjtState.mjSTATE_QPOS
                  | mujoco.mjtState.mjSTATE_QVEL)


@dataclass
class StepResult:
    """What one batched step returns; every array has the batch size N as its first dimension.

    ``obs_a``/``obs_b`` are the observations to act on next: for a bout that just ended (and was
    reset, with auto_reset) they are the first observation of the new bout, and
    ``final_obs_a``/``final_obs_b`` hold its terminal observation (rows of bouts that did not end
    equal obs; when no bout ended they are the same arrays as obs). ``length`` is the bout's step
    count including this step (for a bout that ended: its total length).
    Treat the arrays as read-only views of one step; they are not reused by later steps.
    """

    obs_a: np.ndarray
    obs_b: np.ndarray
    dense_a: np.ndarray       # control_a + push_a + move_a
    dense_b: np.ndarray
    control_a: np.ndarray
    control_b: np.ndarray
    push_a: np.ndarray
    push_b: np.ndarray
    move_a: np.ndarray
    move_b: np.ndarray
    sparse_a: np.ndarray
    sparse_b: np.ndarray
    done: np.ndarray          # bool: the bout ended on this step
    truncated: np.ndarray     # bool: it ended at the step limit without a decision (a draw)
    outcome: np.ndarray       # int8: RUNNING / A_WINS / B_WINS / DRAW
    reason: np.ndarray        # int8: NONE / RING_OUT_REASON / FALL_REASON / TIMEOUT / UNSTABLE
    length: np.ndarray        # int32
    final_obs_a: np.ndarray
    final_obs_b: np.ndarray


def default_threads(n_envs: int) -> int:
    """The usable cores, at most n_envs."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, n_envs))


class _AgentLayout:
    """Where one agent's state lives in the scene's arrays."""

    def __init__(self, model: mujoco.MjModel, spec: BodySpec, prefix: str):
        self.spec = spec
        root = model.joint(prefix + "root")
        self.qpos_start = int(root.qposadr[0])
        self.qvel_start = int(root.dofadr[0])
        self.qpos_idx = np.arange(self.qpos_start, self.qpos_start + spec.nq)
        self.qvel_idx = np.arange(self.qvel_start, self.qvel_start + spec.nv)
        torso = model.body(prefix + "torso").id
        self.torso_id = torso
        self.body_ids = np.arange(torso, torso + spec.n_bodies)  # torso then legs, tree order
        for i in self.body_ids:
            assert model.body(int(i)).name.startswith(prefix)
        self.act_start = model.actuator(prefix + "hip_1").id
        for k in range(spec.n_actions):
            joint = f"{prefix}{'hip' if k % 2 == 0 else 'knee'}_{k // 2 + 1}"
            i = self.act_start + k
            assert model.actuator(i).name == joint
            assert model.actuator_trnid[i, 0] == model.joint(joint).id
            assert model.jnt_qposadr[model.joint(joint).id] == self.qpos_start + 7 + k


class BatchedSumo:
    """N RoboSumo bouts of body_a (agent A) against body_b (agent B), stepped together.

    Args:
        body_a, body_b: "ant", "bug" or "spider" (any pair, the same body included).
        n_envs: number of bouts in the batch.
        physics: "faithful" (RK4) or "fast" (implicitfast); see arena.build_model.
        seed: seeds one numpy Generator per bout (SeedSequence(seed).spawn(n_envs)); the same seed
            gives the same bouts whatever n_threads is.
        auto_reset: reset a bout as soon as it ends. Without it, an ended bout is frozen (not
            stepped; zero rewards, done False, its final observation repeated; ``finished`` marks
            it) until reset() or reset_envs().
        n_threads: physics threads, the calling thread included (default: the usable cores, at
            most n_envs).

    Attributes worth reading: ``model``, ``data`` (one MjData per bout), ``length`` (steps of the
    current bouts), ``finished``, ``unstable_count``, ``bouts_finished``, ``obs_size_a/b``,
    ``n_actions_a/b``.
    """

    def __init__(self, body_a: str, body_b: str, n_envs: int, physics: str = "faithful",
                 seed: int | None = 0, auto_reset: bool = True, n_threads: int | None = None):
        if int(n_envs) < 1:
            raise ValueError(f"n_envs must be at least 1, got {n_envs}")
        self.spec_a = body_spec(body_a)
        self.spec_b = body_spec(body_b)
        self.physics = physics
        self.n_envs = n = int(n_envs)
        self.auto_reset = bool(auto_reset)
        self.model = m = build_model(self.spec_a.name, self.spec_b.name, physics)
        self.data = [mujoco.MjData(m) for _ in range(n)]
        self.a = a = _AgentLayout(m, self.spec_a, AGENT_PREFIXES[0])
        self.b = b = _AgentLayout(m, self.spec_b, AGENT_PREFIXES[1])
        assert a.act_start == 0 and b.act_start == self.spec_a.n_actions == m.nu - self.spec_b.n_actions
        self.obs_size_a = self.spec_a.obs_size
        self.obs_size_b = self.spec_b.obs_size
        self.n_actions_a = self.spec_a.n_actions
        self.n_actions_b = self.spec_b.n_actions

        # One row per bout, written by the stepping threads:
        #   [time | qpos | qvel | cfrc_ext (nbody x 6)]
        # (time, qpos, qvel in one mj_getState call). The force part is turned into
        # abs(clip(f, ±100)) in place before observations are read.
        self._Q = 1
        self._V = 1 + m.nq
        self._F = 1 + m.nq + m.nv
        self._state = np.zeros((n, self._F + 6 * m.nbody))
        self._qpos = self._state[:, self._Q:self._V]
        self._ctrl = np.zeros((n, m.nu))
        self._step_mask = np.ones(n, dtype=bool)
        self._slots = [
            (self.data[i], self._state[i, :self._F],
             self._state[i, self._F:].reshape(m.nbody, 6), self._ctrl[i])
            for i in range(n)
        ]
        self._bad: list[int] = []                 # bouts whose physics broke during this step
        # state columns of the torso x, y (A then B) and x, y, z (A then B); actuator split
        q = self._Q
        self._xy_cols = q + np.array([a.qpos_start, a.qpos_start + 1, b.qpos_start, b.qpos_start + 1])
        self._xyz_cols = q + np.r_[a.qpos_start:a.qpos_start + 3, b.qpos_start:b.qpos_start + 3]
        self._act_split = np.array([0, self.n_actions_a])
        self._step_mask_all = True
        self._idx_a, self._off_a = self._obs_index(a, b)
        self._idx_b, self._off_b = self._obs_index(b, a)
        assert len(self._idx_a) == self.obs_size_a and len(self._idx_b) == self.obs_size_b
        self._obs_a = np.zeros((n, self.obs_size_a))
        self._obs_b = np.zeros((n, self.obs_size_b))

        self.length = np.zeros(n, dtype=np.int32)
        self.finished = np.zeros(n, dtype=bool)   # only ever set without auto_reset
        self._fresh: set[int] = set()             # bouts not yet stepped since their reset
        self.unstable_count = 0
        self.bouts_finished = 0

        self.n_threads = default_threads(n) if n_threads is None else max(1, int(n_threads))
        self._pool = ForkJoinPool(self.n_threads) if self.n_threads > 1 else None
        if self._pool is not None:
            weakref.finalize(self, self._pool.close)
        # Bouts are handed out costliest first (by their last step's wall time), so that the
        # threads finish together instead of one waiting on a late expensive bout.
        self._cost = np.zeros(n)
        self._order = list(range(n))
        self._seed_rngs(seed)
        self.reset()

    # ------------------------------------------------------------------ set-up helpers
    def _obs_index(self, me: _AgentLayout, opp: _AgentLayout) -> tuple[np.ndarray, np.ndarray]:
        """Columns of the state row that make up one agent's observation, and the offset to
        subtract (the surface height, on the two torso-z columns)."""
        six = np.arange(6)
        parts = [
            self._Q + me.qpos_idx,                                  # own qpos
            self._V + me.qvel_idx,                                  # own qvel
            (self._F + 6 * me.body_ids[:, None] + six).ravel(),     # own forces, body by body
            self._Q + opp.qpos_idx[:7],                             # opponent torso pose
            self._F + 6 * opp.torso_id + six,                       # opponent torso forces
        ]
        idx = np.concatenate(parts)
        offset = np.zeros(len(idx))
        offset[2] = SURFACE_Z
        offset[len(idx) - 13 + 2] = SURFACE_Z
        return idx, offset

    def _seed_rngs(self, seed: int | None) -> None:
        children = np.random.SeedSequence(seed).spawn(self.n_envs)
        self.rngs = [np.random.Generator(np.random.PCG64(c)) for c in children]

    def close(self) -> None:
        """Stop the physics pool threads (also done on garbage collection); stepping goes on in
        the calling thread only."""
        pool, self._pool = getattr(self, "_pool", None), None
        if pool is not None:
            pool.close()
        self.n_threads = 1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:
            pass

    # ------------------------------------------------------------------ reset
    def _reset_one(self, i: int) -> None:
        m, rng = self.model, self.rngs[i]
        d, head_row, cfrc_row, ctrl_row = self._slots[i]
        mujoco.mj_resetData(m, d)
        qpos = m.qpos0.copy()
        phi = rng.uniform(0.0, 2.0 * math.pi)
        for layout, angle in ((self.a, phi), (self.b, phi + math.pi)):
            s = layout.qpos_start
            qpos[s:s + 3] = (START_RADIUS * math.cos(angle), START_RADIUS * math.sin(angle),
                             START_HEIGHT)
            qpos[s + 3:s + 7] = (1.0, 0.0, 0.0, 0.0)
        d.qpos[:] = qpos + rng.uniform(-QPOS_NOISE, QPOS_NOISE, m.nq)
        d.qvel[:] = rng.normal(0.0, QVEL_NOISE, m.nv)
        mujoco.mj_forward(m, d)            # releases the GIL
        mujoco.mj_rnePostConstraint(m, d)
        mujoco.mj_getState(m, d, head_row, _HEAD_STATE)
        cfrc_row[:] = d.cfrc_ext
        ctrl_row[:] = 0.0
        self.length[i] = 0
        self.finished[i] = False
        self._fresh.add(i)

    def _reset_many(self, idx) -> None:
        idx = [int(i) for i in idx]
        if self._pool is None or len(idx) < 2:
            for i in idx:
                self._reset_one(i)
            return
        self._run_parallel(self._reset_worker, idx)

    def _reset_worker(self, counter, idx) -> None:
        for k in counter:
            if k >= len(idx):
                return
            self._reset_one(idx[k])

    def _run_parallel(self, fn, *args) -> None:
        """fn(counter, *args) on the calling thread and every pool thread, sharing one counter."""
        if self._pool is None:
            fn(itertools.count(), *args)
        else:
            self._pool.run(fn, *args)

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Reset every bout (re-seeding first when seed is given); returns (obs_a, obs_b)."""
        if seed is not None:
            self._seed_rngs(seed)
        self._reset_many(range(self.n_envs))
        self._obs_a, self._obs_b = self._observe_rows(None)
        return self._obs_a.copy(), self._obs_b.copy()

    def reset_envs(self, indices, seed: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Reset only the given bouts (indices or a bool mask); returns the whole batch's obs.
        With ``seed``, those bouts are re-seeded first as ``reset(seed)`` seeds a batch of their
        size (bout k of ``indices`` gets child k), so several small batches can share one env."""
        arr = np.asarray(indices)
        idx = np.flatnonzero(arr) if arr.dtype == bool else arr.astype(int).ravel()
        if seed is not None:
            for i, child in zip(idx, np.random.SeedSequence(seed).spawn(len(idx))):
                self.rngs[int(i)] = np.random.Generator(np.random.PCG64(child))
        self._reset_many(idx)
        if len(idx):
            # copy on write: arrays handed out by earlier calls never change under the caller
            self._obs_a, self._obs_b = self._obs_a.copy(), self._obs_b.copy()
            self._obs_a[idx], self._obs_b[idx] = self._observe_rows(idx)
        return self._obs_a.copy(), self._obs_b.copy()

    # ------------------------------------------------------------------ observation
    def _observe_rows(self, rows) -> tuple[np.ndarray, np.ndarray]:
        """New (obs_a, obs_b) arrays for the given rows (all when None) of the state array."""
        st = self._state if rows is None else self._state[rows]
        forces = st[:, self._F:]
        np.abs(forces, out=forces)                  # abs(clip(f, -c, c)) == min(abs(f), c);
        np.minimum(forces, FORCE_CLIP, out=forces)  # in place and idempotent
        obs_a = st.take(self._idx_a, axis=1)        # C-contiguous (st[:, idx] would not be)
        obs_a -= self._off_a
        obs_b = st.take(self._idx_b, axis=1)
        obs_b -= self._off_b
        return obs_a, obs_b

    def observe(self) -> tuple[np.ndarray, np.ndarray]:
        """The current observations (copies)."""
        return self._obs_a.copy(), self._obs_b.copy()

    # ------------------------------------------------------------------ physics
    def _work(self, counter) -> None:
        """Step bouts taken one at a time from a shared counter (dynamic load balance).

        MuJoCo's bad-state check resets an MjData by itself, restarting its clock at 0, so a clock
        that did not advance by exactly one env step gives it away; on a bout's first step after
        our own reset (clock at 0 either way) MuJoCo's warning counters are read instead.
        """
        m, slots, mask, n = self.model, self._slots, self._step_mask, self.n_envs
        fresh, bad, order, cost = self._fresh, self._bad, self._order, self._cost
        step, rne, get_state = mujoco.mj_step, mujoco.mj_rnePostConstraint, mujoco.mj_getState
        clock = time.perf_counter
        for k in counter:
            if k >= n:
                return
            i = order[k]
            if not mask[i]:
                continue
            d, head_row, cfrc_row, ctrl_row = slots[i]
            t0 = d.time
            d.ctrl[:] = ctrl_row
            c0 = clock()
            step(m, d, FRAME_SKIP)       # releases the GIL
            cost[i] = clock() - c0
            rne(m, d)
            get_state(m, d, head_row, _HEAD_STATE)
            cfrc_row[:] = d.cfrc_ext
            if abs(d.time - t0 - DT) > _TIME_TOL or (
                    i in fresh and d.warning.number[_BAD_WARNINGS].any()):
                bad.append(i)

    def _physics(self) -> None:
        self._bad.clear()
        self._run_parallel(self._work)
        if self._pool is not None:
            self._order = np.argsort(-self._cost, kind="stable").tolist()

    def _unstable(self, live: np.ndarray | None) -> np.ndarray | None:
        """Bouts whose physics broke this step (a MuJoCo auto-reset seen by ``_work``, or a
        non-finite state), or None when none did."""
        bad = None
        if self._bad:
            bad = np.zeros(self.n_envs, dtype=bool)
            bad[self._bad] = True
        if not math.isfinite(float(self._state[:, :self._F].sum())):
            rows = ~np.isfinite(self._state[:, :self._F]).all(axis=1)
            if live is not None:
                rows &= live
            bad = rows if bad is None else bad | rows
        return bad if bad is not None and bad.any() else None

    # ------------------------------------------------------------------ step
    @staticmethod
    def _check_actions(act, spec: BodySpec, who: str, n: int) -> np.ndarray:
        arr = np.asarray(act, dtype=np.float64)
        if arr.shape != (n, spec.n_actions):
            raise ValueError(f"agent {who} ({spec.name}): expected actions of shape "
                             f"{(n, spec.n_actions)}, got {tuple(np.shape(act))}")
        if not math.isfinite(float(arr.sum())) and not np.isfinite(arr).all():
            bad = np.flatnonzero(~np.isfinite(arr).all(axis=1))
            raise ValueError(f"agent {who} ({spec.name}): actions contain NaN or inf "
                             f"(bouts {bad[:8].tolist()}{'...' if len(bad) > 8 else ''})")
        return arr

    def step(self, act_a, act_b) -> StepResult:
        """Advance every live bout by one env step (5 physics steps) under the given actions."""
        n = self.n_envs
        act_a = self._check_actions(act_a, self.spec_a, "A", n)
        act_b = self._check_actions(act_b, self.spec_b, "B", n)
        na = self.n_actions_a
        ctrl = self._ctrl
        ctrl[:, :na] = act_a
        ctrl[:, na:] = act_b

        # frozen bouts (only without auto_reset) are not stepped
        live = ~self.finished if (not self.auto_reset and self.finished.any()) else None
        if live is not None or not self._step_mask_all:
            self._step_mask[:] = True if live is None else live
            self._step_mask_all = live is None
        state = self._state
        xy0 = state.take(self._xy_cols, axis=1).view(np.complex128).T   # (agent, env): x + iy

        self._physics()

        unstable = self._unstable(live)
        self._fresh.clear()
        keep = unstable if live is None else (~live if unstable is None else ~live | unstable)
        if unstable is not None:
            self.unstable_count += int(unstable.sum())
            state[unstable] = 0.0           # keep the arithmetic finite; these rows are discarded
        obs_a, obs_b = self._observe_rows(None)
        if keep is not None:                # frozen or broken bouts keep their last observation
            obs_a[keep] = self._obs_a[keep]
            obs_b[keep] = self._obs_b[keep]
        self._obs_a, self._obs_b = obs_a, obs_b
        if live is None:
            self.length += 1
        else:
            self.length += live

        # --- dense rewards, laid out (agent, env): row 0 is A, row 1 is B; positions as x + iy
        xy1 = state.take(self._xy_cols, axis=1).view(np.complex128).T
        push = np.abs(xy1[::-1])            # the opponent's distance from the centre
        np.negative(push, out=push)
        np.exp(push, out=push)
        push *= -PUSH_SCALE
        sq = np.square(ctrl)
        control = np.add.reduceat(sq, self._act_split, axis=1).T
        control *= -CONTROL_COST
        to_opp = xy1[::-1] - xy0            # own position before -> opponent after
        move = ((xy1 - xy0) * to_opp.conj()).real
        np.maximum(move, 0.0, out=move)
        move /= np.maximum(np.abs(to_opp), 1e-12)
        move *= MOVE_SCALE / DT
        if keep is not None:
            control[:, keep] = 0.0
            push[:, keep] = 0.0
            move[:, keep] = 0.0
        dense = control + push
        dense += move

        # --- rules
        pos = np.abs(state.take(self._xyz_cols, axis=1)).reshape(n, 2, 3)  # |x|, |y|, z per agent
        out = (pos[:, :, :2].max(axis=2) >= RING_OUT).T           # (agent, env)
        fall = (pos[:, :, 2] < SURFACE_Z + FALL_Z).T
        lose = out | fall
        if keep is not None:
            lose[:, keep] = False
        time_up_any = int(self.length.max()) > MAX_STEPS

        outcome = np.zeros(n, dtype=np.int8)
        reason = np.zeros(n, dtype=np.int8)
        sparse = np.zeros((2, n))
        truncated = np.zeros(n, dtype=bool)
        if unstable is not None or time_up_any or lose.any():
            time_up = self.length > MAX_STEPS
            if keep is not None:
                time_up &= ~keep
            lose_a, lose_b = lose
            a_wins = lose_b & ~lose_a
            b_wins = lose_a & ~lose_b
            both = lose_a & lose_b
            decided = lose_a | lose_b
            truncated = time_up & ~decided
            outcome[a_wins] = A_WINS
            outcome[b_wins] = B_WINS
            outcome[both | truncated] = DRAW
            lost_fall = (fall & lose).any(axis=0)
            lost_out = (out & lose).any(axis=0)
            reason[decided & lost_fall] = FALL_REASON
            reason[decided & lost_out] = RING_OUT_REASON
            reason[truncated] = TIMEOUT
            if unstable is not None:
                outcome[unstable] = DRAW
                reason[unstable] = UNSTABLE
            sparse[0, a_wins] = WIN_REWARD
            sparse[1, a_wins] = LOSE_REWARD
            sparse[0, b_wins] = LOSE_REWARD
            sparse[1, b_wins] = WIN_REWARD
            # the step limit's draw penalty applies even when someone lost on that step; a
            # double loss is one draw, penalised once
            sparse[:, both | time_up] += DRAW_REWARD
            done = outcome != RUNNING
        else:
            done = np.zeros(n, dtype=bool)

        final_obs_a, final_obs_b = obs_a, obs_b
        length = self.length.copy()
        if done.any():
            idx = np.flatnonzero(done)
            self.bouts_finished += len(idx)
            if self.auto_reset:
                final_obs_a, final_obs_b = obs_a.copy(), obs_b.copy()
                self.reset_envs(idx)        # replaces self._obs_a/_obs_b (copy on write)
            else:
                self.finished[idx] = True
        return StepResult(
            obs_a=self._obs_a, obs_b=self._obs_b,
            dense_a=dense[0], dense_b=dense[1],
            control_a=control[0], control_b=control[1],
            push_a=push[0], push_b=push[1], move_a=move[0], move_b=move[1],
            sparse_a=sparse[0], sparse_b=sparse[1],
            done=done, truncated=truncated, outcome=outcome, reason=reason, length=length,
            final_obs_a=final_obs_a, final_obs_b=final_obs_b,
        )


# ---------------------------------------------------------------------- conveniences
def run_bout(body_a: str, body_b: str, policy_a, policy_b, physics: str = "faithful",
             seed: int | None = 0) -> dict:
    """Play one bout with two callables obs (D,) -> action (A,); returns a summary dict with the
    outcome and reason names, length and the summed dense and sparse rewards of both agents."""
    env = BatchedSumo(body_a, body_b, 1, physics=physics, seed=seed, auto_reset=False,
                      n_threads=1)
    obs_a, obs_b = env.observe()
    totals = np.zeros(4)
    while True:
        act_a = np.asarray(policy_a(obs_a[0]), dtype=np.float64)[None]
        act_b = np.asarray(policy_b(obs_b[0]), dtype=np.float64)[None]
        r = env.step(act_a, act_b)
        totals += (r.dense_a[0], r.dense_b[0], r.sparse_a[0], r.sparse_b[0])
        obs_a, obs_b = r.obs_a, r.obs_b
        if r.done[0]:
            env.close()
            return {
                "outcome": OUTCOMES[r.outcome[0]], "reason": REASONS[r.reason[0]],
                "length": int(r.length[0]), "dense_a": totals[0], "dense_b": totals[1],
                "sparse_a": totals[2], "sparse_b": totals[3],
            }


# ---------------------------------------------------------------------- reference speed
def raw_physics_steps_per_second(model: mujoco.MjModel, n_envs: int, n_threads: int | None = None,
                                 n_steps: int = 200, seed: int = 0, clock=time.perf_counter) -> float:  # noqa: ANN001
    """Env steps per second of raw MuJoCo: mujoco.rollout of n_envs copies of ``model`` on
    n_threads native threads, FRAME_SKIP physics steps per env step with a uniform random control
    held over each env step, starting from the scene's default pose plus the reset noise; no
    observation, reward or rule work and no Python between steps. The reference the batched env is
    measured against. ``clock``: wall time by default; ``time.process_time`` gives steps per
    second of this process's CPU time (all its threads), which a loaded machine disturbs less."""
    from mujoco import rollout

    n_threads = default_threads(n_envs) if n_threads is None else n_threads
    rng = np.random.default_rng(seed)
    data = mujoco.MjData(model)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    nstate = mujoco.mj_stateSize(model, spec)
    init = np.empty((n_envs, nstate))
    for i in range(n_envs):
        mujoco.mj_resetData(model, data)
        data.qpos[:] = model.qpos0 + rng.uniform(-QPOS_NOISE, QPOS_NOISE, model.nq)
        data.qvel[:] = rng.normal(0.0, QVEL_NOISE, model.nv)
        mujoco.mj_getState(model, data, init[i], spec)
    ctrl = np.repeat(rng.uniform(-1.0, 1.0, (n_envs, n_steps, model.nu)), FRAME_SKIP, axis=1)
    datas = [mujoco.MjData(model) for _ in range(n_threads)]
    state = np.empty((n_envs, n_steps * FRAME_SKIP, nstate))
    with rollout.Rollout(nthread=n_threads) as runner:
        # warm-up: thread start and first touch of memory
        runner.rollout(model, datas, init, ctrl[:, :FRAME_SKIP], state=state[:, :FRAME_SKIP])
        t0 = clock()
        runner.rollout(model, datas, init, ctrl, state=state)
        elapsed = clock() - t0
    return n_envs * n_steps / elapsed


def batched_steps_per_second(env: BatchedSumo, n_steps: int = 200, seed: int = 0) -> float:
    """Env steps per second of ``env.step`` (every bout counted) with uniform random actions."""
    rng = np.random.default_rng(seed)
    n = env.n_envs
    acts_a = rng.uniform(-1, 1, (n_steps, n, env.n_actions_a))
    acts_b = rng.uniform(-1, 1, (n_steps, n, env.n_actions_b))
    env.step(acts_a[0], acts_b[0])  # warm-up
    t0 = time.perf_counter()
    for k in range(n_steps):
        env.step(acts_a[k], acts_b[k])
    return n * n_steps / (time.perf_counter() - t0)
