"""Training a RoboSumo agent with PPO against opponents sampled from snapshots (the paper's
pre-training by self-play, and its curriculum for the baselines and meta-learners).

Read top to bottom:

1. :class:`TrainConfig`: every knob, with its default and why.
2. Schedules: :func:`reward_alpha` (dense -> sparse annealing), :func:`start_radius`,
   :func:`motionless_prob` (curriculum), :func:`eligible_versions` / :func:`sample_opponents`.
3. Rollouts: :class:`RolloutJob` (plain data) -> :func:`run_rollout` in any process ->
   :func:`merge_rollouts`.
4. :class:`PPOLearner` (params, Adam, normaliser; state save/load for exact resume) behind the
   :class:`Learner` protocol, and :func:`register_learner`, the hook for other strategies (meta).
5. :func:`train`: the loop. Storage goes through the :class:`TrainStore` protocol (the database
   version is :mod:`sumo_cli.runs.training`; :class:`MemoryStore` keeps everything in memory).

**An iteration** is one PPO update on one batch: ``n_envs`` bouts slots x ``num_steps`` steps
(default 8 x 512 = 4,096 env steps). Every iteration starts fresh bouts (reset with a seed derived
from the run's seed and the iteration), and a column's bout still running after ``num_steps`` is
cut there and bootstrapped with V(last obs) (PPO's usual ``last_values``). So an iteration's batch
is a pure function of (seed, iteration, parameters, normaliser, opponent snapshots): resume is exact
without saving simulator state, and the result does not depend on how many processes roll out.
``num_steps`` = 512 >= 501 lets every column's first bout reach the step limit, so the draw penalty
at step 501 is seen. The batch is split into ``rollout_shards`` jobs (default 2) that worker
processes (``-j``) or Ray run in parallel; the shard layout, not the worker count, fixes the result.

**Versions**: version k = the parameters after k updates (snapshot every ``snapshot_every``
iterations, and always after the last). The paper snapshots every iteration and picks, at
iteration k, an opponent version uniformly in [1, k]; here the self-play snapshots available at
iteration k are theta_0 (the initialisation, kept with the run) .. theta_{k-1} (the current
parameters): k of them, the paper's [1, k] counted from theta_0. A stored opponent agent's versions
are eligible up to k (its version v has had v iterations of training). The paper's "versions
500..2000" are iterations of batches far larger than ours (its epochs were 32,000 episodes on a
cluster); ours at default scale see 4,096 env steps per version.

Opponents per iteration: each shard draws ``opponent_samples`` (agent, version) pairs i.i.d. from
the eligible snapshots; every interaction (``episodes_per_opponent`` bouts) then picks one of them
uniformly, so each bout's opponent is still uniform over the eligible versions while a shard loads
at most ``opponent_samples`` snapshots per iteration. Several opponent bodies: each shard plays one
body (shards are dealt round-robin over the bodies), and draws among the pool's agents of it.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Protocol

import numpy as np
import torch
from torch import Tensor

from sumo_cli.ppo import kickstart as KS
from sumo_cli.ppo.kickstart import Teacher
from sumo_cli.ppo.ppo import make_optimizer, make_params, ppo_update
from sumo_cli.ppo.rollout import Rollout
# the run's settings, in a module of their own so that bad input is answered before torch loads
from sumo_cli.selfplay.train_config import SELF, StoredConfig, TrainConfig  # noqa: F401
from sumo_cli.selfplay.sumo_vec import (
    EpisodeRecord, OpponentPolicy, Shaping, StartConditions, SumoVecEnv, evaluate, summarise,
)
from sumo_cli.nets import features as F
from sumo_cli.nets import normalizer as nz
from sumo_cli.nets import policy as P
from sumo_cli.runtime.threads import torch_threads
from sumo_cli.sim.arena import START_RADIUS
from sumo_cli.sim.bodies import body_spec

# ---------------------------------------------------------------------------------------------
# schedules


def reward_alpha(k: int, anneal_iterations: int, start: float = 1.0) -> float:
    """Weight of the dense reward at iteration k (1-based): ``start`` at iteration 1, linearly down
    to 0 at iteration ``anneal_iterations + 1`` and 0 after; ``anneal_iterations`` = 0: always 0."""
    if anneal_iterations <= 0:
        return 0.0
    return start * max(0.0, 1.0 - (k - 1) / anneal_iterations)


def start_radius(k: int, cfg: TrainConfig) -> float | None:
    """The start radius at iteration k: cfg.start_radius, moving linearly to the reference 1.15
    over cfg.start_radius_iterations (None when the curriculum is off)."""
    if cfg.start_radius is None:
        return None
    if cfg.start_radius_iterations <= 0:
        return cfg.start_radius
    f = min(1.0, (k - 1) / cfg.start_radius_iterations)
    return cfg.start_radius + (START_RADIUS - cfg.start_radius) * f


def start_conditions(k: int, cfg: TrainConfig) -> StartConditions:
    """Where iteration k's bouts start: the radius curriculum, and with ``face_opponent`` a facing
    start whose heading error grows to 180 degrees over ``face_spread_iterations``, then the
    reference orientation."""
    radius = start_radius(k, cfg)
    if not cfg.face_opponent:
        return StartConditions(radius)
    if cfg.face_spread_iterations <= 0:
        return StartConditions(radius, True)
    if k > cfg.face_spread_iterations:
        return StartConditions(radius, False)
    return StartConditions(radius, True, math.pi * (k - 1) / cfg.face_spread_iterations)


def motionless_prob(k: int, cfg: TrainConfig) -> float:
    """Share of interactions against a motionless opponent at iteration k."""
    return 1.0 if k <= cfg.motionless_iterations else cfg.motionless_fraction


def eligible_versions(stored: Iterable[int], k: float, self_play: bool = False) -> list[int]:
    """The versions of an opponent eligible at iteration k: those <= k (at least the oldest one).
    Self-play: the own snapshots 0 .. k-1 (version 0 = the initialisation, k-1 = the current
    parameters; version k does not exist before iteration k's update)."""
    s = sorted(set(int(v) for v in stored))
    if not s:
        raise ValueError("an opponent without versions")
    ok = [v for v in s if (v < k if self_play else v <= k)]
    return ok or s[:1]


def sample_opponents(rng: np.random.Generator, pool: list[tuple[str, list[int]]], k: int, n: int,
                     stride: float = 1.0) -> list[tuple[str, int]]:
    """n i.i.d. (agent, version) draws: an agent uniformly from ``pool`` (name, stored versions;
    the name ``self`` for the own snapshots), then a version uniformly among its
    :func:`eligible_versions` at iteration k (``stride`` x k for a stored opponent)."""
    out = []
    for _ in range(n):
        name, stored = pool[int(rng.integers(len(pool)))]
        vs = eligible_versions(stored, k if name == SELF else k * stride, name == SELF)
        out.append((name, vs[int(rng.integers(len(vs)))]))
    return out


def derive_seed(*parts: int) -> int:
    """A 31-bit seed from integers (run seed, iteration, purpose, shard)."""
    return int(np.random.SeedSequence([int(p) & 0xFFFFFFFF for p in parts]).generate_state(1)[0] & 0x7FFFFFFF)


_ENV_SEED, _OPP_SEED, _POLICY_SEED, _MB_SEED, _EVAL_SEED = 1, 2, 3, 4, 5


# ---------------------------------------------------------------------------------------------
# rollouts as plain jobs


@dataclass
class RolloutJob:
    """One shard of an iteration's batch, as plain data (picklable for worker processes / Ray)."""

    shard: int
    env_seed: int
    policy_seed: int
    body: str
    opp_body: str
    n_envs: int
    num_steps: int
    physics: str
    spec: dict
    params: dict[str, np.ndarray]
    obs_stats: dict[str, np.ndarray]
    opponents: list[OpponentPolicy]
    motionless_prob: float
    alpha: float
    shaping: Shaping
    start: StartConditions
    episodes_per_opponent: int
    bptt_len: int
    reset_on: str
    threads: int = 1


@dataclass
class RolloutPiece:
    shard: int
    rollout: dict  # numpy version of a Rollout
    episodes: list[EpisodeRecord]
    seconds: float


_SIMS: dict[tuple, object] = {}  # per process: one simulator per shape, reused across iterations


def _sim_for(job: RolloutJob):
    from sumo_cli.selfplay.sumo_vec import CurriculumSumo

    key = (job.body, job.opp_body, job.n_envs, job.physics, job.threads)
    sim = _SIMS.get(key)
    if sim is None:
        sim = _SIMS[key] = CurriculumSumo(job.body, job.opp_body, job.n_envs, physics=job.physics,
                                          n_threads=job.threads)
    return sim


def _quiet_worker() -> None:
    """In a worker process, leave Ctrl-C to the driver (which saves and prints the resume command)."""
    import multiprocessing
    import signal

    if multiprocessing.parent_process() is not None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_rollout(job: RolloutJob) -> RolloutPiece:
    """Collect one shard: fresh bouts seeded with ``job.env_seed``, ``job.num_steps`` steps of every
    column, actions sampled with a generator seeded with ``job.policy_seed``."""
    from sumo_cli.ppo.collect import collect, new_carry

    _quiet_worker()
    t0 = time.perf_counter()
    spec = P.PolicySpec.from_dict(job.spec)
    env = SumoVecEnv(job.body, job.opp_body, job.n_envs, job.opponents, physics=job.physics,
                     motionless_prob=job.motionless_prob, shaping=job.shaping, alpha=job.alpha,
                     episodes_per_opponent=job.episodes_per_opponent, start=job.start, sim=_sim_for(job),
                     features=spec.features)
    params = {k: torch.from_numpy(np.asarray(v, dtype=np.float32)) for k, v in job.params.items()}
    stats = nz.to_torch(job.obs_stats)
    carry = new_carry(env, spec, seed=job.env_seed)
    gen = torch.Generator().manual_seed(job.policy_seed)
    rollout, _ = collect(env, spec, params, stats, job.num_steps, carry, gen, update_norm=False,
                         chunk_len=job.bptt_len, reset_on=job.reset_on)
    return RolloutPiece(job.shard, rollout_to_numpy(rollout), env.episodes, time.perf_counter() - t0)


def rollout_to_numpy(r: Rollout) -> dict:
    out = {}
    for f in dataclasses.fields(r):
        v = getattr(r, f.name)
        if isinstance(v, Tensor):
            v = v.numpy()
        elif isinstance(v, dict):
            v = {k: (t.numpy() if isinstance(t, Tensor) else t) for k, t in v.items()}
        out[f.name] = v
    return out


def rollout_from_numpy(d: dict) -> Rollout:
    kw = {}
    for k, v in d.items():
        if isinstance(v, np.ndarray):
            v = torch.from_numpy(v)
        elif isinstance(v, dict):
            v = {a: (torch.from_numpy(t) if isinstance(t, np.ndarray) else t) for a, t in v.items()}
        kw[k] = v
    return Rollout(**kw)


_TN = ("obs", "actions", "logp", "values", "rewards", "terminated", "truncated", "first", "final_values",
       "prev_rewards", "prev_dones", "state_reset", "task_end")


def merge_rollouts(parts: list[Rollout]) -> Rollout:
    """Side by side along the env dim, in the given order (same T, chunking and norm stats)."""
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    kw = {name: torch.cat([getattr(p, name) for p in parts], dim=1) for name in _TN if getattr(first, name) is not None}
    kw["last_values"] = torch.cat([p.last_values for p in parts])
    kw["state0"] = {k: torch.cat([p.state0[k] for p in parts]) for k in first.state0}
    kw["chunk_states"] = {k: torch.cat([p.chunk_states[k] for p in parts], dim=1) for k in first.chunk_states}
    return Rollout(chunk_len=first.chunk_len, norm_stats=first.norm_stats, **kw)


# ---------------------------------------------------------------------------------------------
# learners


@dataclass
class Shard:
    """Where a shard's columns play: its opponent body and its columns."""

    index: int
    opp_body: str
    n_envs: int


def shard_layout(cfg: TrainConfig, bodies: list[str]) -> list[Shard]:
    """``max(rollout_shards, len(bodies))`` shards of near-equal size, dealt round-robin over the
    opponent bodies."""
    n = max(cfg.rollout_shards, len(bodies))
    if cfg.n_envs < n:
        raise ValueError(f"{cfg.n_envs} envs cannot fill {n} shards (one per opponent body at least)")
    sizes = [cfg.n_envs // n + (i < cfg.n_envs % n) for i in range(n)]
    return [Shard(i, bodies[i % len(bodies)], sizes[i]) for i in range(n)]


@dataclass
class IterationContext:
    """What a learner gets for one iteration: the schedule values and a way to collect the batch
    (or, for learners that need their own rollouts, the shard plans and the executor)."""

    k: int
    cfg: TrainConfig
    alpha: float
    jobs: list[RolloutJob]  # the shard plans, parameters not filled in yet
    executor: object
    timing: dict = field(default_factory=dict)
    episodes: list[EpisodeRecord] = field(default_factory=list)
    store: "TrainStore | None" = None  # the run's store (pool, opponent versions), for learners that pick their own

    def collect(self, spec: P.PolicySpec, params: P.Params, obs_stats: dict, reset_on: str) -> Rollout:
        """The iteration's batch with these parameters: every shard job run (in parallel where the
        executor allows), merged in shard order; the episodes land in ``self.episodes``."""
        p = {k: v.detach().to(torch.float32).numpy().copy() for k, v in params.items()}
        s = nz.to_numpy(obs_stats)
        jobs = [dataclasses.replace(j, spec=spec.to_dict(), params=p, obs_stats=s, reset_on=reset_on) for j in self.jobs]
        t0 = time.perf_counter()
        pieces = dict(self.executor.run(run_rollout, [(j.shard, (j,)) for j in jobs]))
        ordered = [pieces[j.shard] for j in jobs]
        self.timing["rollout_seconds"] = self.timing.get("rollout_seconds", 0.0) + time.perf_counter() - t0
        self.timing["shard_seconds"] = [round(x.seconds, 3) for x in ordered]
        self.episodes.extend(e for x in ordered for e in x.episodes)
        return merge_rollouts([rollout_from_numpy(x.rollout) for x in ordered])


class Learner(Protocol):
    """A training algorithm behind :func:`train`. PPO is :class:`PPOLearner`; register others
    (the meta-learner) with :func:`register_learner`."""

    spec: P.PolicySpec

    def iterate(self, ctx: IterationContext) -> dict:
        """One iteration (collect through ``ctx`` and update); returns scalar statistics."""

    def policy(self) -> tuple[P.Params, dict]:
        """The current (detached) parameters and observation statistics, as a snapshot plays."""

    def snapshot_extras(self) -> dict[str, Tensor]:
        """Tensors stored with every version beside the policy (e.g. ``meta/alpha_0``)."""

    def state(self) -> tuple[dict[str, Tensor], dict]:
        """Everything needed to resume (tensors, JSON-able metadata)."""

    def load_state(self, tensors: dict[str, Tensor], metadata: dict) -> None: ...


def adam_state_tensors(optimizer: torch.optim.Optimizer, keys: list[str]) -> dict[str, Tensor]:
    """Adam's per-parameter state as named tensors (``adam/<param>/<field>``), for safetensors."""
    out = {}
    opt_state = optimizer.state_dict()["state"]
    for i, key in enumerate(keys):
        for name, t in opt_state.get(i, {}).items():
            out[f"adam/{key}/{name}"] = torch.as_tensor(t).detach().clone()
    return out


def load_adam_state(optimizer: torch.optim.Optimizer, keys: list[str], tensors: dict[str, Tensor]) -> None:
    """Inverse of :func:`adam_state_tensors` (``keys`` in the optimiser's parameter order)."""
    sd = optimizer.state_dict()
    state = {}
    for i, key in enumerate(keys):
        entry = {name: tensors[f"adam/{key}/{name}"].clone() for name in ("step", "exp_avg", "exp_avg_sq")
                 if f"adam/{key}/{name}" in tensors}
        if entry:
            state[i] = entry
    sd["state"] = state
    optimizer.load_state_dict(sd)


class PPOLearner:
    """Plain PPO (strategies none, track, rl2): the learner of the paper's pre-training and of
    its baselines. Observation statistics are frozen during an iteration's rollout and updated with
    its observations after the update (as :func:`sumo_cli.ppo.ppo.train_ppo` does)."""

    def __init__(self, spec: P.PolicySpec, cfg: TrainConfig):
        self.spec, self.cfg = spec, cfg
        self.ppo_cfg = cfg.ppo()
        self.params = make_params(spec, torch.Generator().manual_seed(derive_seed(cfg.seed, 0, 0)))
        with torch.no_grad():
            self.params["logstd"].fill_(cfg.init_logstd)
        self.optimizer = make_optimizer(self.params, self.ppo_cfg)
        self.obs_stats = nz.new_stats(spec.obs_dim)
        self.reset_on = "task" if spec.arch == "rl2" else "episode"
        self.teacher: Teacher | None = None  # set by the trainer when the run names one (cfg.teacher)

    def iterate(self, ctx: IterationContext) -> dict:
        rollout = ctx.collect(self.spec, self.params, self.obs_stats, self.reset_on)
        t0 = time.perf_counter()
        gen = torch.Generator().manual_seed(derive_seed(self.cfg.seed, ctx.k, _MB_SEED))
        coef = KS.coefficient(ctx.k, self.cfg.teacher_coef, self.cfg.teacher_iterations) if self.teacher else 0.0
        teacher = (self.teacher.means(rollout), self.teacher.logstd, coef) if coef > 0 else None
        stats = ppo_update(self.spec, self.params, self.optimizer, rollout, None, self.ppo_cfg, gen, teacher)
        if teacher:
            stats["distill_coef"] = coef
        self.obs_stats = nz.update(self.obs_stats, rollout.obs.to(torch.float64))
        ctx.timing["update_seconds"] = time.perf_counter() - t0
        return stats

    def policy(self) -> tuple[P.Params, dict]:
        return {k: v.detach().clone() for k, v in self.params.items()}, dict(self.obs_stats)

    def snapshot_extras(self) -> dict[str, Tensor]:
        return {}

    def state(self) -> tuple[dict[str, Tensor], dict]:
        from sumo_cli.nets.checkpoint import checkpoint_tensors

        keys = list(self.params)
        extra = adam_state_tensors(self.optimizer, keys)
        tensors = checkpoint_tensors({k: v.detach() for k, v in self.params.items()}, self.obs_stats, extra)
        return tensors, {"learner": "ppo", "param_order": keys, "adam_steps": bool(extra)}

    def load_state(self, tensors: dict[str, Tensor], metadata: dict) -> None:
        keys = list(self.params)
        if metadata.get("param_order", keys) != keys:
            raise ValueError("the saved learner state lists its parameters in another order")
        with torch.no_grad():
            for k, v in self.params.items():
                v.copy_(tensors[k])
        self.obs_stats = {k: tensors["obs_norm/" + k].clone() for k in nz.KEYS}
        load_adam_state(self.optimizer, keys, tensors)


LearnerFactory = Callable[[P.PolicySpec, TrainConfig], Learner]
_LEARNERS: dict[str, LearnerFactory] = {"none": PPOLearner, "track": PPOLearner, "rl2": PPOLearner}
# Where a strategy's learner is looked up when it is not registered yet: importing the module must
# call register_learner(strategy, factory). The meta-learner plugs in here.
LEARNER_MODULES = {"meta": "sumo_cli.selfplay.meta_selfplay"}


def register_learner(strategy: str, factory: LearnerFactory) -> None:
    """Make ``sumo train --strategy <strategy>`` use ``factory(spec, cfg)`` as its learner. The
    learner gets an :class:`IterationContext` per iteration: its ``jobs`` are the shard plans (one
    opponent body, the iteration's opponent snapshots, schedule values) which it may run with its
    own parameters via ``ctx.collect`` or turn into its own :class:`SumoVecEnv` s."""
    _LEARNERS[strategy] = factory


def learner_factory(strategy: str) -> LearnerFactory | None:
    if strategy not in _LEARNERS and strategy in LEARNER_MODULES:
        import importlib

        try:
            importlib.import_module(LEARNER_MODULES[strategy])
        except ModuleNotFoundError:
            return None
    return _LEARNERS.get(strategy)


def policy_spec(cfg: TrainConfig) -> P.PolicySpec:
    b = body_spec(cfg.body)
    return P.PolicySpec(cfg.policy_arch, F.policy_dim(cfg.features, b.obs_size), b.n_actions, features=cfg.features)


# ---------------------------------------------------------------------------------------------
# the loop


class TrainStore(Protocol):
    """Where :func:`train` gets opponents and puts its results."""

    def pool(self) -> list[tuple[str, str, list[int]]]:
        """The opponent pool as (name, body, stored versions); the name ``self`` stands for the
        learner's own snapshots (version 0 = the initialisation)."""

    def load_opponent(self, name: str, version: int) -> OpponentPolicy: ...

    def save_iteration(self, k: int, learner: Learner, metrics: dict, snapshot: bool) -> None:
        """Persist iteration k: the version when ``snapshot``, the learner state, the metrics."""


class MemoryStore:
    """A :class:`TrainStore` in memory (tests, benchmarks): snapshots, learner states and metrics."""

    def __init__(self, body: str, opponents: dict[str, list[OpponentPolicy]] | None = None):
        self.body = body
        self.snapshots: dict[int, OpponentPolicy] = {}
        self.others = opponents or {}
        self.metrics: list[dict] = []
        self.states: dict[int, tuple] = {}

    def start(self, learner: Learner) -> None:
        self.snapshots[0] = snapshot_opponent(learner, self.body, "self@0")

    def pool(self):
        out = [(SELF, self.body, sorted(self.snapshots))] if self.snapshots else []
        return out + [(n, v[0].body, list(range(1, len(v) + 1))) for n, v in self.others.items()]

    def load_opponent(self, name: str, version: int) -> OpponentPolicy:
        return self.snapshots[version] if name == SELF else self.others[name][version - 1]

    def save_iteration(self, k, learner, metrics, snapshot) -> None:
        self.snapshots[k] = snapshot_opponent(learner, self.body, f"self@{k}")
        self.metrics.append(metrics)
        self.states[k] = learner.state()


def snapshot_opponent(learner: Learner, body: str, key: str) -> OpponentPolicy:
    params, stats = learner.policy()
    return OpponentPolicy(key, body, learner.spec.to_dict(), {k: v.numpy() for k, v in params.items()}, nz.to_numpy(stats))


@dataclass
class Progress:
    """What :func:`train` reports after every iteration."""

    k: int
    iterations: int
    env_steps: int
    wall_seconds: float  # this iteration
    steps_per_second: float  # this iteration, everything included
    metrics: dict


def iteration_env_steps(metrics: dict, steps_per_iteration: int) -> int:
    """Env steps iteration's ``metrics`` simulated: what its learner reported (a meta-iteration
    simulates several phases), else the configured batch."""
    return int(metrics.get("iteration_env_steps") or steps_per_iteration)


def finish_iteration(k: int, iterations: int, steps_per_iteration: int, snapshot_every: int, wall: float,
                     metrics: dict, save: Callable[[int, dict, bool], None],
                     on_iteration: Callable[[Progress], None] | None) -> Progress:
    """The end of iteration k, shared by the training loops: time the metrics (non-finite values
    stored as None), save (a snapshot every ``snapshot_every`` iterations and after the last),
    report."""
    steps = iteration_env_steps(metrics, steps_per_iteration)
    metrics["wall_seconds"] = wall
    metrics["steps_per_second"] = steps / wall
    metrics = {key: (None if isinstance(v, float) and not math.isfinite(v) else v) for key, v in metrics.items()}
    save(k, metrics, k % snapshot_every == 0 or k == iterations)
    total = int(metrics.get("env_steps_total") or k * steps_per_iteration)  # set by save() where it counts them
    prog = Progress(k, iterations, total, wall, steps / wall, metrics)
    if on_iteration is not None:
        on_iteration(prog)
    return prog


def plan_jobs(cfg: TrainConfig, k: int, pool: list[tuple[str, str, list[int]]], store: TrainStore) -> list[RolloutJob]:
    """The shard jobs of iteration k (parameters not filled in): layout, seeds, sampled opponents
    (loaded through ``store``), schedule values."""
    bodies = sorted({b for _, b, _ in pool})
    rng = np.random.default_rng(derive_seed(cfg.seed, k, _OPP_SEED))
    alpha = reward_alpha(k, cfg.anneal_iterations, cfg.anneal_start)
    p_still = motionless_prob(k, cfg)
    start = start_conditions(k, cfg)
    jobs = []
    for sh in shard_layout(cfg, bodies):
        mine = [(n, vs) for n, b, vs in pool if b == sh.opp_body]
        # a body that sags below the fall line unactuated (the Spider) is never a motionless opponent
        p_body = p_still if body_spec(sh.opp_body).stands_unactuated else 0.0
        draws = sample_opponents(rng, mine, k, cfg.opponent_samples, cfg.opponent_stride) if p_body < 1.0 else []
        opponents = [store.load_opponent(n, v) for n, v in draws]
        jobs.append(RolloutJob(
            shard=sh.index, env_seed=derive_seed(cfg.seed, k, _ENV_SEED, sh.index),
            policy_seed=derive_seed(cfg.seed, k, _POLICY_SEED, sh.index), body=cfg.body, opp_body=sh.opp_body,
            n_envs=sh.n_envs, num_steps=cfg.num_steps, physics=cfg.physics, spec={}, params={}, obs_stats={},
            opponents=opponents, motionless_prob=p_body, alpha=alpha, shaping=cfg.shaping(), start=start,
            episodes_per_opponent=cfg.interaction_episodes, bptt_len=cfg.ppo().bptt_len, reset_on="episode",
        ))
    return jobs


def iteration_metrics(ctx: IterationContext, stats: dict) -> dict:
    m = {"alpha": ctx.alpha, "motionless_prob": max(j.motionless_prob for j in ctx.jobs),
         "start_radius": ctx.jobs[0].start.radius or START_RADIUS}
    if ctx.jobs[0].start.face_opponent:
        m["face_error"] = ctx.jobs[0].start.face_error
    m.update(summarise(ctx.episodes))
    m.update({k: float(v) for k, v in stats.items() if isinstance(v, (int, float))})
    m["opponents"] = sorted({o.key for j in ctx.jobs for o in j.opponents})[:32]
    m.update(ctx.timing)
    return m


def evaluate_learner(learner: Learner, cfg: TrainConfig) -> dict:
    """Bouts against a motionless opponent of the learner's body under the faithful start
    conditions, rules and rewards (same seed every time, so iterations compare)."""
    params, stats = learner.policy()
    eps = evaluate(cfg.body, learner.spec, params, stats, OpponentPolicy.motionless(cfg.body), cfg.eval_bouts,
                   derive_seed(cfg.seed, 0, _EVAL_SEED), physics=cfg.physics)
    return {f"eval_{k}": v for k, v in summarise(eps).items()}


def train(
    cfg: TrainConfig,
    learner: Learner,
    store: TrainStore,
    executor,
    *,
    start: int = 0,
    on_iteration: Callable[[Progress], None] | None = None,
) -> list[Progress]:
    """Iterations ``start + 1 .. cfg.iterations``: plan (opponents, seeds, schedules), let the
    learner collect and update, evaluate if due, hand the iteration to ``store``, report. An
    interruption between iterations loses nothing; during one, that iteration only."""
    out = []
    with torch_threads(1):
        for k in range(start + 1, cfg.iterations + 1):
            t0 = time.perf_counter()
            pool = store.pool()
            jobs = plan_jobs(cfg, k, pool, store)
            ctx = IterationContext(k, cfg, jobs[0].alpha, jobs, executor, store=store)
            stats = learner.iterate(ctx)
            metrics = iteration_metrics(ctx, stats)
            if cfg.eval_every and (k % cfg.eval_every == 0 or k == cfg.iterations):
                te = time.perf_counter()
                metrics.update(evaluate_learner(learner, cfg))
                metrics["eval_seconds"] = time.perf_counter() - te
            out.append(finish_iteration(
                k, cfg.iterations, cfg.steps_per_iteration, cfg.snapshot_every, time.perf_counter() - t0, metrics,
                lambda k, m, snap: store.save_iteration(k, learner, m, snap), on_iteration))
    return out
