"""Trajectory batches of the meta-learner: time-major :class:`TrajBatch` built from rollouts or
episodes, discounted targets, column selection."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor


@dataclass
class TrajBatch:
    """Time-major trajectories, ``(T, *G, N)`` (+ feature dims). All fields are data (no graph).

    ``first[t]``: step t starts an episode (the recurrent state is zeroed before it); ``mask``:
    valid steps (padding false). A *trajectory* is a maximal run of valid steps of one column that
    does not cross an episode start. ``returns``/``adv`` are the targets and advantages the loss at
    hand uses (inner: discounted reward-to-go and ``returns - values``; outer: GAE).
    """

    x: Tensor  # (T, *G, N, D) network input (normalised observations)
    actions: Tensor  # (T, *G, N, A)
    logp: Tensor  # (T, *G, N) log-prob of the action under the behaviour policy
    values: Tensor  # (T, *G, N) behaviour value estimates
    returns: Tensor  # (T, *G, N)
    adv: Tensor  # (T, *G, N)
    first: Tensor  # (T, *G, N) bool
    mask: Tensor  # (T, *G, N) bool
    state0: dict[str, Tensor] = field(default_factory=dict)  # (*G, N, H) recurrent state before step 0
    # optional: the behaviour policy's recurrent states fed into steps 0, L, 2L, ... (C, *G, N, H),
    # for truncated BPTT in windows of L = chunk_len steps evaluated in parallel (GaussianModel)
    chunk_states: dict[str, Tensor] = field(default_factory=dict)
    chunk_len: int = 0

    @property
    def agent_shape(self) -> tuple[int, ...]:
        return tuple(self.logp.shape[1:-1])

    @property
    def num_steps(self) -> int:
        return int(self.logp.shape[0])

    @property
    def num_cols(self) -> int:
        return int(self.logp.shape[-1])

    def map(self, fn) -> "TrajBatch":
        """Apply ``fn`` to every tensor (states included)."""
        return TrajBatch(
            **{k: fn(getattr(self, k)) for k in ("x", "actions", "logp", "values", "returns", "adv", "first", "mask")},
            state0={k: fn(v) for k, v in self.state0.items()},
            chunk_states={k: fn(v) for k, v in self.chunk_states.items()},
            chunk_len=self.chunk_len,
        )

    def select_agents(self, idx: Tensor | slice) -> "TrajBatch":
        """Sub-batch of the first agent dim (``idx`` indexes dim 1 of the time-major tensors)."""
        return TrajBatch(
            **{k: getattr(self, k)[:, idx] for k in ("x", "actions", "logp", "values", "returns", "adv", "first", "mask")},
            state0={k: v[idx] for k, v in self.state0.items()},
            chunk_states={k: v[:, idx] for k, v in self.chunk_states.items()},
            chunk_len=self.chunk_len,
        )


def discounted_targets(
    rewards: Tensor,
    values: Tensor,
    terminated: Tensor,
    truncated: Tensor,
    final_values: Tensor,
    last_values: Tensor,
    gamma: float,
    lam: float,
) -> tuple[Tensor, Tensor]:
    """(advantages, returns) of GAE(gamma, lam) on ``(T, ...)`` tensors; ``lam = 1`` gives the
    discounted reward-to-go (``returns``) bootstrapped only at truncation (``final_values``) and at
    the end of the batch (``last_values``). Termination wins over truncation."""
    T = rewards.shape[0]
    ended = terminated | truncated
    adv = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in reversed(range(T)):
        next_value = last_values if t == T - 1 else values[t + 1]
        boot = final_values[t] * (truncated[t] & ~terminated[t]).to(rewards.dtype)
        next_value = torch.where(ended[t], boot, next_value)
        delta = rewards[t] + gamma * next_value - values[t]
        running = delta + gamma * lam * (~ended[t]).to(rewards.dtype) * running
        adv[t] = running
    return adv, adv + values


def batch_from_rollout(
    rollout,
    *,
    gamma: float,
    lam: float,
    baseline: bool = True,
    obs_stats: dict | None = None,
    groups: int | None = None,
    dtype: torch.dtype | None = None,
    bptt_chunk: int | None = None,
) -> TrajBatch:
    """A :class:`TrajBatch` from a :class:`~sumo_cli.ppo.rollout.Rollout` ``(T, N)``.

    ``lam``: GAE lambda of ``returns``/``adv`` (``cfg.inner_lam`` for an inner batch, ``cfg.lam``
    for an outer one); ``baseline=False`` makes ``adv = returns`` (no baseline). ``obs_stats``:
    normaliser statistics (default: ``rollout.norm_stats`` when the rollout carries them, else the
    raw observations are the network input). ``groups``: split the N envs into ``(groups, N //
    groups)`` (envs ``g*E .. g*E+E-1`` form task/agent ``g``). ``bptt_chunk``: keep the rollout's
    stored recurrent states at every ``bptt_chunk``-th step (``rollout.chunk_states``) for windowed
    truncated BPTT."""
    from sumo_cli.nets import normalizer

    if getattr(rollout, "prev_rewards", None) is not None and rollout.prev_rewards.abs().sum() > 0:
        pass  # RL^2 inputs are not used by the meta-learner (MLP/LSTM only)
    dtype = dtype or rollout.obs.dtype
    stats = obs_stats if obs_stats is not None else getattr(rollout, "norm_stats", None)
    x = rollout.obs if stats is None else normalizer.normalize(stats, rollout.obs)
    rewards = rollout.rewards.to(dtype)
    values = rollout.values.to(dtype)
    adv, ret = discounted_targets(
        rewards,
        values,
        rollout.terminated.bool(),
        rollout.truncated.bool(),
        rollout.final_values.to(dtype),
        rollout.last_values.to(dtype),
        gamma,
        lam,
    )
    if not baseline:
        adv = ret.clone()
    T, N = rollout.num_steps, rollout.num_envs
    first = rollout.first.bool()
    b = TrajBatch(
        x=x.to(dtype),
        actions=rollout.actions.to(dtype),
        logp=rollout.logp.to(dtype),
        values=values,
        returns=ret,
        adv=adv,
        first=first,
        mask=torch.ones(T, N, dtype=torch.bool),
        state0={k: v.to(dtype) for k, v in rollout.state0.items()},
    )
    cl = getattr(rollout, "chunk_len", 0)
    if bptt_chunk and cl and bptt_chunk % cl == 0 and getattr(rollout, "chunk_states", None):
        b.chunk_states = {k: v[:: bptt_chunk // cl].to(dtype) for k, v in rollout.chunk_states.items()}
        b.chunk_len = bptt_chunk
    if groups is not None:
        if N % groups:
            raise ValueError(f"{N} envs do not split into {groups} equal groups")
        E = N // groups

        def split(t: Tensor) -> Tensor:
            return t.reshape(T, groups, E, *t.shape[2:])

        b = TrajBatch(
            **{k: split(getattr(b, k)) for k in ("x", "actions", "logp", "values", "returns", "adv", "first", "mask")},
            state0={k: v.reshape(groups, E, *v.shape[1:]) for k, v in b.state0.items()},
            chunk_states={k: v.reshape(v.shape[0], groups, E, *v.shape[2:]) for k, v in b.chunk_states.items()},
            chunk_len=b.chunk_len,
        )
    return b


def episode_batch(
    x: Tensor,
    actions: Tensor,
    logp: Tensor,
    values: Tensor,
    rewards: Tensor,
    lengths: Tensor,
    *,
    gamma: float,
    lam: float = 1.0,
    terminated: Tensor | None = None,
    final_values: Tensor | None = None,
    baseline: bool = True,
    state0: dict[str, Tensor] | None = None,
) -> TrajBatch:
    """Complete episodes, one per column, padded at the end: tensors ``(L, *G, K, ...)``,
    ``lengths`` ``(*G, K)``. ``terminated`` (``(*G, K)`` bool, default all true): the episode
    truly ended (bootstrap 0) rather than hit a time limit (bootstrap ``final_values``).
    This is the layout of the execution-time experience buffer."""
    L = x.shape[0]
    lead = tuple(lengths.shape)
    t_idx = torch.arange(L).reshape(L, *([1] * len(lead)))
    mask = t_idx < lengths.unsqueeze(0)
    last = t_idx == (lengths.unsqueeze(0) - 1)
    first = torch.zeros(L, *lead, dtype=torch.bool)
    first[0] = True
    if terminated is None:
        terminated = torch.ones(lead, dtype=torch.bool)
    if final_values is None:
        final_values = torch.zeros(lead, dtype=rewards.dtype)
    term = last & terminated.unsqueeze(0)
    trunc = last & ~terminated.unsqueeze(0)
    z = torch.zeros_like(rewards)
    rewards = torch.where(mask, rewards, z)
    values_m = torch.where(mask, values, z)
    adv, ret = discounted_targets(
        rewards, values_m, term, trunc, final_values.unsqueeze(0).expand_as(rewards).to(rewards.dtype),
        torch.zeros(lead, dtype=rewards.dtype), gamma, lam,
    )
    if not baseline:
        adv = ret.clone()
    return TrajBatch(
        x=x, actions=actions, logp=torch.where(mask, logp, z), values=values_m, returns=torch.where(mask, ret, z),
        adv=torch.where(mask, adv, z), first=first, mask=mask, state0=dict(state0 or {}),
    )


def cat_columns(a: TrajBatch, b: TrajBatch) -> TrajBatch:
    """Concatenate two batches along the column (last batch) dim, padding time at the end."""
    T = max(a.num_steps, b.num_steps)

    def pad(t: Tensor, n: int) -> Tensor:
        if t.shape[0] == n:
            return t
        return torch.cat([t, torch.zeros(n - t.shape[0], *t.shape[1:], dtype=t.dtype)], 0)

    out = {}
    nagent = len(a.agent_shape)
    for k in ("x", "actions", "logp", "values", "returns", "adv", "first", "mask"):
        ta, tb = pad(getattr(a, k), T), pad(getattr(b, k), T)
        dim = 1 + nagent
        out[k] = torch.cat([ta, tb], dim)
    st = {k: torch.cat([a.state0[k], b.state0[k]], nagent) for k in a.state0}
    return TrajBatch(**out, state0=st)


def select_columns(b: TrajBatch, idx: Tensor) -> TrajBatch:
    """Columns ``idx`` (along the last batch dim) of ``b``; time is trimmed to the longest kept column."""
    nagent = len(b.agent_shape)
    sel = {k: getattr(b, k).index_select(1 + nagent, idx) for k in ("x", "actions", "logp", "values", "returns", "adv", "first", "mask")}
    valid_t = sel["mask"].reshape(sel["mask"].shape[0], -1).any(1)
    T = int(valid_t.nonzero().max()) + 1 if bool(valid_t.any()) else 1
    sel = {k: v[:T] for k, v in sel.items()}
    return TrajBatch(**sel, state0={k: v.index_select(nagent, idx) for k, v in b.state0.items()})
