"""RoboSumo as a single-agent :class:`~sumo_cli.sim.vec_env.VecEnv` for training agent A.

:class:`SumoVecEnv` wraps :class:`~sumo_cli.sim.sumo_env.BatchedSumo`: the learner is agent A of
every bout; agent B is played by an opponent policy chosen per column (bout slot) from a list of
:class:`OpponentPolicy` (stored agent versions, or a motionless body). Every opponent acts for all
the columns it plays in one NumPy call per step (:class:`~sumo_cli.nets.numpy_actor.NumpyActor`,
the same function as ``nets.policy``); the action noise is drawn per architecture for its columns in
column order, as one batched :func:`~sumo_cli.nets.policy.sample` of those columns would draw it.
The grouping is rebuilt only when an assignment changes.

Opponents are re-drawn per interaction: a column keeps its opponent for ``episodes_per_opponent``
bouts (1 for plain policies; RL^2 keeps its state over the whole interaction, so it is told through
``info["task_changed"]`` when the opponent changes), then draws a new one: motionless with
probability ``motionless_prob``, otherwise uniformly from ``opponents``.

Training reward (what the learner sees): ``alpha * shaped_dense + (1 - alpha) * sparse`` with the
shaping coefficients of :class:`Shaping` (the reference values reproduce the environment's dense
reward). Termination and truncation stay apart: a decided bout (ring-out, fall, a double loss) is
``terminated`` (bootstrap 0); the step limit's draw is ``truncated`` (bootstrap with V(final obs)),
and so is an unstable bout (its physics broke; nothing the policy did decided it).

Whatever the training shaping and start conditions, every finished episode is also scored under the
faithful rules and rewards (reference dense + sparse) in :attr:`SumoVecEnv.episodes`, and
:func:`evaluate` plays bouts under the faithful start conditions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from sumo_cli.sim.vec_env import StepOut
from sumo_cli.nets import features as F
from sumo_cli.nets import normalizer as nz
from sumo_cli.nets import policy as P
from sumo_cli.nets.numpy_actor import NumpyActor
from sumo_cli.sim import mujoco  # the bindings as imported there, without GL probing
from sumo_cli.sim import sumo_env as SE
from sumo_cli.sim.arena import START_RADIUS

MOTIONLESS = "motionless"


@dataclass
class Shaping:
    """Dense shaping of the training reward. Defaults are the reference environment's terms:
    control ``-control * sum(a^2)``, push ``-push * exp(-|opponent xy|)``, move
    ``move * max(0, v . u)``. Extras, off (0) by default: ``centre`` adds ``-centre * |own xy|``
    (the paper appendix's "stay near the centre", disabled in the reference); ``approach`` adds
    ``approach * (d_before - d_after) / dt``, the signed speed at which the torso-to-torso distance
    shrinks (a potential-based term: unlike the rectified ``move``, random jitter earns nothing on
    average); ``push_out`` adds ``push_out * (|opp xy| after - before) / dt``, the speed at which the
    opponent's torso leaves the centre (potential-based too); ``tilt`` adds
    ``tilt * (b after - b before) / dt`` with ``b`` = the opponent torso's tilt minus the agent's own
    (:func:`tilt_balance`): tipping or lifting the opponent pays, being tipped costs (potential-based)."""

    control: float = SE.CONTROL_COST
    push: float = SE.PUSH_SCALE
    move: float = SE.MOVE_SCALE
    centre: float = 0.0
    approach: float = 0.0
    push_out: float = 0.0
    tilt: float = 0.0

    def dense(self, res: SE.StepResult, obs_before: np.ndarray | None = None) -> np.ndarray:
        """The shaped dense reward of agent A for one step; ``obs_before``, A's observation the step
        started from, is needed by the potential-based terms (``approach``, ``push_out``, ``tilt``)."""
        d = res.control_a * (self.control / SE.CONTROL_COST)
        d = d + res.push_a * (self.push / SE.PUSH_SCALE)
        d = d + res.move_a * (self.move / SE.MOVE_SCALE)
        ok = res.reason != SE.UNSTABLE
        if self.centre:
            xy = res.final_obs_a[:, :2]
            d = d - self.centre * np.hypot(xy[:, 0], xy[:, 1]) * ok
        # potential-based terms: coefficient x (potential after - potential before) / dt
        for coef, potential in ((-self.approach, torso_distance), (self.push_out, opponent_radius), (self.tilt, tilt_balance)):
            if coef:
                if obs_before is None:
                    raise ValueError("the approach, push-out and tilt terms need the observation before the step")
                d = d + coef * (potential(res.final_obs_a) - potential(obs_before)) / SE.DT * ok
        return d

    @property
    def is_reference(self) -> bool:
        return self == Shaping()


@dataclass
class StartConditions:
    """Where bouts start. ``radius`` None = the reference 1.15 m from the centre;
    ``face_opponent`` turns each torso (yaw) so its x axis points at the opponent (the reference
    keeps the identity orientation), give or take a heading error drawn uniformly in
    [-``face_error``, ``face_error``] radians per torso (at pi the heading relative to the opponent
    is uniform, as it is in the reference start)."""

    radius: float | None = None
    face_opponent: bool = False
    face_error: float = 0.0

    @property
    def is_reference(self) -> bool:
        return (self.radius is None or self.radius == START_RADIUS) and not self.face_opponent


class CurriculumSumo(SE.BatchedSumo):
    """BatchedSumo whose resets honour :class:`StartConditions` (set ``start`` before a reset).
    With the reference conditions it resets exactly as BatchedSumo does."""

    def __init__(self, *args, start: StartConditions | None = None, **kwargs):
        self.start = start or StartConditions()
        super().__init__(*args, **kwargs)

    def _reset_one(self, i: int) -> None:
        super()._reset_one(i)
        start = self.start
        if start.is_reference:
            return
        m = self.model
        d, head_row, cfrc_row, _ = self._slots[i]
        scale = (start.radius if start.radius is not None else START_RADIUS) / START_RADIUS
        pos = {}
        for layout in (self.a, self.b):
            s = layout.qpos_start
            d.qpos[s:s + 2] *= scale
            pos[s] = d.qpos[s:s + 2].copy()
        if start.face_opponent:
            for me, opp in ((self.a, self.b), (self.b, self.a)):
                s = me.qpos_start
                dx, dy = pos[opp.qpos_start] - pos[s]
                yaw = math.atan2(dy, dx)
                if start.face_error > 0.0:  # drawn only then: a plain facing start stays as it was
                    yaw += self.rngs[i].uniform(-start.face_error, start.face_error)
                turn = np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])
                q = np.empty(4)
                mujoco.mju_mulQuat(q, turn, d.qpos[s + 3:s + 7].copy())
                d.qpos[s + 3:s + 7] = q
        mujoco.mj_forward(m, d)
        mujoco.mj_rnePostConstraint(m, d)
        mujoco.mj_getState(m, d, head_row, SE._HEAD_STATE)
        cfrc_row[:] = d.cfrc_ext


@dataclass
class OpponentPolicy:
    """An opponent as plain data (crosses process boundaries). ``spec`` None: motionless."""

    key: str  # e.g. "ant-lstm@12", or "motionless"
    body: str
    spec: dict | None = None
    params: dict[str, np.ndarray] | None = None
    obs_stats: dict[str, np.ndarray] | None = None

    @classmethod
    def motionless(cls, body: str) -> "OpponentPolicy":
        return cls(MOTIONLESS, body)

    @property
    def is_motionless(self) -> bool:
        return self.spec is None


class _Compiled:
    """An opponent ready to act: its policy net in NumPy (float32, frozen normaliser) and its
    action standard deviation."""

    def __init__(self, opp: OpponentPolicy):
        self.spec = P.PolicySpec.from_dict(opp.spec)
        params = {k: torch.as_tensor(np.asarray(v, dtype=np.float32)) for k, v in opp.params.items()}
        mean, std = nz.mean_std(nz.to_torch(opp.obs_stats))
        self.actor = NumpyActor(self.spec, params, mean.to(torch.float32), std.to(torch.float32))
        self.action_std = torch.exp(params["logstd"]).numpy()  # as P.sample scales its noise


@dataclass
class EpisodeRecord:
    """One finished bout of the learner (agent A), scored under the faithful rules."""

    column: int
    opponent: str
    outcome: int  # SE.A_WINS (learner won), SE.B_WINS (learner lost), SE.DRAW
    reason: int
    length: int
    faithful_return: float  # reference dense + sparse, as a game scores it
    train_return: float  # what the learner was trained on (shaped, annealed)
    min_dist: float  # closest torso-to-torso distance during the bout
    mean_dist: float


def torso_distance(obs_a: np.ndarray) -> np.ndarray:
    """Distance between the two torsos (x, y) from agent A's observations (N, D): own x, y come
    first, the opponent's torso pose starts 13 entries from the end."""
    return np.hypot(obs_a[:, 0] - obs_a[:, -13], obs_a[:, 1] - obs_a[:, -12])


def _tilt(q: np.ndarray) -> np.ndarray:
    """1 - the vertical component of a torso's up axis, from its quaternions (N, 4) in (w, x, y, z)
    order: 0 upright, 1 on its side, 2 upside down."""
    return 2.0 * (q[:, 1] ** 2 + q[:, 2] ** 2)


def tilt_balance(obs_a: np.ndarray) -> np.ndarray:
    """The opponent torso's tilt minus the agent's own, from A's observations (N, D): the own
    quaternion is at 3-6, the opponent's 10th to 7th from the end."""
    return _tilt(obs_a[:, -10:-6]) - _tilt(obs_a[:, 3:7])


def opponent_radius(obs_a: np.ndarray) -> np.ndarray:
    """The opponent torso's distance from the centre of the tatami, from A's observations."""
    return np.hypot(obs_a[:, -13], obs_a[:, -12])


class SumoVecEnv:
    """N bouts of ``body`` (learner, agent A) against opponents of ``opp_body`` (agent B)."""

    def __init__(
        self,
        body: str,
        opp_body: str,
        n_envs: int,
        opponents: list[OpponentPolicy],
        *,
        physics: str = "faithful",
        motionless_prob: float = 0.0,
        shaping: Shaping | None = None,
        alpha: float = 1.0,
        episodes_per_opponent: int = 1,
        start: StartConditions | None = None,
        threads: int | None = 1,
        sim: CurriculumSumo | None = None,
        features: str = F.NONE,
    ):
        for o in opponents:
            if o.body != opp_body:
                raise ValueError(f"opponent {o.key} is a {o.body}, this env's opponents are {opp_body}s")
        if not opponents and motionless_prob < 1.0:
            raise ValueError("no opponent policies: use motionless_prob=1")
        if episodes_per_opponent < 1:
            raise ValueError("episodes_per_opponent must be at least 1")
        self.sim = sim or CurriculumSumo(body, opp_body, n_envs, physics=physics, n_threads=threads, start=start)
        if start is not None:
            self.sim.start = start
        self.num_envs = n = self.sim.n_envs
        self.features = features  # what the learner observes beyond the original observation
        self.obs_dim = F.policy_dim(features, self.sim.obs_size_a)
        self._view_a = F.Viewer(features, n)
        self.act_dim = self.sim.n_actions_a
        self.opp_obs_dim = self.sim.obs_size_b
        self.opp_act_dim = self.sim.n_actions_b
        self.opponents = list(opponents)
        self._compiled = [_Compiled(o) for o in self.opponents]
        for c in self._compiled:
            if c.spec.env_obs_dim != self.opp_obs_dim or c.spec.act_dim != self.opp_act_dim:
                raise ValueError(f"an opponent's policy does not fit a {opp_body} against a {body}")
        self.motionless_prob = float(motionless_prob)
        self.shaping = shaping or Shaping()
        self.alpha = float(alpha)
        self.episodes_per_opponent = int(episodes_per_opponent)
        self.assign = np.full(n, -1)  # opponent index per column; -1 = motionless
        self.episodes: list[EpisodeRecord] = []
        self._rng = np.random.default_rng(0)
        self._gen = torch.Generator().manual_seed(0)
        self._zero_b = np.zeros((n, self.opp_act_dim))

    # ------------------------------------------------------------------ opponents
    def _draw(self, cols: np.ndarray) -> None:
        """New opponents for ``cols`` (one uniform draw for the motionless choice, one for the pick)."""
        for c in cols:
            u = self._rng.random()
            pick = int(self._rng.integers(len(self.opponents))) if self.opponents else -1
            self.assign[c] = -1 if (u < self.motionless_prob or pick < 0) else pick
        self._interaction_eps[cols] = 0
        self._groups = None
        for viewer in self._opp_view.values():
            viewer.restart(cols)
        for st in self._opp_state.values():
            for v in st:
                v[cols] = 0.0
        self._opp_prev_r[cols] = 0.0
        self._opp_prev_d[cols] = 0.0

    def _build_groups(self) -> None:
        """Per architecture (in order of its first column): its columns, and for each of its
        opponents the positions of that opponent's columns among them."""
        groups: dict[P.PolicySpec, list[int]] = {}
        for c, k in enumerate(self.assign):
            if k >= 0:
                groups.setdefault(self._compiled[k].spec, []).append(c)
        self._groups = []
        for spec, cols in groups.items():
            cols = np.asarray(cols)
            ks = self.assign[cols]
            self._groups.append((spec, cols, [(int(k), np.flatnonzero(ks == k)) for k in np.unique(ks)]))
            if spec.recurrent and spec not in self._opp_state:
                self._opp_state[spec] = tuple(np.zeros((self.num_envs, spec.hidden), np.float32) for _ in "hc")
            if spec.features not in self._opp_view:  # every column's stream starts with its next bout
                self._opp_view[spec.features] = F.Viewer(spec.features, self.num_envs)
        # per feature set, the columns whose opponents observe through it (in column order)
        self._feature_cols = {}
        for spec, cols, _ in self._groups:
            self._feature_cols[spec.features] = np.union1d(self._feature_cols.get(spec.features, cols), cols)

    def _opponent_actions(self, obs_b: np.ndarray) -> np.ndarray:
        if self._groups is None:
            self._build_groups()
        if not self._groups:
            return self._zero_b
        act = np.zeros((self.num_envs, self.opp_act_dim))
        views = {}  # each feature set's view of every column playing an opponent that uses it
        for features, cols in self._feature_cols.items():
            seen = np.zeros((self.num_envs, F.policy_dim(features, self.opp_obs_dim)), dtype=obs_b.dtype)
            views[features] = seen
            seen[cols] = self._opp_view[features].view(obs_b[cols], cols)
        for spec, cols, members in self._groups:
            # the noise of one P.sample over this architecture's columns (same generator stream)
            noise = torch.randn((len(cols), 1, self.opp_act_dim), generator=self._gen, dtype=torch.float32).numpy()[:, 0]
            state = self._opp_state.get(spec)
            for k, rows in members:
                comp, cc = self._compiled[k], cols[rows]
                st = None if state is None else (state[0][cc], state[1][cc])
                mean, st = comp.actor.step(views[spec.features][cc], st, self._opp_prev_r[cc], self._opp_prev_d[cc])
                if state is not None:
                    state[0][cc], state[1][cc] = st
                act[cc] = mean + comp.action_std * noise[rows]
        return act

    # ------------------------------------------------------------------ VecEnv
    def reset(self, seed: int | None = None) -> np.ndarray:
        """Reset every bout (seeded), draw every column's opponent, forget recorded episodes."""
        s = 0 if seed is None else int(seed)
        self._rng = np.random.default_rng([s, 0x0990])
        self._gen = torch.Generator().manual_seed(int(np.random.SeedSequence([s, 0x0991]).generate_state(1)[0]))
        obs_a, self._obs_b = self.sim.reset(seed=seed)
        n = self.num_envs
        self._opp_state: dict[P.PolicySpec, tuple[np.ndarray, np.ndarray]] = {}  # (h, c) per column
        self._opp_view: dict[str, F.Viewer] = {}  # per feature set: what its opponents have seen
        self._opp_prev_r = np.zeros(n, dtype=np.float32)  # numpy: converted only for RL^2 opponents
        self._opp_prev_d = np.zeros(n, dtype=np.float32)
        self._interaction_eps = np.zeros(n, dtype=np.int64)
        self._ep_faithful = np.zeros(n)
        self._ep_train = np.zeros(n)
        self._obs_a = obs_a  # the next step's "before", for the potential-based shaping terms
        self._ep_min = torso_distance(obs_a)
        self._ep_sum = np.zeros(n)
        self.episodes = []
        self._draw(np.arange(n))
        self._view_a.restart()
        return self._view_a.view(obs_a)

    def step(self, actions: np.ndarray) -> StepOut:
        act_b = self._opponent_actions(self._obs_b)
        res = self.sim.step(np.asarray(actions, dtype=np.float64), act_b)
        sparse = res.sparse_a
        reward = self.alpha * self.shaping.dense(res, self._obs_a) + (1.0 - self.alpha) * sparse
        self._ep_faithful += res.dense_a + sparse
        self._ep_train += reward
        dist = torso_distance(res.final_obs_a)
        np.minimum(self._ep_min, dist, out=self._ep_min)
        self._ep_sum += dist
        # the opponent's own (faithful) reward, for RL^2 opponents' inputs
        self._opp_prev_r = np.asarray(res.dense_b + res.sparse_b, dtype=np.float32)
        self._opp_prev_d = np.asarray(res.done, dtype=np.float32)
        done = res.done
        unstable = done & (res.reason == SE.UNSTABLE)
        truncated = res.truncated | unstable
        terminated = done & ~truncated
        changed = np.zeros(self.num_envs, dtype=bool)
        if done.any():
            idx = np.flatnonzero(done)
            for c in idx:
                self.episodes.append(EpisodeRecord(
                    column=int(c), opponent=self._opp_key(c), outcome=int(res.outcome[c]),
                    reason=int(res.reason[c]), length=int(res.length[c]),
                    faithful_return=float(self._ep_faithful[c]), train_return=float(self._ep_train[c]),
                    min_dist=float(self._ep_min[c]), mean_dist=float(self._ep_sum[c] / max(1, res.length[c])),
                ))
            self._ep_faithful[idx] = 0.0
            self._ep_train[idx] = 0.0
            self._ep_sum[idx] = 0.0
            self._ep_min[idx] = torso_distance(res.obs_a[idx])  # the new bouts' start
            for viewer in self._opp_view.values():
                viewer.restart(idx)
            # opponents start every bout from a zero state, except RL^2 ones within an interaction
            for spec, st in self._opp_state.items():
                if spec.arch != "rl2":
                    for v in st:
                        v[idx] = 0.0
            self._interaction_eps[idx] += 1
            over = idx[self._interaction_eps[idx] >= self.episodes_per_opponent]
            if len(over):
                self._draw(over)
                changed[over] = True
        self._obs_b = res.obs_b
        # the next step's "before": after an auto-reset that is the new bout's start, not the final pose
        self._obs_a = res.obs_a
        final_obs = self._view_a.view(res.final_obs_a, record=False)  # the ended bouts' last view
        self._view_a.restart(done)
        return StepOut(obs=self._view_a.view(res.obs_a), reward=reward, terminated=terminated,
                       truncated=truncated, final_obs=final_obs, info={"task_changed": changed})

    def _opp_key(self, c: int) -> str:
        k = self.assign[c]
        return MOTIONLESS if k < 0 else self.opponents[k].key

    def close(self) -> None:
        self.sim.close()


# ---------------------------------------------------------------------------------------------
# evaluation under the faithful rules


@torch.no_grad()
def evaluate(
    body: str,
    spec: P.PolicySpec,
    params: P.Params,
    obs_stats: dict,
    opponent: OpponentPolicy,
    n_bouts: int,
    seed: int,
    physics: str = "faithful",
    deterministic: bool = False,
    threads: int | None = 1,
) -> list[EpisodeRecord]:
    """Play ``n_bouts`` bouts (one per column, the first bout of each) of the learner against one
    opponent under the faithful start conditions, rules and rewards; the episode records in column
    order. ``deterministic``: act with the policy mean (else sample, as games do)."""
    env = SumoVecEnv(body, opponent.body, n_bouts, [] if opponent.is_motionless else [opponent],
                     physics=physics, motionless_prob=1.0 if opponent.is_motionless else 0.0, threads=threads,
                     features=spec.features)
    try:
        obs = env.reset(seed=seed)
        gen = torch.Generator().manual_seed(seed)
        params = {k: v.detach().to(torch.float32) for k, v in params.items()}
        state = P.initial_state(spec, n_bouts)
        first: dict[int, EpisodeRecord] = {}
        prev_r, prev_d = torch.zeros(n_bouts), torch.zeros(n_bouts)
        seen = 0
        from sumo_cli.ppo.collect import net_input

        while len(first) < n_bouts:
            x = net_input(spec, obs_stats, torch.as_tensor(obs, dtype=torch.float32), prev_r, prev_d)
            mean, _, state = P.forward(spec, params, x, state)
            a = mean if deterministic else P.sample(mean, params["logstd"], gen)
            out = env.step(a.numpy())
            for rec in env.episodes[seen:]:
                first.setdefault(rec.column, rec)
            seen = len(env.episodes)
            state = P.reset_state(state, torch.as_tensor(out.done))
            obs = out.obs
        return [first[c] for c in range(n_bouts)]
    finally:
        env.close()


def summarise(episodes: list[EpisodeRecord]) -> dict:
    """Win/draw/loss rates, mean faithful and training returns, mean length and distances."""
    n = len(episodes)
    if n == 0:
        return {"episodes": 0}
    out = np.array([e.outcome for e in episodes])
    return {
        "episodes": n,
        "win_rate": float(np.mean(out == SE.A_WINS)),
        "loss_rate": float(np.mean(out == SE.B_WINS)),
        "draw_rate": float(np.mean(out == SE.DRAW)),
        "mean_return": float(np.mean([e.faithful_return for e in episodes])),
        "mean_train_return": float(np.mean([e.train_return for e in episodes])),
        "mean_length": float(np.mean([e.length for e in episodes])),
        "mean_min_dist": float(np.mean([e.min_dist for e in episodes])),
        "mean_dist": float(np.mean([e.mean_dist for e in episodes])),
    }


__all__ = [
    "MOTIONLESS", "Shaping", "StartConditions", "CurriculumSumo", "OpponentPolicy", "EpisodeRecord",
    "SumoVecEnv", "evaluate", "summarise", "torso_distance",
]
