"""The meta-learner of "Continuous Adaptation via Meta-Learning" (Al-Shedivat et al., ICLR 2018).

Written against generic tensors (a :class:`TrajBatch`, time-major like :class:`Rollout`) and a
small policy-model interface (:class:`PolicyModel`; :class:`GaussianModel` wraps the pure-function
policies of :mod:`sumo_cli.nets.policy`), not against RoboSumo. The generic training loop over a
VecEnv is in :mod:`sumo_cli.learn.meta_train`.

Notation: ``theta`` = initial parameters (policy *and* value function, paper appendix D.1),
``alpha`` = one positive step size per inner step (``exp(log_alpha)``), ``phi`` = adapted
parameters. Every parameter dict may carry leading agent dims ``G`` (tasks at training time, agents
at execution time); a :class:`TrajBatch` is ``(T, *G, N, ...)``.

Adaptation (paper Eq. "multi-step meta-update")::

    phi^0 = theta,   phi^m = phi^{m-1} - clip(alpha_m * grad L_in(phi^{m-1}; D_m)),   phi = phi^M

Design choices (each is a :class:`MetaConfig` field; the defaults are stated there):

* Inner loss ``L_in`` (appendix D.1: "vanilla policy gradients computed on the negative discounted
  rewards"): per trajectory ``k`` (a maximal run of valid steps between episode starts),
  ``L_k = sum_t [ -log pi(a_t|s_t) * (R_t - b_t) + c_v * 0.5 * (V(s_t) - R_t)^2 ]`` and
  ``L_in = (1/K) sum_k w_k L_k``. ``R_t`` is the discounted reward-to-go (``inner_lam = 1``: a
  Monte-Carlo return, cut at termination, bootstrapped with the *stored* value only where an
  episode is truncated or the batch ends). ``b_t`` is the *stored* behaviour value (data, so the
  inner step stays an unbiased policy gradient and a plain function of theta for the meta-gradient;
  ``inner_baseline=False`` drops it). The value-regression term is what lets the value-function
  half of ``phi`` adapt: a pure policy-gradient loss gives the value parameters no gradient, and the
  outer PPO loss then needs the adapted value function for its value loss.
* Inner advantages (``inner_adv``, ``inner_norm_adv``): instead of the stored value, a linear
  feature baseline refitted on each agent's inner batch (MAML-RL's ``LinearFeatureBaseline``:
  features ``x, x^2, t, t^2, t^3, 1``; :func:`linear_baseline`), and/or advantages standardised per
  agent (:func:`prepare_inner`). Both are functions of the data only. On the drifting-goal point a
  barely trained value net made the inner step mostly noise (see
  :mod:`sumo_cli.learn.meta_experiment`). ``inner_params`` restricts the inner steps to some
  parameter tensors (the others stay at theta).
* Clipping (appendix D.1 "clipped [the meta-gradient steps] by value to [-0.1, 0.1]"): by default
  the *step* ``alpha_m * g`` is clamped elementwise (``clip_mode="step"``). A clamped element
  passes no gradient to alpha or theta (clamp is flat there); ``clip_mode="grad"`` clamps ``g``
  instead (alpha then always gets a gradient).
* Inner-step data at training time (``inner_data``): ``"reuse"`` (default) samples one batch with
  ``pi_theta`` and reuses it for all ``M`` steps, importance-weighted at steps ``m >= 2`` by
  ``pi_{phi^{m-1}}(tau) / pi_theta(tau)`` (both differentiable: the denominator is the sampling
  distribution, so the weight at step 1 is identically 1); this is what execution time does too,
  and needs one interaction with ``T_i`` per meta-update. ``"fresh"`` follows the appendix: step
  ``m`` uses trajectories sampled with ``phi^{m-1}`` (``M`` interactions), and the score-function
  term then covers every batch.
* Importance weights (``iw``) are per trajectory, computed in log space from summed per-step log
  ratios (products of hundreds of ratios overflow). ``"snis"`` (default) self-normalises:
  ``w_k = K softmax_k(log w)``; it cannot overflow, is invariant to a common factor, equals 1
  exactly when the policies agree, and is consistent (biased for finite K). ``"truncated"`` uses
  ``min(w_k, iw_truncate)``; ``"raw"`` the plain ratio (log ratio clamped at 80 against overflow);
  ``"none"`` ignores the mismatch.
* Meta-gradient (:func:`meta_loss`): PPO on the post-adaptation trajectories, differentiated through
  the whole adaptation (second derivatives: ``create_graph=True``), *plus* the score-function term
  of the pre-update trajectories ``-c_g * sum_k log pi_theta(tau^k)`` (paper Eq. 4 / appendix),
  weighted by the baselined post-adaptation return of the same task, scaled so that it stands to
  the PPO term as in the true gradient (see :func:`meta_loss`). Without it the estimator is biased
  (the PPO surrogate itself is ~0 after advantage standardisation, so a DiCE box on it would not do).
  tests/test_meta_exact.py checks the estimator against exact enumeration; on its bandit the
  theta-gradient without the term is ~41% too small. The term is ``score_term`` (in
  :meth:`MetaConfig.paper`); the default leaves it out, as MAML's code does: the bias costs less than
  the term's variance (docs/lab-record.md: MAML benchmarks).
* Step sizes: ``alpha = exp(log_alpha)`` (always positive), one scalar per step (paper). Because
  theta holds the value function too, the outer value loss (orders of magnitude larger than the
  standardised PPO surrogate) then also drives the shared alpha: on the drifting-goal point this
  grew alpha_3 and collapsed the post-adaptation return (measured); ``alpha_per="net"`` gives the
  policy and the value function their own step sizes (the value loss then cannot move the policy's).
* Execution time (Algorithm 2, Eq. 7): :func:`adapt_execution` (from scratch) and
  :class:`ExecutionAdapter` (a per-agent episode buffer, batched over agents, with the first step's
  gradient at ``theta*`` kept as a running sum over the buffered episodes: what stays fixed is
  reused). Every step is importance-weighted against the stored behaviour log-probs.

Cost: every inner step is a forward and a ``create_graph`` backward, and the importance-weighted
steps evaluate the policy twice (see :func:`inner_grad`). Tiny tensors: ``torch.set_num_threads(1)``
is much faster on a shared machine (the tests set it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Protocol

import torch
from torch import Tensor

from sumo_cli.nets import policy as P

Params = dict[str, Tensor]

ROBOSUMO_BUFFER_EPISODES = 75  # paper: experience buffer of RoboSumo meta-learners at test time
LOCOMOTION_BUFFER_EPISODES = 3  # paper (Sec. 5.1 says "the previous 2 episodes" elsewhere)


@dataclass(frozen=True)
class MetaConfig:
    """Hyper-parameters of the meta-learner. Paper values where the paper gives one."""

    # --- adaptation (inner loop) ---
    num_steps: int = 3  # M, paper: 3 meta-gradient steps
    alpha_init: float = 0.5  # paper: 0.001 with its per-episode sum over ~hundreds of steps; here the inner loss is
    # a mean over steps of standardised advantages (inner_reduce, inner_norm_adv), so alpha is horizon- and
    # reward-scale-free. MAML's 0.1 (Finn et al. 2017) grew only to ~0.3 in 100 iterations on 2D navigation and its
    # first step gained 5.5; started at 0.5 the step sizes went on to ~0.6-0.9 and the first step gained 15.6
    # (docs/lab-record.md, 3 seeds each). Stored as log alpha
    alpha_per: str = "tensor"  # "step": one scalar per step (paper); "net": per step for the policy and for the
    # value function ("vf/" keys) separately; "tensor": one per step and parameter tensor (default: the value loss
    # then moves only the value function's step sizes, and each layer finds its own scale; Meta-SGD-like)
    clip_value: float | None = 1.0  # paper: steps clipped by value to [-0.1, 0.1]; None: no clipping. Default 1.0: a
    # guard against exploding steps (unclipped, a 2D-navigation run diverged at iteration 80 with one alpha at 100)
    # loose enough for learnt step sizes; a clamped element passes no gradient to its alpha, so at the paper's 0.1
    # alpha could hardly grow
    clip_mode: str = "step"  # "step": clamp(alpha*g) (paper: "meta-gradient steps ... clipped"); "grad": alpha*clamp(g)
    outer_steps: str = "post"  # the outer (PPO) objective: "last" = the return of phi^M only (paper); "post" = the
    # mean of the returns of phi^1 .. phi^M, each on the batch it sampled (inner_data="fresh" only: MAML-style k
    # consecutive steps, every one of which must pay off, as MAML++'s multi-step loss; theta's own return is not a
    # target, theta learns to collect informative episodes through the score-function term); "all" = the same mean
    # with theta's return phi^0 included. On 2D navigation (150 iterations, 5 seeds) the first step gains 25.4
    # +- 1.4, 91% of MAML's (docs/lab-record.md); "all" was within the seeds' spread of "post" before the score term was fixed
    inner_data: str = "fresh"  # training: "reuse" one batch (IW at steps >= 2) or "fresh" batch per step (appendix;
    # default: step m learns from episodes of phi^{m-1}, as at execution, where each round adapts on its own episodes);
    # read by meta_train (adapt/meta_loss decide by the number of batches they are given)
    inner_baseline: bool = True  # subtract the stored behaviour value from the reward-to-go
    inner_adv: str = "linear"  # baseline of the inner policy gradient: "value" = the stored behaviour value (as
    # collected; per inner_baseline); "linear" = a linear feature baseline refitted on each agent's inner batch
    # (MAML-RL / rllab LinearFeatureBaseline: features x, x^2, t, t^2, t^3, 1 of the network input and the step
    # index within the trajectory), which needs no trained value function
    inner_norm_adv: bool = True  # standardise the inner advantages per agent over its batch's valid steps (scale-
    # free inner steps, as MAML-RL does; alpha then means "step per unit-variance advantage")
    inner_lam: float = 1.0  # lambda of the inner returns: 1 = discounted reward-to-go (paper: "discounted rewards")
    inner_vf_coef: float = 1.0  # weight of the value-regression term that adapts the value function (not in paper)
    inner_vf_norm: bool = True  # divide that term by the per-agent variance of the return targets (scale-free)
    inner_params: tuple[str, ...] | None = None  # the parameter tensors the inner steps adapt (None: all, paper);
    # the others stay at theta
    inner_reduce: str = "step"  # "episode": (1/K) sum_k L(tau_k) as in the paper; "step": mean over steps (MAML-RL;
    # alpha does not depend on the episode length)
    iw: str = "snis"  # importance weights: "snis" | "truncated" | "raw" | "none"
    iw_truncate: float = 10.0  # cap of "truncated" weights
    train_rounds: int = 2  # read by meta_train: 2 = one task pair (T_i, T_{i+1}) per group and iteration
    # (Algorithm 1); R > 2 = every group plays R consecutive tasks as at execution time, pair r (r >= 2) adapting
    # from theta on the episodes the adapted phi_{r-1} collected, importance-weighted against it (Eq. 7), so
    # the meta-update is trained on the data it meets at execution (needs inner_data="reuse")
    # --- outer loop (PPO on the post-adaptation trajectories) ---
    lr: float = 3e-4  # paper: 3e-4 (Adam) for theta. 1e-3 learnt faster on 2D navigation for ~100 iterations,
    # then broke in longer runs (docs/lab-record.md: MAML benchmarks)
    lr_alpha: float = 0.003  # paper: 3e-4 for alpha. Applied to log alpha, Adam moves it by up to lr_alpha per
    # outer epoch (4 per iteration), so alpha can change by a factor of e in ~80 iterations; at the paper's rate
    # alpha moves by ~30% in 1,000 iterations. At 0.01, 5 of 6 longer or larger 2D-navigation runs broke after
    # 45-110 iterations with single step sizes grown to 50-190; at 0.003 (with lr 3e-4) 3 of 3 seeds held over
    # 150 iterations, none above 1.6, and their first step gained 79% of MAML's (docs/lab-record.md). At 0.03 two runs
    # diverged within 20 iterations
    gamma: float = 0.995  # paper: GAE gamma
    lam: float = 0.95  # paper: GAE lambda
    ppo_clip: float = 0.2  # paper: PPO clip 0.2, no KL penalty
    vf_coef: float = 0.5  # not in paper (baselines/SB3 default)
    ent_coef: float = 0.0  # not in paper
    normalize_adv: bool = True  # standardise the outer advantages (PPO practice)
    outer_adv: str = "value"  # "value": GAE advantages of the learnt value function; "task": the same, centred on
    # each task's mean over its valid steps before the standardisation (MAML-RL refits its baseline and normalises
    # advantages per task): a value function that does not see the hidden task (a direction, a goal velocity)
    # leaves a per-task offset in every advantage of the task, noise that a per-task constant removes without bias.
    # Off by default: on the runner's directions its first step gained less on both seeds tried (docs/lab-record.md)
    outer_epochs: int = 4  # PPO epochs per meta-iteration (not in paper); theta changes -> phi is recomputed
    outer_minibatches: int = 1  # minibatches = disjoint subsets of the tasks
    outer_target_kl: float | None = None  # stop a meta-iteration's remaining outer epochs once the epoch's mean
    # approximate KL of the sampling policies (theta and phi^1..phi^M against what collected each batch, the
    # largest of them) exceeds this (as PPOConfig.target_kl); None: all epochs. A guard for more epochs and
    # minibatches: 8 epochs of 2-4 minibatches learnt faster on the runner, then collapsed (docs/lab-record.md)
    outer_kl_lr: float | None = None  # adapt theta's learning rate to this KL per meta-iteration (the largest
    # epoch mean of approx_kl): x1.5 after an iteration below half of it, /1.5 after one above twice it, within
    # outer_lr_range (rl_games' adaptive schedule; MAML's outer TRPO step takes KL 0.01 every iteration). None: lr
    # stays. At the default lr an iteration moves theta by KL ~0.0004 (2D navigation) to 0.0002-0.0013 (runner);
    # at a target of 0.01 the runner's first step gained more (32.5 against 26.8, 3 seeds) and 2D navigation's
    # less (15.7 against 25.4): off by default (docs/lab-record.md)
    outer_lr_range: tuple[float, float] = (1e-5, 1e-2)
    max_grad_norm: float | None = 0.5  # global-norm clip (not in paper), applied separately to the policy part of
    # theta, its value part and log_alpha (one joint norm would let the large value gradients scale the policy's away)
    # --- score-function term of the pre-update trajectories ---
    score_term: bool = False  # the score-function term of the pre-update trajectories (paper: included; MAML-RL
    # code drops it). Unbiased but, weighting each task's whole pre-update log-likelihood by one return, of high
    # variance: without it (MAML's own estimator) the runner's first learnt step gained 97 instead of 27 at 300
    # iterations (3 seeds, each ahead) and 2D navigation's every step improved (5 seeds; docs/lab-record.md:
    # MAML benchmarks). MetaConfig.paper() keeps it
    score_coef: float = 1.0
    score_baseline: str = "loo"  # "loo": mean post-return of the *other* tasks in the batch; "ema"; "none"
    score_ema: float = 0.9  # decay of the "ema" baseline (kept by the training loop)
    # --- execution time (Algorithm 2) ---
    execution: str = "continue"  # "paper": Algorithm 2, every round phi = M steps from theta* on the importance-
    # weighted buffer of earlier rounds; "continue" (default): every round one learnt step from the current parameters
    # on that round's own episodes (on-policy, no importance weights), step r with alpha_min(r, M): what meta-training
    # with inner_data="fresh" optimises. The paper's rule fell below its one-update return on later rounds (docs/lab-record.md)
    buffer_episodes: int = ROBOSUMO_BUFFER_EPISODES  # paper: 75 (RoboSumo), 3 (locomotion)
    # --- recurrent nets ---
    bptt_chunk: int | None = None  # detach the recurrent state every k steps (paper trains with T=10); None: full BPTT

    def __post_init__(self) -> None:
        choices = {
            "alpha_per": ("step", "net", "tensor"),
            "clip_mode": ("step", "grad"),
            "inner_data": ("reuse", "fresh"),
            "outer_steps": ("last", "all", "post"),
            "execution": ("paper", "continue"),
            "inner_reduce": ("episode", "step"),
            "inner_adv": ("value", "linear"),
            "outer_adv": ("value", "task"),
            "iw": ("snis", "truncated", "raw", "none"),
            "score_baseline": ("loo", "ema", "none"),
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"MetaConfig.{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if self.num_steps < 1:
            raise ValueError("MetaConfig.num_steps must be >= 1")
        if self.train_rounds < 2 or (self.train_rounds > 2 and self.inner_data != "reuse"):
            raise ValueError("MetaConfig.train_rounds must be >= 2, and > 2 only with inner_data='reuse'")
        if self.alpha_init <= 0:
            raise ValueError("MetaConfig.alpha_init must be positive")
        if self.outer_target_kl is not None and self.outer_target_kl <= 0:
            raise ValueError("MetaConfig.outer_target_kl must be positive (or None: every outer epoch)")
        if self.outer_kl_lr is not None and self.outer_kl_lr <= 0:
            raise ValueError("MetaConfig.outer_kl_lr must be positive (or None: a fixed learning rate)")
        lo, hi = self.outer_lr_range
        if not 0 < lo <= hi:
            raise ValueError("MetaConfig.outer_lr_range must be (low, high) with 0 < low <= high")
        if self.outer_from is not None and self.inner_data != "fresh":
            raise ValueError(f"MetaConfig.outer_steps={self.outer_steps!r} needs inner_data='fresh' (a batch sampled by every phi^m)")

    def replace(self, **kw) -> "MetaConfig":
        return replace(self, **kw)

    @property
    def outer_from(self) -> int | None:
        """The first m whose phi^m return joins phi^M's in the outer objective (0 for "all", 1 for
        "post"), or None when only phi^M's counts ("last")."""
        return {"all": 0, "post": 1}.get(self.outer_steps)

    @property
    def phases(self) -> int:
        """Collections per meta-iteration: one per inner step plus the post-update one ("fresh"), or 2."""
        return self.num_steps + 1 if self.inner_data == "fresh" else 2

    @classmethod
    def paper(cls, **kw) -> "MetaConfig":
        """The paper's values (appendix D.1) where the defaults differ: one alpha per step initialised
        at 0.001 and trained at 3e-4 like theta, steps clipped to [-0.1, 0.1], the inner loss summed
        over each episode with the stored value as its baseline, the score-function term of the pre-update
        trajectories, Algorithm 2 at execution. On 2D navigation these adapted
        almost nothing (docs/lab-record.md's benchmark section)."""
        base = dict(num_steps=3, alpha_init=1e-3, alpha_per="step", clip_value=0.1, inner_adv="value", inner_norm_adv=False,
                    inner_vf_norm=False, inner_reduce="episode", lr=3e-4, lr_alpha=3e-4, execution="paper",
                    inner_data="reuse", outer_steps="last", score_term=True)
        return cls(**{**base, **kw})


# ----------------------------------------------------------------------------------------------
# data


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
    """A :class:`TrajBatch` from a :class:`~sumo_cli.learn.rollout.Rollout` ``(T, N)``.

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


# ----------------------------------------------------------------------------------------------
# policy model interface


class PolicyModel(Protocol):
    """What the meta-learner needs from a policy: its parameter layout and, for a batch, the
    log-probabilities of the stored actions and the value estimates (``(T, *G, N)`` each)."""

    def param_shapes(self) -> dict[str, tuple[int, ...]]: ...

    def evaluate(self, params: Params, batch: TrajBatch) -> tuple[Tensor, Tensor]: ...

    def entropy(self, params: Params) -> Tensor: ...


class GaussianModel:
    """:mod:`sumo_cli.nets.policy` (MLP / LSTM, diagonal Gaussian) as a :class:`PolicyModel`.

    ``bptt_chunk`` = L (recurrent nets): truncated BPTT. If the batch carries the behaviour's states
    at every L-th step (``batch.chunk_states`` with ``chunk_len == L``), the windows of L steps are
    unrolled in parallel from those stored (constant) states, as PPO does; otherwise the whole
    sequence is unrolled with the current parameters and the state is detached every L steps.
    None: full backpropagation through the whole batch."""

    def __init__(self, spec: P.PolicySpec, bptt_chunk: int | None = None):
        if spec.arch == "rl2":
            raise ValueError("the meta-learner adapts MLP and LSTM policies (RL^2 adapts through its state)")
        self.spec = spec
        self.bptt_chunk = bptt_chunk

    def param_shapes(self) -> dict[str, tuple[int, ...]]:
        return P.param_shapes(self.spec)

    def evaluate(self, params: Params, batch: TrajBatch) -> tuple[Tensor, Tensor]:
        spec = self.spec
        n_agent = len(batch.agent_shape)
        if spec.recurrent and self.bptt_chunk and batch.chunk_states and batch.chunk_len == self.bptt_chunk:
            mean, value = self._windowed(params, batch)
        elif spec.recurrent:
            state = batch.state0 or P.initial_state(spec, (*batch.agent_shape, batch.num_cols), batch.x.dtype)
            T = batch.num_steps
            chunk = self.bptt_chunk or T
            means, values = [], []
            for s in range(0, T, chunk):
                if s > 0:
                    state = {k: v.detach() for k, v in state.items()}
                m, v, state = P.forward_sequence(spec, params, batch.x[s : s + chunk], state, batch.first[s : s + chunk])
                means.append(m)
                values.append(v)
            mean, value = torch.cat(means), torch.cat(values)
        else:
            mean, value, _ = P.forward_sequence(spec, params, batch.x, {})
        m = torch.movedim(mean, 0, n_agent)
        a = torch.movedim(batch.actions, 0, n_agent)
        lp = torch.movedim(P.log_prob(m, params["logstd"], a), n_agent, 0)
        return lp, value

    def entropy(self, params: Params) -> Tensor:
        return P.entropy(params["logstd"])

    def _windowed(self, params: Params, batch: TrajBatch) -> tuple[Tensor, Tensor]:
        L, T, N = batch.chunk_len, batch.num_steps, batch.num_cols
        G = batch.agent_shape
        ng = len(G)
        C = -(-T // L)
        pad = C * L - T

        def win(t: Tensor, fill) -> Tensor:  # (T, *G, N, ...) -> (L, *G, C * N, ...)
            if pad:
                t = torch.cat([t, torch.full((pad, *t.shape[1:]), fill, dtype=t.dtype)], 0)
            rest = t.shape[2 + ng :]
            t = torch.movedim(t.reshape(C, L, *t.shape[1:]), 0, 1 + ng)
            return t.reshape(L, *G, C * N, *rest)

        def unwin(t: Tensor) -> Tensor:  # (L, *G, C * N, ...) -> (T, *G, N, ...)
            rest = t.shape[2 + ng :]
            t = torch.movedim(t.reshape(L, *G, C, N, *rest), 1 + ng, 0)
            return t.reshape(C * L, *G, N, *rest)[:T]

        st = {k: torch.movedim(v, 0, ng).reshape(*G, C * N, v.shape[-1]) for k, v in batch.chunk_states.items()}
        mean, value, _ = P.forward_sequence(self.spec, params, win(batch.x, 0), st, win(batch.first, False))
        return unwin(mean), unwin(value)


def as_model(model_or_spec, cfg: "MetaConfig | None" = None) -> PolicyModel:
    """A :class:`PolicySpec` becomes a :class:`GaussianModel` (with ``cfg.bptt_chunk``)."""
    if isinstance(model_or_spec, P.PolicySpec):
        return GaussianModel(model_or_spec, None if cfg is None else cfg.bptt_chunk)
    return model_or_spec


def expand_params(model: PolicyModel, params: Params, agent_shape: tuple[int, ...]) -> Params:
    """Broadcast parameters without agent dims (or with some) to ``agent_shape`` (a view)."""
    shapes = model.param_shapes()
    out = {}
    for k, s in shapes.items():
        v = params[k]
        lead = tuple(v.shape[: v.dim() - len(s)])
        if lead == tuple(agent_shape):
            out[k] = v
        elif lead == ():
            out[k] = v.expand(*agent_shape, *s)
        else:
            raise ValueError(f"parameter {k!r} has agent shape {lead}, the batch has {tuple(agent_shape)}")
    return out


def init_log_alpha(cfg: MetaConfig, model: PolicyModel | None = None, agent_shape: tuple[int, ...] = (), dtype=torch.float32) -> Tensor:
    """``log(alpha_init)`` of shape ``(*agent_shape, M)`` or ``(*agent_shape, M, n_tensors)``."""
    shape = (cfg.num_steps,)
    if cfg.alpha_per == "tensor":
        if model is None:
            raise ValueError("alpha_per='tensor' needs the model to count parameter tensors")
        shape = (cfg.num_steps, len(model.param_shapes()))
    elif cfg.alpha_per == "net":
        shape = (cfg.num_steps, 2)
    return torch.full((*agent_shape, *shape), math.log(cfg.alpha_init), dtype=dtype)


def alpha_metrics(alphas) -> dict[str, float]:
    """``meta_alpha_<m>``: the step size of inner step m (the geometric mean over its tensors when
    there is one per tensor), for the stored training metrics."""
    a = torch.as_tensor(alphas, dtype=torch.float64)
    a = a.reshape(a.shape[0], -1)
    return {f"meta_alpha_{m}": float(torch.exp(torch.log(a[m]).mean())) for m in range(a.shape[0])}


# ----------------------------------------------------------------------------------------------
# trajectories (segments) and importance weights


@dataclass
class Segments:
    """Trajectory bookkeeping for a batch: ids ``(T, Gf, N)`` into ``(Gf, S)`` slots (agent dims
    flattened to ``Gf``), which slots hold a trajectory, and K per agent."""

    flat_idx: Tensor  # (T, Gf, N) long: g * S + local id
    S: int
    valid: Tensor  # (Gf, S) bool
    K: Tensor  # (Gf,) number of trajectories
    n_steps: Tensor  # (Gf,) number of valid steps
    starts_episode: Tensor  # (Gf, S) bool: the trajectory begins with first=True
    start_t: Tensor  # (Gf, S) long: time index of the trajectory's first step (where valid)
    start_n: Tensor  # (Gf, S) long


def segments(first: Tensor, mask: Tensor) -> Segments:
    T, N = first.shape[0], first.shape[-1]
    f = first.reshape(T, -1, N).long()
    mk = mask.reshape(T, -1, N)
    Gf = f.shape[1]
    seg_in_col = torch.cumsum(f, 0) - f[0:1]  # (T, Gf, N)
    n_in_col = seg_in_col[-1] + 1  # (Gf, N)
    col_off = torch.cumsum(n_in_col, -1) - n_in_col
    local = col_off.unsqueeze(0) + seg_in_col
    S = int(n_in_col.sum(-1).max())
    flat = local + (torch.arange(Gf) * S).reshape(1, Gf, 1)
    cnt = torch.zeros(Gf * S, dtype=torch.long).index_add_(0, flat[mk], torch.ones_like(flat[mk]))
    valid = (cnt > 0).reshape(Gf, S)
    # start of each trajectory: first valid step of its id
    t_idx = torch.arange(T).reshape(T, 1, 1).expand(T, Gf, N)
    n_idx = torch.arange(N).reshape(1, 1, N).expand(T, Gf, N)
    big = T * N + 1
    key = torch.where(mk, t_idx * N + n_idx, torch.full_like(t_idx, big))
    start_key = torch.full((Gf * S,), big, dtype=torch.long).scatter_reduce(0, flat.reshape(-1), key.reshape(-1), "amin")
    start_key = start_key.clamp_max(T * N - 1).reshape(Gf, S)
    start_t, start_n = start_key // N, start_key % N
    g_idx = torch.arange(Gf).reshape(Gf, 1).expand(Gf, S)
    starts_episode = f.bool()[start_t, g_idx, start_n] & valid
    return Segments(flat, S, valid, valid.sum(-1), mk.sum((0, 2)), starts_episode, start_t, start_n)


def seg_sum(x: Tensor, seg: Segments, mask: Tensor) -> Tensor:
    """Per-trajectory sums ``(Gf, S)`` of ``x`` ``(T, *G, N)`` over valid steps (differentiable)."""
    T, N = x.shape[0], x.shape[-1]
    xf = x.reshape(T, -1, N)
    mk = mask.reshape(T, -1, N)
    Gf = xf.shape[1]
    out = torch.zeros(Gf * seg.S, dtype=x.dtype).index_add(0, seg.flat_idx[mk], xf[mk])
    return out.reshape(Gf, seg.S)


def seg_broadcast(v: Tensor, seg: Segments, like: Tensor) -> Tensor:
    """Per-trajectory values ``(Gf, S)`` back onto steps, shaped like ``like`` ``(T, *G, N)``."""
    return v.reshape(-1)[seg.flat_idx].reshape(like.shape)


def normalised_weights(log_w: Tensor, seg: Segments, cfg: MetaConfig) -> Tensor:
    """Per-trajectory importance weights ``(Gf, S)`` from log ratios, see :class:`MetaConfig.iw`.
    Invalid slots get weight 0."""
    if cfg.iw == "snis":
        lw = log_w.masked_fill(~seg.valid, float("-inf"))
        w = torch.softmax(lw, -1) * seg.K.unsqueeze(-1).to(log_w.dtype)
    elif cfg.iw == "truncated":
        w = torch.exp(torch.clamp(log_w, max=math.log(cfg.iw_truncate)))
    elif cfg.iw == "raw":
        w = torch.exp(torch.clamp(log_w, max=80.0))
    else:
        w = torch.ones_like(log_w)
    return torch.where(seg.valid, w, torch.zeros_like(w))


# ----------------------------------------------------------------------------------------------
# inner loss and adaptation


def inner_terms(logp: Tensor, values: Tensor, batch: TrajBatch, cfg: MetaConfig) -> Tensor:
    """Per-step inner loss ``-log pi * adv + c_v * 0.5 (V - R)^2`` on valid steps, ``(T, *G, N)``."""
    t = -logp * batch.adv
    if cfg.inner_vf_coef:
        sq = 0.5 * (values - batch.returns) ** 2
        if cfg.inner_vf_norm:
            sq = sq / _return_variance(batch)
        t = t + cfg.inner_vf_coef * sq
    return torch.where(batch.mask, t, torch.zeros_like(t))


def _return_variance(batch: TrajBatch) -> Tensor:
    """Per-agent variance of the return targets over the valid steps, broadcast to ``(T, *G, N)``
    (data: it scales the inner value regression to unit size, whatever the reward scale)."""
    T, N = batch.returns.shape[0], batch.returns.shape[-1]
    r = batch.returns.detach().reshape(T, -1, N)
    mk = batch.mask.reshape(T, -1, N).to(r.dtype)
    n = mk.sum((0, 2)).clamp_min(1)
    mu = (r * mk).sum((0, 2)) / n
    var = (((r - mu.reshape(1, -1, 1)) ** 2) * mk).sum((0, 2)) / n + 1e-8
    return var.reshape(1, -1, 1).expand(T, -1, N).reshape(batch.returns.shape)


def step_index(first: Tensor, mask: Tensor) -> Tensor:
    """Index of every step within its trajectory (0 at an episode start or at the first valid step
    of a column), ``(T, *G, N)`` long."""
    T = first.shape[0]
    out = torch.zeros(first.shape, dtype=torch.long)
    run = torch.zeros(first.shape[1:], dtype=torch.long)
    for t in range(T):
        run = torch.where(first[t], torch.zeros_like(run), run + 1) if t else torch.zeros_like(run)
        out[t] = run
    return out


def linear_baseline(batch: TrajBatch, reg: float = 1e-5) -> Tensor:
    """Per-agent least-squares fit of ``batch.returns`` on the features ``[x, x^2, t, t^2, t^3, 1]``
    (``t`` = step index within the trajectory / 100), as MAML-RL's ``LinearFeatureBaseline``: the
    fitted values ``(T, *G, N)``. Data only (no graph); the ridge term grows until the solve is finite."""
    T, N = batch.num_steps, batch.num_cols
    x = batch.x.detach().to(torch.float64)
    D = x.shape[-1]
    xf = x.reshape(T, -1, N, D)
    Gf = xf.shape[1]
    t = (step_index(batch.first, batch.mask).reshape(T, Gf, N, 1).to(torch.float64)) / 100.0
    feats = torch.cat([xf, xf**2, t, t**2, t**3, torch.ones_like(t)], -1)  # (T, Gf, N, F)
    m = batch.mask.reshape(T, Gf, N, 1).to(torch.float64)
    y = batch.returns.detach().reshape(T, Gf, N, 1).to(torch.float64)
    X = (feats * m).permute(1, 0, 2, 3).reshape(Gf, T * N, -1)
    Y = (y * m).permute(1, 0, 2, 3).reshape(Gf, T * N, 1)
    F = X.shape[-1]
    A, B = X.transpose(1, 2) @ X, X.transpose(1, 2) @ Y
    eye = torch.eye(F, dtype=torch.float64)
    r = reg
    for _ in range(8):
        beta = torch.linalg.solve(A + r * eye, B)
        if bool(torch.isfinite(beta).all()):
            break
        r *= 10
    fit = (feats.unsqueeze(-2) @ beta.reshape(1, Gf, 1, F, 1)).reshape(T, Gf, N)
    return fit.reshape(batch.returns.shape).to(batch.returns.dtype)


def prepare_inner(batch: TrajBatch, cfg: MetaConfig) -> TrajBatch:
    """The inner batch with the advantages ``cfg.inner_adv`` / ``cfg.inner_norm_adv`` ask for
    (unchanged for the defaults): a function of the data only, so the inner step stays a plain
    function of the parameters."""
    if cfg.inner_adv == "value" and not cfg.inner_norm_adv:
        return batch
    adv = batch.adv
    if cfg.inner_adv == "linear":
        adv = batch.returns - linear_baseline(batch)
    adv = torch.where(batch.mask, adv, torch.zeros_like(adv))
    if cfg.inner_norm_adv:
        T, N = adv.shape[0], adv.shape[-1]
        a = adv.reshape(T, -1, N)
        mk = batch.mask.reshape(T, -1, N).to(adv.dtype)
        n = mk.sum((0, 2)).clamp_min(1)
        mu = (a * mk).sum((0, 2)) / n
        sd = torch.sqrt((((a - mu.reshape(1, -1, 1)) ** 2) * mk).sum((0, 2)) / n) + 1e-8
        a = (a - mu.reshape(1, -1, 1)) / sd.reshape(1, -1, 1)
        adv = torch.where(batch.mask, a.reshape(adv.shape), torch.zeros_like(adv))
    return TrajBatch(
        x=batch.x, actions=batch.actions, logp=batch.logp, values=batch.values, returns=batch.returns, adv=adv.detach(),
        first=batch.first, mask=batch.mask, state0=batch.state0, chunk_states=batch.chunk_states, chunk_len=batch.chunk_len,
    )


def _denominator(seg: Segments, cfg: MetaConfig, dtype) -> Tensor:
    d = seg.K if cfg.inner_reduce == "episode" else seg.n_steps
    return d.clamp_min(1).to(dtype)


def inner_loss(
    model: PolicyModel,
    params: Params,
    batch: TrajBatch,
    cfg: MetaConfig,
    log_w: Tensor | None = None,
) -> Tensor:
    """The inner loss, summed over agents (each agent's loss depends only on its own slice, so
    the gradient wrt stacked params is the per-agent gradient). ``log_w`` ``(Gf, S)``: per-trajectory
    log importance weights (normalised per ``cfg.iw``); None: unweighted. For reference/tests; the
    adaptation uses :func:`inner_grad`."""
    batch = prepare_inner(batch, cfg)
    seg = segments(batch.first, batch.mask)
    lp, v = model.evaluate(params, batch)
    terms = inner_terms(lp, v, batch, cfg)
    if log_w is not None:
        terms = terms * seg_broadcast(normalised_weights(log_w, seg, cfg), seg, terms)
    per_agent = terms.reshape(terms.shape[0], -1, terms.shape[-1]).sum((0, 2))
    return (per_agent / _denominator(seg, cfg, terms.dtype)).sum()


def _grad(loss: Tensor, params: Params, create_graph: bool) -> Params:
    keys = list(params)
    gs = torch.autograd.grad(loss, [params[k] for k in keys], create_graph=create_graph, allow_unused=True)
    return {k: (torch.zeros_like(params[k]) if g is None else g) for k, g in zip(keys, gs)}


@dataclass
class InnerGrad:
    grad: Params
    logp: Tensor  # (T, *G, N) log pi_params(a|s) on the batch (with graph when create_graph)


def inner_grad(
    model: PolicyModel,
    params: Params,
    batch: TrajBatch,
    cfg: MetaConfig,
    *,
    create_graph: bool,
    ref_logp: Tensor | None = None,
    seg: Segments | None = None,
) -> InnerGrad:
    """Gradient of the inner loss at ``params``. With ``ref_logp`` (the behaviour log-probs,
    ``(T, *G, N)``), trajectories are importance-weighted by ``pi_params(tau) / exp(sum ref_logp)``.

    The weight multiplies the gradient (paper Eq. 7: ``w_k * grad L(tau_k)``), it is not itself
    differentiated by the inner gradient; but for the meta-gradient the step is a function of
    ``params`` through ``w`` too. With ``create_graph`` that is done by differentiating wrt a copy
    ``psi`` of ``params`` while ``w`` is computed from ``params`` (two forward passes)."""
    seg = seg or segments(batch.first, batch.mask)
    den = None
    if ref_logp is None or cfg.iw == "none":
        lp, v = model.evaluate(params, batch)
        terms = inner_terms(lp, v, batch, cfg)
        wrt = params
    elif not create_graph:
        lp, v = model.evaluate(params, batch)
        log_w = seg_sum((lp - ref_logp).detach(), seg, batch.mask)
        w = normalised_weights(log_w, seg, cfg)
        terms = inner_terms(lp, v, batch, cfg) * seg_broadcast(w, seg, lp)
        wrt = params
    else:
        lp, _ = model.evaluate(params, batch)
        log_w = seg_sum(lp - ref_logp, seg, batch.mask)
        w = normalised_weights(log_w, seg, cfg)
        psi = {k: t.view_as(t) for k, t in params.items()}
        lp_psi, v_psi = model.evaluate(psi, batch)
        terms = inner_terms(lp_psi, v_psi, batch, cfg) * seg_broadcast(w, seg, lp_psi)
        wrt = psi
    den = _denominator(seg, cfg, terms.dtype)
    per_agent = terms.reshape(terms.shape[0], -1, terms.shape[-1]).sum((0, 2))
    loss = (per_agent / den).sum()
    return InnerGrad(_grad(loss, wrt, create_graph), lp)


def _alpha_for(alpha_m: Tensor, key_index: int, cfg: MetaConfig, tensor: Tensor, n_agent: int) -> Tensor:
    """alpha of one step for one parameter tensor, broadcastable against it (agent dims first)."""
    if cfg.alpha_per == "tensor":
        a = alpha_m[..., key_index]
    elif cfg.alpha_per == "net":
        a = alpha_m[..., key_index]  # key_index is the net index here (0 policy, 1 value)
    else:
        a = alpha_m
    extra = tensor.dim() - a.dim()
    return a.reshape(*a.shape, *([1] * extra))


def take_step(phi: Params, grad: Params, alpha_m: Tensor, cfg: MetaConfig, n_agent: int) -> Params:
    """``phi - clip(alpha_m * grad)`` (or ``alpha_m * clip(grad)``, per ``cfg.clip_mode``)."""
    out = {}
    for i, (k, p) in enumerate(phi.items()):
        if cfg.inner_params is not None and k not in cfg.inner_params:
            out[k] = p
            continue
        idx = (1 if k.startswith("vf/") else 0) if cfg.alpha_per == "net" else i
        a = _alpha_for(alpha_m, idx, cfg, p, n_agent)
        g = grad[k]
        c = cfg.clip_value
        if c is None:
            d = a * g
        elif cfg.clip_mode == "step":
            d = torch.clamp(a * g, -c, c)
        else:
            d = a * torch.clamp(g, -c, c)
        out[k] = p - d
    return out


def _alphas(log_alpha: Tensor, cfg: MetaConfig, agent_shape: tuple[int, ...]) -> Tensor:
    """exp(log_alpha) broadcast to ``(*agent_shape, M[, P])``."""
    tail = 1 if cfg.alpha_per == "step" else 2
    a = torch.exp(log_alpha)
    lead = tuple(a.shape[: a.dim() - tail])
    if lead != tuple(agent_shape):
        if lead != ():
            raise ValueError(f"log_alpha has agent shape {lead}, the batch has {tuple(agent_shape)}")
        a = a.expand(*agent_shape, *a.shape)
    if a.shape[len(agent_shape)] != cfg.num_steps:
        raise ValueError(f"log_alpha has {a.shape[len(agent_shape)]} steps, cfg.num_steps = {cfg.num_steps}")
    return a


@dataclass
class AdaptTrace:
    phi: Params  # adapted parameters phi^M
    phis: list[Params]  # phi^0 .. phi^M
    logps: list[Tensor]  # log pi_{phi^{m-1}}(a|s) on the batch used by step m, (T, *G, N), with graph
    batches: list[TrajBatch]  # the batch of each step

    def score_logps(self, fresh: bool) -> list[Tensor]:
        """Per pre-update batch, the sum of its trajectories' log-probabilities under the policy
        that sampled them, per agent ``(Gf,)``, differentiable: ``[sum_k log pi_theta(tau^k)]``
        (reuse) or ``[sum_k log pi_{phi^m}(tau^k_m) for m = 0 .. M-1]`` (fresh)."""
        out = []
        for m in range(len(self.logps) if fresh else 1):
            lp, b = self.logps[m], self.batches[m]
            s = torch.where(b.mask, lp, torch.zeros_like(lp))
            out.append(s.reshape(s.shape[0], -1, s.shape[-1]).sum((0, 2)))
        return out


@torch.enable_grad()
def adapt_trace(
    model,
    theta: Params,
    log_alpha: Tensor,
    batches: list[TrajBatch] | TrajBatch,
    cfg: MetaConfig,
    *,
    create_graph: bool = False,
    behaviour: str = "data",
    first_grad: Params | None = None,
) -> AdaptTrace:
    """``M`` adaptation steps from ``theta`` (see the module docstring).

    ``batches``: one batch (reused by every step) or ``M`` batches (``fresh``: step m uses
    ``batches[m-1]``, sampled with ``phi^{m-1}``, no importance weights). With one reused batch,
    step m is importance-weighted by ``pi_{phi^{m-1}}(tau) / pi_beh(tau)`` where ``behaviour`` is
    ``"data"`` (``batch.logp``: the policy that actually collected it, as at execution time, Eq. 7)
    or ``"theta"`` (training-time reuse: the batch was sampled by ``pi_theta``, so the weight of step
    1 is identically 1 and the others are differentiable in numerator and denominator).
    ``first_grad``: a precomputed gradient for step 1 (see :class:`ExecutionAdapter`).
    ``create_graph``: keep the graph for the meta-gradient (second derivatives)."""
    model = as_model(model, cfg)
    if isinstance(batches, TrajBatch):
        batches = [batches]
    batches = [prepare_inner(b, cfg) for b in batches]
    M = cfg.num_steps
    if len(batches) not in (1, M):
        raise ValueError(f"adapt needs 1 batch (reused) or M={M} batches (fresh), got {len(batches)}")
    fresh = len(batches) == M and M > 1
    agent_shape = batches[0].agent_shape
    n_agent = len(agent_shape)
    phi = expand_params(model, theta, agent_shape)
    if not create_graph:
        phi = {k: v.detach().contiguous().requires_grad_(True) for k, v in phi.items()}
    alphas = _alphas(log_alpha if create_graph else log_alpha.detach(), cfg, agent_shape)
    phis, logps, used = [phi], [], []
    seg0 = None if fresh else segments(batches[0].first, batches[0].mask)
    for m in range(M):
        b = batches[m] if fresh else batches[0]
        seg = seg0 if not fresh else None
        if fresh or cfg.iw == "none":
            ref = None
        elif behaviour == "theta":
            ref = None if m == 0 else logps[0]
        elif behaviour == "data":
            ref = b.logp
        else:
            raise ValueError(f"behaviour must be 'data' or 'theta', got {behaviour!r}")
        if m == 0 and first_grad is not None:
            g = first_grad
            lp = None
        else:
            ig = inner_grad(model, phi, b, cfg, create_graph=create_graph, ref_logp=ref, seg=seg)
            g, lp = ig.grad, ig.logp
        alpha_m = alphas.select(n_agent, m)
        new = take_step(phi, g, alpha_m, cfg, n_agent)
        if not create_graph:
            new = {k: v.detach().requires_grad_(True) for k, v in new.items()}
        phi = new
        phis.append(phi)
        logps.append(lp)
        used.append(b)
    if not create_graph:
        phi = {k: v.detach() for k, v in phi.items()}
        phis[-1] = phi
    return AdaptTrace(phi, phis, logps, used)


def adapt(
    model,
    theta: Params,
    log_alpha: Tensor,
    batch: list[TrajBatch] | TrajBatch,
    cfg: MetaConfig,
    create_graph: bool = False,
    behaviour: str = "data",
) -> Params:
    """Adapted parameters ``phi`` (``M`` steps from ``theta``); see :func:`adapt_trace`.
    ``model``: a :class:`PolicyModel` or a :class:`PolicySpec`."""
    return adapt_trace(model, theta, log_alpha, batch, cfg, create_graph=create_graph, behaviour=behaviour).phi


# ----------------------------------------------------------------------------------------------
# outer objective (Algorithm 1)


def _per_agent_mean(x: Tensor, mask: Tensor) -> Tensor:
    T, N = x.shape[0], x.shape[-1]
    xf = torch.where(mask, x, torch.zeros_like(x)).reshape(T, -1, N).sum((0, 2))
    return xf / mask.reshape(T, -1, N).sum((0, 2)).clamp_min(1).to(x.dtype)


def post_returns(post: TrajBatch) -> tuple[Tensor, Tensor]:
    """Per agent ``(Gf,)``: the mean return from the start of the post-adaptation episodes (the
    ``returns`` target at each trajectory start that begins an episode; all trajectory starts if
    none does) and the mean trajectory length (valid steps / number of trajectories)."""
    seg = segments(post.first, post.mask)
    Gf = seg.valid.shape[0]
    g_idx = torch.arange(Gf).reshape(Gf, 1).expand_as(seg.start_t)
    T, N = post.num_steps, post.num_cols
    ret0 = post.returns.reshape(T, -1, N)[seg.start_t, g_idx, seg.start_n]  # (Gf, S)
    use = torch.where(seg.starts_episode.any(-1, keepdim=True), seg.starts_episode, seg.valid)
    R = (ret0 * use).sum(-1) / use.sum(-1).clamp_min(1)
    Lbar = seg.n_steps.to(ret0.dtype) / seg.K.clamp_min(1).to(ret0.dtype)
    return R, Lbar


def _ppo_terms(model, phi: Params, post: TrajBatch, cfg: MetaConfig, adv_stats, task_weights) -> tuple[Tensor, Tensor, Tensor]:
    """(PPO surrogate loss, value loss, entropy) of ``phi`` on a batch it sampled, averaged over tasks."""
    lp, v = model.evaluate(phi, post)
    mask = post.mask
    adv = (post.adv - adv_stats[0]) / adv_stats[1] if cfg.normalize_adv else post.adv
    ratio = torch.exp(lp - post.logp)
    surr = torch.minimum(ratio * adv, torch.clamp(ratio, 1 - cfg.ppo_clip, 1 + cfg.ppo_clip) * adv)
    per_agent = _per_agent_mean(surr, mask)
    tw = torch.full_like(per_agent, 1.0 / per_agent.numel()) if task_weights is None else (task_weights / task_weights.sum()).to(per_agent.dtype)
    ent = (tw * model.entropy(phi).reshape(-1)).sum() if cfg.ent_coef else torch.zeros((), dtype=lp.dtype)
    return -(tw * per_agent).sum(), 0.5 * (tw * _per_agent_mean((v - post.returns) ** 2, mask)).sum(), ent


def _loo(R: Tensor) -> Tensor:
    """Leave-one-out baseline: for every task, the mean of the other tasks' returns (0 with one task)."""
    return (R.sum() - R) / (R.numel() - 1) if R.numel() > 1 else torch.zeros_like(R)


def _score_coef(R: Tensor, Lbar: Tensor, sigma: Tensor, baseline: Tensor, cfg: MetaConfig) -> Tensor:
    """``c = score_coef (R - b) / (Lbar sigma)`` per task: the weight of a return in the score term, on
    the scale of the PPO term of the policy that earned it (mean over ``Lbar`` steps per episode,
    advantages divided by ``sigma``)."""
    return (cfg.score_coef * (R - baseline) / (Lbar * sigma)).detach()


def _score_term(slps: list[Tensor], cs: list[Tensor], first: int, tw: Tensor) -> Tensor:
    """The score-function term of the pre-update batches for an objective that is the mean of the
    returns of phi^first .. phi^M (``cs[k]``: the coefficient of phi^(first+k)'s return). Batch i
    (sampled by phi^i, used by step i+1) changes phi^(i+1) .. phi^M, so its log-probability
    ``slps[i]`` is weighted by ``(1/J) sum_{j >= max(i+1, first)} c_j`` over the J terms. With one
    term (``first = M``) every batch carries phi^M's return; R_0 (theta's own return, "all") is no
    batch's score: its PPO term is already on-policy."""
    M, J = first + len(cs) - 1, len(cs)
    score = torch.zeros((), dtype=cs[-1].dtype)
    for i, s in enumerate(slps):
        w = sum(cs[j - first] for j in range(max(i + 1, first), M + 1)) / J
        score = score - (tw * w * s).sum()
    return score


def center_adv_per_task(batch: TrajBatch) -> TrajBatch:
    """The batch with each task's (agent's) advantages less their mean over its valid steps
    (``MetaConfig.outer_adv="task"``); padding stays 0."""
    T, N = batch.num_steps, batch.num_cols
    a = batch.adv.reshape(T, -1, N)
    mk = batch.mask.reshape(T, -1, N).to(a.dtype)
    mu = (a * mk).sum((0, 2)) / mk.sum((0, 2)).clamp_min(1)
    adv = torch.where(batch.mask, (a - mu.reshape(1, -1, 1)).reshape(batch.adv.shape), torch.zeros_like(batch.adv))
    return replace(batch, adv=adv)


def adv_stats_of(batch: TrajBatch) -> tuple[Tensor, Tensor]:
    """(mean, std) of a batch's advantages over its valid steps (the outer PPO's standardisation)."""
    a = batch.adv[batch.mask]
    return a.mean(), a.std(unbiased=False) + 1e-8


@dataclass
class MetaLossInfo:
    loss: Tensor
    ppo: Tensor
    vf: Tensor
    score: Tensor
    post_return: Tensor  # (Gf,)
    score_weight: Tensor  # (Gf,)
    phi: Params
    approx_kl: float = 0.0  # the largest (r - 1) - log r over the batches' sampling policies (see outer_target_kl)


def _approx_kl(logp: Tensor, behaviour_logp: Tensor, mask: Tensor) -> float:
    """The (r - 1) - log r estimate of KL(behaviour || current), mean over the valid steps."""
    with torch.no_grad():
        log_r = torch.where(mask, logp - behaviour_logp, torch.zeros_like(logp))
        return float(((torch.exp(log_r) - 1) - log_r)[mask].mean()) if bool(mask.any()) else 0.0


def meta_loss(
    model,
    theta: Params,
    log_alpha: Tensor,
    pre: list[TrajBatch] | TrajBatch,
    post: TrajBatch,
    cfg: MetaConfig,
    *,
    baseline: Tensor | None = None,
    adv_stats: tuple[Tensor, Tensor] | None = None,
    post_stats: tuple[Tensor, Tensor] | None = None,
    behaviour: str = "theta",
    task_weights: Tensor | None = None,
    mids: list[tuple[TrajBatch, tuple[Tensor, Tensor]]] | None = None,
) -> MetaLossInfo:
    """The loss whose gradient wrt ``theta`` and ``log_alpha`` is the meta-gradient estimate of
    Algorithm 1 for a batch of task pairs (agent dims of ``pre``/``post`` = tasks).

    ``loss = PPO(phi; post) + vf_coef * value_loss(phi; post) - ent_coef * H
             - (1/G) sum_g c_g * sum_k log pi(tau^k_g)``    (last sum: pre-update trajectories)

    where ``phi = adapt(theta, alpha; pre)`` keeps its graph. The PPO term's gradient at ratio 1
    is ``-1/(Lbar_g sigma)`` times the per-episode policy gradient of the post-adaptation return
    (mean over ``Lbar_g`` steps per episode, advantages divided by their std ``sigma``), so the
    score term uses the same scale: ``c_g = score_coef * (R_g - b_g) / (Lbar_g * sigma)`` with
    ``R_g`` the mean post-adaptation return of task g and ``b_g`` its baseline (``baseline`` if
    given, else per ``cfg.score_baseline``: ``"loo"`` = mean of the other tasks' ``R``).
    ``adv_stats``/``post_stats``: (mean, std) of the advantages and (R, Lbar) computed once on the
    whole batch, so that minibatches (subsets of tasks) use the full-batch normalisation.
    ``behaviour``: see :func:`adapt_trace` (``"theta"`` at training time: ``pre`` sampled by theta).
    ``task_weights`` ``(Gf,)``: weights of the tasks in the average (default uniform; they are
    normalised to sum 1), e.g. probabilities when the expectation is enumerated exactly.
    ``mids`` (``cfg.outer_steps="all"``): for m = 0 .. M-1, the batch sampled by ``phi^m`` (outer
    targets; it is also ``pre[m]``; ``phi^0 = theta``) and its advantage statistics; the PPO and
    value terms become the mean over ``phi^0 .. phi^M``, and each pre-update batch's score term
    carries the returns of the later steps it changes (:func:`_score_term`). With
    ``outer_steps="post"`` the list starts at ``phi^1`` (m = 1 .. M-1) and the mean is over
    ``phi^1 .. phi^M``."""
    model = as_model(model, cfg)
    fresh = isinstance(pre, list) and len(pre) == cfg.num_steps and cfg.num_steps > 1
    trace = adapt_trace(model, theta, log_alpha, pre, cfg, create_graph=True, behaviour=behaviour)
    phi = trace.phi
    mid_loss = None
    if mids:
        parts = [_ppo_terms(model, trace.phis[cfg.outer_from + m], b, cfg, st, task_weights)
                 for m, (b, st) in enumerate(mids)]
        mid_loss = sum(p + cfg.vf_coef * v - cfg.ent_coef * e for p, v, e in parts)
    lp, v = model.evaluate(phi, post)
    mask = post.mask
    adv = post.adv
    if cfg.normalize_adv:
        if adv_stats is None:
            mu = adv[mask].mean()
            sigma = adv[mask].std(unbiased=False) + 1e-8
        else:
            mu, sigma = adv_stats
        adv = (adv - mu) / sigma
    else:
        sigma = torch.ones((), dtype=adv.dtype)
    ratio = torch.exp(lp - post.logp)
    surr = torch.minimum(ratio * adv, torch.clamp(ratio, 1 - cfg.ppo_clip, 1 + cfg.ppo_clip) * adv)
    per_agent = _per_agent_mean(surr, mask)
    if task_weights is None:
        tw = torch.full_like(per_agent, 1.0 / per_agent.numel())
    else:
        tw = (task_weights / task_weights.sum()).to(per_agent.dtype)
    ppo = -(tw * per_agent).sum()
    vf = 0.5 * (tw * _per_agent_mean((v - post.returns) ** 2, mask)).sum()
    loss = ppo + cfg.vf_coef * vf
    if cfg.ent_coef:
        loss = loss - cfg.ent_coef * (tw * model.entropy(phi).reshape(-1)).sum()
    if mid_loss is not None:
        loss = (loss + mid_loss) / (len(mids) + 1)
    kl = max([_approx_kl(lp, post.logp, mask)] + [_approx_kl(l, b.logp, b.mask) for l, b in zip(trace.logps, trace.batches)
                                                 if l is not None and (fresh or (l is trace.logps[0] and behaviour == "theta"))])
    R, Lbar = post_returns(post) if post_stats is None else post_stats
    if cfg.score_term:
        if baseline is None:
            baseline = _loo(R) if cfg.score_baseline == "loo" else torch.zeros_like(R)
        c = _score_coef(R, Lbar, sigma, baseline, cfg)
        cs = [c]
        if mids:  # the intermediate returns' baselines: leave-one-out ("loo" and "ema"), none with "none"
            cs = []
            for b, (_, sd) in mids:
                Rj, Lj = post_returns(b)
                bj = _loo(Rj) if cfg.score_baseline != "none" else torch.zeros_like(Rj)
                cs.append(_score_coef(Rj, Lj, sd if cfg.normalize_adv else torch.ones((), dtype=Rj.dtype), bj, cfg))
            cs.append(c)
        first = cfg.outer_from if mids else cfg.num_steps
        score = _score_term(trace.score_logps(fresh), cs, first, tw)
        loss = loss + score
    else:
        c = torch.zeros_like(R)
        score = torch.zeros((), dtype=loss.dtype)
    return MetaLossInfo(loss, ppo.detach(), vf.detach(), score.detach(), R.detach(), c, phi, kl)


class MetaLearner:
    """theta, log alpha and their Adam optimiser; :meth:`update` runs the outer PPO epochs of one
    meta-iteration on a batch of task pairs (Algorithm 1, lines 9-11)."""

    def __init__(self, model, theta: Params, cfg: MetaConfig, log_alpha: Tensor | None = None):
        self.model = as_model(model, cfg)
        self.cfg = cfg
        self.theta = {k: v.detach().clone().requires_grad_(True) for k, v in theta.items()}
        dtype = next(iter(theta.values())).dtype
        la = init_log_alpha(cfg, self.model, (), dtype) if log_alpha is None else log_alpha.detach().clone()
        self.log_alpha = la.requires_grad_(True)
        self.opt = torch.optim.Adam(
            [{"params": list(self.theta.values()), "lr": cfg.lr}, {"params": [self.log_alpha], "lr": cfg.lr_alpha}],
            eps=1e-5,
        )
        self.ema_return: float | None = None
        vf = [v for k, v in self.theta.items() if k.startswith("vf/")]
        pi = [v for k, v in self.theta.items() if not k.startswith("vf/")]
        self._clip_groups = [g for g in (pi, vf, [self.log_alpha]) if g]

    @property
    def alpha(self) -> Tensor:
        return torch.exp(self.log_alpha.detach())

    @property
    def lr(self) -> float:
        """theta's current learning rate (MetaConfig.lr unless outer_kl_lr adapts it)."""
        return float(self.opt.param_groups[0]["lr"])

    @lr.setter
    def lr(self, value: float) -> None:
        self.opt.param_groups[0]["lr"] = float(value)

    def _close_iteration(self, info: dict, epochs: int, kls: list[float]) -> None:
        """Record a meta-iteration's outer epochs and KL in ``info`` and take the lr schedule's step."""
        info["outer_epochs"] = epochs
        info["approx_kl"] = max(kls)
        info["lr"] = self._adapt_lr(info["approx_kl"])

    def _adapt_lr(self, kl: float) -> float:
        """The adaptive schedule of ``MetaConfig.outer_kl_lr`` after an iteration of KL ``kl``; the new lr."""
        target = self.cfg.outer_kl_lr
        if target is not None and math.isfinite(kl):
            lo, hi = self.cfg.outer_lr_range
            if kl > 2 * target:
                self.lr = max(lo, self.lr / 1.5)
            elif kl < target / 2:
                self.lr = min(hi, self.lr * 1.5)
        return self.lr

    def params(self) -> tuple[Params, Tensor]:
        return {k: v.detach() for k, v in self.theta.items()}, self.log_alpha.detach()

    def adapt(self, pre, create_graph: bool = False, behaviour: str = "theta") -> Params:
        return adapt(self.model, self.theta, self.log_alpha, pre, self.cfg, create_graph=create_graph, behaviour=behaviour)

    def update(self, pre: list[TrajBatch] | TrajBatch, post: TrajBatch, generator: torch.Generator | None = None,
               mids: list[TrajBatch] | None = None) -> dict:
        """``mids``: the outer-target batches sampled by ``phi^0 .. phi^{M-1}`` (``outer_steps="all"``;
        from ``phi^1`` with ``"post"``)."""
        cfg = self.cfg
        if cfg.outer_adv == "task":
            post = center_adv_per_task(post)
            mids = [center_adv_per_task(b) for b in mids] if mids else mids
        mid_stats = [adv_stats_of(b) for b in mids] if mids else None
        G = post.agent_shape[0] if post.agent_shape else 1
        mask = post.mask
        adv_stats = (post.adv[mask].mean(), post.adv[mask].std(unbiased=False) + 1e-8)
        post_stats = post_returns(post)
        R = post_stats[0]
        baseline = None
        if cfg.score_baseline == "ema":
            b = self.ema_return if self.ema_return is not None else float(R.mean())
            baseline = torch.full_like(R, b)
        nmb = max(1, min(cfg.outer_minibatches, G))
        info = {}
        epochs, kls = 0, []
        for _ in range(cfg.outer_epochs):
            perm = torch.randperm(G, generator=generator) if nmb > 1 else torch.arange(G)
            epoch_kl = []
            for chunk in perm.chunk(nmb):
                if nmb > 1:
                    pre_mb = [b.select_agents(chunk) for b in pre] if isinstance(pre, list) else pre.select_agents(chunk)
                    post_mb = post.select_agents(chunk)
                    ps = (post_stats[0][chunk], post_stats[1][chunk])
                    bl = None if baseline is None else baseline[chunk]
                    if cfg.score_baseline == "loo" and baseline is None and R.numel() > 1:
                        bl = ((R.sum() - R) / (R.numel() - 1))[chunk]
                    mids_mb = [(b.select_agents(chunk), st) for b, st in zip(mids, mid_stats)] if mids else None
                else:
                    pre_mb, post_mb, ps, bl = pre, post, post_stats, baseline
                    mids_mb = list(zip(mids, mid_stats)) if mids else None
                out = meta_loss(self.model, self.theta, self.log_alpha, pre_mb, post_mb, cfg, baseline=bl, adv_stats=adv_stats, post_stats=ps, mids=mids_mb)
                self.opt.zero_grad(set_to_none=True)
                out.loss.backward()
                if cfg.max_grad_norm is not None:
                    for group in self._clip_groups:
                        torch.nn.utils.clip_grad_norm_(group, cfg.max_grad_norm)
                self.opt.step()
                epoch_kl.append(out.approx_kl)
                info = {"loss": float(out.loss.detach()), "ppo": float(out.ppo), "vf": float(out.vf), "score": float(out.score)}
            epochs += 1
            kls.append(sum(epoch_kl) / len(epoch_kl))
            if cfg.outer_target_kl is not None and kls[-1] > cfg.outer_target_kl:
                break
        self._close_iteration(info, epochs, kls)
        if cfg.score_baseline == "ema":
            r = float(R.mean())
            self.ema_return = r if self.ema_return is None else cfg.score_ema * self.ema_return + (1 - cfg.score_ema) * r
        info["post_return"] = float(R.mean())
        info["alpha"] = self.alpha.tolist()
        return info


    def update_pairs(self, pairs: list[tuple[TrajBatch, TrajBatch, str, bool]], generator: torch.Generator | None = None) -> dict:
        """The outer update on several batches of task pairs at once (a training chain, see
        ``MetaConfig.train_rounds``): ``(pre, post, behaviour, score)`` each, ``pre`` one reused batch
        sampled by ``theta`` (``behaviour="theta"``) or by an adapted policy whose log-probs it stores
        (``"data"``, importance-weighted as at execution); ``score``: add the score-function term of
        ``pre`` (only meaningful where ``pre`` was sampled by ``pi_theta``). Every outer epoch takes one
        Adam step on the mean of the pairs' :func:`meta_loss` (full batches, no minibatches)."""
        cfg = self.cfg
        if cfg.score_baseline == "ema":
            raise ValueError("update_pairs supports the 'loo' and 'none' score baselines")
        if cfg.outer_adv == "task":
            pairs = [(pre, center_adv_per_task(post), behaviour, score) for pre, post, behaviour, score in pairs]
        stats = []
        for _, post, _, _ in pairs:
            mask = post.mask
            stats.append(((post.adv[mask].mean(), post.adv[mask].std(unbiased=False) + 1e-8), post_returns(post)))
        info: dict = {}
        epochs, kls = 0, []
        for _ in range(cfg.outer_epochs):
            total, parts = 0.0, []
            for (pre, post, behaviour, score), (adv_stats, ps) in zip(pairs, stats):
                c = cfg if score else cfg.replace(score_term=False)
                out = meta_loss(self.model, self.theta, self.log_alpha, pre, post, c, adv_stats=adv_stats, post_stats=ps, behaviour=behaviour)
                total = total + out.loss / len(pairs)
                parts.append(out)
            self.opt.zero_grad(set_to_none=True)
            total.backward()
            if cfg.max_grad_norm is not None:
                for group in self._clip_groups:
                    torch.nn.utils.clip_grad_norm_(group, cfg.max_grad_norm)
            self.opt.step()
            info = {
                "loss": float(total.detach()),
                **{k: float(sum(getattr(o, k) for o in parts) / len(parts)) for k in ("ppo", "vf", "score")},
            }
            epochs += 1
            kls.append(max(o.approx_kl for o in parts))
            if cfg.outer_target_kl is not None and kls[-1] > cfg.outer_target_kl:
                break
        self._close_iteration(info, epochs, kls)
        info["post_return"] = float(torch.stack([ps[0].mean() for _, ps in stats]).mean())
        info["post_returns"] = [float(ps[0].mean()) for _, ps in stats]
        info["alpha"] = self.alpha.tolist()
        return info


# ----------------------------------------------------------------------------------------------
# execution time (Algorithm 2, Eq. 7)


def adapt_execution(model, theta: Params, log_alpha: Tensor, buffer: TrajBatch, cfg: MetaConfig) -> Params:
    """``phi_i`` from ``theta*``, ``alpha*`` on the experience buffer collected with earlier
    policies (``buffer.logp`` = their log-probs), every step importance-weighted (Eq. 7 and its
    multi-step extension). No graph. Batched over the agent dims of ``buffer`` (``theta``/``log_alpha``
    stacked with the same leading dims, or shared)."""
    return adapt_trace(model, theta, log_alpha, [buffer], cfg, create_graph=False, behaviour="data").phi


class ExecutionAdapter:
    """Algorithm 2 for G agents at once: a per-agent buffer of the last ``capacity`` complete
    episodes (same count for every agent; columns of a :class:`TrajBatch` ``(L, G, K)``) and the
    adapted parameters ``phi`` computed from ``theta*``, ``alpha*`` on it.

    What stays fixed is reused: ``theta*`` never changes, so an episode's log-weight at the first
    step ``log pi_theta*(tau) - log pi_beh(tau)`` and its inner-loss gradient at ``theta*`` are fixed
    once it is in the buffer. The first step's gradient ``sum_k u_k grad L_k(theta*)`` is therefore
    kept as a running sum and updated with one backward pass over the added and evicted episodes
    only (signed weights), instead of a pass over the whole buffer; it is recomputed from scratch
    when evictions cancel most of it (relative precision). Steps 2..M run on the whole buffer."""

    def __init__(self, model, theta: Params, log_alpha: Tensor, cfg: MetaConfig, capacity: int | None = None, cache_first_step: bool = True, recompute_ratio: float = 1e-6):
        self.model = as_model(model, cfg)
        self.cfg = cfg
        self.theta = {k: v.detach() for k, v in theta.items()}
        self.log_alpha = log_alpha.detach()
        self.capacity = capacity or cfg.buffer_episodes
        # a baseline refitted on (or advantages standardised over) the whole buffer change every
        # buffered episode's gradient when the buffer changes: no running sum then
        self.cache = cache_first_step and cfg.inner_adv == "value" and not cfg.inner_norm_adv
        self.recompute_ratio = recompute_ratio
        self.buffer: TrajBatch | None = None
        self._lw0: Tensor | None = None  # (G, K) first-step log weights of the buffered episodes
        self._S: Params | None = None  # running sum of u_k grad L_k(theta*)
        self._m: Tensor | None = None  # (G,) log scale of u
        self.recomputes = 0

    def reset(self) -> None:
        self.buffer, self._lw0, self._S, self._m = None, None, None, None

    def _theta_for(self, b: TrajBatch) -> Params:
        return expand_params(self.model, self.theta, b.agent_shape)

    def _log_w0(self, b: TrajBatch) -> Tensor:
        with torch.no_grad():
            lp, _ = self.model.evaluate(self._theta_for(b), b)
        seg = segments(b.first, b.mask)
        lw = seg_sum(lp - b.logp, seg, b.mask)  # (G, K): one trajectory per column
        return lw.clamp(max=80.0) if self.cfg.iw == "raw" else lw  # as normalised_weights does

    def _u(self, lw: Tensor, m: Tensor) -> Tensor:
        if self.cfg.iw == "none":
            return torch.ones_like(lw)
        if self.cfg.iw == "truncated":
            return torch.exp(torch.clamp(lw, max=math.log(self.cfg.iw_truncate)))
        return torch.exp(lw - m.unsqueeze(-1))

    @torch.enable_grad()
    def _weighted_grad(self, b: TrajBatch, u: Tensor) -> Params:
        """``sum_k u_k grad L_k(theta*)`` per agent, columns of ``b`` weighted by ``u`` (G, K)."""
        th = {k: v.detach().contiguous().requires_grad_(True) for k, v in self._theta_for(b).items()}
        lp, v = self.model.evaluate(th, b)
        terms = inner_terms(lp, v, b, self.cfg) * u.reshape(1, *u.shape).to(lp.dtype)
        g = _grad(terms.sum(), th, False)
        return {k: x.to(torch.float64) for k, x in g.items()}

    def add(self, episodes: TrajBatch) -> None:
        """Append complete episodes (columns, one trajectory each, ``first[0]`` true), evicting the
        oldest beyond ``capacity``."""
        if not bool(episodes.first[0].all()):
            raise ValueError("execution-time episodes must start at step 0 of their column")
        lw_new = self._log_w0(episodes)
        if self.buffer is None:
            buf, lw = episodes, lw_new
        else:
            buf, lw = cat_columns(self.buffer, episodes), torch.cat([self._lw0, lw_new], -1)
        K = buf.num_cols
        n_evict = max(0, K - self.capacity)
        old_buf = buf
        if n_evict:
            keep = torch.arange(n_evict, K)
            buf, lw_ev, lw = select_columns(buf, keep), lw[..., :n_evict], lw[..., n_evict:]
        self.buffer, self._lw0 = buf, lw
        if not self.cache:
            return
        if self._S is None:
            self._full_recompute()
            return
        m_old = self._m
        m_new = torch.maximum(m_old, lw_new.max(-1).values) if self._scaled else m_old
        scale = torch.exp(m_old - m_new)
        S = {k: v * scale.reshape(-1, *([1] * (v.dim() - 1))).to(v.dtype) for k, v in self._S.items()}
        parts, us = [episodes], [self._u(lw_new, m_new)]
        mass_before = self._u(torch.cat([lw, lw_ev], -1) if n_evict else lw, m_new).sum(-1)
        if n_evict:
            ev = select_columns(old_buf, torch.arange(n_evict))
            u_ev = self._u(lw_ev, m_new)
            parts.append(ev)
            us.append(-u_ev)
            mass_after = self._u(lw, m_new).sum(-1)
            if bool((mass_after < self.recompute_ratio * mass_before).any()):
                self._full_recompute()
                return
        b = parts[0] if len(parts) == 1 else cat_columns(parts[0], parts[1])
        d = self._weighted_grad(b, torch.cat(us, -1))
        self._S = {k: S[k] + d[k] for k in S}
        self._m = m_new

    @property
    def _scaled(self) -> bool:
        """Whether the running sums are kept relative to exp(m) (self-normalised and raw weights)."""
        return self.cfg.iw in ("snis", "raw")

    def _full_recompute(self) -> None:
        self.recomputes += 1
        lw = self._lw0
        m = lw.max(-1).values if self._scaled else torch.zeros_like(lw[..., 0])
        self._m = m
        self._S = self._weighted_grad(self.buffer, self._u(lw, m))

    def first_grad(self) -> Params:
        """The first step's inner gradient at ``theta*`` from the running sum."""
        lw, m, cfg = self._lw0, self._m, self.cfg
        seg = segments(self.buffer.first, self.buffer.mask)
        den = _denominator(seg, cfg, torch.float64)
        if cfg.iw == "snis":
            s = seg.K.to(torch.float64) / torch.exp(lw - m.unsqueeze(-1)).to(torch.float64).sum(-1)
        elif cfg.iw == "raw":
            s = torch.exp(m).to(torch.float64)
        else:
            s = torch.ones_like(den)
        f = s / den
        dtype = next(iter(self.theta.values())).dtype
        return {k: (v * f.reshape(-1, *([1] * (v.dim() - 1)))).to(dtype) for k, v in self._S.items()}

    def compute(self) -> Params:
        """Adapted parameters ``phi`` for the next round (``theta*`` if the buffer is empty)."""
        if self.buffer is None:
            return dict(self.theta)
        fg = self.first_grad() if self.cache else None
        return adapt_trace(self.model, self.theta, self.log_alpha, [self.buffer], self.cfg, create_graph=False, behaviour="data", first_grad=fg).phi


class ContinueAdapter:
    """The execution-time default (``cfg.execution="continue"``): after round r (r = 1, 2, ...), one
    learnt step from the current parameters on that round's episodes, with the step size of inner
    step ``min(r, M)``; on-policy, so the importance weights are exactly 1. Same interface as
    :class:`ExecutionAdapter` (:meth:`add` a round's episodes ``(L, *G, K)``, :meth:`compute`)."""

    def __init__(self, model, theta: Params, log_alpha: Tensor, cfg: MetaConfig):
        self.model = as_model(model, cfg)
        self.cfg = cfg
        self.theta = {k: v.detach() for k, v in theta.items()}
        self.log_alpha = log_alpha.detach()
        self.reset()

    def reset(self) -> None:
        self.phi: Params = dict(self.theta)
        self.rounds = 0

    def add(self, episodes: TrajBatch) -> None:
        tail = 1 if self.cfg.alpha_per == "step" else 2
        dim = self.log_alpha.dim() - tail
        m = min(self.rounds, self.cfg.num_steps - 1)
        la = self.log_alpha.narrow(dim, m, 1)
        phi = expand_params(self.model, self.phi, episodes.agent_shape)
        self.phi = adapt_trace(self.model, phi, la, [episodes], self.cfg.replace(num_steps=1), create_graph=False, behaviour="data").phi
        self.rounds += 1

    def compute(self) -> Params:
        return dict(self.phi)


def execution_adapter(model, theta: Params, log_alpha: Tensor, cfg: MetaConfig):
    """The adapter ``cfg.execution`` asks for (:class:`ContinueAdapter` or :class:`ExecutionAdapter`)."""
    if cfg.execution == "continue":
        return ContinueAdapter(model, theta, log_alpha, cfg)
    return ExecutionAdapter(model, theta, log_alpha, cfg)
