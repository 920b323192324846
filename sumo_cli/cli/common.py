"""What every command shares: the stderr console, the database option, and error handling.

Human output and progress go to stderr; ``--json`` puts one JSON document on stdout and nothing
else. A UserError becomes its one sentence on stderr and exit code 2.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shlex
import signal
import sys
import threading
from typing import Any, Callable, Iterator

import typer
from rich.console import Console

from sumo_cli.compete.limits import check_at_most
from sumo_cli.cli.markup import esc
from sumo_cli.store.preflight import check_policies_folder
from sumo_cli.errors import UserError
from sumo_cli.runtime import interrupts

err_console = Console(stderr=True, markup=False)  # user text is never markup (cli.markup)


def friendly(fn: Callable) -> Callable:
    """Turn UserError into one sentence and exit code 2 instead of a traceback; Ctrl-C into 130."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except UserError as exc:
            err_console.print(f"[bold red]error:[/] {esc(exc)}", markup=True, highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            # Commands with long runs save their progress and print the resume command themselves;
            # reaching here means nothing was left to save. A second Ctrl-C is ignored from here on.
            _ignore_interrupts()
            err_console.print("interrupted; nothing was written")
            raise typer.Exit(130) from None

    return wrapper


def _ignore_interrupts() -> None:
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread
        pass


def db_url(ctx: typer.Context) -> str | None:
    return (ctx.obj or {}).get("db")


def resolved_db_url(ctx: typer.Context) -> str:
    """The database URL of --db / SUMO_DB / the default, refused if its folder does not exist."""
    from sumo_cli.store.database import check_location, resolve_url

    url = resolve_url(db_url(ctx))
    check_location(url)
    return url


def open_db(ctx: typer.Context):  # noqa: ANN201
    from sumo_cli.store.shipped import register_shipped
    from sumo_cli.store.database import Database

    check_policies_folder()  # a SUMO_POLICIES folder that is not there: refused before the database is created
    db = Database(resolved_db_url(ctx))
    register_shipped(db)  # the agents in policies/: every database sees them without the user doing anything
    return db


def print_json(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
    sys.stdout.flush()


def workers_option(what: str):  # noqa: ANN201 - a typer OptionInfo
    """``-j/--workers`` with one meaning and one default in every command: how many processes (or,
    where the work runs in this process, physics threads) do the command's independent work at
    once; results never depend on it. Default: all cores, or ``SUMO_WORKERS``."""
    return typer.Option(None, "-j", "--workers", envvar="SUMO_WORKERS", help=workers_help(what))


def workers_help(what: str) -> str:
    return f"{what} at once; results do not depend on it (default: all cores, or SUMO_WORKERS)."


def resolve_workers(workers: int | None, useful: int | None = None) -> int:
    """``-j`` as given, else all cores (at most ``useful``, the units of work there are to share)."""
    if workers is not None:
        return require_positive(workers, "--workers")
    cores = os.cpu_count() or 1
    return max(1, min(cores, useful)) if useful else cores


def threads_option(what: str):  # noqa: ANN201 - a typer OptionInfo
    """``--threads`` with one meaning and one default: the physics threads of one game's bouts
    (default: one per bout of a round, up to the cores)."""
    return typer.Option(None, "--threads", help=f"{what} (default: one per bout of a round, up to the cores).")


def resolve_threads(threads: int | None, episodes: int) -> int:
    if threads is not None:
        return require_positive(threads, "--threads")
    return max(1, min(episodes, os.cpu_count() or 1))


def require_positive(value: int, what: str) -> int:
    """``value`` when it is at least 1 and, for a size (rounds, matches, ...), at most its limit."""
    if value < 1:
        raise UserError(f"{what} must be at least 1, got {value}")
    check_at_most(value, what)
    return value


_FORMATS = {".png": "PNG", ".mp4": "MP4", ".csv": "CSV", ".gz": "gzip-compressed"}


def check_output(path, option: str, suffix: str):  # noqa: ANN001, ANN201 - str | Path | None -> Path | None
    """An output file an option names (--plot, --heatmap, --video, --out, --png, --csv), checked
    before any work: its name ends in ``suffix``, and its folder exists. One rule for every path a
    command writes, as for --db: a typo must not create folders (nor leave half a run behind)."""
    from pathlib import Path

    if path is None:
        return None
    path = Path(path)
    if path.suffix.lower() != suffix:
        raise UserError(f"{option} writes a {_FORMATS.get(suffix, suffix)} file; give a name ending in {suffix}, "
                        f"not {str(path)!r}")
    if path.is_dir():
        raise UserError(f"{option} {path} is a folder; give a file name ending in {suffix}")
    if not path.parent.is_dir():
        raise UserError(f"the folder {path.parent} of {option} {path} does not exist; create it first")
    return path


def resume_command(ctx: typer.Context, rest: str) -> str:
    """``sumo --db DB <rest>``: a command that continues a run as printed, from any directory. An
    SQLite file is named by its absolute path; a server URL that came from SUMO_DB is left out (the
    shell still has it), so a password in it is not printed."""
    from sumo_cli.store.database import resolve_url, sqlite_path

    given = db_url(ctx)
    url = resolve_url(given)
    path = sqlite_path(url)
    if path is not None:
        db = str(path)
    elif given and given != os.environ.get("SUMO_DB"):
        db = given
    else:
        db = None
    return "sumo " + (f"--db {shlex.quote(db)} " if db else "") + rest


@contextlib.contextmanager
def first_interrupt_only() -> Iterator[None]:
    """The first Ctrl-C raises KeyboardInterrupt as usual; later ones are ignored, so a second
    Ctrl-C cannot break the saving and clean-up that the first one started. SIGTERM (``kill PID``,
    a batch scheduler's notice, a container stopping) takes the same path: the work done is saved,
    the run is marked interrupted and the resume command printed. A background job (``cmd &``)
    starts with SIGINT ignored; SIGTERM is then how to stop it.

    Python runs the handler between any two bytecodes, finalizers included, and drops what a
    finalizer raises: an interrupt that lands there is raised again in the code that runs next."""
    wanted = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}
    # only the signals whose disposition is still the default: ignored ones (a background job's SIGINT) or someone
    # else's handlers stay as they are
    ours = [sig for sig, default in wanted.items() if signal.getsignal(sig) is default]
    ignore_all = {*ours, signal.SIGINT}  # a re-delivered interrupt comes as SIGINT

    def once(signum, frame):  # noqa: ANN001
        for sig in ignore_all:
            signal.signal(sig, signal.SIG_IGN)
        if interrupts.defer():  # inside a database transaction: raised as it ends (runtime.interrupts)
            return
        raise KeyboardInterrupt

    unraisable = sys.unraisablehook

    def redeliver(info) -> None:  # noqa: ANN001
        if isinstance(info.exc_value, KeyboardInterrupt):  # dropped in a finalizer: raise it once more, from a
            # timer thread, so that it lands in the code that runs after this hook, not in the hook itself
            signal.signal(signal.SIGINT, once)
            timer = threading.Timer(0.01, signal.pthread_kill, args=(threading.main_thread().ident, signal.SIGINT))
            timer.daemon = True
            timer.start()
        else:
            unraisable(info)

    try:
        previous = {sig: signal.signal(sig, once) for sig in ours}
    except ValueError:  # not the main thread
        yield
        return
    sys.unraisablehook = redeliver
    try:
        yield
    finally:
        sys.unraisablehook = unraisable
    for sig, handler in previous.items():  # only on success: after an interrupt the process is exiting
        signal.signal(sig, handler)


@contextlib.contextmanager
def starting_run(ctx: typer.Context, kind: str, run_id: int) -> Iterator[None]:
    """Between writing a run and playing it (loading every agent, starting the workers: seconds for
    a large population), a Ctrl-C still names the command that resumes the run."""
    try:
        yield
    except KeyboardInterrupt:
        err_console.print(f"[yellow]interrupted[/] while starting run {run_id}. Resume with: "
                          f"{esc(resume_command(ctx, f'{kind} --resume {run_id}'))}", markup=True, highlight=False, soft_wrap=True)
        raise typer.Exit(130) from None


def check_agents(db, agent_names: list[str]) -> None:  # noqa: ANN001
    """Refuse an unknown agent name (with the close matches) before anything heavy is imported."""
    from sumo_cli.store import registry

    with db.read() as s:
        for name in agent_names:
            registry.resolve(s, name)


def tell_default_step_sizes(agents) -> None:  # noqa: ANN001 - compete.game.AgentData
    """One line per agent played as ``NAME:meta`` without learnt step sizes: what it adapts with."""
    seen = set()
    for agent in agents:
        note = agent.default_step_sizes_note()
        if note and note not in seen:
            seen.add(note)
            err_console.print(note, highlight=False, soft_wrap=True)


def chosen_population(db, agents: str | None, bodies: str | None, kinds: str | None, plan) -> list:  # noqa: ANN001
    """The members of a tournament or an evolution: ``--agents``, or the paper's population (the
    shipped one, or the one ``--plan`` trained) narrowed by ``--bodies`` and ``--kinds``."""
    from sumo_cli.compete import population as pop

    if agents:
        return pop.explicit_population(db, [a for a in agents.split(",") if a.strip()])
    slots = None
    if plan is not None:
        from sumo_cli.runs.population_plan import load_plan

        slots = load_plan(plan).members()
    return pop.paper_population(db, bodies.split(",") if bodies else None, kinds.split(",") if kinds else None, slots)


def log_lines(what: str, total: int, done: int, json_out: bool):  # noqa: ANN201 - runtime.progress_lines.ProgressLines
    """Plain progress lines on the stderr console, enabled when it is not a terminal and there is no
    ``--json``."""
    from sumo_cli.runtime.progress_lines import ProgressLines

    return ProgressLines(what, total, done, lambda line: err_console.print(line, highlight=False, soft_wrap=True),
                         enabled=not json_out and not err_console.is_terminal)
