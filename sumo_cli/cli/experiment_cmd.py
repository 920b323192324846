"""`sumo experiment adaptation | sample-complexity | calibration`: the paper's Fig. 5, Fig. 6 and
calibration table as stored, resumable runs of iterated games (`sumo report` draws them)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from sumo_cli.cli.common import (
    err_console, first_interrupt_only, friendly, open_db, print_json, resume_command, starting_run,
)
from sumo_cli.cli.options import Address, Episodes, GameSeed, GameWorkers, Physics, Resume, Rounds
from sumo_cli.compete.paper_defaults import CALIBRATION_AGENTS, LEARNING_OPPONENTS, PAPER_EPISODES
from sumo_cli.vocabulary import check_physics

app = typer.Typer(help="The paper's game experiments as stored runs (drawn by `sumo report`).", no_args_is_help=True)

def _split(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _execute(ctx: typer.Context, kind: str, build, resume: Optional[int], seed: int, workers: Optional[int],  # noqa: ANN001
             address: Optional[str], json_out: bool) -> None:
    """Create the run (``build(db)`` -> config) or resume it, play what is missing, report."""
    from sumo_cli.compete import experiment as X

    db = open_db(ctx)
    run_id = X.create(db, build(db), seed) if resume is None else resume
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from sumo_cli.runtime.estimate import RunEstimate
    from sumo_cli.runtime.executor import make_executor

    with starting_run(ctx, f"experiment {kind}", run_id):
        runner = X.ExperimentRunner(db, run_id)
        if runner.cfg["kind"] != kind:
            from sumo_cli.errors import UserError

            raise UserError(f"run {run_id} is a {runner.cfg['kind']} experiment; resume it with "
                            + resume_command(ctx, f"experiment {runner.cfg['kind']} --resume {run_id}"))
        runner.load()
        executor = make_executor(workers, address)
    done = len(runner.done())
    total = len(runner.plan)
    cfg = runner.cfg
    err_console.print(f"{kind} run {run_id}: {total} games of {cfg['rounds']} rounds "
                      f"({', '.join(map(str, cfg['episodes']))} episodes each), {executor.workers} worker{'s' if executor.workers != 1 else ''}; "
                      f"{done} already stored", highlight=False)
    progress = Progress(TextColumn("games"), BarColumn(), MofNCompleteColumn(), TextColumn("time left {task.fields[left]}"),
                        console=err_console, disable=json_out)
    left_rounds = sum(cfg["rounds"] for g in runner.plan) - done * cfg["rounds"]
    estimate = RunEstimate(left_rounds, executor.workers,
                           say=(lambda line: None) if json_out else (lambda line: progress.console.print(line, highlight=False)))

    def on_progress(rounds: float, seconds: float) -> None:
        estimate.on_progress(rounds, seconds)
        progress.update(task, left=estimate.left_text())

    try:
        with first_interrupt_only(), progress:
            task = progress.add_task("games", total=total, completed=done, left=estimate.left_text())
            runner.run(executor, on_game=lambda n: progress.update(task, completed=n), on_progress=on_progress)
    except KeyboardInterrupt:
        from sumo_cli.cli.markup import esc

        executor.close()
        err_console.print(f"[yellow]interrupted[/]: {len(runner.done())} of {total} games are stored. Resume with: "
                          f"{esc(resume_command(ctx, f'experiment {kind} --resume {run_id}'))}", markup=True, highlight=False,
                          soft_wrap=True)
        raise typer.Exit(130)
    executor.close()
    if json_out:
        print_json({"run_id": run_id, "kind": kind, "games": total})
        return
    err_console.print(f"{kind} run {run_id} finished: {total} games; `sumo report` draws it", highlight=False)


Players = Annotated[Optional[str], typer.Option(
    "--agents", help="Comma-separated players, NAME[@V][:STRATEGY]; :track plays a policy with tracking, :none "
    "without adaptation (e.g. ant-lstm,ant-lstm:track,ant-lstm-meta).")]
Opponents = Annotated[str, typer.Option(
    "--opponents", help="Comma-separated learning opponents (their stored versions are what they learn through).")]
RunIdJson = Annotated[bool, typer.Option("--json", help="Print the run id as JSON.")]
DEFAULT_OPPONENTS = ",".join(LEARNING_OPPONENTS)


@app.command("adaptation")
@friendly
def adaptation(
    ctx: typer.Context,
    agents: Players = None,
    opponents: Opponents = DEFAULT_OPPONENTS,
    rounds: Rounds = 100,
    episodes: Episodes = 3,
    repeats: int = typer.Option(100, "--repeats", help="Games per agent and opponent (paper: 100)."),
    physics: Physics = "faithful",
    seed: GameSeed = 0,
    workers: GameWorkers = None,
    address: Address = None,
    resume: Resume = None,
    json_out: RunIdJson = False,
) -> None:
    """Fig. 5: each agent against each learning opponent (its version strides from 0.35 K to K over the game);
    each adaptive agent (track, meta) is paired with itself unadapted (NAME:none, added if not named), on the same seeds."""
    _game_experiment(ctx, "adaptation", agents, opponents, rounds, [episodes], repeats, physics, seed, workers,
                     address, resume, json_out)


@app.command("sample-complexity")
@friendly
def sample_complexity(
    ctx: typer.Context,
    agents: Players = None,
    opponents: Opponents = DEFAULT_OPPONENTS,
    episodes: str = typer.Option(",".join(map(str, PAPER_EPISODES)), "--episodes",
                                 help="Comma-separated episodes per round to compare (paper: 3 to 90)."),
    rounds: Rounds = 100,
    repeats: int = typer.Option(20, "--repeats", help="Games per agent, opponent and episodes setting (paper: 20)."),
    physics: Physics = "faithful",
    seed: GameSeed = 0,
    workers: GameWorkers = None,
    address: Address = None,
    resume: Resume = None,
    json_out: RunIdJson = False,
) -> None:
    """Fig. 6: the adaptation experiment at several numbers of episodes per round (win rate over the last 25 rounds)."""
    from sumo_cli.errors import UserError

    try:
        counts = [int(x) for x in _split(episodes)]
    except ValueError:
        raise UserError(f"--episodes takes comma-separated whole numbers, got {episodes!r}") from None
    if not counts or len(set(counts)) != len(counts):
        raise UserError(f"--episodes needs distinct numbers, got {episodes!r}")
    _game_experiment(ctx, "sample-complexity", agents, opponents, rounds, sorted(counts), repeats, physics, seed,
                     workers, address, resume, json_out)


@app.command("calibration")
@friendly
def calibration(
    ctx: typer.Context,
    agents: str = typer.Option(",".join(CALIBRATION_AGENTS), "--agents", help="Comma-separated agents of at least two "
                               "bodies, trained alike (paper: an LSTM of each body by self-play); they play without adaptation."),
    rounds: Rounds = 100,
    episodes: Episodes = 3,
    repeats: int = typer.Option(20, "--repeats", help="Games per pair of agents."),
    physics: Physics = "faithful",
    seed: GameSeed = 0,
    workers: GameWorkers = None,
    address: Address = None,
    resume: Resume = None,
    json_out: RunIdJson = False,
) -> None:
    """Calibration: agents of different bodies play each other without adaptation (cross-body win rates, densities)."""
    _game_experiment(ctx, "calibration", agents, None, rounds, [episodes], repeats, physics, seed,
                     workers, address, resume, json_out)


def _game_experiment(ctx, kind, agents, opponents, rounds, episodes, repeats, physics, seed, workers, address,  # noqa: ANN001
                     resume, json_out) -> None:
    from sumo_cli.errors import UserError

    if resume is None:
        if not agents:
            raise UserError("name the players with --agents, e.g. --agents ant-lstm,ant-lstm:track")
        from sumo_cli.compete.limits import check_at_most

        for value, what in ((rounds, "--rounds"), (repeats, "--repeats"), *((e, "--episodes") for e in episodes)):
            check_at_most(value, what)
        for value, what in ((rounds, "--rounds"), (repeats, "--repeats"), *((e, "--episodes") for e in episodes)):
            if value < 1:
                raise UserError(f"{what} must be at least 1, got {value}")
        check_physics(physics)

    def build(db):  # noqa: ANN001, ANN202
        from sumo_cli.compete import experiment as X

        players = X.resolve_players(db, _split(agents), "--agents")
        if kind == "calibration":  # without adaptation: the policies as they are
            players = [{**p, "strategy": "none" if p["strategy"] in ("track", "meta") else p["strategy"]}
                       for p in players]
            opps = players
        else:
            opps = X.resolve_players(db, _split(opponents), "--opponents")
        if kind == "adaptation":  # each adaptive player against itself unadapted, on the same seeds
            from sumo_cli.compete.pairing import twins_to_add

            twins = twins_to_add(players)
            players += X.resolve_players(db, twins, "--agents")
            if twins:
                err_console.print(f"paired with the same weights unadapted, on the same seeds: {', '.join(twins)}",
                                  highlight=False, soft_wrap=True)
        cfg = X.config(kind, players, opps, rounds, episodes, repeats, physics)
        return {**cfg, "paired": True} if kind == "adaptation" else cfg

    _execute(ctx, kind, build, resume, seed, workers, address, json_out)
