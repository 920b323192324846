"""What every command shares: the stderr console, the database option, and error handling.

Human output and progress go to stderr; ``--json`` puts one JSON document on stdout and nothing
else. A UserError becomes its one sentence on stderr and exit code 2.
"""

from __future__ import annotations

import functools
import json
import sys
from typing import Any, Callable

import typer
from rich.console import Console

from sumo_cli.errors import UserError

err_console = Console(stderr=True)


def friendly(fn: Callable) -> Callable:
    """Turn UserError into one sentence and exit code 2 instead of a traceback; Ctrl-C into 130."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except UserError as exc:
            err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            # Commands with long runs save their progress and print the resume command themselves;
            # reaching here means nothing was left to save.
            err_console.print("interrupted; nothing was written")
            raise typer.Exit(130) from None

    return wrapper


def db_url(ctx: typer.Context) -> str | None:
    return (ctx.obj or {}).get("db")


def resolved_db_url(ctx: typer.Context) -> str:
    """The database URL of --db / SUMO_DB / the default, refused if its folder does not exist."""
    from sumo_cli.store.database import check_location, resolve_url

    url = resolve_url(db_url(ctx))
    check_location(url)
    return url


def open_db(ctx: typer.Context):  # noqa: ANN201
    from sumo_cli.store.database import Database

    return Database(resolved_db_url(ctx))


def print_json(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
    sys.stdout.flush()


def require_positive(value: int, what: str) -> int:
    if value < 1:
        raise UserError(f"{what} must be at least 1, got {value}")
    return value
