"""Proximal Policy Optimisation (clipped surrogate, no KL penalty) for the pure-function MLP, LSTM
and RL^2 policies of :mod:`sumo_cli.nets.policy`.

Read top to bottom:

1. :class:`PPOConfig`: every hyper-parameter, with the paper's value or the reason for another.
2. :func:`ppo_update`: one PPO update on a rollout from :func:`sumo_cli.ppo.collect.collect`:

   a. network inputs: observations normalised with the statistics the behaviour policy used
      (``rollout.norm_stats``, frozen during the update), plus RL^2's previous reward and done;
   b. advantages by GAE on the whole T-step trajectories (termination bootstraps with 0, time-limit
      truncation with V(final obs); for RL^2 optionally the whole interaction with one task is the
      trajectory, see ``rl2_trial_returns``), *before* any chunking;
   c. recurrent nets: the T steps are cut into fixed windows of ``bptt_len`` = 10 steps; each window
      is unrolled from the state stored at its start during collection (or recomputed with the
      current parameters, ``recompute_chunk_states``); episode starts inside a window zero the state
      there (``rollout.resets``); a last, shorter window is padded and the padding masked out.
      MLP: the T x N steps are independent samples;
   d. ``epochs`` passes over the batch in ``num_minibatches`` random minibatches (of windows for the
      recurrent nets, of steps for the MLP): clipped surrogate + value regression - entropy bonus,
      one Adam step each, global gradient-norm clipping.

3. :func:`train_ppo`: the loop collect -> update for standard tasks and tests.

Log-probabilities are summed over the action dimensions (:func:`sumo_cli.nets.policy.log_prob`).
The policy and value nets share no parameters, so ``vf_coef`` only weighs the value gradients in
the global gradient-norm clip (Adam is invariant to a constant scale of a parameter's gradient).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch
from torch import Tensor

from sumo_cli.ppo.advantages import gae
from sumo_cli.ppo.collect import Carry, collect, net_input, new_carry, _stats_of
from sumo_cli.ppo.kickstart import gaussian_kl
from sumo_cli.ppo.losses import clipped_surrogate, masked_mean, normalise, value_loss
from sumo_cli.ppo.rollout import Rollout, chunk as _chunk, unchunk as _unchunk
from sumo_cli.sim.vec_env import VecEnv
from sumo_cli.nets import normalizer as nz
from sumo_cli.nets import policy as P


@dataclass
class PPOConfig:
    """PPO hyper-parameters. "Paper" = Al-Shedivat et al. 2018, appendix; other values say why."""

    # --- stated by the paper -------------------------------------------------------------------
    clip: float = 0.2  # paper: clipping 0.2; there is no KL penalty term (the paper uses none)
    lr: float = 3e-4  # paper: Adam learning rate 3e-4
    gamma: float = 0.995  # paper: GAE gamma
    gae_lambda: float = 0.95  # paper: GAE lambda
    bptt_len: int = 10  # paper: recurrent nets unrolled for T = 10 steps (truncated BPTT)
    # --- not stated by the paper: common PPO values (OpenAI baselines ppo1/ppo2, which the paper's
    # authors used for RoboSumo; CleanRL) -------------------------------------------------------
    num_steps: int = 512  # rollout length per env per iteration. The paper's batches (8,000) ran
    # on a cluster; the batch is num_steps x num_envs and must be scaled to the machine.
    epochs: int = 10  # passes over each batch (ppo1 / CleanRL continuous control: 10)
    num_minibatches: int = 32  # minibatches per epoch (of chunks for recurrent nets, of steps for the MLP)
    ent_coef: float = 0.0  # entropy bonus (ppo1 MuJoCo: 0; the state-independent logstd is learnt)
    vf_coef: float = 0.5  # value-loss weight; only matters via the grad-norm clip (no shared params)
    max_grad_norm: float | None = 0.5  # global gradient-norm clip (ppo2 / CleanRL); None: no clip
    norm_adv: bool = True  # standardise advantages over the whole batch (ppo1 does this)
    adam_eps: float = 1e-5  # Adam epsilon (baselines / CleanRL), not torch's default 1e-8
    anneal_lr: bool = False  # linear learning-rate decay to 0 over train_ppo's iterations (off: paper
    # gives a constant rate)
    target_kl: float | None = None  # stop an update's remaining epochs once approx KL exceeds this
    # (off: the paper uses the plain clipped objective)
    reward_scale: float = 1.0  # constant factor on rewards inside the learner only (the value net
    # then predicts scaled returns). 1: the paper mentions no reward scaling
    # --- choices this implementation makes ------------------------------------------------------
    recompute_chunk_states: bool = False  # False: every BPTT window starts from the state stored
    # during collection (exact for the first epoch, stale by at most the update's parameter change
    # afterwards; the usual choice, e.g. SB3 RecurrentPPO). True: before every epoch after the first,
    # re-unroll the whole rollout without gradient with the current parameters and use those states.
    rl2_trial_returns: bool = True  # RL^2 only: the return runs over the whole interaction with
    # one task (Duan et al.'s trial objective): episode ends inside an interaction do not cut the
    # advantage; only task changes (rollout.task_end) do, with value 0. False: per-episode returns.
    update_obs_norm: bool = True  # train_ppo: update the running observation statistics after
    # each rollout (paper: running mean normalisation, clipped to [-5, 5])

    def __post_init__(self) -> None:
        if not 0 < self.clip < 1:
            raise ValueError("clip must be in (0, 1)")
        for name in ("num_steps", "epochs", "num_minibatches", "bptt_len"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"PPOConfig.{name} must be positive")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# ----------------------------------------------------------------------------------------------
# the update


def advantages_and_returns(spec: P.PolicySpec, rollout: Rollout, cfg: PPOConfig) -> tuple[Tensor, Tensor]:
    """GAE advantages and value targets (T, N) on the whole trajectories (rewards times
    ``cfg.reward_scale``). For RL^2 with ``cfg.rl2_trial_returns`` the trajectory is the
    interaction with one task: only ``rollout.task_end`` cuts it (value 0 after it)."""
    r = rollout
    if cfg.reward_scale != 1.0:
        r = dataclasses.replace(r, rewards=r.rewards * cfg.reward_scale)
    if spec.arch == "rl2" and cfg.rl2_trial_returns:
        if r.task_end is None:
            raise ValueError("rl2_trial_returns needs rollout.task_end (collect it with sumo_cli.ppo.collect)")
        r = dataclasses.replace(
            r,
            terminated=r.task_end.clone(),
            truncated=torch.zeros_like(r.task_end),
            final_values=torch.zeros_like(r.final_values),
        )
    return gae(r, cfg.gamma, cfg.gae_lambda)


def explained_variance(pred: Tensor, target: Tensor) -> float:
    """1 - Var(target - pred) / Var(target) (nan if the target is constant)."""
    var = target.var()
    return float("nan") if var == 0 else float(1.0 - (target - pred).var() / var)


def update_targets(spec: P.PolicySpec, rollout: Rollout, cfg: PPOConfig) -> tuple[Tensor, Tensor, float]:
    """What a PPO update fits: the advantages (normalised when ``cfg.norm_adv``), the value targets,
    and the explained variance of the behaviour values on those targets."""
    with torch.no_grad():
        adv, ret = advantages_and_returns(spec, rollout, cfg)
        ev = explained_variance(rollout.values.flatten(), ret.flatten())
        if cfg.norm_adv:
            adv = normalise(adv)
    return adv, ret, ev


def _stored_chunk_states(rollout: Rollout, L: int) -> dict[str, Tensor]:
    """The states at the window starts 0, L, 2L, ... from the rollout, as (C * N, H)."""
    if not rollout.chunk_states:
        raise ValueError("the rollout stores no chunk states: collect it with chunk_len dividing bptt_len")
    cl = rollout.chunk_len
    if cl < 1 or L % cl:
        raise ValueError(f"rollout stores states every {cl} steps; bptt_len {L} must be a multiple of it")
    step = L // cl
    return {k: v[::step].reshape(-1, v.shape[-1]) for k, v in rollout.chunk_states.items()}


@torch.no_grad()
def _recomputed_chunk_states(spec, params, x: Tensor, resets: Tensor, state0: P.State, L: int) -> dict[str, Tensor]:
    """Unroll the whole (T, N) rollout with the current parameters; the states at every window
    start, as (C * N, H)."""
    T = x.shape[0]
    states: dict[str, list[Tensor]] = {k: [] for k in state0}
    state = state0
    for t0 in range(0, T, L):
        for k, v in state.items():
            states[k].append(v)
        _, _, state = P.forward_sequence(spec, params, x[t0 : t0 + L], state, resets[t0 : t0 + L])
    return {k: torch.cat(v, dim=0) for k, v in states.items()}


def rollout_inputs(spec: P.PolicySpec, rollout: Rollout, obs_norm, dtype: torch.dtype = torch.float32) -> Tensor:
    """(T, N, input_dim) network inputs of a rollout: observations normalised with
    ``rollout.norm_stats`` (else ``obs_norm``), plus RL^2's previous reward and done."""
    r = rollout
    T, N = r.num_steps, r.num_envs
    stats = r.norm_stats if r.norm_stats is not None else _stats_of(obs_norm)
    prev_r = r.prev_rewards if r.prev_rewards is not None else torch.zeros(T, N)
    prev_d = r.prev_dones if r.prev_dones is not None else torch.zeros(T, N)
    return net_input(spec, stats, r.obs.to(dtype), prev_r.to(dtype), prev_d.to(dtype))


def chunked_evaluation(
    spec: P.PolicySpec, params: P.Params, rollout: Rollout, obs_norm, bptt_len: int, recompute_states: bool = False
) -> tuple[Tensor, Tensor]:
    """Log-probabilities of the rollout's actions and values, both (T, N), evaluated exactly as
    :func:`ppo_update` does (windows of ``bptt_len`` steps from the stored, or recomputed, window
    start states; the MLP step by step). At the behaviour parameters they equal ``rollout.logp``
    and ``rollout.values``."""
    T, N = rollout.num_steps, rollout.num_envs
    dtype = params["logstd"].dtype
    x = rollout_inputs(spec, rollout, obs_norm, dtype)
    if not spec.recurrent:
        means, values, _ = P.forward(spec, params, x, {})
        return P.log_prob(means, params["logstd"], rollout.actions.to(dtype)), values
    L = bptt_len
    if recompute_states:
        states = _recomputed_chunk_states(spec, params, x, rollout.resets, rollout.state0, L)
    else:
        states = _stored_chunk_states(rollout, L)
    means, values, _ = P.forward_sequence(spec, params, _chunk(x, L), states, _chunk(rollout.resets, L, False))
    logp = P.log_prob(means, params["logstd"], _chunk(rollout.actions.to(dtype), L))
    return _unchunk(logp, T, N), _unchunk(values, T, N)


def _clip_grad_norm(grads: list[Tensor], max_norm: float) -> Tensor:
    """``torch.nn.utils.clip_grad_norm_`` (2-norm) on one device's gradients, the same operations
    without its per-call grouping and checks (a sixth of a small net's minibatch step); returns the
    total norm before clipping."""
    total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0)
    torch._foreach_mul_(grads, torch.clamp(max_norm / (total + 1e-6), max=1.0))
    return total


def ppo_update(
    spec: P.PolicySpec,
    params: P.Params,
    optimizer: torch.optim.Optimizer,
    rollout: Rollout,
    obs_norm,
    cfg: PPOConfig,
    generator: torch.Generator | None = None,
    teacher: tuple[Tensor, Tensor, float] | None = None,
) -> dict[str, float]:
    """One PPO update of ``params`` (leaf tensors with ``requires_grad``, the ones ``optimizer``
    holds) on ``rollout``. Observations are normalised with ``rollout.norm_stats`` (the statistics
    collection used) or, if the rollout has none, with ``obs_norm`` (RunningNormalizer, stats dict
    or None); neither is changed. ``generator`` shuffles the minibatches. ``teacher``: (means
    ``(T, N, A)``, logstd ``(A)``, coefficient) of a policy to imitate (:mod:`kickstart`): the loss
    gains ``coefficient * KL(teacher || policy)``, averaged over the steps, logged as ``distill_kl``.

    Returns mean over minibatch steps of ``policy_loss``, ``value_loss``, ``entropy``,
    ``approx_kl`` (the (r - 1) - log r estimator), ``clip_fraction``, ``grad_norm`` (before
    clipping), and ``explained_variance`` of the behaviour values, ``num_grad_steps``, ``epochs``.
    """
    r = rollout
    T, N = r.num_steps, r.num_envs
    dtype = params["logstd"].dtype

    # a. network inputs, fixed for the whole update
    x = rollout_inputs(spec, r, obs_norm, dtype)

    # b. advantages on whole trajectories
    adv, ret, ev = update_targets(spec, r, cfg)

    # c. the samples: windows of bptt_len steps (recurrent) or single steps (MLP)
    if spec.recurrent:
        L = cfg.bptt_len
        mask = _chunk(torch.ones(T, N, dtype=torch.bool), L, False)
        xs, acts, logp_old = _chunk(x, L), _chunk(r.actions.to(dtype), L), _chunk(r.logp.to(dtype), L)
        t_means = _chunk(teacher[0].to(dtype), L) if teacher else None
        advs, rets, resets = _chunk(adv, L), _chunk(ret, L), _chunk(r.resets, L, False)
        states = _stored_chunk_states(r, L)
        num_samples = mask.shape[1]  # windows
    else:
        xs, acts, logp_old = x.reshape(T * N, -1), r.actions.reshape(T * N, -1).to(dtype), r.logp.reshape(-1).to(dtype)
        advs, rets = adv.reshape(-1), ret.reshape(-1)
        t_means = teacher[0].to(dtype).reshape(T * N, -1) if teacher else None
        num_samples = T * N
    num_mb = min(cfg.num_minibatches, num_samples)

    # d. epochs of minibatch steps
    plist = list(params.values())
    log: dict[str, list[float]] = {k: [] for k in ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm")}
    if teacher:
        log["distill_kl"] = []
        t_logstd, t_coef = teacher[1].to(dtype), teacher[2]
    epochs_run = 0
    for epoch in range(cfg.epochs):
        if spec.recurrent and cfg.recompute_chunk_states and epoch > 0:
            states = _recomputed_chunk_states(spec, {k: v.detach() for k, v in params.items()}, x, r.resets, r.state0, L)
        perm = torch.randperm(num_samples, generator=generator)
        epoch_kl = []
        for idx in torch.tensor_split(perm, num_mb):
            if spec.recurrent:
                st = {k: v[idx] for k, v in states.items()}
                means, values, _ = P.forward_sequence(spec, params, xs[:, idx], st, resets[:, idx], fused=True)
                m = mask[:, idx]
                mb_logp_old, mb_adv, mb_ret, mb_act = logp_old[:, idx], advs[:, idx], rets[:, idx], acts[:, idx]
            else:
                means, values, _ = P.forward(spec, params, xs[idx], {})
                m = None
                mb_logp_old, mb_adv, mb_ret, mb_act = logp_old[idx], advs[idx], rets[idx], acts[idx]
            logp = P.log_prob(means, params["logstd"], mb_act)
            pg_loss = clipped_surrogate(logp, mb_logp_old, mb_adv, cfg.clip, m)
            v_loss = value_loss(values, mb_ret, m)
            ent = P.entropy(params["logstd"])
            loss = pg_loss + cfg.vf_coef * v_loss - cfg.ent_coef * ent
            if teacher:
                mb_t = t_means[:, idx] if spec.recurrent else t_means[idx]
                distill = masked_mean(gaussian_kl(mb_t, t_logstd, means, params["logstd"]), m)
                loss = loss + t_coef * distill
                log["distill_kl"].append(float(distill.detach()))

            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            max_norm = cfg.max_grad_norm if cfg.max_grad_norm is not None else float("inf")
            gnorm = _clip_grad_norm([p.grad for p in plist if p.grad is not None], max_norm)
            optimizer.step()

            with torch.no_grad():
                log_ratio = logp - mb_logp_old
                ratio = log_ratio.exp()
                kl = masked_mean((ratio - 1) - log_ratio, m)
                clipped = ((ratio - 1).abs() > cfg.clip).to(dtype)
                log["policy_loss"].append(float(pg_loss))
                log["value_loss"].append(float(v_loss))
                log["entropy"].append(float(ent))
                log["approx_kl"].append(float(kl))
                log["clip_fraction"].append(float(masked_mean(clipped, m)))
                log["grad_norm"].append(float(gnorm))
                epoch_kl.append(float(kl))
        epochs_run += 1
        if cfg.target_kl is not None and np.mean(epoch_kl) > cfg.target_kl:
            break

    out = {k: float(np.mean(v)) for k, v in log.items()}
    out.update(explained_variance=ev, num_grad_steps=len(log["policy_loss"]), epochs=epochs_run)
    return out


# ----------------------------------------------------------------------------------------------
# the training loop


def make_params(spec: P.PolicySpec, generator: torch.Generator) -> P.Params:
    """Fresh parameters as leaf tensors that require gradients (what the optimiser holds)."""
    return {k: v.detach().clone().requires_grad_(True) for k, v in P.init_params(spec, generator).items()}


def make_optimizer(params: P.Params, cfg: PPOConfig) -> torch.optim.Adam:
    """Adam with the fused CPU kernel (the same update as the per-parameter loop in one call per step:
    ~20% less time per minibatch step of the small nets, where the optimiser's dispatch overhead
    rivals the arithmetic); the multi-tensor (foreach) version on tensors it cannot take."""
    plist = list(params.values())
    if all(p.device.type == "cpu" and p.dtype in (torch.float32, torch.float64) for p in plist):
        try:
            return torch.optim.Adam(plist, lr=cfg.lr, eps=cfg.adam_eps, fused=True)
        except (RuntimeError, TypeError, ValueError):
            pass
    return torch.optim.Adam(plist, lr=cfg.lr, eps=cfg.adam_eps, foreach=True)


@dataclass
class TrainResult:
    params: P.Params
    obs_norm: nz.RunningNormalizer
    history: list[dict] = field(default_factory=list)  # one dict per iteration
    carry: Carry | None = None
    optimizer: torch.optim.Optimizer | None = None


def train_ppo(
    env: VecEnv,
    spec: P.PolicySpec,
    cfg: PPOConfig,
    iterations: int,
    seed: int,
    callback: Callable[[int, dict, TrainResult], bool | None] | None = None,
    *,
    params: P.Params | None = None,
    obs_norm: nz.RunningNormalizer | None = None,
    reset_on: str | None = None,
) -> TrainResult:
    """Train with PPO for ``iterations`` rounds of collect (``cfg.num_steps`` x ``env.num_envs``
    steps) and update. Deterministic given ``seed`` (parameter init, action noise, minibatch order
    and the env's reset seed all derive from it). ``callback(iteration, stats, result)`` runs after
    every update; returning True stops training. ``stats`` has the update's statistics plus
    ``iteration``, ``env_steps`` (total so far, all envs), ``episodes`` (finished in this rollout)
    and ``mean_return`` / ``mean_length`` over them (nan if none finished)."""
    gen = torch.Generator().manual_seed(seed)
    params = make_params(spec, gen) if params is None else params
    obs_norm = nz.RunningNormalizer(spec.obs_dim) if obs_norm is None else obs_norm
    optimizer = make_optimizer(params, cfg)
    carry = new_carry(env, spec, seed)
    result = TrainResult(params=params, obs_norm=obs_norm, carry=carry, optimizer=optimizer)
    for it in range(iterations):
        if cfg.anneal_lr:
            for g in optimizer.param_groups:
                g["lr"] = cfg.lr * (1.0 - it / iterations)
        rollout, carry = collect(
            env, spec, params, obs_norm, cfg.num_steps, carry, gen,
            update_norm=cfg.update_obs_norm, chunk_len=cfg.bptt_len, reset_on=reset_on,
        )
        stats = ppo_update(spec, params, optimizer, rollout, obs_norm, cfg, gen)
        rets = carry.finished_returns
        stats.update(
            iteration=it,
            env_steps=carry.total_steps * carry.num_envs,
            episodes=len(rets),
            mean_return=float(np.mean(rets)) if rets else float("nan"),
            mean_length=float(np.mean(carry.finished_lengths)) if rets else float("nan"),
        )
        result.history.append(stats)
        if callback is not None and callback(it, stats, result):
            break
    return result
