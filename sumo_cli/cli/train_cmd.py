"""`sumo train`: train an agent with PPO by self-play or against a pool of stored opponents, or
(``--env locomotion``) on the nonstationary-locomotion training pairs; resumable after Ctrl-C or a
kill, exactly."""

from __future__ import annotations

from typing import Optional

import typer

from sumo_cli.cli.common import (
    err_console, first_interrupt_only, friendly, open_db, print_json, require_positive, resolve_workers, resume_command,
)
from sumo_cli.cli.markup import esc
from sumo_cli.compete.wording import count

# Options that define a run; with --resume the stored values are used and these must be left out.
_RUN_OPTIONS = {
    "recipe": "--recipe", "env": "--env", "horizon": "--horizon", "hidden": "--hidden", "body": "--body", "arch": "--arch", "features": "--features", "strategy": "--strategy", "name": "--name", "opponents": "--opponents", "init_from": "--init-from",
    "iterations": "--iterations", "seed": "--seed", "physics": "--physics", "envs": "--envs", "steps": "--steps",
    "shards": "--shards", "opponent_samples": "--opponent-samples", "opponent_stride": "--opponent-stride", "episodes_per_opponent": "--episodes-per-opponent",
    "anneal": "--anneal", "control_coef": "--control-coef", "push_coef": "--push-coef", "move_coef": "--move-coef",
    "centre_coef": "--centre-coef", "approach_coef": "--approach-coef", "push_out_coef": "--push-out-coef", "tilt_coef": "--tilt-coef", "anneal_start": "--anneal-start", "start_radius": "--start-radius", "start_radius_iterations": "--start-radius-iterations",
    "face_opponent": "--face-opponent", "face_spread_iterations": "--face-spread-iterations", "motionless_iterations": "--motionless-iterations",
    "motionless_fraction": "--motionless-fraction", "lr": "--lr", "init_logstd": "--init-logstd", "epochs": "--epochs", "minibatches": "--minibatches",
    "ent_coef": "--ent-coef", "reward_scale": "--reward-scale", "alpha_init": "--alpha-init", "alpha_init_body": "--alpha-init-body", "meta_inner": "--meta-inner", "heldout_every": "--heldout-every", "teacher": "--teacher", "teacher_coef": "--teacher-coef", "teacher_iterations": "--teacher-iterations", "snapshot_every": "--snapshot-every",
    "eval_every": "--eval-every", "eval_bouts": "--eval-bouts",
}
# Options of sumo training that mean nothing for --env locomotion, and the reverse.
_SUMO_ONLY = ("recipe", "body", "features", "opponents", "init_from", "steps", "shards", "opponent_samples", "opponent_stride", "episodes_per_opponent", "anneal",
              "control_coef", "push_coef", "move_coef", "centre_coef", "approach_coef", "push_out_coef", "tilt_coef", "anneal_start", "start_radius",
              "start_radius_iterations", "face_opponent", "face_spread_iterations", "motionless_iterations", "motionless_fraction",
              "eval_every", "eval_bouts", "alpha_init", "alpha_init_body", "meta_inner", "heldout_every", "teacher", "teacher_coef", "teacher_iterations")
_LOCOMOTION_ONLY = ("horizon", "hidden")
# option name -> LocoConfig field
_LOCO_FIELDS = {"envs": "n_envs", "minibatches": "num_minibatches"}
# option name -> TrainConfig field
_FIELDS = {
    "envs": "n_envs", "steps": "num_steps", "shards": "rollout_shards", "anneal": "anneal_iterations",
    "minibatches": "num_minibatches",
}


def _check_names(resume, env, body, arch, strategy, recipe, features, workers) -> None:  # noqa: ANN001
    """The typos a new run can have, answered before torch and MuJoCo are imported."""
    from sumo_cli.errors import UserError
    from sumo_cli.names import ARCHS, BODIES, STRATEGIES
    from sumo_cli.selfplay.recipes import RECIPES
    from sumo_cli.vocabulary import FEATURES

    if workers is not None and workers < 1:
        raise UserError(f"--workers must be at least 1, got {workers}")
    if resume is not None or (env or "sumo").strip().lower() != "sumo":
        return
    choices = {"--body": (body, BODIES), "--arch": (arch, ARCHS), "--strategy": (strategy, STRATEGIES),
               "--recipe": (recipe, tuple(RECIPES)), "--features": (features, FEATURES)}
    for option, (value, allowed) in choices.items():
        if value is not None and value.strip().lower() not in allowed:
            raise UserError(f"unknown {option[2:]} {value!r}; choose one of {', '.join(allowed)}")


def _say_numbered_name(agent_name: str, body: str, arch: str, strategy: str) -> None:
    """One line when the run's agent is not the combination's canonical name because a shipped agent
    holds that (training.new_agent_name)."""
    from sumo_cli.names import canonical_name

    canonical = canonical_name(body, arch, strategy)
    if agent_name.startswith(canonical + "-"):
        err_console.print(f"{canonical} is a shipped agent, so this run trains {agent_name} (--name NAME picks "
                          "another name)", highlight=False, soft_wrap=True)


def _stored_pace(db, run_id: int, left: int) -> str:  # noqa: ANN001
    """``; about 2 h 10 min left at ...`` for a resumed run: its iterations so far say how long the rest
    takes before this session's first one ends; "" for a new run."""
    from sumo_cli.runtime.estimate import duration
    from sumo_cli.store.runs import mean_iteration_seconds

    with db.read() as s:
        mean = mean_iteration_seconds(s, run_id)
    if mean is None or left <= 0:
        return ""
    return f"; about {duration(mean * left)} left at the stored iterations' pace ({duration(mean)} each)"


def _training_view(total: int, done: int, json_out: bool, shown: str, fields):  # noqa: ANN001, ANN202
    """The progress of a training run and the ``on_iteration`` callback that moves it: on a terminal a
    live bar whose time left is known from the first finished iteration (this session's mean
    iteration), in a log plain lines at a steady pace (cli.progress_lines); after the first
    iteration, one line with the expected duration. ``shown``: the bar's extra text of
    ``fields(metrics)``."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from sumo_cli.runtime.estimate import duration
    from sumo_cli.cli.common import log_lines

    progress = Progress(
        TextColumn("iteration"), MofNCompleteColumn(), BarColumn(),
        TextColumn("{task.fields[steps]} steps  {task.fields[rate]} steps/s  " + shown + "  {task.fields[left]} left"),
        console=err_console, disable=json_out or not err_console.is_terminal,
    )
    task = progress.add_task("train", total=total, completed=done, steps="0", rate="-", left="-",
                             **{k: "-" for k in fields({})})
    lines = log_lines("iteration", total, done, json_out)

    def on_iteration(p) -> None:  # noqa: ANN001 - selfplay.Progress
        lines.step_took(p.wall_seconds)
        left = lines.seconds_left(p.k)
        extra = fields(p.metrics)
        progress.update(task, completed=p.k, steps=f"{p.env_steps:,}", rate=f"{p.steps_per_second:,.0f}",
                        left="-" if left is None else duration(left), **extra)
        if p.k == done + 1 and not json_out and p.k < total:
            progress.console.print(f"iteration {p.k} took {duration(p.wall_seconds)}: the {total - p.k} left take about "
                                   f"{duration(left)}", highlight=False)
        lines.update(p.k, f"{p.env_steps:,} env steps, {p.steps_per_second:,.0f} steps/s, "
                          + ", ".join(f"{k} {v}" for k, v in extra.items()))

    return progress, on_iteration


def _interrupted(ctx: typer.Context, exc) -> None:  # noqa: ANN001 - training.TrainingInterrupted
    err_console.print(
        f"[yellow]interrupted[/]: run {exc.run_id} has {exc.done} of {exc.total} iterations saved. "
        f"Resume with: {esc(resume_command(ctx, f'train --resume {exc.run_id}'))}", markup=True, highlight=False,
        soft_wrap=True,
    )
    raise typer.Exit(130)


def _finished(summary: dict, json_out: bool, last_iteration: str) -> None:
    if json_out:
        print_json(summary)
        return
    err_console.print(
        f"run {summary['run_id']} finished: {summary['agent']}@{summary['latest_version']} after "
        f"{summary['env_steps']:,} env steps ({summary['steps_per_second'] or '-'} steps/s this session); "
        f"{last_iteration}", highlight=False,
    )


@friendly
def train(
    ctx: typer.Context,
    recipe: Optional[str] = typer.Option(None, "--recipe", rich_help_panel="Recipe and agent", help="Named preset of every setting below for a new sumo run "
                                         "(fight: the default, wins from the standard start; meta: the default of --strategy meta, warm-started "
                                         "from a pool agent; rl2: the default of --strategy rl2, taught by the body's MLP; paper: the paper's "
                                         "values; push: the earlier facing-start recipe). Options given override it."),
    env: Optional[str] = typer.Option(None, "--env", rich_help_panel="Recipe and agent", help="sumo (default: RoboSumo bouts) or locomotion (the "
                                      "nonstationary six-legged Bug on its 12 training leg pairs)."),
    body: Optional[str] = typer.Option(None, "--body", rich_help_panel="Recipe and agent", help="ant, bug or spider (required for a new sumo run)."),
    arch: Optional[str] = typer.Option(None, "--arch", rich_help_panel="Recipe and agent", help="mlp or lstm (default lstm)."),
    features: Optional[str] = typer.Option(None, "--features", rich_help_panel="Recipe and agent", help="Observation features the policy adds to the original "
                                           "observation: none (paper), ego (fight: the bout's geometry in the agent's heading frame), or ego-past (ego and the observation's last two changes)."),
    strategy: Optional[str] = typer.Option(None, "--strategy", rich_help_panel="Recipe and agent", help="none, track, rl2 or meta (default none)."),
    name: Optional[str] = typer.Option(None, "--name", rich_help_panel="Recipe and agent", help="Agent name (default: the canonical one, e.g. ant-lstm)."),
    opponents: Optional[str] = typer.Option(None, "--opponents", rich_help_panel="Recipe and agent", help="Comma-separated opponent pool, e.g. ant-lstm,bug-lstm (name@v pins a version); "
        "'self' = own snapshots. Default: self (pure self-play)."),
    init_from: Optional[str] = typer.Option(None, "--init-from", rich_help_panel="Recipe and agent", help="Start from a stored version's policy "
        "(name@version, e.g. ant-mlp@588; same body, architecture and features) instead of fresh weights."),
    iterations: Optional[int] = typer.Option(None, "--iterations", "-n", rich_help_panel="Recipe and agent", help="PPO iterations (one update each; fight 600, paper 100); with --resume: train the run further, to this many."),
    seed: Optional[int] = typer.Option(None, "--seed", rich_help_panel="Recipe and agent", help="Seed of everything (default 0)."),
    physics: Optional[str] = typer.Option(None, "--physics", rich_help_panel="Recipe and agent", help="faithful (RK4; paper) or fast (implicitfast; fight). Evaluations always use faithful."),
    envs: Optional[int] = typer.Option(None, "--envs", rich_help_panel="PPO and batch", help="Bout slots per iteration (fight 64, paper 8)."),
    steps: Optional[int] = typer.Option(None, "--steps", rich_help_panel="PPO and batch", help="Steps per slot per iteration (default 512)."),
    shards: Optional[int] = typer.Option(None, "--shards", rich_help_panel="PPO and batch", help="Rollout jobs per iteration (default 2; fixes the result, -j only runs them)."),
    opponent_samples: Optional[int] = typer.Option(None, "--opponent-samples", rich_help_panel="PPO and batch", help="Opponent snapshots drawn per shard per iteration (default 8)."),
    opponent_stride: Optional[float] = typer.Option(None, "--opponent-stride", rich_help_panel="PPO and batch", help="A stored opponent's versions up to this many times the iteration are eligible (default 1: the paper's [1, k]; a short learner against a longer pool: pool length / learner length)."),
    episodes_per_opponent: Optional[int] = typer.Option(None, "--episodes-per-opponent", rich_help_panel="PPO and batch", help="Bouts per interaction with one opponent (default 1; rl2: 3)."),
    anneal: Optional[int] = typer.Option(None, "--anneal", rich_help_panel="Reward shaping", help="Iterations over which the dense-reward weight goes to 0 (paper 500, fight 100000: held; 0: sparse only)."),
    control_coef: Optional[float] = typer.Option(None, "--control-coef", rich_help_panel="Reward shaping", help="Control cost coefficient (paper 0.1, fight 0.02)."),
    push_coef: Optional[float] = typer.Option(None, "--push-coef", rich_help_panel="Reward shaping", help="The reference's always-negative push term -c exp(-|opponent xy|) (paper 10, fight 0)."),
    move_coef: Optional[float] = typer.Option(None, "--move-coef", rich_help_panel="Reward shaping", help="Move-toward-the-opponent coefficient (paper 0.1, fight 0)."),
    centre_coef: Optional[float] = typer.Option(None, "--centre-coef", rich_help_panel="Reward shaping", help="Stay-near-the-centre coefficient (reference 0: off)."),
    approach_coef: Optional[float] = typer.Option(None, "--approach-coef", rich_help_panel="Reward shaping", help="Reward the signed speed at which the torsos close in (paper 0: off, fight 5)."),
    push_out_coef: Optional[float] = typer.Option(None, "--push-out-coef", rich_help_panel="Reward shaping", help="Reward the speed at which the opponent leaves the centre (paper 0: off, fight 5)."),
    tilt_coef: Optional[float] = typer.Option(None, "--tilt-coef", rich_help_panel="Reward shaping", help="Reward tipping the opponent's torso and staying level (rate of change of its tilt minus the own; default 0: off)."),
    anneal_start: Optional[float] = typer.Option(None, "--anneal-start", rich_help_panel="Reward shaping", help="Dense-reward weight at iteration 1 (paper 1, fight 0.9: below 1 the outcome counts from the start)."),
    start_radius: Optional[float] = typer.Option(None, "--start-radius", rich_help_panel="Curriculum", help="Curriculum: start this far from the centre (reference 1.15 m)."),
    start_radius_iterations: Optional[int] = typer.Option(None, "--start-radius-iterations", rich_help_panel="Curriculum", help="...moving linearly to 1.15 over this many iterations (0: stays)."),
    face_opponent: Optional[bool] = typer.Option(None, "--face-opponent/--no-face-opponent", rich_help_panel="Curriculum", help="Curriculum: start turned toward the opponent."),
    face_spread_iterations: Optional[int] = typer.Option(None, "--face-spread-iterations", rich_help_panel="Curriculum", help="Curriculum, with --face-opponent: the start heading's error grows to 180 degrees over this many iterations, then the reference start (default 0: always facing)."),
    motionless_iterations: Optional[int] = typer.Option(None, "--motionless-iterations", rich_help_panel="Curriculum", help="Curriculum: the first iterations face motionless opponents only."),
    motionless_fraction: Optional[float] = typer.Option(None, "--motionless-fraction", rich_help_panel="Curriculum", help="Curriculum: afterwards this share of opponents is motionless."),
    lr: Optional[float] = typer.Option(None, "--lr", rich_help_panel="PPO and batch", help="Adam learning rate (paper: 3e-4)."),
    init_logstd: Optional[float] = typer.Option(None, "--init-logstd", rich_help_panel="PPO and batch", help="Initial log std of the actions (paper 0: std 1, fight -1)."),
    epochs: Optional[int] = typer.Option(None, "--epochs", rich_help_panel="PPO and batch", help="PPO epochs per iteration (default 10)."),
    minibatches: Optional[int] = typer.Option(None, "--minibatches", rich_help_panel="PPO and batch", help="Minibatches per epoch (default 8)."),
    ent_coef: Optional[float] = typer.Option(None, "--ent-coef", rich_help_panel="PPO and batch", help="Entropy bonus (default 0)."),
    reward_scale: Optional[float] = typer.Option(None, "--reward-scale", rich_help_panel="Reward shaping", help="Reward factor inside the learner (default 0.01)."),
    teacher: Optional[str] = typer.Option(None, "--teacher", rich_help_panel="Recipe and agent", help="Kickstarting: imitate this stored MLP or LSTM policy (name@version, same body and features) while the weight below decays, e.g. ant-mlp@588 teaching an LSTM; none: no teacher (fight: the body's MLP teaches an LSTM, and for the Spider the body's LSTM teaches an MLP, when the database has one)."),
    teacher_coef: Optional[float] = typer.Option(None, "--teacher-coef", rich_help_panel="Recipe and agent", help="Kickstarting: weight of KL(teacher || policy) at iteration 1 (default 1)."),
    teacher_iterations: Optional[int] = typer.Option(None, "--teacher-iterations", rich_help_panel="Recipe and agent", help="Kickstarting: the weight reaches 0 after this many iterations (default 100)."),
    alpha_init: Optional[float] = typer.Option(None, "--alpha-init", rich_help_panel="Meta-learning", help="--strategy meta: the learnt step sizes' initial value (default 0.5; smaller for a warm start with --init-from)."),
    alpha_init_body: Optional[float] = typer.Option(None, "--alpha-init-body", rich_help_panel="Meta-learning", help="--strategy meta: the initial step size of the tensors below the output layers (default: --alpha-init); small values adapt mostly the heads."),
    meta_inner: Optional[str] = typer.Option(None, "--meta-inner", rich_help_panel="Meta-learning", help="--strategy meta: the inner steps' data: fresh (default: each step on episodes of the step before) or reuse (every step on theta's one batch, as games adapt)."),
    heldout_every: Optional[int] = typer.Option(None, "--heldout-every", rich_help_panel="Meta-learning", help="--strategy meta: measure the held-out gain on the first and every this many meta-updates (default 10; it does not change the training)."),
    snapshot_every: Optional[int] = typer.Option(None, "--snapshot-every", rich_help_panel="PPO and batch", help="Store a version every this many iterations (default 1, as the paper)."),
    eval_every: Optional[int] = typer.Option(None, "--eval-every", rich_help_panel="Execution", help="Evaluate vs a motionless opponent under faithful conditions every this many iterations (default 0: never)."),
    eval_bouts: Optional[int] = typer.Option(None, "--eval-bouts", rich_help_panel="Execution", help="Bouts per evaluation (default 8)."),
    horizon: Optional[int] = typer.Option(None, "--horizon", rich_help_panel="Locomotion", help="Locomotion: env steps per episode (default 100 = 5 s)."),
    hidden: Optional[int] = typer.Option(None, "--hidden", rich_help_panel="Locomotion", help="Locomotion: units per hidden layer (default 64)."),
    workers: Optional[int] = typer.Option(None, "-j", "--workers", envvar="SUMO_WORKERS", rich_help_panel="Execution",
                                          help="Processes that run the rollout shards at once (at most --shards are busy; "
                                          "locomotion: physics threads); results do not depend on it (default: all "
                                          "cores, or SUMO_WORKERS)."),
    address: Optional[str] = typer.Option(None, "--address", envvar="RAY_ADDRESS", rich_help_panel="Execution", help="Ray cluster address (default: local processes)."),
    resume: Optional[int] = typer.Option(None, "--resume", rich_help_panel="Execution", help="Continue an interrupted training run by id, with its stored settings."),
    json_out: bool = typer.Option(False, "--json", rich_help_panel="Execution", help="Print a JSON summary on stdout."),
) -> None:
    """Train an agent by PPO: self-play snapshots (the paper's pre-training) or a pool of stored
    opponents; one version per iteration; Ctrl-C keeps everything and prints the resume command."""
    from sumo_cli.errors import UserError

    given = {k: v for k, v in locals().items() if k in _RUN_OPTIONS and v is not None}
    # everything that can be checked without torch and MuJoCo (seconds to load) is checked first
    _check_names(resume, env, body, arch, strategy, recipe, features, workers)

    if resume is not None:
        extend_to = given.pop("iterations", None)  # the one run option --resume takes: train a run further
        if given:
            opts = ", ".join(_RUN_OPTIONS[k] for k in given)
            raise UserError(f"--resume continues run {resume} with its stored settings; leave out {opts}")
        if extend_to is not None:
            require_positive(extend_to, "--iterations")
        db = open_db(ctx)
        from sumo_cli.store.runs import TRAIN_KIND, get_run

        with db.read() as s:
            get_run(s, resume, TRAIN_KIND)  # an unknown run: one sentence
        from sumo_cli.runs import training as TR

        if TR.run_env(db, resume) == "locomotion":
            return _train_locomotion(ctx, db, resume, None, workers, address, json_out, extend_to=extend_to)
        cfg, agent_name, done = TR.check_resume(db, resume, extend_to)
        run_id = resume
    elif (env or "sumo").strip().lower() == "locomotion":
        from sumo_cli.runs import training as TR

        return _train_locomotion(ctx, None, None, given, workers, address, json_out, arch=arch, strategy=strategy)
    elif (env or "sumo").strip().lower() != "sumo":
        raise UserError(f"unknown --env {env!r}; choose sumo or locomotion")
    elif any(k in given for k in _LOCOMOTION_ONLY):
        opts = ", ".join(_RUN_OPTIONS[k] for k in _LOCOMOTION_ONLY if k in given)
        raise UserError(f"{opts} only apply to --env locomotion")
    else:
        if body is None:
            raise UserError("--body is required for a new run (ant, bug or spider), or continue one with --resume RUN_ID")
        from sumo_cli.selfplay.new_run import new_run_config, run_identity

        fields = {_FIELDS.get(k, k): v for k, v in given.items()
                  if k not in ("name", "opponents", "env", "recipe", "body", "arch", "strategy")}
        for option in ("alpha_init", "alpha_init_body", "meta_inner", "heldout_every"):
            if option in given and run_identity(body, arch, strategy)[2] != "meta":
                raise UserError(f"{_RUN_OPTIONS[option]} only applies to --strategy meta")
        if opponents is not None:
            fields["opponents"] = [o.strip() for o in opponents.split(",") if o.strip()]
            if not fields["opponents"]:
                raise UserError("--opponents is empty; give agent names, or self for self-play")
        cfg = new_run_config(fields, body=body, arch=arch, strategy=strategy, recipe=recipe)  # names known: _check_names
        bad = cfg.check()
        if bad:
            raise UserError(bad[0])
        db = open_db(ctx)
        from sumo_cli.runs import training as TR

        agent_name, pool = TR.check_new_run(db, cfg, name)
        _say_numbered_name(agent_name, cfg.body, cfg.arch, cfg.strategy)
        run_id = TR.create_run(db, cfg, agent_name, pool)
        done = 0

    from sumo_cli.runtime.executor import make_executor

    executor = make_executor(workers if address else resolve_workers(workers, cfg.rollout_shards), address)
    planned = TR.planned_iteration_env_steps(cfg)
    pace = _stored_pace(db, run_id, cfg.iterations - done)
    batch = f"{cfg.n_envs} x {cfg.num_steps}" + (f" x {planned // cfg.steps_per_iteration} phases"
                                                 if planned != cfg.steps_per_iteration else "")
    if not json_out:
        err_console.print(
            f"training run {run_id}: {agent_name} ({cfg.body}, {cfg.policy_arch}, strategy {cfg.strategy}"
            f"{', recipe ' + cfg.recipe if cfg.recipe else ''}) "
            f"vs {','.join(cfg.opponents)}; iterations {done + 1}..{cfg.iterations} of {planned:,} "
            f"env steps ({batch}), {cfg.physics} physics, {count(executor.workers, 'worker')}{pace}",
            highlight=False,
        )

    def fmt(x, spec: str) -> str:  # noqa: ANN001
        return "-" if x is None else format(x, spec)

    progress, on_iteration = _training_view(
        cfg.iterations, done, json_out, "return {task.fields[return]}  win {task.fields[win]}",
        lambda m: {"return": fmt(m.get("mean_return"), ".0f"), "win": fmt(m.get("win_rate"), ".0%")})
    try:
        with first_interrupt_only(), progress:
            summary = TR.run_training(db, run_id, executor, on_iteration)
    except TR.TrainingInterrupted as exc:
        executor.close()
        _interrupted(ctx, exc)
    finally:
        executor.close()
    last = summary["last_iteration"]
    _finished(summary, json_out, f"last iteration win rate {fmt(last.get('win_rate'), '.0%')}, "
                                 f"mean return {fmt(last.get('mean_return'), '.0f')}")



def _train_locomotion(ctx: typer.Context, db, resume: int | None, given: dict | None, workers: int | None,  # noqa: ANN001
                      address: str | None, json_out: bool, arch: str | None = None, strategy: str | None = None,
                      extend_to: int | None = None) -> None:
    """`sumo train --env locomotion`: a new run (``given`` = the options typed) or ``--resume`` (``extend_to``:
    with more iterations)."""
    from sumo_cli.runs import locomotion_training as LT
    from sumo_cli.runs import training as TR
    from sumo_cli.errors import UserError
    from sumo_cli.runs.locomotion_learn import LocoConfig

    if address:
        raise UserError("--address does not apply to --env locomotion: it trains in this process (-j sets physics threads)")
    workers = resolve_workers(workers)
    if resume is not None:
        cfg, agent_name, done = LT.check_resume(db, resume, extend_to)
        run_id = resume
    else:
        refused = [_RUN_OPTIONS[k] for k in _SUMO_ONLY if k in given]
        if refused:
            raise UserError(f"{', '.join(refused)} only apply to sumo training, not to --env locomotion")
        kw = {_LOCO_FIELDS.get(k, k): v for k, v in given.items() if k not in ("name", "env")}
        kw["strategy"] = (strategy or "none").strip().lower()
        kw["arch"] = (arch or ("lstm" if kw["strategy"] == "rl2" else "mlp")).strip().lower()
        cfg = LocoConfig(**kw)
        bad = cfg.check()
        if bad:
            raise UserError(bad[0])
        db = open_db(ctx)
        agent_name = LT.check_new_run(db, cfg, given.get("name"))
        _say_numbered_name(agent_name, "loco", cfg.arch, cfg.strategy)
        run_id = LT.create_run(db, cfg, agent_name)
        done = 0
    if not json_out:
        what = (f"{cfg.n_envs} task pairs x {cfg.meta_episodes} episodes per phase" if cfg.strategy == "meta"
                else f"{cfg.n_envs} envs x {cfg.sequences} sequence(s) of 7 episodes")
        err_console.print(
            f"training run {run_id}: {agent_name} (locomotion, {cfg.policy_arch}, strategy {cfg.strategy}); "
            f"iterations {done + 1}..{cfg.iterations} of {cfg.steps_per_iteration} env steps ({what}, horizon "
            f"{cfg.horizon}), {cfg.physics} physics, {workers} physics thread(s)"
            f"{_stored_pace(db, run_id, cfg.iterations - done)}", highlight=False,
        )

    def fmt(x, spec: str) -> str:  # noqa: ANN001
        return "-" if x is None else format(x, spec)

    progress, on_iteration = _training_view(cfg.iterations, done, json_out, "return {task.fields[return]}",
                                            lambda m: {"return": fmt(m.get("mean_return"), ".1f")})
    try:
        with first_interrupt_only(), progress:
            summary = LT.run_training(db, run_id, workers, on_iteration)
    except TR.TrainingInterrupted as exc:
        _interrupted(ctx, exc)
    last = summary["last_iteration"]
    _finished(summary, json_out, f"last iteration mean episodic return {fmt(last.get('mean_return'), '.1f')}")
