"""Training for nonstationary locomotion (paper Sec. 4.1 / 5.1): the learners behind
``sumo train --env locomotion``, on the 12 training leg pairs at once.

Read top to bottom:

1. :class:`LocoConfig`: every knob of a locomotion training run (stored with the run; resume reuses it).
2. :class:`LocoPPOLearner` (strategies ``none``, ``track``, ``rl2``): :class:`selfplay.PPOLearner`
   (parameters, Adam, normaliser, exact state save/load) fed by :class:`LocoContext`, which
   collects whole 7-episode sequences on a :class:`~sumo_cli.sim.locomotion.LocomotionEnv`.
3. :class:`LocoMetaLearner` (strategy ``meta``): Algorithm 1 (:func:`meta_train.meta_iteration`) on a
   :class:`~sumo_cli.meta.locomotion_tasks.LocomotionChain`, with the state handling of
   :class:`meta_selfplay.MetaSelfPlayLearner`.
4. :func:`train`: the (short) loop; storage goes through a ``save_iteration(k, learner, metrics,
   snapshot)`` callable (the database version is :mod:`sumo_cli.runs.locomotion_training`).

**A PPO iteration**: ``n_envs`` envs (env n on training pair ``n mod 12``; the default 12 covers each
pair once), each playing ``sequences`` whole 7-episode sequences of ``horizon`` steps (torque factor
1, 5/6, ..., 0 on its pair), from a reset seeded with (seed, iteration). The LSTM (and RL^2) state is
kept over the 7 episodes of a sequence and zeroed only when a new sequence starts (``reset_on =
"task"``); RL^2 also sees the previous reward and done flag, and its return runs over the whole
sequence (PPOConfig.rl2_trial_returns). ``none`` and ``track`` train identically (tracking is an
execution-time strategy: one PPO step per episode at evaluation).

**A meta iteration**: ``n_envs`` task pairs (T_i, T_{i+1}) = (episode k, episode k + 1) of a training
pair's sequence, pair and k uniform; each task is played by ``meta_episodes`` envs (default 3 = the
paper's 3-episode execution-time buffer), one episode each in T_i, then one each in T_{i+1} with the
adapted parameters. MetaConfig = the meta-learner's defaults (:class:`meta.MetaConfig`) with
``buffer_episodes`` = 3.

Everything an iteration draws is seeded from (seed, iteration), so resuming after iteration k is
exact: no simulator state needs saving.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from sumo_cli import meta as ML
from sumo_cli.names import ARCHS, STRATEGIES
from sumo_cli.selfplay import selfplay as SP
from sumo_cli.ppo.rollout import Rollout
from sumo_cli.nets import normalizer as nz
from sumo_cli.nets import policy as P
from sumo_cli.runtime.threads import torch_threads
from sumo_cli.sim import locomotion as L

_ENV_SEED, _POLICY_SEED, _TASK_SEED, _META_SEED = 21, 22, 23, 24


@dataclass
class LocoConfig(SP.StoredConfig):
    """Everything that determines a locomotion training run."""

    arch: str = "mlp"  # mlp | lstm (rl2 is always an lstm)
    strategy: str = "none"  # none | track | rl2 | meta
    iterations: int = 100
    seed: int = 0
    physics: str = "fast"  # fast (implicitfast) | faithful (RK4)
    horizon: int = L.HORIZON  # env steps per episode (100 = 5 s)
    n_envs: int = 12  # PPO: envs (one training pair each, round-robin); meta: task pairs per iteration
    sequences: int = 1  # PPO: whole 7-episode sequences per env per iteration
    meta_episodes: int = ML.LOCOMOTION_BUFFER_EPISODES  # meta: envs (episodes) per task and phase
    hidden: int = 64  # units per hidden layer (MLP: two layers; LSTM: one fc + one LSTM layer)
    lr: float | None = None  # Adam learning rate (None: 3e-4 for PPO, the paper's; 1e-3 for meta)
    init_logstd: float = 0.0
    epochs: int = 4  # PPO epochs per iteration (meta: outer epochs, at most 4)
    num_minibatches: int = 4
    ent_coef: float = 0.0
    reward_scale: float = 1.0  # episode returns are O(100): no scaling needed
    snapshot_every: int = 1  # store a version every this many iterations (and after the last)

    @property
    def policy_arch(self) -> str:
        return "rl2" if self.strategy == "rl2" else self.arch

    @property
    def steps_per_env(self) -> int:
        """PPO: steps per env per iteration (whole sequences)."""
        return self.sequences * L.SEQUENCE_LEN * self.horizon

    @property
    def steps_per_iteration(self) -> int:
        if self.strategy == "meta":
            return self.meta_config(self.spec()).phases * self.n_envs * self.meta_episodes * self.horizon
        return self.n_envs * self.steps_per_env

    def check(self) -> list[str]:
        bad = []
        if self.arch not in ARCHS:
            bad.append(f"unknown arch {self.arch!r}; choose mlp or lstm")
        if self.strategy not in STRATEGIES:
            bad.append(f"unknown strategy {self.strategy!r}; choose one of {', '.join(STRATEGIES)}")
        if self.strategy == "rl2" and self.arch != "lstm":
            bad.append("rl2 is a recurrent policy: use --arch lstm (or leave --arch out)")
        for name in ("iterations", "horizon", "n_envs", "sequences", "meta_episodes", "hidden", "epochs",
                     "num_minibatches", "snapshot_every"):
            if getattr(self, name) < 1:
                bad.append(f"{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.physics not in L.PHYSICS_MODES:
            bad.append(f"physics must be fast or faithful, got {self.physics!r}")
        if (self.lr is not None and self.lr <= 0) or self.reward_scale <= 0:
            bad.append("lr and reward-scale must be positive")
        return bad

    def spec(self) -> P.PolicySpec:
        b = L.body_spec(L.BODY)
        return P.PolicySpec(self.policy_arch, b.nq + b.nv, b.n_actions, hidden=self.hidden)

    def train_config(self) -> SP.TrainConfig:
        """The sumo TrainConfig that :class:`selfplay.PPOLearner` reads (PPO fields only)."""
        return SP.TrainConfig(body=L.BODY, arch=self.arch, strategy=self.strategy, iterations=self.iterations,
                              seed=self.seed, physics=self.physics, n_envs=self.n_envs,
                              num_steps=self.steps_per_env, rollout_shards=1, lr=self.lr or 3e-4,
                              init_logstd=self.init_logstd, epochs=self.epochs,
                              num_minibatches=self.num_minibatches, ent_coef=self.ent_coef,
                              reward_scale=self.reward_scale)

    def meta_config(self, spec: P.PolicySpec) -> ML.MetaConfig:
        kw = dict(buffer_episodes=self.meta_episodes, outer_epochs=min(self.epochs, 4), ent_coef=self.ent_coef,
                  bptt_chunk=10 if spec.recurrent else None)
        if self.lr is not None:
            kw["lr"] = self.lr
        return ML.MetaConfig(**kw)

    def ppo_config(self):  # noqa: ANN201 - ppo.PPOConfig, the one tracking uses at execution time too
        return self.train_config().ppo()


def episode_index_returns(rollout: Rollout, horizon: int) -> np.ndarray:
    """Mean undiscounted return of episode 1..7 of the sequences in a rollout that starts at a
    sequence start and holds whole sequences: shape (7,)."""
    r = rollout.rewards.double().numpy()  # (T, N)
    T, N = r.shape
    seq = T // (L.SEQUENCE_LEN * horizon)
    return r.reshape(seq, L.SEQUENCE_LEN, horizon, N).sum(axis=2).mean(axis=(0, 2))


# ---------------------------------------------------------------------------------------------
# PPO (none, track, rl2)


class LocoContext:
    """What :meth:`selfplay.PPOLearner.iterate` needs of an iteration (``k``, ``timing``,
    ``collect``), over a locomotion env."""

    def __init__(self, k: int, cfg: LocoConfig, env: L.LocomotionEnv):
        self.k, self.cfg, self.env = k, cfg, env
        self.timing: dict = {}
        self.episode_returns: list[float] = []
        self.by_episode: np.ndarray | None = None

    def collect(self, spec: P.PolicySpec, params: P.Params, obs_stats: dict, reset_on: str) -> Rollout:
        from sumo_cli.ppo.collect import collect, new_carry

        cfg, k = self.cfg, self.k
        t0 = time.perf_counter()
        carry = new_carry(self.env, spec, seed=SP.derive_seed(cfg.seed, k, _ENV_SEED))
        gen = torch.Generator().manual_seed(SP.derive_seed(cfg.seed, k, _POLICY_SEED))
        rollout, carry = collect(self.env, spec, params, dict(obs_stats), cfg.steps_per_env, carry, gen,
                                 update_norm=False, chunk_len=cfg.ppo_config().bptt_len, reset_on=reset_on)
        self.episode_returns = list(carry.finished_returns)
        self.by_episode = episode_index_returns(rollout, cfg.horizon)
        self.timing["rollout_seconds"] = time.perf_counter() - t0
        return rollout


class LocoPPOLearner(SP.PPOLearner):
    """PPO on whole 7-episode sequences; recurrent state kept over a sequence."""

    def __init__(self, spec: P.PolicySpec, cfg: LocoConfig, n_threads: int | None = 1):
        super().__init__(spec, cfg.train_config())
        self.loco = cfg
        self.reset_on = "task"  # lstm and rl2: zeroed only when a new sequence starts
        self.n_threads = n_threads
        self.env: L.LocomotionEnv | None = None

    def iterate_k(self, k: int) -> dict:
        if self.env is None:
            self.env = L.LocomotionEnv(self.loco.n_envs, L.TRAIN_PAIRS, horizon=self.loco.horizon,
                                       physics=self.loco.physics, seed=self.loco.seed, n_threads=self.n_threads)
        ctx = LocoContext(k, self.loco, self.env)
        stats = self.iterate(ctx)
        rets = ctx.episode_returns
        out = {key: float(v) for key, v in stats.items() if isinstance(v, (int, float))}
        out.update(ctx.timing)
        out["episodes"] = len(rets)
        out["mean_return"] = float(np.mean(rets)) if rets else None
        for i, v in enumerate(ctx.by_episode, start=1):
            out[f"return_ep{i}"] = float(v)
        return out

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None


# ---------------------------------------------------------------------------------------------
# meta (Algorithm 1)


def _meta_base():
    from sumo_cli.selfplay import meta_selfplay as MS

    return MS.MetaSelfPlayLearner


class LocoMetaLearner(_meta_base()):
    """theta, log alpha and the normaliser (state save/load as the sumo meta-learner), trained by
    Algorithm 1 on consecutive episodes of the training pairs' sequences."""

    def __init__(self, spec: P.PolicySpec, cfg: LocoConfig, n_threads: int | None = 1):
        from sumo_cli.ppo.ppo import make_params

        if spec.arch == "rl2":
            raise ValueError("the meta-learner trains MLP or LSTM policies, not RL^2")
        self.spec, self.loco = spec, cfg
        self.meta_cfg = cfg.meta_config(spec)
        theta = make_params(spec, torch.Generator().manual_seed(SP.derive_seed(cfg.seed, 0, 0)))
        with torch.no_grad():
            theta["logstd"].fill_(cfg.init_logstd)
        self.learner = ML.MetaLearner(spec, {k: v.detach() for k, v in theta.items()}, self.meta_cfg)
        self.obs_stats = nz.new_stats(spec.obs_dim)
        self.n_threads = n_threads
        self.env = None

    def iterate_k(self, k: int) -> dict:
        from sumo_cli.meta.locomotion_tasks import LocomotionChain
        from sumo_cli.meta.meta_train import meta_iteration

        cfg = self.loco
        if self.env is None:
            self.env = LocomotionChain(cfg.n_envs, cfg.meta_episodes, L.TRAIN_PAIRS, horizon=cfg.horizon,
                                       physics=cfg.physics, seed=cfg.seed, n_threads=self.n_threads)
        gen = torch.Generator().manual_seed(SP.derive_seed(cfg.seed, k, _META_SEED))
        stats = {key: v.clone() for key, v in nz.to_torch(self.obs_stats).items()}
        info, rollouts = meta_iteration(self.env, self.spec, self.learner, stats, cfg.horizon, cfg.horizon,
                                        SP.derive_seed(cfg.seed, k, _TASK_SEED), gen)
        for ro in rollouts:
            self.obs_stats = nz.update(self.obs_stats, ro.obs.to(torch.float64))
        alphas = info.pop("alpha")
        out = {key: float(v) for key, v in info.items() if isinstance(v, (int, float))}
        out["rollout_seconds"] = out.pop("collect_s")
        out["update_seconds"] = out.pop("update_s")
        out["mean_return"] = out["pre_return"]
        out["episodes"] = self.meta_cfg.phases * cfg.n_envs * cfg.meta_episodes
        out.update(ML.alpha_metrics(alphas))
        return out

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None


def make_learner(cfg: LocoConfig, n_threads: int | None = 1):  # noqa: ANN201 - LocoPPOLearner | LocoMetaLearner
    spec = cfg.spec()
    return LocoMetaLearner(spec, cfg, n_threads) if cfg.strategy == "meta" else LocoPPOLearner(spec, cfg, n_threads)


def snapshot_metadata(cfg: LocoConfig, learner) -> dict:  # noqa: ANN001
    """What evaluation needs beside the tensors: the env settings and the strategy's configs."""
    meta = {"env": "locomotion", "horizon": cfg.horizon, "physics": cfg.physics,
            "ppo_config": cfg.ppo_config().to_dict()}
    if cfg.strategy == "meta":
        meta["meta_config"] = dataclasses.asdict(learner.meta_cfg)
    return meta


def train(cfg: LocoConfig, learner, save_iteration: Callable[[int, object, dict, bool], None], *, start: int = 0,
          on_iteration: Callable[[SP.Progress], None] | None = None) -> list[SP.Progress]:
    """Iterations ``start + 1 .. cfg.iterations``: update, hand the iteration to ``save_iteration``,
    report. An interruption between iterations loses nothing; during one, that iteration only."""
    out = []
    try:
        with torch_threads(1):
            for k in range(start + 1, cfg.iterations + 1):
                t0 = time.perf_counter()
                metrics = learner.iterate_k(k)
                out.append(SP.finish_iteration(
                    k, cfg.iterations, cfg.steps_per_iteration, cfg.snapshot_every, time.perf_counter() - t0,
                    metrics, lambda k, m, snap: save_iteration(k, learner, m, snap), on_iteration))
    finally:
        learner.close()
    return out
