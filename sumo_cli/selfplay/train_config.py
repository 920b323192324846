"""The settings of a sumo training run (:class:`TrainConfig`), stored with the run and reused on
resume. Plain data and checks only: importable without torch or MuJoCo, so that ``sumo train``
answers bad settings at once; :mod:`sumo_cli.selfplay.selfplay` trains with them."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from sumo_cli.vocabulary import FEATURES, PHYSICS, START_RADIUS

SELF = "self"
#: The inner-data choices of a meta run (TrainConfig.meta_inner).
META_INNER = ("fresh", "reuse")


class StoredConfig:
    """A run's settings as stored with it: plain JSON out, and back in (unknown keys ignored, so a
    run stored by an older sumo still resumes)."""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict):  # noqa: ANN206
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass
class TrainConfig(StoredConfig):
    """Everything that determines a training run (stored with the run; resume reuses it)."""

    recipe: str = ""  # the named preset (learn.recipes) this run started from; provenance only
    body: str = "ant"
    arch: str = "lstm"  # mlp | lstm (RL^2 is the strategy rl2 on an lstm)
    features: str = "none"  # extra observations the policy computes (nets.features): none | ego | ego-past
    strategy: str = "none"  # none | track | rl2 (| meta, through register_learner)
    opponents: list[str] = field(default_factory=lambda: [SELF])  # "self" = own snapshots;
    # agent names (optionally name@version to pin a version)
    init_from: str = ""  # name@version whose policy and observation statistics replace the fresh weights
    # of version 0 (same body, architecture and features); "" = fresh weights from the seed. The paper
    # trains its adaptation strategies against a pre-trained pool; starting them from that pool too is
    # this project's shortcut (fewer env steps), stated wherever it is used
    iterations: int = 100
    seed: int = 0
    physics: str = "faithful"  # faithful (RK4, as the original) | fast (implicitfast, ~3x faster)
    # --- the batch of one iteration ------------------------------------------------------------
    n_envs: int = 8  # bout slots (columns)
    num_steps: int = 512  # steps per column per iteration (>= 501: a whole bout fits)
    rollout_shards: int = 2  # rollout jobs per iteration (run in parallel with -j); part of the result
    opponent_samples: int = 8  # opponent snapshots drawn per shard per iteration
    opponent_stride: float = 1.0  # a stored opponent's versions up to stride x k are eligible at iteration k
    # (the paper: 1, its learners trained as long as the pool, so [1, k] is the same progress); a learner
    # of K iterations against a pool of runs of S x K iterations uses S to meet the pool at the same share
    # of its history (a population plan's short adaptation learners against its longer pre-trained pool)
    episodes_per_opponent: int = 0  # bouts per interaction with one opponent; 0 = 1, or 3 for rl2
    # --- reward: r = alpha * dense + (1 - alpha) * sparse, alpha 1 -> 0 linearly -----------------
    anneal_iterations: int = 500  # alpha reaches 0 at iteration anneal_iterations + 1 (0: sparse only)
    anneal_start: float = 1.0  # alpha at iteration 1 (the reference: 1, dense only). Below 1 the
    # outcome counts from the start: with alpha = 1 an untrained agent that leaves the tatami loses
    # nothing, and the reference's always-negative push term makes an early exit pay
    control_coef: float = 0.1  # the reference shaping: -0.1 sum a^2
    push_coef: float = 10.0  # -10 exp(-|opponent xy|)
    move_coef: float = 0.1  # 0.1 max(0, v . u)
    centre_coef: float = 0.0  # -c |own xy| (appendix's "stay near the centre"; off in the reference)
    approach_coef: float = 0.0  # +c x (signed closing speed of the torsos); not in the reference
    push_out_coef: float = 0.0  # +c x (speed at which the opponent's torso leaves the centre); not in
    # the reference: a potential-based push reward that is zero on average for a standing opponent
    tilt_coef: float = 0.0  # +c x (rate of change of the opponent torso's tilt minus the own); not in
    # the reference: the original LSTMs win by lifting the opponent's front (README: Results)
    # --- curriculum (all off by default: the reference conditions) -------------------------------
    start_radius: float | None = None  # first iteration's start radius (None: the reference 1.15)
    start_radius_iterations: int = 0  # linear to 1.15 over this many iterations (0: stays)
    face_opponent: bool = False  # start turned toward the opponent
    face_spread_iterations: int = 0  # with face_opponent: the heading error's bound grows linearly
    # from 0 at iteration 1 to 180 degrees (a uniform heading, as in the reference start) over this
    # many iterations, after which bouts start from the reference start (0: always facing exactly)
    motionless_iterations: int = 0  # the first iterations play only motionless opponents
    motionless_fraction: float = 0.0  # afterwards, this share of interactions is motionless
    # --- PPO (the paper's clip/lr/gamma/lambda/BPTT; see PPOConfig) ------------------------------
    lr: float = 3e-4
    init_logstd: float = 0.0  # initial log standard deviation of the actions (0: std 1, the nets'
    # default; lower makes the untrained agent less likely to throw itself off the tatami)
    epochs: int = 10
    num_minibatches: int = 8  # minibatches of 512 steps (MLP) or ~51 BPTT windows (recurrent). The
    # paper's minibatches were large (8,000); CleanRL's 32 of 128 steps cost the MLP twice the update
    # time for no measured gain (README: Performance, Results). 0 = the choice of runs stored before this
    # default: 32 for the MLP, 8 for the recurrent nets (so that they resume unchanged)
    ent_coef: float = 0.0
    reward_scale: float = 0.01  # returns reach +-2000: scaled so the value loss does not swamp the
    # global gradient-norm clip (advantages are standardised anyway)
    # --- kickstarting (ppo.kickstart; for strategy meta a phase of its own after the outer update, on
    # theta's own bouts: meta_train.distillation, MetaLearner.distill) ---------------------------------
    teacher: str = ""  # name@version of a stored MLP or LSTM policy of the same observation (body and features) to
    # imitate; "" = none; "auto" (the fight recipe) is resolved when the run is created: the body's MLP for a
    # recurrent learner if the database has one, else none ("auto-both", the fight recipe's Spider: also the
    # body's LSTM for an MLP learner). On the fight recipe alone the Ant LSTM plateaued
    # at 81% against motionless Ants, where the Ant MLP reached 98% (README: Results)
    teacher_coef: float = 1.0  # weight of KL(teacher || policy) at iteration 1 (Schmitt et al. 2018 start at 1 too)
    teacher_iterations: int = 100  # the weight decays linearly to 0 over this many iterations; plain PPO after
    # --- meta-learning (strategy meta) ------------------------------------------------------------
    alpha_init: float = 0.5  # the learnt step sizes' start (MetaConfig.alpha_init: 0.5, chosen on 2D
    # navigation from fresh weights). A warm-started learner (--init-from) is already a good policy that one
    # noisy step of 0.5 per unit-variance advantage can only spoil: from ant-mlp@588 its held-out return
    # fell after adaptation from the first iteration on (README: Results, meta-learning on RoboSumo)
    alpha_init_body: float | None = None  # the start of the step sizes of the tensors below the output layers
    # (None: alpha_init, every tensor alike). A small value adapts mostly the heads (the policy's and the value
    # function's output layers and the log std): the "adapt a small part of the policy" candidate of issue 47,
    # with every step size still learnt, so meta-training can move the body's too
    meta_inner: str = "fresh"  # the inner steps' data (MetaConfig.inner_data): "fresh" = step m learns from
    # episodes of phi^{m-1}, the outer loss on every phi^m (outer_steps "post"); "reuse" = all M steps from theta on
    # the one batch theta collected (importance-weighted at steps >= 2), the outer loss on phi^M alone: the update
    # games apply (Algorithm 2 on the last rounds' episodes, adapt/meta_execution), at half the env steps
    heldout_every: int = 10  # the held-out gain is measured on the first and every this many meta-updates (one or
    # two more phases of env steps each, not training data: the run trains the same either way). 10 costs 2.5-5% of
    # the env steps; the bar on the last 20% of a run wants several measurements there (a t-interval over 2 or 3
    # measurements is 4-13 standard errors wide), so short runs that are judged on it measure every 2-3
    # --- snapshots and evaluation ----------------------------------------------------------------
    snapshot_every: int = 1  # the paper snapshots every iteration
    eval_every: int = 0  # evaluate vs a motionless opponent under faithful conditions (0: never)
    eval_bouts: int = 8

    def __post_init__(self) -> None:
        self.opponents = list(self.opponents) or [SELF]

    def ppo(self):  # noqa: ANN201 - learn.ppo.PPOConfig
        from sumo_cli.ppo.ppo import PPOConfig

        mb = self.num_minibatches or (32 if self.policy_arch == "mlp" else 8)
        return PPOConfig(lr=self.lr, epochs=self.epochs, num_minibatches=mb,
                         ent_coef=self.ent_coef, reward_scale=self.reward_scale, num_steps=self.num_steps)

    def shaping(self):  # noqa: ANN201 - learn.sumo_vec.Shaping
        from sumo_cli.selfplay.sumo_vec import Shaping

        return Shaping(self.control_coef, self.push_coef, self.move_coef, self.centre_coef, self.approach_coef,
                       self.push_out_coef, self.tilt_coef)

    @property
    def interaction_episodes(self) -> int:
        return self.episodes_per_opponent or (3 if self.strategy == "rl2" else 1)

    @property
    def policy_arch(self) -> str:
        return "rl2" if self.strategy == "rl2" else self.arch

    @property
    def steps_per_iteration(self) -> int:
        return self.n_envs * self.num_steps

    def check(self) -> list[str]:
        """What is wrong with this configuration, as sentences (empty: nothing)."""
        bad = []
        if self.opponent_stride < 1.0:
            bad.append(f"opponent-stride must be at least 1, got {self.opponent_stride}")
        ints = {"iterations": 1, "n_envs": 1, "num_steps": 1, "rollout_shards": 1, "opponent_samples": 1,
                "epochs": 1, "num_minibatches": 0, "snapshot_every": 1, "eval_bouts": 1}
        for name, low in ints.items():
            if getattr(self, name) < low:
                bad.append(f"{name.replace('_', '-')} must be at least {low}, got {getattr(self, name)}")
        for name in ("anneal_iterations", "start_radius_iterations", "motionless_iterations", "eval_every",
                     "episodes_per_opponent", "face_spread_iterations"):
            if getattr(self, name) < 0:
                bad.append(f"{name.replace('_', '-')} must not be negative, got {getattr(self, name)}")
        if not 0.0 <= self.motionless_fraction <= 1.0:
            bad.append(f"motionless-fraction must be in [0, 1], got {self.motionless_fraction}")
        if self.start_radius is not None and not 0.3 <= self.start_radius <= 1.9:
            bad.append(f"start-radius must be in [0.3, 1.9] m (the reference is {START_RADIUS}), got {self.start_radius}")
        if self.face_spread_iterations and not self.face_opponent:
            bad.append("face-spread-iterations needs --face-opponent")
        if self.features not in FEATURES:
            bad.append(f"features must be one of {', '.join(FEATURES)}, got {self.features!r}")
        if self.physics not in PHYSICS:
            bad.append(f"physics must be {' or '.join(PHYSICS)}, got {self.physics!r}")
        if not 0.0 <= self.anneal_start <= 1.0:
            bad.append(f"anneal-start must be in [0, 1], got {self.anneal_start}")
        if self.lr <= 0 or self.reward_scale <= 0:
            bad.append("lr and reward-scale must be positive")
        if self.teacher_coef < 0 or self.teacher_iterations < 0:
            bad.append("teacher-coef and teacher-iterations must not be negative")
        if self.alpha_init <= 0:
            bad.append(f"alpha-init must be positive, got {self.alpha_init}")
        if self.alpha_init_body is not None and self.alpha_init_body <= 0:
            bad.append(f"alpha-init-body must be positive, got {self.alpha_init_body}")
        if self.heldout_every < 1:
            bad.append(f"heldout-every must be at least 1, got {self.heldout_every}")
        if self.meta_inner not in META_INNER:
            bad.append(f"meta-inner must be {' or '.join(META_INNER)}, got {self.meta_inner!r}")
        if self.n_envs < self.rollout_shards:
            bad.append(f"n-envs ({self.n_envs}) must be at least the number of rollout shards ({self.rollout_shards})")
        return bad
