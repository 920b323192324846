"""`sumo tournament`: TrueSkill over random iterated games of a population; resumable."""

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
from sumo_cli.vocabulary import check_physics


def leaderboard_table(rows: list[dict], title: str, limit: int = 20):  # noqa: ANN201
    from sumo_cli.cli.tables import whole_words_table

    cells = []
    for r in rows[:limit]:
        bt = r.get("bradley_terry")
        bt_text = f"{bt['strength']:+.2f} ({bt['low']:+.2f}, {bt['high']:+.2f})" if bt else "-"
        cells.append([str(r["rank"]), r["agent"], f"{r['mu']:.2f} ±{2 * r['sigma']:.2f}", f"{r['conservative']:.2f}",
                      str(r["games"]), f"{r['wins']}/{r['draws']}/{r['losses']}", bt_text])
    headers = ["rank", "agent", "mu ± 2σ", "mu - 3σ", "games", "W/D/L", "Bradley-Terry (95%)"]
    return whole_words_table(title, headers, cells, err_console.width, drop_order=("games", "W/D/L"), left=("agent",))


@friendly
def tournament(
    ctx: typer.Context,
    population: Optional[int] = typer.Option(
        None, "--population", help="Population size: 105 = 3 bodies x 7 combinations x 5 stages (the default); fewer take a seeded sample."
    ),
    agents: Members = None,
    bodies: Bodies = None,
    kinds: Kinds = None,
    plan: Plan = None,
    matches: int = typer.Option(1000, "--matches", help="Random pairs to play (paper: 1000)."),
    rounds: Rounds = 100,
    episodes: Episodes = 3,
    physics: Physics = "faithful",
    draw_probability: Optional[float] = typer.Option(
        None, "--draw-probability", help="TrueSkill's draw chance between equal agents (default: derived from the game rules)."
    ),
    seed: ScheduleSeed = 0,
    workers: GameWorkers = None,
    address: Address = None,
    resume: Resume = None,
    every: int = typer.Option(100, "--leaderboard-every", help="Print the leaderboard every this many rated games."),
    heatmap: Optional[Path] = typer.Option(None, "--heatmap", help="Write the win-probability heatmap of the top agents (PNG)."),
    top: int = typer.Option(20, "--top", help="Agents in the printed leaderboard and the heatmap."),
    csv_out: Optional[Path] = typer.Option(None, "--csv", help="Write the final leaderboard to this CSV file (every agent)."),
    json_out: bool = typer.Option(False, "--json", help="Print the run id and the final leaderboard as JSON."),
) -> None:
    """Play --matches random iterated games between members of a population; rate them with TrueSkill."""
    from sumo_cli.errors import UserError

    if workers is not None:  # every option is checked before the run is written and before torch loads
        require_positive(workers, "--workers")
    for value, what in ((top, "--top"), (every, "--leaderboard-every")):
        require_positive(value, what)
    check_output(heatmap, "--heatmap", ".png")
    check_output(csv_out, "--csv", ".csv")
    if resume is None:  # the options first, before anything heavy is imported (torch takes seconds)
        for value, what in ((matches, "--matches"), (rounds, "--rounds"), (episodes, "--episodes")):
            require_positive(value, what)
        check_physics(physics)
        if draw_probability is not None and not 0 < draw_probability < 1:
            raise UserError(f"--draw-probability must be strictly between 0 and 1, got {draw_probability}")
    db = open_db(ctx)
    if resume is None:
        members = chosen_population(db, agents, bodies, kinds, plan)
        if population is not None and not agents:
            if population < 2:
                raise UserError(f"--population must be at least 2, got {population}")
            if population > len(members):
                raise UserError(f"--population {population} is larger than the {len(members)} agent versions available")
            import numpy as np

            pick = np.random.default_rng(seed).choice(len(members), population, replace=False)
            members = [members[i] for i in sorted(pick)]
        from sumo_cli.compete import tournament as T

        from sumo_cli.cli.population_support import say_plan_fills

        say_plan_fills(members, plan is not None and not agents, json_out)
        config = T.tournament_config(members, matches, rounds, episodes, physics, draw_probability)
        from sumo_cli.store.library import load_agent

        for m in members:  # a missing or corrupt checkpoint is refused before the run is written
            load_agent(db, m.name)
        run_id = T.create_tournament(db, members, config, seed)
    else:
        run_id = resume
    from sumo_cli.compete import tournament as T
    from sumo_cli.runtime.executor import make_executor

    with starting_run(ctx, "tournament", run_id):
        runner = T.TournamentRunner(db, run_id)
        executor = make_executor(workers, address)
    err_console.print(
        f"tournament run {run_id}: {len(runner.members)} agents, {len(runner.schedule)} games of "
        f"{runner.config['game']['rounds']} rounds x {runner.config['game']['episodes']} episodes, "
        f"{executor.workers} worker{'s' if executor.workers != 1 else ''}; draw probability {runner.config['draw_probability']:.3f}"
    )
    tell_default_step_sizes(runner.data)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from sumo_cli.runtime.estimate import RunEstimate
    from sumo_cli.store.runs import get_run

    progress = Progress(TextColumn("games"), BarColumn(), MofNCompleteColumn(), TextColumn("time left {task.fields[left]}"),
                        console=err_console, disable=json_out)
    with db.read() as s:
        done = get_run(s, run_id).progress_done
    estimate = RunEstimate((len(runner.schedule) - done) * runner.config["game"]["rounds"], executor.workers,
                           say=(lambda line: None) if json_out else (lambda line: progress.console.print(line, highlight=False)))
    last_print = {"n": 0}
    from sumo_cli.cli.common import log_lines

    lines = log_lines("games", len(runner.schedule), done, json_out)

    def on_progress(rounds: float, seconds: float) -> None:
        estimate.on_progress(rounds, seconds)
        progress.update(task, left=estimate.left_text())

    def on_game(idx: int, result: dict) -> None:
        progress.update(task, completed=len(runner.outcomes))
        lines.update(len(runner.outcomes), f"{runner.rated} rated", left=estimate.seconds_left)
        if runner.rated - last_print["n"] >= every and not json_out:
            last_print["n"] = runner.rated
            rows = runner.leaderboard().to_rows()
            progress.console.print(leaderboard_table(rows, f"after {runner.rated} rated games", top))

    try:
        with first_interrupt_only(), progress:
            task = progress.add_task("games", total=len(runner.schedule), completed=done, left=estimate.left_text())
            board = runner.run(executor, on_game, on_progress=on_progress)
    except KeyboardInterrupt:
        from sumo_cli.cli.markup import esc

        executor.close()
        err_console.print(
            f"[yellow]interrupted[/]: {len(runner.outcomes)} of {len(runner.schedule)} games are stored. "
            f"Resume with: {esc(resume_command(ctx, f'tournament --resume {run_id}'))}", markup=True, highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(130)
    executor.close()
    rows = board.to_rows()
    if heatmap is not None:
        from sumo_cli.report.plots import win_probability_heatmap

        win_probability_heatmap(rows, heatmap, top)
        err_console.print(f"wrote {heatmap}")
    if csv_out is not None:
        from sumo_cli.report.csv_export import write_csv

        write_csv(csv_out, rows)
        err_console.print(f"wrote {csv_out}")
    from sumo_cli.compete.categories import category_summary

    cats = category_summary(rows)
    if json_out:
        print_json({"run_id": run_id, "leaderboard": rows, "categories": cats,
                    "draw_probability": runner.config["draw_probability"]})
        return
    err_console.print(leaderboard_table(rows, f"final leaderboard, run {run_id} ({board.rated} games)", top))
    print_categories(cats)


def print_categories(cats: dict) -> None:
    for key, groups in cats.items():
        err_console.print(
            f"by {key}: " + "; ".join(f"{g[key]} mu {g['mean_mu']:.2f} (sd {g['sd_mu']:.2f}, {g['agents']} agents)" for g in groups),
            highlight=False,
        )
