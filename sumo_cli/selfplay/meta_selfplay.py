"""The meta-learner in ``sumo train --strategy meta``: Algorithm 1 against a pool of opponents.

Importing this module registers the learner ``"meta"`` with :func:`selfplay.register_learner`.

**An iteration** (one meta-update, :func:`sumo_cli.meta.meta_train.meta_iteration`):

1. draw ``G`` task pairs: per task an opponent agent uniformly from the pool (one opponent body per
   iteration, drawn uniformly when the pool has several) and a version ``v`` uniformly among its
   stored versions that have a successor ``v + 1`` (versions >= 1 when there are such pairs; an
   agent with one version gives the pair ``(v, v)``; ``self`` in the pool: own snapshots
   ``0 .. k-1``). ``T_i`` = play version ``v``,
   ``T_{i+1}`` = play version ``v + 1`` (method notes: consecutive versions of one opponent);
2. collect ``tau_theta``: ``num_steps`` steps of ``n_envs`` bout slots, slots
   ``g*E .. g*E+E-1`` (``E = n_envs / G``) against task g's version ``v`` (all acting with theta);
3. ``phi_g = adapt(theta, alpha, tau_theta_g)`` (``MetaConfig.num_steps`` = 3 inner steps);
4. collect ``tau_phi``: ``num_steps`` steps of the same slots, group g acting with ``phi_g``
   against version ``v + 1``;
5. :meth:`MetaLearner.update`: outer PPO epochs through the adaptation (``create_graph``) plus the
   score-function term of the pre-update trajectories; tasks are batched along the agent dim.

The normaliser's statistics are frozen during the iteration and updated afterwards with both
collections' observations.

**Sizes** (TrainConfig fields, CLI options): ``G = opponent_samples`` tasks (``--opponent-samples``,
lowered to the largest divisor of ``n_envs``), ``n_envs`` slots (``--envs``) x ``num_steps``
(``--steps``) per phase, so ``2 * n_envs * num_steps`` env steps per iteration (defaults 8 tasks,
8 x 512 per phase = 8,192 env steps); outer epochs = ``min(epochs, 4)`` (``--epochs``), lr =
``--lr`` for theta; everything else (the inner loss, the step sizes and their learning rate) is
the meta-learner's default configuration (:class:`meta.MetaConfig`). The inner/outer losses see the
training reward unscaled (``reward_scale`` is not applied), as the execution-time adaptation in games
sees its rewards unscaled too. Games adapt on the faithful reward (dense + sparse), not on the run's
shaped mix, and (recurrent nets) with full backpropagation through the bout; computed the training's
way, a kickstarted Ant's update gave back 7 of the 44 points it cost against a motionless body and
nothing against a learning one (docs/lab-record.md, the population's meta-learners), so games keep
their rule. Recurrent nets: truncated BPTT in windows of 10 steps; the recurrent state is zeroed at
each bout start (collect_stacked), not kept across the bouts against one opponent version. The paper
says both: Sec. 5.2 retains the LSTM states over the interaction with one opponent version, its
appendix on architectures resets them at every episode (only RL^2 keeping its state). This follows
the appendix, as games do (every bout of a round starts from a zero state; RL^2 carries on).

Everything an iteration draws is seeded from (seed, iteration), and the learner state (theta,
log alpha, both Adam states, normaliser) is saved as safetensors + JSON, so resume is exact.
Versions carry the learned step sizes under ``meta/log_alpha`` (:data:`meta_execution.LOG_ALPHA_KEY`).
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np
import torch
from torch import Tensor

from sumo_cli import meta as ML
from sumo_cli.selfplay import selfplay as SP
from sumo_cli.adapt.meta_execution import LOG_ALPHA_KEY
from sumo_cli.meta.meta_train import collect_stacked, distillation, episode_returns, finite_mean, meta_iteration
from sumo_cli.ppo import kickstart as KS
from sumo_cli.ppo.kickstart import Teacher
from sumo_cli.ppo.ppo import make_params
from sumo_cli.ppo.rollout import Rollout
from sumo_cli.selfplay.sumo_vec import OpponentPolicy, SumoVecEnv
from sumo_cli.sim.sumo_env import A_WINS
from sumo_cli.nets import normalizer as nz
from sumo_cli.nets import policy as P

_TASK_SEED, _PAIR_ENV_SEED, _META_SEED, _HELDOUT_SEED = 11, 12, 13, 14
MAX_OUTER_EPOCHS = 4
#: The first and every ``TrainConfig.heldout_every``-th iteration theta (as it was before the update) also plays one phase against
#: the post-adaptation opponents (versions v + 1): the stored metrics then hold, on the same held-out
#: versions, the return after adaptation (phi) and without it (theta), and the gain task by task
#: with its 95% interval. With two or more tasks a second phase is the control for what the update
#: learnt about its own opponent: task g's opponent is played by the phi adapted on task g - 1's
#: (drawn independently, so as a rule another version), on the same bout starts as theta; adapted minus that "crossed" return is the
#: opponent-specific part of the gain, crossed minus theta's the part any update brings. One or two
#: more phases of env steps on those iterations (2.5-5% of all at 4 phases, measuring every 10th).
#: 97.5% quantiles of Student's t by degrees of freedom (the interval over the tasks of one
#: iteration; 8 tasks by default); more than 30: 2.0.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def measures_heldout(k: int, every: int) -> bool:
    """Whether iteration k measures the return on the held-out versions (the first and every
    ``every``-th)."""
    return k == 1 or k % every == 0


def t_half_width(x: np.ndarray) -> float:
    """Half-width of the 95% t-interval of the mean of ``x`` (NaNs left out; NaN below 2 values)."""
    x = x[np.isfinite(x)]
    if len(x) < 2:
        return float("nan")
    q = _T975[len(x) - 2] if len(x) - 1 <= len(_T975) else 2.0
    return float(q * x.std(ddof=1) / np.sqrt(len(x)))


def heldout_summary(metrics: list[dict]) -> dict | None:
    """The held-out measurements of a meta run in one line's worth of numbers: how many there are
    (``n``), the mean gain over them with its 95% t-interval (each measurement a fresh draw of tasks
    and bouts, taken as independent: the interval of the run's average gain, theta changing between
    them), how many have their own interval entirely above 0 (``above``) or below it (``below``), and
    the learnt step sizes' geometric means (``meta_alpha_<m>``) at the first and the last iteration;
    under ``specific`` the same numbers for the opponent-specific part of the gain (adapted minus
    crossed, see measures_heldout) and under ``won`` for the gain in the share of bouts won, each over
    the measurements that have it, or None.
    ``metrics``: the iterations' metric dicts in order. None when no iteration measured."""
    gain = _spread(metrics, "heldout_gain")
    if gain is None:
        return None
    alphas = sorted((k for k in metrics[0] if k.startswith("meta_alpha_")), key=lambda k: int(k.rsplit("_", 1)[1]))
    return {**gain, "specific": _spread(metrics, "heldout_specific_gain"), "won": _spread(metrics, "heldout_won_gain"),
            "alpha_first": [float(metrics[0][k]) for k in alphas],
            "alpha_last": [float(metrics[-1].get(k, math.nan)) for k in alphas]}


def _spread(metrics: list[dict], key: str) -> dict | None:
    """n, mean, t half-width, and how many intervals lie above/below 0, of the finite ``key`` values
    (their intervals under ``key + "_ci95"``)."""
    rows = [m for m in metrics if isinstance(m.get(key), (int, float)) and math.isfinite(m[key])]
    if not rows:
        return None
    x = np.array([m[key] for m in rows])
    ci = np.array([m.get(key + "_ci95", math.nan) for m in rows], dtype=float)
    return {"n": len(rows), "mean": float(x.mean()), "ci95": t_half_width(x),
            "above": int(np.sum(x - ci > 0)), "below": int(np.sum(x + ci < 0))}


class PairSumoEnv(SumoVecEnv):
    """A :class:`~sumo_cli.meta.meta_train.TaskChainEnv` of ``G`` groups of ``E`` bout slots:
    group g plays ``pairs[g][0]`` after :meth:`sample_tasks` and ``pairs[g][1]`` after
    :meth:`next_task`. The episodes of both phases are kept in :attr:`all_episodes`."""

    def __init__(self, body: str, opp_body: str, pairs: list[tuple[OpponentPolicy, OpponentPolicy]],
                 group_size: int, **kw):
        self.num_groups, self.group_size = len(pairs), int(group_size)
        self.phase = 0
        opps = [a for a, _ in pairs] + [b for _, b in pairs]
        super().__init__(body, opp_body, self.num_groups * self.group_size, opps, motionless_prob=0.0,
                         episodes_per_opponent=1, **kw)
        self.all_episodes: list = []
        self.second_phase_from = 0  # index in all_episodes where phase 1's episodes start
        self._seed = 0

    def _draw(self, cols: np.ndarray) -> None:
        super()._draw(cols)
        for c in cols:
            self.assign[c] = self.phase * self.num_groups + int(c) // self.group_size
        self._groups = None

    def sample_tasks(self, seed: int | None = None) -> np.ndarray:
        self.phase, self._seed = 0, int(seed or 0)
        self.all_episodes = []
        return self.reset(self._seed)

    def next_task(self) -> np.ndarray:
        self.all_episodes.extend(self.episodes)
        self.second_phase_from = len(self.all_episodes)
        self.phase = 1
        return self.reset(SP.derive_seed(self._seed, 1))

    def win_shares(self, episodes: list) -> np.ndarray:
        """Per task (group), the share of ``episodes`` (bouts it finished) the learner won; NaN for a
        task that finished none."""
        won, n = np.zeros(self.num_groups), np.zeros(self.num_groups)
        for e in episodes:
            g = e.column // self.group_size
            n[g] += 1
            won[g] += e.outcome == A_WINS
        with np.errstate(invalid="ignore"):
            return won / n

    def finish(self) -> list:
        self.all_episodes.extend(self.episodes)
        self.episodes = []
        return self.all_episodes


def num_tasks(cfg: SP.TrainConfig) -> int:
    """G: ``opponent_samples`` lowered to the largest divisor of ``n_envs``."""
    g = max(1, min(cfg.opponent_samples, cfg.n_envs))
    while cfg.n_envs % g:
        g -= 1
    return g


def meta_config(spec: P.PolicySpec, cfg: SP.TrainConfig) -> ML.MetaConfig:
    ppo = cfg.ppo()
    return ML.MetaConfig(lr=cfg.lr, alpha_init=cfg.alpha_init, gamma=ppo.gamma, lam=ppo.gae_lambda, ent_coef=cfg.ent_coef,
                         inner_data=cfg.meta_inner, outer_steps="post" if cfg.meta_inner == "fresh" else "last",
                         outer_epochs=max(1, min(cfg.epochs, MAX_OUTER_EPOCHS)),
                         bptt_chunk=ppo.bptt_len if spec.recurrent else None)


def is_head(key: str) -> bool:
    """The tensors of the output layers (policy mean, value) and the action log std."""
    return key == "logstd" or key.endswith("out/w") or key.endswith("out/b")


def body_log_alpha(log_alpha: Tensor, keys: list[str], alpha_body: float) -> Tensor:
    """``log_alpha`` (M, n_tensors) with the columns of the tensors below the heads set to log(alpha_body)."""
    if log_alpha.dim() != 2 or log_alpha.shape[1] != len(keys):
        raise ValueError("a step size for the tensors below the heads needs one step size per tensor (alpha_per='tensor')")
    out = log_alpha.clone()
    for i, key in enumerate(keys):
        if not is_head(key):
            out[:, i] = math.log(alpha_body)
    return out


def version_pairs(stored: list[int], k: int, self_play: bool) -> list[tuple[int, int]]:
    """(v, v+1) pairs among an opponent's versions, versions >= 1 preferred; an opponent with no
    such pair: (v, v) for each version. A stored (pre-trained) agent offers all its stored versions
    from the first iteration (not capped at k as in PPO's curriculum); the own snapshots
    (``self``) those that exist at iteration k (0 .. k-1)."""
    vs = SP.eligible_versions(stored, k, True) if self_play else sorted(set(int(v) for v in stored))
    have = set(vs)
    pairs = [(v, v + 1) for v in vs if v + 1 in have]
    return [p for p in pairs if p[0] >= 1] or pairs or [(v, v) for v in vs]


def sample_pairs(rng: np.random.Generator, pool: list[tuple[str, str, list[int]]], k: int, n: int
                 ) -> tuple[str, list[tuple[str, int, int]]]:
    """One opponent body, then n i.i.d. (agent, v, v') task pairs of it."""
    bodies = sorted({b for _, b, _ in pool})
    body = bodies[int(rng.integers(len(bodies)))]
    mine = [(name, vs) for name, b, vs in pool if b == body]
    out = []
    for _ in range(n):
        name, stored = mine[int(rng.integers(len(mine)))]
        pairs = version_pairs(stored, k, name == SP.SELF)
        v, w = pairs[int(rng.integers(len(pairs)))]
        out.append((name, v, w))
    return body, out


class MetaSelfPlayLearner:
    """theta, log alpha (:class:`meta.MetaLearner`) and the observation normaliser behind
    :class:`selfplay.Learner`."""

    def __init__(self, spec: P.PolicySpec, cfg: SP.TrainConfig):
        if spec.arch == "rl2":
            raise ValueError("the meta-learner trains MLP or LSTM policies, not RL^2")
        self.spec, self.cfg = spec, cfg
        self.meta_cfg = meta_config(spec, cfg)
        theta = make_params(spec, torch.Generator().manual_seed(SP.derive_seed(cfg.seed, 0, 0)))
        with torch.no_grad():
            theta["logstd"].fill_(cfg.init_logstd)
        self.learner = ML.MetaLearner(spec, {k: v.detach() for k, v in theta.items()}, self.meta_cfg)
        if cfg.alpha_init_body is not None:
            with torch.no_grad():
                self.learner.log_alpha.copy_(body_log_alpha(self.learner.log_alpha, list(theta), cfg.alpha_init_body))
        self.obs_stats = nz.new_stats(spec.obs_dim)
        self.teacher: Teacher | None = None  # set by the trainer when the run names one (cfg.teacher)

    # ------------------------------------------------------------------ one iteration
    def iterate(self, ctx: SP.IterationContext) -> dict:
        if ctx.store is None:
            raise ValueError("the meta-learner needs the run's store in the iteration context")
        cfg, k = self.cfg, ctx.k
        t0 = time.perf_counter()
        G = num_tasks(cfg)
        rng = np.random.default_rng(SP.derive_seed(cfg.seed, k, _TASK_SEED))
        body, draws = sample_pairs(rng, ctx.store.pool(), k, G)
        pairs = [(ctx.store.load_opponent(n, v), ctx.store.load_opponent(n, w)) for n, v, w in draws]
        job = ctx.jobs[0]
        env = PairSumoEnv(cfg.body, body, pairs, cfg.n_envs // G, physics=cfg.physics, shaping=cfg.shaping(),
                          alpha=ctx.alpha, start=job.start, features=cfg.features)
        gen = torch.Generator().manual_seed(SP.derive_seed(cfg.seed, k, _META_SEED))
        stats = {key: v.clone() for key, v in nz.to_torch(self.obs_stats).items()}
        heldout: dict = {}
        measures = measures_heldout(k, cfg.heldout_every)
        if measures:  # theta as phi was adapted from, before the update changes it
            theta_before = {key: v.detach().clone() for key, v in self.learner.params()[0].items()}
        try:
            info, rollouts = meta_iteration(env, self.spec, self.learner, stats, cfg.num_steps, cfg.num_steps,
                                            SP.derive_seed(cfg.seed, k, _PAIR_ENV_SEED), gen, keep_phi=measures)
            episodes = env.finish()
            phi = info.pop("phi", None)
            if measures:
                heldout = self._heldout(env, theta_before, phi, stats, rollouts[-1], k)
        finally:
            env.close()
        coef = KS.coefficient(k, cfg.teacher_coef, cfg.teacher_iterations) if self.teacher else 0.0
        if coef > 0:  # kickstarting: theta imitates the teacher on its own bouts of the iteration
            t1 = time.perf_counter()
            ro = rollouts[0]
            loss_of = distillation(self.spec, stats, self.teacher.means(ro), self.teacher.logstd, coef, ro)
            info["distill_kl"] = self.learner.distill(loss_of, ro.num_envs, cfg.epochs, cfg.num_minibatches, gen) / coef
            info["distill_coef"] = coef
            info["update_s"] += time.perf_counter() - t1
        for ro in rollouts:
            self.obs_stats = nz.update(self.obs_stats, ro.obs.to(torch.float64))
        ctx.episodes.extend(episodes)
        # the metrics list the opponents actually played
        ctx.jobs = [dataclasses.replace(job, opponents=[o for p in pairs for o in p], motionless_prob=0.0)]
        ctx.timing["rollout_seconds"] = info.pop("collect_s")
        ctx.timing["update_seconds"] = info.pop("update_s")
        phases = self.meta_cfg.phases + ("heldout_gain" in heldout) + ("heldout_specific_gain" in heldout)
        ctx.timing["iteration_env_steps"] = phases * cfg.n_envs * cfg.num_steps
        alphas = info.pop("alpha")
        out = {key: float(v) for key, v in info.items() if isinstance(v, (int, float))}
        out.update(heldout)
        out.update(ML.alpha_metrics(alphas))
        out["meta_tasks"] = G
        out["meta_seconds"] = time.perf_counter() - t0
        return out

    def _heldout(self, env: PairSumoEnv, theta: P.Params, phi: P.Params | None, stats: dict, adapted: Rollout,
                 k: int) -> dict:
        """theta against the versions phi played (``env`` is in its second phase), for one phase, then
        (``phi`` given, two or more tasks) each task's opponent against the phi adapted on the task
        before it, on the same bout starts; neither phase's episodes are training data. Returns mean
        returns per episode (adapted, unadapted, crossed), and the gain over the tasks and its
        opponent-specific part (mean and 95% half-width each)."""
        G = env.num_groups
        seed = SP.derive_seed(self.cfg.seed, k, _HELDOUT_SEED)
        theta_g = {key: v.contiguous() for key, v in ML.expand_params(self.learner.model, theta, (G,)).items()}
        with_phi = episode_returns(adapted, G)
        won_phi = env.win_shares(env.all_episodes[env.second_phase_from:])
        with_theta, won_theta = self._play(env, theta_g, stats, seed)
        gain, won_gain = with_phi - with_theta, won_phi - won_theta
        out = {"heldout_return_adapted": finite_mean(with_phi),
               "heldout_return_unadapted": finite_mean(with_theta),
               "heldout_gain": finite_mean(gain), "heldout_gain_ci95": t_half_width(gain),
               # the games' measure: the share of bouts won, adapted and not
               "heldout_won_adapted": finite_mean(won_phi), "heldout_won_unadapted": finite_mean(won_theta),
               "heldout_won_gain": finite_mean(won_gain), "heldout_won_gain_ci95": t_half_width(won_gain)}
        if phi is not None and G >= 2:
            crossed_phi = {key: torch.roll(v, 1, dims=0).contiguous() for key, v in phi.items()}
            with_crossed, _ = self._play(env, crossed_phi, stats, seed)
            specific = with_phi - with_crossed
            out.update(heldout_return_crossed=finite_mean(with_crossed),
                       heldout_specific_gain=finite_mean(specific),
                       heldout_specific_gain_ci95=t_half_width(specific))
        return out

    def _play(self, env: PairSumoEnv, params: P.Params, stats: dict, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """One phase of ``params`` (one row per task) from the bout starts of ``seed``; per task the
        mean return of its finished episodes and the share of them won, not kept as training data."""
        ro, _ = collect_stacked(env, self.spec, params, stats, env.reset(seed), self.cfg.num_steps,
                                torch.Generator().manual_seed(seed))
        won = env.win_shares(env.episodes)
        env.episodes = []
        return episode_returns(ro, env.num_groups), won

    # ------------------------------------------------------------------ Learner protocol
    def policy(self) -> tuple[P.Params, dict]:
        theta, _ = self.learner.params()
        return {k: v.detach().clone() for k, v in theta.items()}, dict(self.obs_stats)

    def snapshot_extras(self) -> dict[str, Tensor]:
        return {LOG_ALPHA_KEY: self.learner.log_alpha.detach().clone()}

    def _opt_params(self) -> list[tuple[str, Tensor]]:
        return [*self.learner.theta.items(), (LOG_ALPHA_KEY, self.learner.log_alpha)]

    def state(self) -> tuple[dict[str, Tensor], dict]:
        from sumo_cli.nets.checkpoint import checkpoint_tensors

        keys = [k for k, _ in self._opt_params()]
        extra = {**self.snapshot_extras(), **SP.adam_state_tensors(self.learner.opt, keys)}
        theta, stats = self.policy()
        tensors = checkpoint_tensors(theta, stats, extra)
        meta = {"learner": "meta", "param_order": keys, "ema_return": self.learner.ema_return,
                "theta_lr": self.learner.lr, "meta_config": dataclasses.asdict(self.meta_cfg)}
        return tensors, meta

    def load_state(self, tensors: dict[str, Tensor], metadata: dict) -> None:
        keys = [k for k, _ in self._opt_params()]
        if metadata.get("param_order", keys) != keys:
            raise ValueError("the saved learner state lists its parameters in another order")
        with torch.no_grad():
            for k, v in self.learner.theta.items():
                v.copy_(tensors[k])
            self.learner.log_alpha.copy_(tensors[LOG_ALPHA_KEY])
        self.obs_stats = {k: tensors["obs_norm/" + k].clone() for k in nz.KEYS}
        self.learner.ema_return = metadata.get("ema_return")
        self.learner.lr = metadata.get("theta_lr", self.meta_cfg.lr)
        SP.load_adam_state(self.learner.opt, keys, tensors)


SP.register_learner("meta", MetaSelfPlayLearner)
