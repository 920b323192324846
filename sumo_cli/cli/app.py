"""The `sumo` command. Heavy imports (torch, mujoco, alembic, matplotlib) stay inside commands so
`sumo --help` answers at once."""

from __future__ import annotations

from typing import Optional

import typer
from typer.core import TyperGroup

from sumo_cli import __version__
from sumo_cli.cli import (
    agents_cmd,
    bench_cmd,
    bench_game_cmd,
    db_cmd,
    eval_cmd,
    eval_sumo_cmd,
    evolve_cmd,
    experiment_cmd,
    matches_cmd,
    play_cmd,
    population_cmd,
    render_cmd,
    report_cmd,
    runs_cmd,
    tournament_cmd,
    train_cmd,
    zoo_cmd,
)

def _flags_take_no_value() -> None:
    """Typer's help shows a type after every option, flags too (``--json <bool>``), which reads as
    if they took a value: show none for flags."""
    from typer.core import TyperOption

    shown = TyperOption.display_type_rich

    def display_type_rich(self, ctx):  # noqa: ANN001, ANN202
        return None if self.is_flag else shown(self, ctx)

    TyperOption.display_type_rich = display_type_rich


_flags_take_no_value()


def hoist_options(args: list[str], takes_value: dict[str, bool]) -> list[str]:
    """``args`` with the options named in ``takes_value`` (option -> whether it takes a value) moved
    to the front, wherever they were typed, with their values (``--db X`` or ``--db=X``); nothing
    after ``--`` is touched."""
    front, rest = [], []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest.extend(args[i:])
            break
        option = arg.partition("=")[0]
        if option in takes_value and (i + 1 < len(args) or "=" in arg or not takes_value[option]):
            # (one that lacks its value is left where it is, for the parser's own sentence)
            n = 1 if "=" in arg or not takes_value[option] else 2
            front.extend(args[i:i + n])
            i += n
            continue
        rest.append(arg)
        i += 1
    return front + rest


class RootGroup(TyperGroup):
    """`sumo` itself: its own options (``--db``, ``--version``) are also taken after the subcommand and
    its arguments (``sumo play a b --db x.sqlite``), as users type them."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:  # noqa: ANN001
        takes_value = {opt: not p.is_flag for p in self.params if p.param_type_name == "option" for opt in p.opts}
        return super().parse_args(ctx, hoist_options(list(args), takes_value))


app = typer.Typer(
    cls=RootGroup,
    name="sumo",
    help="Continuous adaptation via meta-learning in competitive RoboSumo.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
app.add_typer(db_cmd.app, name="db")
app.add_typer(agents_cmd.app, name="agents")
app.add_typer(zoo_cmd.app, name="zoo")
app.command("play")(play_cmd.play)
app.add_typer(matches_cmd.matches_app, name="matches")
app.add_typer(runs_cmd.app, name="runs")
app.command("tournament")(tournament_cmd.tournament)
app.command("train")(train_cmd.train)
app.command("evolve")(evolve_cmd.evolve)
app.add_typer(population_cmd.app, name="population")
app.add_typer(experiment_cmd.app, name="experiment")
app.command("render")(render_cmd.render)
app.command("report")(report_cmd.report)
eval_cmd.app.command("sumo")(eval_sumo_cmd.sumo_curve)
app.add_typer(eval_cmd.app, name="eval")
bench_cmd.app.command("game")(bench_game_cmd.game)
app.add_typer(bench_cmd.app, name="bench")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"sumo {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    db: Optional[str] = typer.Option(
        None, "--db", envvar="SUMO_DB", help="SQLAlchemy URL or SQLite file path (default: db/sumo.sqlite)."
    ),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    ctx.obj = {"db": db}


def main() -> None:
    try:
        app()
    except SystemExit as exc:
        if exc.code == 130:
            _end_interrupted()
        raise
    except KeyboardInterrupt:  # a second Ctrl-C while the first one's message or clean-up ran: no traceback
        _end_interrupted()


def _end_interrupted() -> None:
    """End an interrupted command at once. Its run is saved and its workers ended by now; what is
    left is the interpreter's teardown, which takes 1.5-2.5 s once torch is imported (2-core
    machine under load), too slow for the promised Ctrl-C. The exit handlers still run (0.1 s;
    multiprocessing's unlink the pool's semaphores), the teardown after them is skipped."""
    import atexit
    import os
    import signal
    import sys

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a further Ctrl-C must not break the exit handlers
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(130)
