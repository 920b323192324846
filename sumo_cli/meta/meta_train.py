"""Meta-training (Algorithm 1) over a VecEnv whose task changes between phases. Playing a task chain
with a strategy (Algorithm 2 and the baselines) is :mod:`sumo_cli.adapt.chains`.

The environment contract (:class:`TaskChainEnv`): a :class:`~sumo_cli.sim.vec_env.VecEnv` whose
envs form ``num_groups`` groups of ``group_size`` consecutive envs; every group follows its own
chain of tasks ``T_1, T_2, ...``; ``sample_tasks(seed)`` draws new chains (all groups at their
``T_1``), ``next_task()`` moves every group from ``T_i`` to ``T_{i+1}``; both reset all envs and
return the first observations. A group is one task pair of Algorithm 1 (one opponent in RoboSumo:
meta-updates are per opponent), and the groups of a meta-iteration are batched: ``theta`` is
broadcast over them and the adapted ``phi`` has a leading group dim.

Training chains (``MetaConfig.train_rounds > 2``, :func:`chain_iteration`): every group plays
several consecutive tasks per iteration the way Algorithm 2 plays them, so that the inner batches of
later pairs are collected by adapted policies, as at execution.

Observation normalisation: the running statistics are frozen for a whole meta-iteration (the
pre-update collection, the post-adaptation collection and the update use the same statistics, so
the first outer epoch sees importance ratio 1) and updated afterwards.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np
import torch
from torch import Tensor

from sumo_cli import meta as ML
from sumo_cli.ppo.rollout import Rollout
from sumo_cli.sim.vec_env import VecEnv
from sumo_cli.nets import normalizer as nz
from sumo_cli.nets import policy as P


class TaskChainEnv(VecEnv, Protocol):
    num_groups: int
    group_size: int

    def sample_tasks(self, seed: int | None = None) -> np.ndarray: ...

    def next_task(self) -> np.ndarray: ...


# ----------------------------------------------------------------------------------------------
# collection with one parameter set per group


@torch.no_grad()
def collect_stacked(
    env: VecEnv,
    spec: P.PolicySpec,
    params: P.Params,
    stats: dict | None,
    obs: np.ndarray,
    num_steps: int,
    generator: torch.Generator | None,
    deterministic: bool = False,
    keep_final_obs: bool = False,
) -> tuple[Rollout, np.ndarray]:
    """``num_steps`` steps of all envs, group ``g`` (envs ``g*E .. g*E+E-1``) acting with
    ``params[...][g]`` (stacked, leading dim G; use :func:`~sumo_cli.meta.expand_params` for a
    shared set). The recurrent state starts at zero (a new phase) and is zeroed at every episode
    start. ``stats``: frozen normaliser statistics (or None). Returns the rollout (``(T, N)``, with
    ``norm_stats = stats``) and the observation after the last step."""
    G = int(params["logstd"].shape[0])
    N, D, A = env.num_envs, spec.obs_dim, spec.act_dim
    if N % G:
        raise ValueError(f"{N} envs do not split into {G} groups")
    E, T = N // G, int(num_steps)
    dtype = params["logstd"].dtype
    state = P.initial_state(spec, (G, E), dtype)
    state0 = {k: v.reshape(N, -1).clone() for k, v in state.items()}
    first = np.ones(N, dtype=bool)
    bufs = {
        "obs": torch.zeros(T, N, D, dtype=dtype), "actions": torch.zeros(T, N, A, dtype=dtype),
        "logp": torch.zeros(T, N, dtype=dtype), "values": torch.zeros(T, N, dtype=dtype),
        "rewards": torch.zeros(T, N, dtype=dtype), "terminated": torch.zeros(T, N, dtype=torch.bool),
        "truncated": torch.zeros(T, N, dtype=torch.bool), "first": torch.zeros(T, N, dtype=torch.bool),
        "final_values": torch.zeros(T, N, dtype=dtype),
    }
    if keep_final_obs:  # for a strategy that bootstraps from each episode's last observation (adapt.chains)
        bufs["final_obs"] = torch.zeros(T, N, D, dtype=dtype)
    states = {k: torch.zeros(T, N, spec.hidden, dtype=dtype) for k in state}  # state fed into each step

    def net_in(o: np.ndarray) -> Tensor:
        x = torch.as_tensor(np.asarray(o), dtype=dtype)
        if stats is not None:
            x = nz.normalize(stats, x)
        return x.reshape(G, E, D)

    for t in range(T):
        fm = torch.as_tensor(first).reshape(G, E)
        if spec.recurrent:
            state = P.reset_state(state, fm)
            for k, v in state.items():
                states[k][t] = v.reshape(N, -1)
        mean, value, new_state = P.forward(spec, params, net_in(obs), state)
        action = mean if deterministic else P.sample(mean, params["logstd"], generator)
        logp = P.log_prob(mean, params["logstd"], action)
        out = env.step(action.reshape(N, A).cpu().numpy())
        term = np.asarray(out.terminated, dtype=bool)
        trunc = np.asarray(out.truncated, dtype=bool)
        trunc_only = trunc & ~term
        if trunc_only.any():
            _, vf, _ = P.forward(spec, params, net_in(out.final_obs), new_state)
            bufs["final_values"][t] = torch.where(torch.as_tensor(trunc_only), vf.reshape(N), torch.zeros(N, dtype=dtype))
        if keep_final_obs and (term | trunc).any():
            ended = torch.as_tensor(term | trunc)
            bufs["final_obs"][t][ended] = torch.as_tensor(np.asarray(out.final_obs), dtype=dtype)[ended]
        bufs["obs"][t] = torch.as_tensor(np.asarray(obs), dtype=dtype)
        bufs["actions"][t] = action.reshape(N, A)
        bufs["logp"][t] = logp.reshape(N)
        bufs["values"][t] = value.reshape(N)
        bufs["rewards"][t] = torch.as_tensor(np.asarray(out.reward), dtype=dtype)
        bufs["terminated"][t] = torch.as_tensor(term)
        bufs["truncated"][t] = torch.as_tensor(trunc)
        bufs["first"][t] = torch.as_tensor(first)
        obs = np.asarray(out.obs)
        first = term | trunc
        state = new_state
    fm = torch.as_tensor(first).reshape(G, E)
    _, last_values, _ = P.forward(spec, params, net_in(obs), state, fm if spec.recurrent else None)
    ro = Rollout(
        **bufs, last_values=last_values.reshape(N), state0=state0, norm_stats=stats,
        chunk_len=1 if spec.recurrent else 0, chunk_states=states,
    )
    return ro, obs


def episode_returns(rollout: Rollout, groups: int) -> np.ndarray:
    """Mean undiscounted return per episode for each group (episodes that start and end inside
    the rollout; a rollout of whole episodes is the intended use). Shape ``(groups,)``."""
    T, N = rollout.num_steps, rollout.num_envs
    E = N // groups
    r = rollout.rewards.double().numpy()
    first = rollout.first.numpy()
    done = (rollout.terminated | rollout.truncated).numpy()
    out = np.zeros(groups)
    for g in range(groups):
        rets = []
        for n in range(g * E, (g + 1) * E):
            acc, started = 0.0, False
            for t in range(T):
                if first[t, n]:
                    acc, started = 0.0, True
                acc += r[t, n]
                if done[t, n] and started:
                    rets.append(acc)
                    started = False
        out[g] = np.mean(rets) if rets else np.nan
    return out


def episode_spans(rollout: Rollout, groups: int) -> list[list[tuple[int, int, int]]]:
    """Per group (envs ``g*E .. g*E+E-1``) its complete episodes as ``(env, first step, end)``."""
    T, N = rollout.num_steps, rollout.num_envs
    E = N // groups
    first = rollout.first.numpy()
    done = (rollout.terminated | rollout.truncated).numpy()
    spans: list[list[tuple[int, int, int]]] = [[] for _ in range(groups)]
    for n in range(N):
        start = None
        for t in range(T):
            if first[t, n]:
                start = t
            if done[t, n] and start is not None:
                spans[n // E].append((n, start, t + 1))
                start = None
    return spans


def episodes_from_rollout(rollout: Rollout, groups: int, cfg: ML.MetaConfig) -> ML.TrajBatch:
    """The complete episodes of a rollout as an execution-time episode batch ``(L, G, K)`` (one
    episode per column; every group must have the same number K of complete episodes), with
    inner-loss targets (reward-to-go with ``cfg.inner_lam``, bootstrapped at truncation)."""
    spans = episode_spans(rollout, groups)
    K = {len(s) for s in spans}
    if len(K) != 1 or 0 in K:
        raise ValueError(f"every group needs the same, non-zero number of complete episodes; got {sorted(len(s) for s in spans)}")
    K = K.pop()
    L = max(t1 - t0 for s in spans for _, t0, t1 in s)
    stats = rollout.norm_stats
    x_all = rollout.obs if stats is None else nz.normalize(stats, rollout.obs)
    dtype = rollout.logp.dtype
    D, A = x_all.shape[-1], rollout.actions.shape[-1]
    x = torch.zeros(L, groups, K, D, dtype=dtype)
    act = torch.zeros(L, groups, K, A, dtype=dtype)
    logp, val, rew = (torch.zeros(L, groups, K, dtype=dtype) for _ in range(3))
    lengths = torch.zeros(groups, K, dtype=torch.long)
    term = torch.zeros(groups, K, dtype=torch.bool)
    fval = torch.zeros(groups, K, dtype=dtype)
    for g, s in enumerate(spans):
        for k, (n, t0, t1) in enumerate(s):
            n_t = t1 - t0
            x[:n_t, g, k] = x_all[t0:t1, n].to(dtype)
            act[:n_t, g, k] = rollout.actions[t0:t1, n]
            logp[:n_t, g, k] = rollout.logp[t0:t1, n]
            val[:n_t, g, k] = rollout.values[t0:t1, n]
            rew[:n_t, g, k] = rollout.rewards[t0:t1, n]
            lengths[g, k] = n_t
            term[g, k] = bool(rollout.terminated[t1 - 1, n])
            fval[g, k] = rollout.final_values[t1 - 1, n]
    return ML.episode_batch(
        x, act, logp, val, rew, lengths, gamma=cfg.gamma, lam=cfg.inner_lam, terminated=term, final_values=fval,
        baseline=cfg.inner_baseline,
    )


# ----------------------------------------------------------------------------------------------
# Algorithm 1


@dataclass
class MetaTrainResult:
    learner: ML.MetaLearner
    obs_norm: nz.RunningNormalizer | None
    history: list[dict] = field(default_factory=list)

    @property
    def theta(self) -> P.Params:
        return self.learner.params()[0]

    @property
    def log_alpha(self) -> Tensor:
        return self.learner.params()[1]


def meta_iteration(
    env: TaskChainEnv,
    spec: P.PolicySpec,
    learner: ML.MetaLearner,
    stats: dict | None,
    steps_pre: int,
    steps_post: int,
    seed: int,
    generator: torch.Generator,
    keep_phi: bool = False,
) -> tuple[dict, list[Rollout]]:
    """One meta-iteration: draw ``env.num_groups`` task pairs, sample ``tau_theta`` in ``T_i``
    (and, for ``inner_data="fresh"``, one batch per intermediate ``phi^m``), adapt, sample
    ``tau_phi`` in ``T_{i+1}``, and run the outer update. Returns the update's statistics and the
    rollouts (for the observation normaliser); with ``keep_phi`` the statistics also hold the
    adapted parameters under ``"phi"`` (detached, one row per task; not for the multi-round chain)."""
    cfg = learner.cfg
    if cfg.train_rounds > 2:
        return chain_iteration(env, spec, learner, stats, steps_pre, steps_post, seed, generator)
    G = env.num_groups
    t0 = time.perf_counter()
    theta, log_alpha = learner.params()
    theta_g = {k: v.contiguous() for k, v in ML.expand_params(learner.model, theta, (G,)).items()}
    obs = env.sample_tasks(seed)
    ro, obs = collect_stacked(env, spec, theta_g, stats, obs, steps_pre, generator)
    rollouts = [ro]
    kw = dict(gamma=cfg.gamma, groups=G, bptt_chunk=cfg.bptt_chunk)
    pre = [ML.batch_from_rollout(ro, lam=cfg.inner_lam, baseline=cfg.inner_baseline, **kw)]
    if cfg.inner_data == "fresh":
        for m in range(1, cfg.num_steps):
            sub = cfg.replace(num_steps=m)
            phi_m = ML.adapt(learner.model, theta, log_alpha[:m], pre if m > 1 else pre[0], sub, behaviour="theta")
            ro, obs = collect_stacked(env, spec, phi_m, stats, obs, steps_pre, generator)
            rollouts.append(ro)
            pre.append(ML.batch_from_rollout(ro, lam=cfg.inner_lam, baseline=cfg.inner_baseline, **kw))
    phi = ML.adapt(learner.model, theta, log_alpha, pre if cfg.inner_data == "fresh" else pre[0], cfg, behaviour="theta")
    obs = env.next_task()
    ro_post, _ = collect_stacked(env, spec, phi, stats, obs, steps_post, generator)
    rollouts.append(ro_post)
    post = ML.batch_from_rollout(ro_post, lam=cfg.lam, baseline=True, **kw)
    t1 = time.perf_counter()
    mids = None
    if cfg.outer_from is not None:
        mids = [ML.batch_from_rollout(r, lam=cfg.lam, baseline=True, **kw) for r in rollouts[cfg.outer_from: cfg.num_steps]]
    info = learner.update(pre if cfg.inner_data == "fresh" else pre[0], post, generator, mids=mids)
    t2 = time.perf_counter()
    info.update(
        step_returns=[_mean_return(r, G) for r in rollouts],
        pre_return=_mean_return(rollouts[0], G),
        post_episode_return=_mean_return(ro_post, G),
        collect_s=t1 - t0,
        update_s=t2 - t1,
    )
    if keep_phi:
        info["phi"] = {k: v.detach() for k, v in phi.items()}
    return info, rollouts


def distillation(spec: P.PolicySpec, stats: dict | None, teacher_means: Tensor, teacher_logstd: Tensor,
                 coef: float, rollout: Rollout) -> Callable[[P.Params, Tensor | None], Tensor]:
    """Kickstarting's loss on theta (:mod:`sumo_cli.ppo.kickstart`): ``coef`` times KL(teacher ||
    pi_theta) per step, summed over the action dimensions and averaged over the steps of the given
    columns (all by default) of theta's own rollout (``teacher_means``: the teacher's on its
    observations). theta's means are computed as it acted: the rollout's frozen statistics, the
    recurrent state zeroed at every episode start."""
    from sumo_cli.ppo.kickstart import gaussian_kl

    x = rollout.obs if stats is None else nz.normalize(stats, rollout.obs)
    t_means, t_logstd = teacher_means.to(x.dtype), teacher_logstd.to(x.dtype)

    def loss(theta: P.Params, cols: Tensor | None = None) -> Tensor:
        xs, first, tm = (x, rollout.first, t_means) if cols is None else (x[:, cols], rollout.first[:, cols], t_means[:, cols])
        if spec.recurrent:
            state0 = P.initial_state(spec, xs.shape[1], x.dtype)
            means = P.forward_sequence(spec, theta, xs, state0, first, fused=True)[0]
        else:
            means = P.forward(spec, theta, xs, {})[0]
        return coef * gaussian_kl(tm, t_logstd, means, theta["logstd"]).mean()

    return loss


def _mean_return(rollout: Rollout, groups: int) -> float:
    """Mean return of the episodes the rollout finished; NaN when none did."""
    return finite_mean(episode_returns(rollout, groups))


def finite_mean(x: np.ndarray) -> float:
    """Mean of the finite values of ``x``; NaN (without numpy's warning) when there is none."""
    return float(np.nanmean(x)) if np.isfinite(x).any() else float("nan")


def chain_iteration(
    env: TaskChainEnv,
    spec: P.PolicySpec,
    learner: ML.MetaLearner,
    stats: dict | None,
    steps_pre: int,
    steps_post: int,
    seed: int,
    generator: torch.Generator,
) -> tuple[dict, list[Rollout]]:
    """One meta-iteration on training chains (``cfg.train_rounds = R > 2``): every group plays ``R``
    consecutive tasks the way Algorithm 2 does at execution time: round 1 with ``theta``, round r+1
    with ``phi_r`` adapted from ``theta`` on the episodes of round r (round 1: sampled by ``theta``;
    later rounds: by ``phi_{r-1}``, importance-weighted against it). The ``R - 1`` pairs (round r's
    episodes, round r+1's episodes) form one outer update (:meth:`MetaLearner.update_pairs`); the
    score-function term covers the first pair only (the later inner batches are not sampled by
    ``pi_theta``; their dependence on theta through ``phi_{r-1}`` is not differentiated).
    Needs ``steps_pre == steps_post`` (a round's episodes are both the post batch of one pair and
    the inner batch of the next)."""
    cfg = learner.cfg
    if steps_pre != steps_post:
        raise ValueError("training chains need steps_pre == steps_post")
    G = env.num_groups
    t0 = time.perf_counter()
    theta, log_alpha = learner.params()
    cur = {k: v.contiguous() for k, v in ML.expand_params(learner.model, theta, (G,)).items()}
    obs = env.sample_tasks(seed)
    kw = dict(gamma=cfg.gamma, groups=G, bptt_chunk=cfg.bptt_chunk)
    ro, obs = collect_stacked(env, spec, cur, stats, obs, steps_pre, generator)
    rollouts, pairs = [ro], []
    behaviour = "theta"
    for r in range(1, cfg.train_rounds):
        pre = ML.batch_from_rollout(ro, lam=cfg.inner_lam, baseline=cfg.inner_baseline, **kw)
        cur = ML.adapt(learner.model, theta, log_alpha, pre, cfg, behaviour=behaviour)
        obs = env.next_task()
        ro, obs = collect_stacked(env, spec, cur, stats, obs, steps_post, generator)
        rollouts.append(ro)
        pairs.append((pre, ML.batch_from_rollout(ro, lam=cfg.lam, baseline=True, **kw), behaviour, r == 1))
        behaviour = "data"
    t1 = time.perf_counter()
    info = learner.update_pairs(pairs, generator)
    t2 = time.perf_counter()
    rets = [_mean_return(x, G) for x in rollouts]
    info.update(pre_return=rets[0], post_episode_return=float(np.mean(rets[1:])), round_returns=rets, collect_s=t1 - t0, update_s=t2 - t1)
    return info, rollouts


def meta_train(
    env: TaskChainEnv,
    spec: P.PolicySpec,
    cfg: ML.MetaConfig,
    iterations: int,
    seed: int,
    *,
    steps_pre: int,
    steps_post: int,
    theta: P.Params | None = None,
    normalize_obs: bool = True,
    callback: Callable[[int, dict, MetaTrainResult], bool | None] | None = None,
) -> MetaTrainResult:
    """Algorithm 1 for ``iterations`` meta-iterations (each: ``env.num_groups`` task pairs,
    ``steps_pre`` steps per env in ``T_i`` per inner batch, ``steps_post`` steps per env in
    ``T_{i+1}``). Deterministic given ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    if theta is None:
        theta = P.init_params(spec, gen)
    learner = ML.MetaLearner(spec, theta, cfg)
    norm = nz.RunningNormalizer(spec.obs_dim) if normalize_obs else None
    result = MetaTrainResult(learner, norm)
    for it in range(iterations):
        stats = None if norm is None else {k: v.clone() for k, v in norm.stats.items()}
        info, rollouts = meta_iteration(env, spec, learner, stats, steps_pre, steps_post, seed * 100003 + it, gen)
        if norm is not None:
            for ro in rollouts:
                norm.update(ro.obs.reshape(-1, spec.obs_dim).double())
        info["iteration"] = it
        result.history.append(info)
        if callback is not None and callback(it, info, result):
            break
    return result
