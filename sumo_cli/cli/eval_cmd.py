"""`sumo eval locomotion`: trained locomotion agents on the held-out leg pairs (the paper's Fig. 4
protocol): per-episode rewards with 95% intervals, a figure, and a stored run."""

from __future__ import annotations

from typing import List, Optional

import typer

from sumo_cli.cli.common import (
    check_output, err_console, friendly, open_db, print_json, require_positive, resolve_workers, workers_option,
)

app = typer.Typer(help="Evaluate trained agents.", no_args_is_help=True)


@app.command("locomotion")
@friendly
def locomotion(
    ctx: typer.Context,
    agents: List[str] = typer.Argument(..., help="Locomotion agents (e.g. loco-mlp loco-mlp-track loco-mlp-meta; name@v picks a version; "
                              "name:none|track|meta plays the policy with another strategy than its own)."),
    repeats: int = typer.Option(50, "--repeats", help="Sequences per agent and pair: 7 episodes, then a full reset of env, policy and adaptation (paper: 50)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the resets and the action noise (the same for every agent)."),
    plot: Optional[str] = typer.Option(None, "--plot", help="Write the figure (one panel per held-out pair) to this PNG file."),
    csv_out: Optional[str] = typer.Option(None, "--csv", help="Write the results (one row per agent, pair and episode: mean and 95% CI) to this CSV file."),
    workers: Optional[int] = workers_option("Physics threads"),
    json_out: bool = typer.Option(False, "--json", help="Print the results as one JSON document on stdout."),
) -> None:
    """Run each agent with its strategy (none, track, rl2, meta; or NAME:STRATEGY) on the back, middle and front
    leg pairs: 7 consecutive episodes with that pair weakened (torque factor 1 .. 0), then a full
    reset, repeated; print the mean episodic reward of every episode with its 95% interval."""
    require_positive(repeats, "--repeats")
    workers = resolve_workers(workers)
    check_output(plot, "--plot", ".png")
    check_output(csv_out, "--csv", ".csv")
    from sumo_cli.runs import locomotion_training as LT

    db = open_db(ctx)
    loaded = LT.load_locomotion_agents(db, agents)
    if not json_out:
        err_console.print(f"evaluating {', '.join(f'{a.name}@{a.version} ({st})' for a, st in loaded)} on the held-out pairs "
                          f"(back, middle, front): {repeats} x 7 episodes each, seed {seed}", highlight=False)

    def progress(row: dict) -> None:
        if not json_out:
            err_console.print(f"  {row['agent']} {row['pair']}: done in {row['seconds']:.1f} s", highlight=False)

    doc = LT.evaluate_agents(db, loaded, repeats, seed, workers, progress)
    if plot is not None:
        from sumo_cli.report.plots import locomotion_adaptation

        doc["plot"] = str(locomotion_adaptation(doc["results"], plot))
    if csv_out is not None:
        from sumo_cli.report.csv_export import write_csv

        write_csv(csv_out, [{"agent": r["agent"], "strategy": r["strategy"], "pair": r["pair"], "episode": k + 1,
                             "mean": m, "ci95": c, "repeats": repeats, "run_id": doc["run_id"]}
                            for r in doc["results"] for k, (m, c) in enumerate(zip(r["mean"], r["ci95"]))])
        doc["csv"] = str(csv_out)
    if json_out:
        print_json(doc)
        return
    for table in locomotion_tables(doc["results"], repeats, doc["run_id"]):
        err_console.print(table)
    if plot is not None:
        err_console.print(f"figure written to {doc['plot']}", highlight=False)
    if csv_out is not None:
        err_console.print(f"results written to {csv_out}", highlight=False)


def locomotion_tables(results: list[dict], repeats: int, run_id: int) -> list:
    """One table per agent (rows: the held-out pairs; columns: the 7 episodes), narrow enough for
    80 columns with every figure whole."""
    from sumo_cli.cli.tables import whole_words_table

    by_agent: dict[tuple[str, str], list[dict]] = {}
    for r in results:
        by_agent.setdefault((r["agent"], r["strategy"]), []).append(r)
    tables = []
    for (agent, strategy), rows in by_agent.items():
        cells = [[r["pair"], *(f"{m:.1f} ±{c:.1f}" for m, c in zip(r["mean"], r["ci95"]))] for r in rows]
        title = f"{agent} ({strategy}): mean episodic reward ± 95% CI per episode ({repeats} repeats; run {run_id})"
        tables.append(whole_words_table(title, ["pair", *(f"ep {k}" for k in range(1, 8))], cells, err_console.width,
                                        left=("pair",)))
    return tables
