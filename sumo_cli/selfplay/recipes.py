"""Named training recipes: presets of :class:`~sumo_cli.selfplay.selfplay.TrainConfig` for a new
``sumo train`` run (every option typed on the command line still overrides its recipe's value).

The dataclass defaults of ``TrainConfig`` are the paper's and the reference environment's values;
they stay the defaults of runs stored before recipes existed, so those resume unchanged. A recipe
is recorded with its run (``TrainConfig.recipe``) for provenance; the run's full configuration is
stored as well, so a recipe changed later never changes a stored run.

Each value of a recipe carries its reason: a measurement (docs/lab-record.md) or a source.
"""

from __future__ import annotations

from dataclasses import dataclass, field


#: ``TrainConfig.teacher`` value meaning "the body's MLP if the database has one, for a recurrent
#: learner" (resolved to ``name@version`` when the run is created; see training.check_new_run)
AUTO_TEACHER = "auto"
#: as AUTO_TEACHER, and for an MLP learner the body's LSTM if the database has one
AUTO_TEACHER_BOTH = "auto-both"


@dataclass(frozen=True)
class Recipe:
    name: str
    summary: str
    values: dict = field(default_factory=dict)  # TrainConfig field -> value
    body_values: dict = field(default_factory=dict)  # body -> {TrainConfig field -> value}, over ``values``


PAPER = Recipe("paper", "the paper's and the reference environment's values: reference shaping (control 0.1, "
               "push 10, move 0.1) annealed to the sparse outcome over 500 updates, faithful physics, "
               "8 x 512 env steps per update")

# Learns to push from a facing start within minutes (docs/lab-record.md: earlier recipes).
PUSH = Recipe("push", "the earlier small-batch recipe: closing-in reward, facing start, motionless opponents", {
    "physics": "fast",
    "approach_coef": 5.0, "push_coef": 0.0, "move_coef": 0.0, "control_coef": 0.02,
    "anneal_start": 0.9, "anneal_iterations": 100_000,
    "face_opponent": True, "motionless_iterations": 100_000,
    "init_logstd": -1.0,
})

FIGHT = Recipe("fight", "wins from the standard start: large batches, the bout's geometry in the agent's "
               "frame, closing-in and push-out rewards, motionless opponents first, then self-play", {
    # The policy sees the opponent and the tatami in its own heading frame (nets.features "ego"):
    # from the standard start the opponent may be behind the agent, and turning toward it from world
    # coordinates and a quaternion is a product of inputs that a tanh MLP learns slowly.
    "features": "ego",
    # implicitfast is ~3x faster than RK4 and reproduces the original agents' statistics (docs/lab-record.md:
    # the original policies); every evaluation uses the faithful physics.
    "physics": "fast",
    # 64 bout slots x 512 steps = 32,768 env steps per update: large batches were "critical for
    # learning in the competitive setting" (the paper); the 4,096-step batches of earlier recipes
    # learned to draw, not to win.
    "n_envs": 64,
    # Shaping: potential-based rewards for closing in (5 x closing speed, m/s) and for pushing the
    # opponent away from the centre (5 x its radial speed); the reference's push term (negative at
    # every step) and rectified move term are off; a small control cost. The outcome is weighted 0.1
    # from the first update and the weights are held (no annealing within a run of this length).
    "approach_coef": 5.0, "push_out_coef": 5.0, "push_coef": 0.0, "move_coef": 0.0, "control_coef": 0.02,
    "anneal_start": 0.9, "anneal_iterations": 100_000,
    # std 0.37 at the start: with std 1 the untrained Ant throws itself off the tatami.
    "init_logstd": -1.0,
    # Motionless opponents first (a target that does not run away), then self-play against the own
    # snapshots with a share of motionless opponents kept, so pushing a standing body is not forgotten.
    "motionless_iterations": 200,
    "motionless_fraction": 0.3,
    "iterations": 600,
    # A recurrent learner (LSTM, RL^2) is kickstarted by the body's MLP when the database has one
    # (`<body>-mlp`, e.g. the shipped ones; ppo.kickstart): without a teacher the Ant LSTM plateaued at
    # 81% against motionless bodies after 19.7 M env steps, with ant-mlp@588 it passed 90% at 0.66 M.
    "teacher": AUTO_TEACHER,
}, body_values={
    # A motionless Spider sags below the fall line by itself (a win for nothing), so the Spider's
    # motionless opponents are the shipped Ant and Bug MLPs' bodies (the versions its earlier
    # policies trained against), and half of its bouts stay motionless after the first 100
    # iterations: it first has to learn to stand. The rest of its bouts are Spiders: its own snapshots
    # and the shipped still-spider. Measured (docs/lab-record.md: Spider): the Spider runs that played
    # only Ants and Bugs (500 motionless iterations) won 60% and 62% against their versions at 20% of
    # the run (bar 70%); with Spiders in the pool the MLP's version 600 won 72.4% against its 120,
    # and 95.8 / 90.6 / 97.4% against a motionless Ant, a motionless Bug and random actions.
    # A Spider MLP is kickstarted by the body's LSTM when the database has one (the shipped spider-lstm):
    # alone, the Spider MLP won 83-91% of faithful bouts against motionless bodies whichever run trained it;
    # taught by the Spider LSTM shipped then (kick-spider-lstm@260) it won 92-93% on fresh seeds after
    # 300 iterations (docs/lab-record.md).
    # Since the population shipped (policies/population.toml), the motionless bodies are the shipped Ant and
    # Bug MLPs at any version up to the learner's progress, and still-spider no longer ships.
    "spider": {"opponents": ["self", "ant-mlp", "bug-mlp"],
               "motionless_iterations": 100, "motionless_fraction": 0.5, "teacher": AUTO_TEACHER_BOTH},
})

# The adaptation learners of a population (policies/population.toml) start from, or are taught by, a
# pre-trained pool agent and train against the pool (the paper's curriculum), on a budget of minutes per
# learner on 2 cores rather than the paper's cluster-days: these two recipes are the fight recipe's
# values with what changes for them.
META = Recipe("meta", "--strategy meta warm-started from a pool agent (--init-from): 8 tasks of 4 bout "
              "slots per phase, small learnt step sizes, no motionless opponents, 10 iterations", {
    **FIGHT.values,
    # 32 slots x 512 steps per phase (8 tasks of 4 slots): the size of every meta run measured on RoboSumo
    # (README: Results, meta-learning on RoboSumo; ~30 s per iteration on one core). The default 64 slots
    # double the cost of an iteration for the same number of tasks.
    "n_envs": 32,
    # A warm-started fighter's action std is 0.08-0.11: an initial step size of 0.05 already cut its training
    # bouts won from 57% to 34% within 10 iterations; 0.01 was the largest that did no measured harm
    # (README: Results). From fresh weights use --alpha-init 0.5 (MetaConfig's default).
    "alpha_init": 0.01,
    # The tasks are the pool's consecutive versions; a motionless opponent has no next version to adapt to.
    "motionless_iterations": 0, "motionless_fraction": 0.0,
    # Kickstarting is not defined for the meta-learner's outer loss.
    "teacher": "",
    # 10 meta-updates (~0.35 M env steps, ~5 minutes on one core): the five stages are versions 2, 4, .., 10.
    # Measured so far from a warm start: no adaptation gain in either direction within 30-104 iterations
    # (README: Results), so a longer run buys no measured gain; the gain is reported per learner.
    "iterations": 10,
}, body_values={"spider": {}})

RL2 = Recipe("rl2", "--strategy rl2 taught by the body's MLP: the fight recipe with a short motionless phase, "
             "40 iterations, teacher weight gone after 20", {
    **FIGHT.values,
    # Kickstarted by the body's MLP (ppo.kickstart), as the fight recipe's LSTMs: the Ant LSTM passed 90%
    # against motionless Ants at 0.66 M env steps with a teacher, and plateaued at 81% after 19.7 M without.
    "teacher": AUTO_TEACHER, "teacher_iterations": 20,
    # 10 iterations against motionless bodies (the teacher already pushes), then the pool with 30% motionless.
    "motionless_iterations": 10,
    "iterations": 40,
}, body_values={"spider": {"motionless_iterations": 10, "motionless_fraction": 0.5, "teacher": AUTO_TEACHER}})

RECIPES = {r.name: r for r in (FIGHT, META, RL2, PAPER, PUSH)}
DEFAULT = FIGHT.name
#: The recipe of a new run whose --recipe is not given, by --strategy.
DEFAULT_BY_STRATEGY = {"meta": META.name, "rl2": RL2.name}


def default_recipe(strategy: str | None) -> str:
    return DEFAULT_BY_STRATEGY.get((strategy or "none").strip().lower(), DEFAULT)


def recipe_values(name: str, body: str | None = None) -> dict:
    """The TrainConfig values of recipe ``name`` for a learner of ``body`` (a ValueError names the
    known recipes)."""
    if name not in RECIPES:
        raise ValueError(f"unknown recipe {name!r}; choose one of {', '.join(RECIPES)}")
    recipe = RECIPES[name]
    return {"recipe": name, **recipe.values, **recipe.body_values.get(body, {})}
