"""`sumo agents`: list agents, show one with its versions and record."""

from __future__ import annotations

import typer

from sumo_cli.cli.common import err_console, friendly, open_db, print_json

app = typer.Typer(help="List agents, or show one with its versions and record.", invoke_without_command=True)


@app.callback()
@friendly
def list_agents(
    ctx: typer.Context,
    json_out: bool = typer.Option(False, "--json", help="Print JSON on stdout."),
) -> None:
    """List all agents grouped by body and combination (the paper's seven first), with the five
    versions that stand for each population member (its stages)."""
    if ctx.invoked_subcommand is not None:
        return
    from rich.table import Table

    from sumo_cli import names
    from sumo_cli.compete.population import stage_versions
    from sumo_cli.store import registry

    combos = {names.canonical_name(b, a, st): i for b in names.BODIES for i, (a, st) in enumerate(names.COMBINATIONS)}
    bodies = {b: i for i, b in enumerate(names.BODIES)}
    db = open_db(ctx)
    with db.read() as s:
        rows = [{"name": a.name, "body": a.body, "arch": a.arch, "strategy": a.strategy, "provenance": a.provenance,
                 "versions": len(vs), "latest": max(vs) if vs else None, "default_version": a.default_version,
                 "stages": stage_versions(vs) if a.name in combos else None}
                for a, vs in registry.agents_with_versions(s)]
    rows.sort(key=lambda r: (bodies.get(r["body"], len(bodies)), r["body"], r["name"] not in combos,
                             combos.get(r["name"], 0), r["name"]))
    if json_out:
        print_json(rows)
        return
    if not rows:
        err_console.print("no agents yet: `sumo zoo import PATH` imports the original policies; `sumo train` trains one")
        return
    members = sum(len(r["stages"]) for r in rows if r["stages"])
    table = Table(title=f"{len(rows)} agents; the paper's population: {members} of its 105 versions")
    cols = ("name", "arch", "strategy", "provenance", "versions", "latest", "stages")
    for col in cols:
        table.add_column(col, justify="right" if col in ("versions", "latest") else "left", no_wrap=col == "name")
    body = None
    for r in rows:
        if r["body"] != body:
            if body is not None:
                table.add_section()
            body = r["body"]
            from rich.text import Text

            table.add_row(Text(str(body), style="bold"), *[""] * (len(cols) - 1))
        shown = {**r, "stages": ",".join(map(str, r["stages"])) if r["stages"] else None}
        table.add_row(*(str(shown[c]) if shown[c] is not None else "-" for c in cols))
    err_console.print(table)


@app.command()
@friendly
def show(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Agent name, e.g. ant-meta or zoo-bug-lstm-v3."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON on stdout."),
) -> None:
    """Show one agent: its kind, provenance, versions and game record."""
    from rich.table import Table

    from sumo_cli.store import registry

    db = open_db(ctx)
    with db.read() as s:
        resolved = registry.resolve(s, name.split("@")[0])
        agent = registry.get_agent(s, resolved.agent_name)
        rec = registry.record(s, agent)
        doc = {
            "name": agent.name,
            "body": agent.body,
            "arch": agent.arch,
            "strategy": agent.strategy,
            "provenance": agent.provenance,
            "origin": agent.origin,
            "default_version": resolved.version,
            "record": {"games": rec.games, "wins": rec.wins, "draws": rec.draws, "losses": rec.losses,
                       "interrupted": rec.interrupted},
            "versions": [
                {
                    "version": v.version,
                    "iteration": v.iteration,
                    "checkpoint": v.checkpoint_path,
                    "sha256": v.sha256,
                    "metrics": v.metrics,
                    "created_at": v.created_at.isoformat() if v.created_at else None,
                }
                for v in agent.versions
            ],
        }
    doc["observations_seen"] = _observations_seen(resolved)
    if json_out:
        print_json(doc)
        return
    from sumo_cli.cli.markup import esc

    err_console.print(
        f"[bold]{esc(doc['name'])}[/]: " + esc(f"{doc['body']}, {doc['arch']}, strategy {doc['strategy']}, "
                                              f"{doc['provenance']}; default version {doc['default_version']}"),
        markup=True,
    )
    seen = doc["observations_seen"]
    if seen:
        err_console.print(f"trained on {seen:,} observations (the count in its observation normaliser)")
    r = doc["record"]
    cut_short = f" ({r['interrupted']} interrupted games left out)" if r["interrupted"] else ""
    err_console.print(f"record: {r['games']} games, {r['wins']} won, {r['draws']} drawn, {r['losses']} lost{cut_short}")
    table = Table(title="versions")
    for col in ("version", "iteration", "sha256", "checkpoint"):
        table.add_column(col)
    for v in doc["versions"][-20:]:
        table.add_row(str(v["version"]), str(v["iteration"] if v["iteration"] is not None else "-"), v["sha256"][:12], v["checkpoint"])
    if len(doc["versions"]) > 20:
        err_console.print(f"(showing the last 20 of {len(doc['versions'])} versions; --json lists all)")
    err_console.print(table)


def _observations_seen(resolved) -> int | None:  # noqa: ANN001 (a registry.ResolvedVersion)
    """How many observations the default version learned from, as its observation normaliser
    counted them: for the original policies the only record of their training's length. None when
    the checkpoint cannot be read (showing an agent must not depend on its files)."""
    from sumo_cli.errors import UserError
    from sumo_cli.nets.checkpoint import load_checkpoint

    try:
        stats = load_checkpoint(resolved.checkpoint_path, resolved.sha256).obs_stats
    except UserError:
        return None
    return int(stats["count"]) if stats and "count" in stats else None
