"""Collect a time-major :class:`~sumo_cli.learn.rollout.Rollout` from a :class:`VecEnv` with a
pure-function policy (:mod:`sumo_cli.nets.policy`).

One batched, gradient-free policy call per step for all N envs. What must survive from one call to
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

from sumo_cli.learn.rollout import Rollout
from sumo_cli.learn.vec_env import VecEnv
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
    logstd = params["logstd"]
    N, T = carry.num_envs, int(num_steps)
    dtype = logstd.dtype
    carry.finished_returns, carry.finished_lengths = [], []

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
        x = net_input(spec, frozen, obs, carry.prev_reward, carry.prev_done)
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
            xf = net_input(spec, frozen, torch.as_tensor(np.asarray(out.final_obs), dtype=dtype), reward, done_t.to(dtype))
            _, vfinal, _ = P.forward(spec, params, xf, new_state)
            final_val_buf[t] = torch.where(torch.as_tensor(trunc_only), vfinal, torch.zeros_like(vfinal))

        obs_buf[t], act_buf[t], logp_buf[t], val_buf[t], rew_buf[t] = obs, action, logp, value, reward
        term_buf[t], trunc_buf[t] = torch.as_tensor(terminated), torch.as_tensor(truncated)
        prev_r_buf[t], prev_d_buf[t] = carry.prev_reward, carry.prev_done

        # episode bookkeeping
        carry.ep_return += np.asarray(out.reward, dtype=np.float64)
        carry.ep_length += 1
        for i in np.nonzero(done)[0]:
            carry.finished_returns.append(float(carry.ep_return[i]))
            carry.finished_lengths.append(int(carry.ep_length[i]))
        carry.total_episodes += int(done.sum())
        carry.ep_return[done] = 0.0
        carry.ep_length[done] = 0

        # what the next step starts from
        task_changed = np.asarray(out.info.get("task_changed", np.zeros(N, dtype=bool)), dtype=bool)
        next_reset = (done | task_changed) if reset_on == "episode" else task_changed.copy()
        if end_task and t == T - 1:
            next_reset[:] = True
        task_end_buf[t] = torch.as_tensor(next_reset)
        carry.obs = np.asarray(out.obs, dtype=np.float32)
        carry.state = new_state
        carry.prev_reward = reward
        carry.prev_done = done_t.to(dtype)
        carry.first = done
        carry.reset = next_reset
        carry.total_steps += 1

    # bootstrap value of the observation after the last step (state reset applied if pending; the
    # carry keeps its pending reset, which is idempotent)
    pending = torch.as_tensor(carry.reset)
    state = P.reset_state(carry.state, pending)
    pr = torch.where(pending, torch.zeros_like(carry.prev_reward), carry.prev_reward)
    pd = torch.where(pending, torch.zeros_like(carry.prev_done), carry.prev_done)
    x = net_input(spec, frozen, torch.as_tensor(carry.obs, dtype=dtype), pr, pd)
    _, last_values, _ = P.forward(spec, params, x, state)

    if update_norm and stats is not None:
        stats.update(nz.update(stats, obs_buf.to(stats["sum"].dtype) if isinstance(stats["sum"], Tensor) else obs_buf.numpy()))

    rollout = Rollout(
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
    return rollout, carry


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
