"""`sumo evolve`: losers removed, winners duplicated, generation after generation; resumable."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from sumo_cli.cli.common import (
    check_output, chosen_population, err_console, first_interrupt_only, friendly, open_db, print_json, require_positive, resume_command,
    starting_run, tell_default_step_sizes,
)
from sumo_cli.cli.options import (
    Address, Bodies, Episodes, GameWorkers, Kinds, Members, Physics, Plan, Resume, Rounds, ScheduleSeed,
)
from sumo_cli.runtime.estimate import RunEstimate
from sumo_cli.vocabulary import check_physics


def shares_table(history: list[dict], key: str, labels: list[str] | None = None):  # noqa: ANN201
    """One row per kind and one column of shares per generation (0 first, or as ``labels`` name
    them): a population has a score of kinds and a run ten or so generations, so this way round it
    stays readable in 80 columns."""
    from rich.table import Table

    kinds = sorted({k for h in history for k in h[key]})
    table = Table(title=f"share of the population by {key}, per generation")
    table.add_column(key, no_wrap=True)
    for label in labels or [str(g) for g in range(len(history))]:
        table.add_column(label, justify="right")
    for k in kinds:
        table.add_row(k, *(f"{h[key].get(k, 0.0):.1%}" for h in history))
    return table


def progress_view(generations: int, matches: int, done: int, quiet: bool, estimate: RunEstimate):  # noqa: ANN201
    """A progress bar over all games of the run, with the generation, the games within it and the
    time left (from the game-rounds played: known long before the first game ends); the
    ``on_game(generation, games done in it)`` and ``on_progress(game-rounds, seconds)`` callbacks
    that move it. The estimate's own lines go above the bar (and into logs, where there is no bar)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from sumo_cli.cli.common import log_lines

    lines = log_lines("games", generations * matches, done, quiet)
    progress = Progress(TextColumn("generation {task.fields[generation]}/" + str(generations)),
                        TextColumn("{task.fields[in_generation]}/" + f"{matches} games;"), TextColumn("all games"),
                        BarColumn(), MofNCompleteColumn(), TextColumn("time left {task.fields[left]}"),
                        console=err_console, disable=quiet)
    task = progress.add_task("games", total=generations * matches, completed=done, left=estimate.left_text(),
                             generation=min(done // matches + 1, generations), in_generation=done % matches)
    if not quiet:
        estimate.say = lambda line: progress.console.print(line, highlight=False)

    def on_game(g: int, n: int) -> None:
        progress.update(task, completed=g * matches + n, generation=g + 1, in_generation=n)
        lines.update(g * matches + n, f"generation {g + 1}/{generations}: {n}/{matches} games",
                     left=estimate.seconds_left)

    def on_progress(rounds: float, seconds: float) -> None:
        estimate.on_progress(rounds, seconds)
        progress.update(task, left=estimate.left_text())

    return progress, on_game, on_progress


@friendly
def evolve(
    ctx: typer.Context,
    generations: int = typer.Option(10, "--generations", help="Generations (paper: 10)."),
    copies: int = typer.Option(10, "--copies", help="Copies of each agent at the start (paper: 10, so 1050 members)."),
    matches: int = typer.Option(1000, "--matches", help="Games per generation (paper: 1000)."),
    agents: Members = None,
    bodies: Bodies = None,
    kinds: Kinds = None,
    plan: Plan = None,
    rounds: Rounds = 100,
    episodes: Episodes = 3,
    physics: Physics = "faithful",
    seed: ScheduleSeed = 0,
    workers: GameWorkers = None,
    address: Address = None,
    resume: Resume = None,
    plot: Optional[Path] = typer.Option(None, "--plot", help="Write the stacked-area share plot (PNG)."),
    csv_out: Optional[Path] = typer.Option(None, "--csv", help="Write the shares of every generation (by body, arch, strategy and kind) to this CSV file."),
    by: str = typer.Option("kind", "--by", help="Grouping of the table and plot: body, arch, strategy or kind."),
    json_out: bool = typer.Option(False, "--json", help="Print the run id and the shares per generation as JSON."),
) -> None:
    """Evolve a population: each generation's losers are replaced by copies of its winners."""
    from sumo_cli.compete.categories import check_grouping

    check_grouping(by)
    check_output(plot, "--plot", ".png")
    check_output(csv_out, "--csv", ".csv")
    if workers is not None:  # every option is checked before the run is written and before torch loads
        require_positive(workers, "--workers")
    if resume is None:  # the options first, before anything heavy is imported (torch takes seconds)
        for value, what in ((copies, "--copies"), (generations, "--generations"), (matches, "--matches"),
                            (rounds, "--rounds"), (episodes, "--episodes")):
            require_positive(value, what)
        check_physics(physics)
    db = open_db(ctx)
    if resume is None:
        members = chosen_population(db, agents, bodies, kinds, plan)
        from sumo_cli.compete.evolution import EvolutionRunner, evolution_config

        from sumo_cli.cli.population_support import say_plan_fills

        say_plan_fills(members, plan is not None and not agents, json_out)
        config = evolution_config(members, copies, generations, matches, rounds, episodes, physics)
        run_id = EvolutionRunner.create(db, config, seed)
    else:
        run_id = resume
    from sumo_cli.compete.evolution import EvolutionRunner
    from sumo_cli.runtime.executor import make_executor

    with starting_run(ctx, "evolve", run_id):
        runner = EvolutionRunner(db, run_id)
        executor = make_executor(workers, address)
    err_console.print(
        f"evolution run {run_id}: {runner.n_slots} members ({len(runner.members)} agents x {runner.config['copies']}), "
        f"{runner.config['generations']} generations of {runner.matches} games, {executor.workers} worker{'s' if executor.workers != 1 else ''}"
    )
    tell_default_step_sizes(runner.data)

    from sumo_cli.store.runs import get_run

    with db.read() as s:
        done = get_run(s, run_id).progress_done
    total = runner.config["generations"] * runner.matches
    estimate = RunEstimate((total - done) * runner.config["game"]["rounds"], executor.workers, say=lambda line: None)
    progress, on_game, on_progress = progress_view(runner.config["generations"], runner.matches, done, json_out,
                                                   estimate)

    def on_generation(g: int, shares: dict) -> None:
        if not json_out:
            progress.console.print(f"generation {g}: " + ", ".join(f"{k} {v:.0%}" for k, v in shares[by].items()))

    try:
        with first_interrupt_only(), progress:
            history = runner.run(executor, on_game=on_game, on_generation=on_generation, on_progress=on_progress)
    except KeyboardInterrupt:
        executor.close()
        from sumo_cli.cli.markup import esc

        err_console.print(f"[yellow]interrupted[/]: finished games are stored. Resume with: "
                          f"{esc(resume_command(ctx, f'evolve --resume {run_id}'))}", markup=True, highlight=False,
                          soft_wrap=True)
        raise typer.Exit(130)
    executor.close()
    if plot is not None:
        from sumo_cli.report.plots import shares_stacked_area

        shares_stacked_area([h[by] for h in history], plot, f"evolution run {run_id}: share by {by}")
        err_console.print(f"wrote {plot}")
    if csv_out is not None:
        from sumo_cli.report.csv_export import share_rows, write_csv

        write_csv(csv_out, share_rows(history))
        err_console.print(f"wrote {csv_out}")
    if json_out:
        print_json({"run_id": run_id, "generations": history})
        return
    err_console.print(shares_table(history, by))
