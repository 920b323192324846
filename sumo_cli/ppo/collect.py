"""Collect a time-major :class:`~sumo_cli.ppo.rollout.Rollout` from a :class:`VecEnv` with a
pure-function policy (:mod:`sumo_cli.nets.policy`).

One batched, gradient-free policy call per step for all N envs: for one agent's float32 nets (what
training uses) the policy mean (and the value net's recurrent state) in NumPy, with the values and
log-probabilities of the whole rollout computed after its last step in one batched torch pass
(:func:`_collect_numpy`); otherwise (stacked agents, float64) one torch call per step
(:func:`_collect_torch`). Both give the same rollout up to float rounding. What must survive from one call to
the next (the current observation, the recurrent state, RL^2's previous reward and done flag, the
running episode returns) lives in a :class:`Carry`, so that collection can continue seamlessly over
iterations and truncated BPTT can restart from any stored chunk start.

Observation normalisation: the statistics are *frozen* for the whole rollout (every action of the
rollout is chosen with the same statistics, which the rollout keeps in ``norm_stats``), and only
after the last step are they updated with the rollout's observations (``update_norm=True``). The
learner then normalises with ``rollout.norm_stats``, so its first-epoch log-probabilities equal the
behaviour log-probabilities exactly (importance ratio 1), and the next rollout sees the new stats.

Recurrent state resets (``reset_on``):

* ``"episode"`` (default for ``lstm``; irrelevant for ``mlp``): the state is zeroed before the first
  step of every episode.
* ``"task"`` (default for ``rl2``): the state lives for a whole interaction with one task (one
  environment, one opponent) across episode boundaries, and is zeroed only when the task changes.
  Two ways to say so, usable together: the env sets ``info["task_changed"]`` (N,) bool after a
  step (the next observation belongs to a new task), or the caller calls :func:`mark_task_change`
  between calls (or passes ``end_task=True`` to the call after which it changes the task).

At a reset, RL^2's previous reward and previous done flag are zeroed too, so every interaction
starts from the same input as the very first step: zero state, ``prev_reward = 0``,
``prev_done = 0``. Within an interaction, ``prev_done`` is 1 on the first step of each new
episode (the previous step ended an episode).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from sumo_cli.ppo.rollout import Rollout, chunk, unchunk
from sumo_cli.sim.vec_env import VecEnv
from sumo_cli.nets import normalizer as nz
from sumo_cli.nets import policy as P

RESET_MODES = ("episode", "task")


@dataclass
class Carry:
    """What collection carries from one call to the next (N = number of envs)."""

    obs: np.ndarray  # (N, D) the observation the next step acts on
    state: P.State  # recurrent state after the last step ({} for the MLP); resets not yet applied
    prev_reward: Tensor  # (N,) RL^2 input: the reward of the previous step (0 after a reset)
    prev_done: Tensor  # (N,) RL^2 input: 1 if the previous step ended an episode (0 after a reset)
    first: np.ndarray  # (N,) bool: the next step is the first of an episode
    reset: np.ndarray  # (N,) bool: zero the state (and RL^2's prev inputs) before the next step
    ep_return: np.ndarray  # (N,) undiscounted return of the running episode so far
    ep_length: np.ndarray  # (N,) steps of the running episode so far
    # episodes that finished during the latest collect() call (cleared at the start of each call)
    finished_returns: list[float] = field(default_factory=list)
    finished_lengths: list[int] = field(default_factory=list)
    total_steps: int = 0  # env steps (per env) taken with this carry
    total_episodes: int = 0

    @property
    def num_envs(self) -> int:
        return int(self.obs.shape[0])


def default_reset_on(spec: P.PolicySpec) -> str:
    """RL^2 keeps its state over a whole task; the plain LSTM resets it every episode."""
    return "task" if spec.arch == "rl2" else "episode"


def new_carry(env: VecEnv, spec: P.PolicySpec, seed: int | None = None) -> Carry:
    """Reset ``env`` (with ``seed``) and start from a zero state: every env begins an episode and a task."""
    obs = np.asarray(env.reset(seed=seed), dtype=np.float32)
    n = obs.shape[0]
    if obs.shape != (n, spec.obs_dim) or n != env.num_envs:
        raise ValueError(f"env.reset returned observations of shape {obs.shape}, expected ({env.num_envs}, {spec.obs_dim})")
    return Carry(
        obs=obs,
        state=P.initial_state(spec, (n,)),
        prev_reward=torch.zeros(n),
        prev_done=torch.zeros(n),
        first=np.ones(n, dtype=bool),
        reset=np.ones(n, dtype=bool),
        ep_return=np.zeros(n),
        ep_length=np.zeros(n, dtype=np.int64),
    )


def mark_task_change(carry: Carry, mask: np.ndarray | None = None) -> None:
    """The caller changed the task of the envs in ``mask`` (all if None): their recurrent state
    and RL^2 inputs are zeroed before the next step. The env itself is not touched (if the caller
    also resets it, it should put the new observation into ``carry.obs`` and set ``carry.first``)."""
    m = np.ones(carry.num_envs, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    carry.reset = carry.reset | m


def _stats_of(obs_norm) -> dict | None:
    if obs_norm is None:
        return None
    if isinstance(obs_norm, nz.RunningNormalizer):
        return obs_norm.stats
    if isinstance(obs_norm, dict):
        return obs_norm
    raise TypeError(f"obs_norm must be a RunningNormalizer, a statistics dict or None, got {type(obs_norm).__name__}")


def net_input(spec: P.PolicySpec, stats: dict | None, obs: Tensor, prev_reward: Tensor, prev_done: Tensor) -> Tensor:
    """Normalised observation (clipped to [-5, 5]), followed for RL^2 by the previous reward and done
    flag. ``obs``: ``(*batch, obs_dim)``; ``prev_*``: ``(*batch)``."""
    x = obs if stats is None else nz.normalize(stats, obs)
    if spec.arch == "rl2":
        x = P.rl2_input(x, prev_reward, prev_done)
    return x


@torch.no_grad()
def collect(
    env: VecEnv,
    spec: P.PolicySpec,
    params: P.Params,
    obs_norm,
    num_steps: int,
    carry: Carry,
    generator: torch.Generator | None,
    update_norm: bool = True,
    *,
    chunk_len: int = 10,
    reset_on: str | None = None,
    end_task: bool = False,
    deterministic: bool = False,
) -> tuple[Rollout, Carry]:
    """Run ``num_steps`` steps in all envs; return the rollout and the updated carry (the same object).

    ``obs_norm``: a :class:`~sumo_cli.nets.normalizer.RunningNormalizer`, a statistics dict
    (updated in place) or None (no normalisation). ``chunk_len``: the recurrent state fed into
    steps 0, chunk_len, 2 chunk_len, ... is stored in ``rollout.chunk_states`` (use the PPO
    config's ``bptt_len``; 1 stores every step). ``end_task``: the caller changes the task after
    this rollout: the last step is recorded as a task end and the state is reset before the next
    call. ``deterministic``: act with the mean (evaluation); the stored log-probabilities are
    then those of the mean.
    """
    if num_steps < 1 or chunk_len < 1:
        raise ValueError("num_steps and chunk_len must be positive")
    reset_on = default_reset_on(spec) if reset_on is None else reset_on
    if reset_on not in RESET_MODES:
        raise ValueError(f"reset_on must be one of {RESET_MODES}, got {reset_on!r}")
    stats = _stats_of(obs_norm)
    frozen = None if stats is None else {k: v.clone() if isinstance(v, Tensor) else np.copy(v) for k, v in stats.items()}
    params = {k: v.detach() for k, v in params.items()}
    if _numpy_path(spec, params, frozen):
        rollout = _collect_numpy(env, spec, params, frozen, int(num_steps), carry, generator, chunk_len=chunk_len,
                                 reset_on=reset_on, end_task=end_task, deterministic=deterministic)
    else:
        rollout = _collect_torch(env, spec, params, frozen, int(num_steps), carry, generator, chunk_len=chunk_len,
                                 reset_on=reset_on, end_task=end_task, deterministic=deterministic)
    if update_norm and stats is not None:
        obs_buf = rollout.obs
        stats.update(nz.update(stats, obs_buf.to(stats["sum"].dtype) if isinstance(stats["sum"], Tensor) else obs_buf.numpy()))
    return rollout, carry


def _numpy_path(spec: P.PolicySpec, params: P.Params, frozen: dict | None) -> bool:
    """One agent's float32 nets: act step by step in NumPy (see :func:`_collect_numpy`)."""
    ls = params["logstd"]
    return (ls.dtype == torch.float32 and ls.dim() == 1 and (frozen is None or np.ndim(frozen["sum"]) == 1))


def _frozen_input(spec: P.PolicySpec, frozen: dict | None, dtype: torch.dtype):
    """``net_input`` with the frozen statistics' mean and std computed once (bit-identical to it)."""
    if frozen is None or np.ndim(frozen["sum"]) != 1:
        return lambda obs, pr, pd: net_input(spec, frozen, obs, pr, pd)
    m, s = nz.mean_std(frozen)
    m, s = torch.as_tensor(m).to(dtype), torch.as_tensor(s).to(dtype)

    def f(obs: Tensor, pr: Tensor, pd: Tensor) -> Tensor:
        x = torch.clamp((obs - m) / s, -nz.CLIP, nz.CLIP)
        return P.rl2_input(x, pr, pd) if spec.arch == "rl2" else x

    return f


def _bookkeeping(carry: Carry, reward: np.ndarray, done: np.ndarray) -> None:
    carry.ep_return += reward
    carry.ep_length += 1
    if done.any():
        for i in np.flatnonzero(done):
            carry.finished_returns.append(float(carry.ep_return[i]))
            carry.finished_lengths.append(int(carry.ep_length[i]))
        carry.total_episodes += int(done.sum())
        carry.ep_return[done] = 0.0
        carry.ep_length[done] = 0


def _next_reset(out, done: np.ndarray, reset_on: str, last: bool) -> np.ndarray:
    tc = out.info.get("task_changed") if out.info else None
    if tc is None:
        next_reset = done.copy() if reset_on == "episode" else np.zeros(done.shape, dtype=bool)
    else:
        task_changed = np.asarray(tc, dtype=bool)
        next_reset = (done | task_changed) if reset_on == "episode" else task_changed.copy()
    if last:
        next_reset[:] = True
    return next_reset


def _last_values(spec: P.PolicySpec, params: P.Params, carry: Carry, inp, dtype: torch.dtype) -> Tensor:  # noqa: ANN001
    """Bootstrap value of the observation after the last step (the state reset applied where one is
    pending; the carry keeps its pending reset, which is idempotent)."""
    pending = torch.as_tensor(carry.reset)
    state = P.reset_state(carry.state, pending)
    pr = torch.where(pending, torch.zeros_like(carry.prev_reward), carry.prev_reward)
    pd = torch.where(pending, torch.zeros_like(carry.prev_done), carry.prev_done)
    _, last_values, _ = P.forward(spec, params, inp(torch.as_tensor(carry.obs, dtype=dtype), pr, pd), state)
    return last_values


def _collect_numpy(env: VecEnv, spec: P.PolicySpec, params: P.Params, frozen: dict | None, T: int, carry: Carry,
                   generator: torch.Generator | None, *, chunk_len: int, reset_on: str, end_task: bool,
                   deterministic: bool) -> Rollout:
    """The rollout with only the policy mean (and, for the recurrent nets, the value net's state) per
    step, in NumPy (:class:`~sumo_cli.nets.numpy_actor.NumpyActor`: a few times cheaper than a torch
    call for a handful of envs), plus the action noise drawn as :func:`~sumo_cli.nets.policy.sample`
    draws it (one ``torch.randn`` per step from the same generator, so the actions are the torch
    path's up to float rounding; one draw for the whole rollout would give another stream).
    The values and log-probabilities are computed after the last step in one batched torch pass over
    the stored inputs (the MLP: all steps at once; the recurrent nets: windows of ``chunk_len`` steps
    from the stored window start states, as :func:`~sumo_cli.ppo.ppo.chunked_evaluation` does),
    with exactly the functions the PPO update uses, so the first epoch's importance ratios are 1.
    The MLP's time-limit bootstraps V(final obs) are batched after the rollout too; the recurrent
    ones need the value state of that step and are computed in NumPy when they occur."""
    from sumo_cli.nets.numpy_actor import NumpyActor

    N, D, A = carry.num_envs, spec.obs_dim, spec.act_dim
    logstd = params["logstd"]
    dtype = logstd.dtype
    recurrent = spec.recurrent
    carry.finished_returns, carry.finished_lengths = [], []
    if frozen is None:
        nm, ns = np.zeros(D, np.float32), np.ones(D, np.float32)
    else:
        nm, ns = (np.asarray(torch.as_tensor(v).to(dtype)) for v in nz.mean_std(frozen))
    actor = NumpyActor(spec, params, nm, ns)
    critic = NumpyActor(spec, params, nm, ns, net="vf") if recurrent else None
    std = torch.exp(logstd).numpy()

    obs_buf = np.empty((T, N, D), np.float32)
    act_buf = np.empty((T, N, A), np.float32)
    rew_buf = np.empty((T, N), np.float32)
    prev_r_buf = np.empty((T, N), np.float32)
    prev_d_buf = np.empty((T, N), np.float32)
    term_buf = np.empty((T, N), bool)
    trunc_buf = np.empty((T, N), bool)
    first_buf = np.empty((T, N), bool)
    reset_buf = np.empty((T, N), bool)
    task_end_buf = np.empty((T, N), bool)
    final_np = np.zeros((T, N), np.float32)  # recurrent nets: V(final obs), computed per step
    final_at: list[tuple[int, np.ndarray]] = []  # MLP: where, and the final observations
    final_obs: list[np.ndarray] = []
    pr = carry.prev_reward.numpy().astype(np.float32)
    pd = carry.prev_done.numpy().astype(np.float32)
    st = {k: carry.state[k].numpy().astype(np.float32) for k in P.STATE_KEYS} if recurrent else {}
    n_chunks = math.ceil(T / chunk_len)
    chunk_np = {k: np.empty((n_chunks, *v.shape), np.float32) for k, v in st.items()}

    for t in range(T):
        if carry.reset.any():
            pr[carry.reset] = 0.0
            pd[carry.reset] = 0.0
            for v in st.values():
                v[carry.reset] = 0.0
        if recurrent and t % chunk_len == 0:
            for k, v in st.items():
                chunk_np[k][t // chunk_len] = v
        reset_buf[t] = carry.reset
        first_buf[t] = carry.first
        obs_buf[t] = carry.obs
        prev_r_buf[t], prev_d_buf[t] = pr, pd
        x = actor.net_input(obs_buf[t], pr, pd)
        if recurrent:
            action, (st["pi/h"], st["pi/c"]) = actor.step_input(x, (st["pi/h"], st["pi/c"]))
            _, (st["vf/h"], st["vf/c"]) = critic.step_input(x, (st["vf/h"], st["vf/c"]))
        else:
            action, _ = actor.step_input(x, None)
        if not deterministic:  # the noise draw of P.sample (same generator stream as the torch path)
            action += std * torch.randn((N, A), generator=generator, dtype=dtype).numpy()
        act_buf[t] = action

        out = env.step(action)
        reward = np.asarray(out.reward, dtype=np.float64)
        terminated = np.asarray(out.terminated, dtype=bool)
        truncated = np.asarray(out.truncated, dtype=bool)
        done = terminated | truncated
        rew_buf[t] = reward
        term_buf[t], trunc_buf[t] = terminated, truncated
        # V(final observation) where the time limit cut the episode (not where it terminated), with
        # the state the episode would have continued with
        trunc_only = truncated & ~terminated
        if trunc_only.any():
            idx = np.flatnonzero(trunc_only)
            if recurrent:
                xf = actor.net_input(np.asarray(out.final_obs, dtype=np.float32), rew_buf[t], done.astype(np.float32))
                vfin, _ = critic.step_input(xf, (st["vf/h"], st["vf/c"]))
                final_np[t, idx] = vfin[idx, 0]
            else:
                final_at.append((t, idx))
                final_obs.append(np.asarray(out.final_obs, dtype=np.float32)[idx])

        _bookkeeping(carry, reward, done)
        next_reset = _next_reset(out, done, reset_on, end_task and t == T - 1)
        task_end_buf[t] = next_reset
        carry.obs = np.asarray(out.obs, dtype=np.float32)
        pr = rew_buf[t].copy()
        pd = done.astype(np.float32)
        carry.first = done
        carry.reset = next_reset
        carry.total_steps += 1
    carry.prev_reward, carry.prev_done = torch.from_numpy(pr), torch.from_numpy(pd)
    carry.state = {k: torch.from_numpy(v) for k, v in st.items()}

    # one batched torch pass: values and log-probabilities of every step, the bootstraps
    obs_t, act_t = torch.from_numpy(obs_buf), torch.from_numpy(act_buf)
    prev_r_t, prev_d_t = torch.from_numpy(prev_r_buf), torch.from_numpy(prev_d_buf)
    reset_t = torch.from_numpy(reset_buf)
    inp = _frozen_input(spec, frozen, dtype)
    x_all = inp(obs_t, prev_r_t, prev_d_t)
    chunk_states = {k: torch.from_numpy(v) for k, v in chunk_np.items()}
    if recurrent:
        L = chunk_len
        states = {k: v.reshape(-1, v.shape[-1]) for k, v in chunk_states.items()}
        means, values, _ = P.forward_sequence(spec, params, chunk(x_all, L), states, chunk(reset_t, L, False), fused=True)
        logp = unchunk(P.log_prob(means, logstd, chunk(act_t, L)), T, N)
        values = unchunk(values, T, N)
        final_val = torch.from_numpy(final_np)
    else:
        means, values, _ = P.forward(spec, params, x_all, {})
        logp = P.log_prob(means, logstd, act_t)
        final_val = torch.zeros(T, N, dtype=dtype)
        if final_at:
            _, vf, _ = P.forward(spec, params, inp(torch.from_numpy(np.concatenate(final_obs)), None, None), {})
            k = 0
            for t, idx in final_at:
                final_val[t, torch.from_numpy(idx)] = vf[k:k + len(idx)]
                k += len(idx)
    last_values = _last_values(spec, params, carry, inp, dtype)

    return Rollout(
        obs=obs_t, actions=act_t, logp=logp, values=values, rewards=torch.from_numpy(rew_buf),
        terminated=torch.from_numpy(term_buf), truncated=torch.from_numpy(trunc_buf),
        first=torch.from_numpy(first_buf), final_values=final_val, last_values=last_values,
        state0={k: v[0].clone() for k, v in chunk_states.items()}, prev_rewards=prev_r_t, prev_dones=prev_d_t,
        state_reset=reset_t, task_end=torch.from_numpy(task_end_buf), chunk_len=chunk_len,
        chunk_states=chunk_states, norm_stats=frozen,
    )


def _collect_torch(env: VecEnv, spec: P.PolicySpec, params: P.Params, frozen: dict | None, T: int, carry: Carry,
                   generator: torch.Generator | None, *, chunk_len: int, reset_on: str, end_task: bool,
                   deterministic: bool) -> Rollout:
    """The general path (recurrent nets, RL^2, other dtypes): one batched torch call per step."""
    logstd = params["logstd"]
    N = carry.num_envs
    dtype = logstd.dtype
    carry.finished_returns, carry.finished_lengths = [], []
    inp = _frozen_input(spec, frozen, dtype)

    obs_buf = torch.zeros(T, N, spec.obs_dim, dtype=dtype)
    act_buf = torch.zeros(T, N, spec.act_dim, dtype=dtype)
    logp_buf = torch.zeros(T, N, dtype=dtype)
    val_buf = torch.zeros(T, N, dtype=dtype)
    rew_buf = torch.zeros(T, N, dtype=dtype)
    term_buf = torch.zeros(T, N, dtype=torch.bool)
    trunc_buf = torch.zeros(T, N, dtype=torch.bool)
    first_buf = torch.zeros(T, N, dtype=torch.bool)
    reset_buf = torch.zeros(T, N, dtype=torch.bool)
    task_end_buf = torch.zeros(T, N, dtype=torch.bool)
    final_val_buf = torch.zeros(T, N, dtype=dtype)
    prev_r_buf = torch.zeros(T, N, dtype=dtype)
    prev_d_buf = torch.zeros(T, N, dtype=dtype)
    n_chunks = math.ceil(T / chunk_len)
    chunk_states = {k: torch.zeros(n_chunks, *v.shape, dtype=v.dtype) for k, v in carry.state.items()}

    def _apply_reset(carry: Carry) -> P.State:
        mask = torch.as_tensor(carry.reset)
        carry.prev_reward = torch.where(mask, torch.zeros_like(carry.prev_reward), carry.prev_reward)
        carry.prev_done = torch.where(mask, torch.zeros_like(carry.prev_done), carry.prev_done)
        return P.reset_state(carry.state, mask)

    for t in range(T):
        obs = torch.as_tensor(carry.obs, dtype=dtype)
        state = _apply_reset(carry)
        reset_buf[t] = torch.as_tensor(carry.reset)
        first_buf[t] = torch.as_tensor(carry.first)
        if t % chunk_len == 0:
            for k, v in state.items():
                chunk_states[k][t // chunk_len] = v
        x = inp(obs, carry.prev_reward, carry.prev_done)
        mean, value, new_state = P.forward(spec, params, x, state)
        action = mean if deterministic else P.sample(mean, logstd, generator)
        logp = P.log_prob(mean, logstd, action)

        out = env.step(action.cpu().numpy())
        reward = torch.as_tensor(np.asarray(out.reward), dtype=dtype)
        terminated = np.asarray(out.terminated, dtype=bool)
        truncated = np.asarray(out.truncated, dtype=bool)
        done = terminated | truncated
        done_t = torch.as_tensor(done)

        # V(final observation) where the episode was cut by the time limit (not where it terminated),
        # with the state the episode would have continued with.
        trunc_only = truncated & ~terminated
        if trunc_only.any():
            xf = inp(torch.as_tensor(np.asarray(out.final_obs), dtype=dtype), reward, done_t.to(dtype))
            _, vfinal, _ = P.forward(spec, params, xf, new_state)
            final_val_buf[t] = torch.where(torch.as_tensor(trunc_only), vfinal, torch.zeros_like(vfinal))

        obs_buf[t], act_buf[t], logp_buf[t], val_buf[t], rew_buf[t] = obs, action, logp, value, reward
        term_buf[t], trunc_buf[t] = torch.as_tensor(terminated), torch.as_tensor(truncated)
        prev_r_buf[t], prev_d_buf[t] = carry.prev_reward, carry.prev_done

        _bookkeeping(carry, np.asarray(out.reward, dtype=np.float64), done)
        # what the next step starts from
        next_reset = _next_reset(out, done, reset_on, end_task and t == T - 1)
        task_end_buf[t] = torch.as_tensor(next_reset)
        carry.obs = np.asarray(out.obs, dtype=np.float32)
        carry.state = new_state
        carry.prev_reward = reward
        carry.prev_done = done_t.to(dtype)
        carry.first = done
        carry.reset = next_reset
        carry.total_steps += 1

    last_values = _last_values(spec, params, carry, inp, dtype)

    return Rollout(
        obs=obs_buf,
        actions=act_buf,
        logp=logp_buf,
        values=val_buf,
        rewards=rew_buf,
        terminated=term_buf,
        truncated=trunc_buf,
        first=first_buf,
        final_values=final_val_buf,
        last_values=last_values,
        state0={k: v[0].clone() for k, v in chunk_states.items()},
        prev_rewards=prev_r_buf,
        prev_dones=prev_d_buf,
        state_reset=reset_buf,
        task_end=task_end_buf,
        chunk_len=chunk_len,
        chunk_states=chunk_states,
        norm_stats=frozen,
    )


def evaluate(
    env: VecEnv,
    spec: P.PolicySpec,
    params: P.Params,
    obs_norm,
    num_steps: int,
    seed: int,
    deterministic: bool = True,
    reset_on: str | None = None,
) -> tuple[Rollout, Carry]:
    """Run a fresh evaluation (env reset with ``seed``, zero state, normaliser not updated) for
    ``num_steps`` steps; returns the rollout and the carry (finished episodes in
    ``carry.finished_returns``)."""
    carry = new_carry(env, spec, seed)
    gen = torch.Generator().manual_seed(seed)
    return collect(env, spec, params, obs_norm, num_steps, carry, gen, update_norm=False, reset_on=reset_on, deterministic=deterministic)
