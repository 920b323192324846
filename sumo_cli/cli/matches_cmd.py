"""`sumo matches`: the stored games (`sumo runs` is in runs_cmd)."""

from __future__ import annotations

from typing import Optional

import typer

from sumo_cli.cli.common import check_output, err_console, friendly, open_db, print_json
from sumo_cli.cli.markup import esc
from sumo_cli.compete.wording import draw_text

matches_app = typer.Typer(help="List stored games, or show one with its rounds.", invoke_without_command=True)


@matches_app.callback()
@friendly
def list_matches(
    ctx: typer.Context,
    limit: int = typer.Option(30, "--limit", help="How many of the newest games."),
    run: Optional[int] = typer.Option(None, "--run", help="Only the games of this tournament or evolution run."),
    csv_out: Optional[str] = typer.Option(None, "--csv", help="Write every bout of the listed games (game, round and bout, outcomes from A's side) to this CSV file."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON on stdout."),
) -> None:
    """List the newest games."""
    if ctx.invoked_subcommand is not None:
        return
    from sumo_cli.store.matches import list_matches as query

    check_output(csv_out, "--csv", ".csv")
    db = open_db(ctx)
    with db.read() as s:
        rows = query(s, limit, run)
        if csv_out:
            from sumo_cli.report.csv_export import bout_rows, write_csv
            from sumo_cli.store.matches import match_dict

            write_csv(csv_out, bout_rows([match_dict(s, r["id"]) for r in reversed(rows)]))
            err_console.print(f"wrote {csv_out}: every bout of {len(rows)} games", highlight=False)
    if json_out:
        print_json(rows)
        return
    if not rows:
        err_console.print("no games yet: `sumo play A B` plays one")
        return
    from sumo_cli.cli.tables import whole_words_table

    won = {"a": "A", "b": "B", "draw": "draw"}
    cells = [[str(r["id"]), str(r["run_id"] or "-"), r["a"], r["b"], "interrupted" if r["interrupted"] else won[r["outcome"]],
              r["rounds"], f"{r['wall_seconds']:.1f}"] for r in rows]
    err_console.print(whole_words_table("games (newest first; an interrupted game has no result)",
                                        ["id", "run", "A", "B", "outcome", "rounds A-D-B", "seconds"], cells,
                                        err_console.width, drop_order=("seconds", "rounds A-D-B", "run"),
                                        left=("A", "B", "outcome")))


@matches_app.command()
@friendly
def show(
    ctx: typer.Context,
    match_id: int = typer.Argument(..., help="Game id from `sumo matches`."),
    csv_out: Optional[str] = typer.Option(None, "--csv", help="Write every bout of the game (one row each, with its round) to this CSV file."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON on stdout."),
) -> None:
    """Show one game with every round and episode."""
    from sumo_cli.compete.summary import summarise
    from sumo_cli.store.matches import match_dict

    check_output(csv_out, "--csv", ".csv")
    db = open_db(ctx)
    with db.read() as s:
        doc = match_dict(s, match_id)
    if csv_out:
        from sumo_cli.report.csv_export import bout_rows, write_csv

        write_csv(csv_out, bout_rows([doc]))
        err_console.print(f"wrote {csv_out}", highlight=False)
    if json_out:
        print_json({**doc, "summary": summarise(doc)})
        return
    print_match(doc, summarise(doc))


def print_match(doc: dict, sm: dict) -> None:
    """A stored game as a person reads it: who played, the result (or that it was interrupted), the
    settings in words, and a table of its rounds with every bout."""
    from sumo_cli.cli.tables import whole_words_table

    played = len(doc["rounds"])
    verdict = {"a": f"{doc['a']} won", "b": f"{doc['b']} won", "draw": draw_text(played)}[doc["outcome"]]
    st = doc["settings"]
    if doc["interrupted"]:
        verdict = f"interrupted after {played} of {st.get('rounds', '?')} rounds (no result)"
    run = f", game {doc['run_index']} of run {doc['run_id']}" if doc["run_id"] is not None else ""
    err_console.print(f"[bold]game #{doc['id']}[/]: {esc(doc['a'])} vs {esc(doc['b'])}{run}", markup=True, highlight=False,
                      soft_wrap=True)
    err_console.print(f"  {verdict}; rounds {doc['rounds_won_a']}-{doc['rounds_drawn']}-{doc['rounds_won_b']} (A-draw-B); "
                      f"win rate A {sm['win_rate_a']['rate']:.1%}, B {sm['win_rate_b']['rate']:.1%}", highlight=False,
                      soft_wrap=True)
    learning = ", B learning between rounds" if st.get("opponent_learning") else ""
    err_console.print(f"  {st.get('rounds', '?')} rounds x {st.get('episodes', '?')} bouts, {st.get('physics', '?')} "
                      f"physics, seed {doc['seed']}{learning}; {doc['wall_seconds']:.1f} s; sumo {doc['code_version']}, "
                      f"MuJoCo {doc['mujoco_version']}", highlight=False, soft_wrap=True)
    sym = {"win": "W", "loss": "L", "draw": "D"}
    won = {"a": "A", "b": "B", "draw": "draw"}
    cells = [[str(r["index"] + 1), f"{r['version_a']} vs {r['version_b']}", won[r["outcome"]],
              ", ".join(f"{sym[e['outcome']]} {e['reason']} {e['length']}".replace(" ", "\u00a0") for e in r["episodes"])]
             for r in doc["rounds"]]
    err_console.print(whole_words_table("rounds (bouts from A's side: outcome, how it ended, steps)",
                                        ["round", "versions", "winner", "bouts"], cells, err_console.width,
                                        left=("versions", "winner", "bouts")))
