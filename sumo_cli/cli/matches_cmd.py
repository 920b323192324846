"""`sumo matches`: the stored games (`sumo runs` is in runs_cmd)."""

from __future__ import annotations

from typing import Optional

import typer

from sumo_cli.cli.common import err_console, friendly, open_db, print_json

matches_app = typer.Typer(help="List stored games, or show one with its rounds.", invoke_without_command=True)


@matches_app.callback()
@friendly
def list_matches(
    ctx: typer.Context,
    limit: int = typer.Option(30, "--limit", help="How many of the newest games."),
    run: Optional[int] = typer.Option(None, "--run", help="Only the games of this tournament or evolution run."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON on stdout."),
) -> None:
    """List the newest games."""
    if ctx.invoked_subcommand is not None:
        return
    from rich.table import Table

    from sumo_cli.store.games import list_matches as query

    db = open_db(ctx)
    with db.read() as s:
        rows = query(s, limit, run)
    if json_out:
        print_json(rows)
        return
    if not rows:
        err_console.print("no games yet: `sumo play A B` plays one")
        return
    table = Table(title="games (newest first)")
    for col in ("id", "run", "A", "B", "outcome", "rounds A-D-B", "seconds"):
        table.add_column(col)
    for r in rows:
        table.add_row(str(r["id"]), str(r["run_id"] or "-"), r["a"], r["b"], r["outcome"], r["rounds"], str(r["wall_seconds"]))
    err_console.print(table)


@matches_app.command()
@friendly
def show(
    ctx: typer.Context,
    match_id: int = typer.Argument(..., help="Game id from `sumo matches`."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON on stdout."),
) -> None:
    """Show one game with every round and episode."""
    from sumo_cli.compete.summary import summarise
    from sumo_cli.store.games import match_dict

    db = open_db(ctx)
    with db.read() as s:
        doc = match_dict(s, match_id)
    if json_out:
        print_json({**doc, "summary": summarise(doc)})
        return
    sm = summarise(doc)
    err_console.print(
        f"#{doc['id']} {doc['a']} vs {doc['b']}: {doc['outcome']}, rounds {doc['rounds_won_a']}-{doc['rounds_drawn']}-"
        f"{doc['rounds_won_b']}, seed {doc['seed']}, {doc['settings']}"
    )
    sym = {"win": "W", "loss": "L", "draw": "D"}
    for r in doc["rounds"]:
        eps = " ".join(f"{sym[e['outcome']]}:{e['reason']}:{e['length']}" for e in r["episodes"])
        err_console.print(f"  round {r['index'] + 1:3d} ({r['version_a']} vs {r['version_b']}): {r['outcome']:4s} {eps}")
    err_console.print(f"A win rate {sm['win_rate_a']['rate']:.1%}, B {sm['win_rate_b']['rate']:.1%}")
