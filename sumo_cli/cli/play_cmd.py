"""`sumo play A B`: one iterated adaptation game, live, stored, summarised."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from sumo_cli.cli.common import (
    check_agents, check_output, err_console, first_interrupt_only, friendly, open_db, print_json, require_positive,
    resolve_threads, tell_default_step_sizes, threads_option,
)
from sumo_cli.vocabulary import check_physics


@friendly
def play(
    ctx: typer.Context,
    agent_a: str = typer.Argument(..., metavar="A", help="Agent A, e.g. ant-meta or zoo-ant-lstm-v3@1; NAME:none|track|meta "
                                  "plays it with another strategy than its own (ant-lstm:track)."),
    agent_b: str = typer.Argument(..., metavar="B", help="Agent B (NAME[@V][:STRATEGY] as A)."),
    rounds: int = typer.Option(100, "--rounds", help="Rounds of the game (paper: 100)."),
    episodes: int = typer.Option(3, "--episodes", help="Episodes (bouts) per round (paper: 3)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bouts and the agents' action noise."),
    physics: str = typer.Option("faithful", "--physics", help="faithful (RK4, as the original) or fast (implicitfast)."),
    opponent_learning: bool = typer.Option(
        False, "--opponent-learning", help="B keeps learning over the game, as if it kept training by self-play: its "
        "version grows by one every round where it has every version needed, else it steps through its stored versions "
        "as `sumo experiment adaptation` does (each round the highest stored version not above a target moving to its "
        "highest), and says so. B needs at least two stored versions."
    ),
    start_version: Optional[int] = typer.Option(None, "--start-version", help="B's first version with --opponent-learning "
                                                "(default: B@V if named, else its default version where the versions "
                                                "that follow it are stored, else 0.35 of its highest, as the experiment)."),
    threads: Optional[int] = threads_option("Physics threads of the game"),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Write the per-round win-rate curve to this PNG."),
    video: Optional[Path] = typer.Option(None, "--video", help="Record the first episode of the first and last rounds to this MP4."),
    json_out: bool = typer.Option(False, "--json", help="Print the result and every round as JSON on stdout."),
) -> None:
    """Play an iterated adaptation game between A and B; both adapt between rounds."""
    require_positive(rounds, "--rounds")
    require_positive(episodes, "--episodes")
    threads = resolve_threads(threads, episodes)
    check_physics(physics)
    check_output(plot, "--plot", ".png")
    check_output(video, "--video", ".mp4")
    if video is not None:
        # Fail before playing, not after: the video needs a GL backend and a writable .mp4 target.
        from sumo_cli.sim.render import check_mp4_target, gl_backend

        check_mp4_target(video, 480, 360)
        gl_backend()
    db = open_db(ctx)
    check_agents(db, [agent_a, agent_b])  # before importing torch, which takes seconds
    from sumo_cli.compete.play import prepare_game, run_and_store

    job = prepare_game(db, agent_a, agent_b, rounds, episodes, seed, physics, threads, opponent_learning, start_version)
    tell_default_step_sizes([job.a, job.b[0]])
    if job.note:
        err_console.print(job.note, markup=False, highlight=False, soft_wrap=True)
    with first_interrupt_only():  # a second Ctrl-C cannot break the storing of the rounds played
        outcome = run_and_store(db, job, _live_view(job, json_out), video=video)
    if outcome.interrupted:
        err_console.print(
            f"[yellow]interrupted[/] after {len(outcome.result['rounds'])} of {rounds} rounds; stored as match "
            f"#{outcome.match_id} (marked interrupted). A game's adaptation state lives only in memory, so "
            f"play it again from the start with the same command.", markup=True
        )
        raise typer.Exit(130)
    summary = outcome.summary
    if video is not None:
        err_console.print(f"wrote {video}")
    if plot is not None:
        from sumo_cli.report.plots import game_curve

        game_curve(outcome.result, plot)
        err_console.print(f"wrote {plot}")
    if json_out:
        print_json({"match_id": outcome.match_id, "a": outcome.result["a"], "b": outcome.result["b"],
                    **summary, "seed": seed, "settings": outcome.result["settings"], "rounds": outcome.result["rounds"]})
        return
    _print_summary(outcome.result, summary, outcome.match_id)


def _live_view(job, quiet: bool):  # noqa: ANN001, ANN202
    """A Rich progress line per round on stderr: results of the round, running win rates, ETA."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    progress = Progress(
        TextColumn("{task.description}", style="bold", markup=False), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeRemainingColumn(), console=err_console, transient=False, disable=quiet,
    )
    state = {"a": 0, "b": 0, "n": 0, "task": None}
    symbol = {"win": "[green]W[/]", "loss": "[red]L[/]", "draw": "[yellow]D[/]"}

    class View:
        def __enter__(self):
            progress.__enter__()
            state["task"] = progress.add_task(f"{job.a_display} vs {job.b_display}", total=job.rounds, status="")
            return self

        def __exit__(self, *exc):
            return progress.__exit__(*exc)

        def on_round(self, rd) -> None:  # noqa: ANN001
            state["n"] += 1
            state["a"] += rd.outcome == "a"
            state["b"] += rd.outcome == "b"
            eps = "".join(symbol[e.outcome] for e in rd.episodes)
            n = state["n"]
            progress.update(
                state["task"], advance=1,
                status=f"round {rd.index + 1}: {eps}  A {state['a'] / n:.0%}  B {state['b'] / n:.0%}",
            )

    return View()


def _print_summary(result: dict, s: dict, match_id: int) -> None:
    from rich.table import Table

    from sumo_cli.cli.markup import esc
    from sumo_cli.compete.wording import draw_text

    played = s["rounds_won_a"] + s["rounds_drawn"] + s["rounds_won_b"]
    verdict = esc({"a": f"{result['a']} wins", "b": f"{result['b']} wins", "draw": draw_text(played)}[s["outcome"]])
    err_console.print(
        f"[bold]{verdict}[/]: rounds {s['rounds_won_a']}-{s['rounds_drawn']}-{s['rounds_won_b']} (A-draw-B), match #{match_id}", markup=True
    )
    table = Table()
    for col in ("", "all rounds", "95% CI", "last 25", "95% CI"):
        table.add_column(col)
    for side, name in (("a", result["a"]), ("b", result["b"])):
        w, l25 = s[f"win_rate_{side}"], s[f"win_rate_{side}_last_25"]
        table.add_row(name, f"{w['rate']:.1%}", f"{w['ci95'][0]:.1%}-{w['ci95'][1]:.1%}",
                      f"{l25['rate']:.1%}", f"{l25['ci95'][0]:.1%}-{l25['ci95'][1]:.1%}")
    err_console.print(table)
    bl = s["bout_length"]
    reasons = ", ".join(f"{k} {v}" for k, v in sorted(bl["by_reason"].items()))
    err_console.print(
        f"bouts: {s['episodes']['total']} ({s['episodes']['won_a']} won by A, {s['episodes']['won_b']} by B, "
        f"{s['episodes']['drawn']} drawn); length mean {bl['mean']:.0f}, median {bl['median']:.0f}, "
        f"range {bl['min']}-{bl['max']} steps; ended by {reasons}"
    )
