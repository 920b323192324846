"""`sumo db`: schema migrations."""

from __future__ import annotations

import typer

from sumo_cli.cli.common import err_console, friendly, print_json, resolved_db_url

app = typer.Typer(help="Database schema: show the revision, upgrade or downgrade it.", no_args_is_help=True)


@app.command()
@friendly
def current(ctx: typer.Context, json_out: bool = typer.Option(False, "--json", help="Print JSON on stdout.")) -> None:
    """Show the database URL, its schema revision and the revision this sumo needs."""
    from sumo_cli.store.database import Database, current_revision, head_revision, known_revisions

    url = resolved_db_url(ctx)
    db = Database(url, check_schema=False)
    rev = current_revision(db._read_engine)
    head = head_revision()
    db.dispose()
    if rev is None:
        status = "empty"
    elif rev == head:
        status = "up to date"
    elif rev in known_revisions():
        status = "older schema: back up, then run `sumo db upgrade`"
    else:
        status = "written by a newer sumo: upgrade sumo to use it"
    if json_out:
        print_json({"url": db.display_url, "revision": rev, "head": head, "status": status})
    else:
        err_console.print(f"{db.display_url}: revision {rev or '-'} (head {head}): {status}")


@app.command()
@friendly
def upgrade(ctx: typer.Context, revision: str = typer.Argument("head", help="Target revision.")) -> None:
    """Migrate the database to the newest schema (back it up first)."""
    from sumo_cli.errors import UserError
    from sumo_cli.store.database import Database, current_revision, known_revisions, upgrade as do_upgrade

    url = resolved_db_url(ctx)
    db = Database(url, check_schema=False)
    before = current_revision(db._read_engine)
    db.dispose()
    if before is not None and before not in known_revisions():
        raise UserError(f"the database is at schema {before}, newer than this sumo knows; upgrade sumo instead")
    do_upgrade(url, revision)
    db = Database(url, check_schema=False)
    after = current_revision(db._read_engine)
    db.dispose()
    err_console.print(f"{db.display_url}: {before or 'empty'} -> {after}")


@app.command()
@friendly
def downgrade(ctx: typer.Context, revision: str = typer.Argument(..., help="Target revision, e.g. -1 or base.")) -> None:
    """Migrate the database back to an older schema (for going back to an older sumo)."""
    from sumo_cli.store.database import downgrade as do_downgrade

    do_downgrade(resolved_db_url(ctx), revision)
    err_console.print(f"downgraded to {revision}")
