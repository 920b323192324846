"""The meta-learner of "Continuous Adaptation via Meta-Learning" (Al-Shedivat et al., ICLR 2018).

Written against generic tensors (a :class:`TrajBatch`, time-major like :class:`Rollout`) and a
small policy-model interface (:class:`PolicyModel`; :class:`GaussianModel` wraps the pure-function
policies of :mod:`sumo_cli.nets.policy`), not against RoboSumo. The generic training loop over a
VecEnv is in :mod:`sumo_cli.meta.meta_train`.

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
  :mod:`benchmarks.meta_experiment`). ``inner_params`` restricts the inner steps to some
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

from dataclasses import dataclass, replace

from torch import Tensor

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
