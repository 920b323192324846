"""`sumo runs`: list training, tournament and evolution runs; `sumo runs show RUN`: one run, with a
training run's per-iteration metrics as a table, JSON or a figure."""

from __future__ import annotations

import math
from typing import Optional

import typer

from sumo_cli.cli.common import check_output, err_console, friendly, open_db, print_json, resume_command

app = typer.Typer(help="List runs, or show one: a training run's metrics, a tournament's leaderboard, an evolution's shares.",
                  invoke_without_command=True)

# `sumo runs show` prints at most about this many iteration rows unless --every says otherwise.
MAX_ROWS = 25


@app.callback()
@friendly
def list_runs(
    ctx: typer.Context,
    limit: int = typer.Option(30, "--limit", help="How many of the newest runs."),
    csv_out: Optional[str] = typer.Option(None, "--csv", help="Write the listed runs to this CSV file."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON on stdout."),
) -> None:
    """List training, tournament and evolution runs with their status and progress."""
    if ctx.invoked_subcommand is not None:
        return
    from rich.table import Table

    from sumo_cli.store.ownership import is_alive
    from sumo_cli.store.runs import list_runs as query

    check_output(csv_out, "--csv", ".csv")
    db = open_db(ctx)
    with db.read() as s:
        rows = query(s, limit, is_alive)
    for r in rows:
        r["resume"] = resume_of(ctx, r)
    if csv_out:
        from sumo_cli.report.csv_export import write_csv

        write_csv(csv_out, rows)
        err_console.print(f"wrote {csv_out}", highlight=False)
    if json_out:
        print_json(rows)
        return
    if not rows:
        err_console.print("no runs yet")
        return
    table = Table(title="runs (newest first)")
    for col in ("id", "kind", "status", "progress", "seed", "updated"):
        table.add_column(col)
    for r in rows:
        table.add_row(str(r["id"]), r["kind"], r["status"], f"{r['done']}/{r['total']}", str(r["seed"]), r["updated_at"] or "-")
    err_console.print(table)
    for r in rows:
        if r["resume"]:
            err_console.print(f"resume run {r['id']} with: {r['resume']}", highlight=False, soft_wrap=True)


def resume_of(ctx: typer.Context, run: dict) -> str | None:
    """The command that continues ``run`` (a row of `sumo runs`) when it is interrupted and of a
    resumable kind; else None."""
    from sumo_cli.store.runs import RESUME_COMMANDS

    command = RESUME_COMMANDS.get(run["kind"])
    if run["status"] != "interrupted" or command is None:
        return None
    return resume_command(ctx, f"{command} --resume {run['id']}")


@app.command()
@friendly
def show(
    ctx: typer.Context,
    run_id: int = typer.Argument(..., help="Run id from `sumo runs`."),
    plot: Optional[str] = typer.Option(None, "--plot", help="Write a PNG: a training run's curves (outcome rates, return, closest distance, alpha against env steps), or an evolution's shares per generation."),
    heatmap: Optional[str] = typer.Option(None, "--heatmap", help="Write a tournament's win-probability heatmap of the top agents (PNG)."),
    every: Optional[int] = typer.Option(None, "--every", help=f"Print every N-th iteration (and the last); default: at most about {MAX_ROWS} rows."),
    top: int = typer.Option(20, "--top", help="Agents in a tournament's printed leaderboard and heatmap."),
    by: str = typer.Option("kind", "--by", help="Grouping of an evolution's table and plot: body, arch, strategy or kind."),
    csv_out: Optional[str] = typer.Option(None, "--csv", help="Write the run's results to this CSV file: a training run's learning curve (one row per iteration), a tournament's leaderboard, an evolution's shares per generation."),
    json_out: bool = typer.Option(False, "--json", help="Print the run and its results (iterations, leaderboard or generations) as JSON on stdout."),
) -> None:
    """Show one run as it stands: its settings, and a training run's per-iteration metrics, a
    tournament's leaderboard or an evolution's shares per generation.

    Prints the run's kind, status, progress, seed and settings; for a training run also a table of
    its iterations (outcome rates of the training bouts, mean faithful return, mean closest
    distance, alpha, steps/s), or with --plot a figure of them against env steps; for a tournament
    the leaderboard (TrueSkill, W/D/L, Bradley-Terry) and the per-body, -architecture and -strategy
    summaries, --heatmap for the win probabilities; for an evolution the shares of every
    generation, --plot for the stacked-area figure."""
    from sumo_cli.compete.categories import check_grouping
    from sumo_cli.errors import UserError
    from sumo_cli.store.runs import TRAIN_KIND, run_detail

    if every is not None and every < 1:
        raise UserError(f"--every must be at least 1, got {every}")
    if top < 1:
        raise UserError(f"--top must be at least 1, got {top}")
    check_grouping(by)
    check_output(plot, "--plot", ".png")
    check_output(heatmap, "--heatmap", ".png")
    check_output(csv_out, "--csv", ".csv")

    from sumo_cli.store.ownership import is_alive

    db = open_db(ctx)
    with db.read() as s:
        doc = run_detail(s, run_id, is_alive)
    run = doc["run"]
    run["resume"] = resume_of(ctx, run)
    kind = run["kind"]
    iterations = doc.get("iterations")
    if heatmap is not None and kind != "tournament":
        raise UserError(f"run {run_id} is a {kind} run; --heatmap draws the win probabilities of tournaments only")
    if plot is not None and kind not in (TRAIN_KIND, "evolution"):
        raise UserError(f"run {run_id} is a {kind} run; --plot draws training runs and evolutions (use --heatmap)")
    if kind == "tournament":
        from sumo_cli.compete.results import tournament_results

        doc["results"] = tournament_results(db, run_id)
        if heatmap is not None:
            from sumo_cli.report.plots import win_probability_heatmap

            doc["heatmap"] = str(win_probability_heatmap(doc["results"]["leaderboard"], heatmap, top))
    elif kind == "evolution":
        from sumo_cli.compete.results import evolution_results

        evolved = evolution_results(db, run_id)
        doc["generations"], doc["current"] = evolved["generations"], evolved["current"]
        if plot is not None:
            from sumo_cli.report.plots import shares_stacked_area

            doc["plot"] = str(shares_stacked_area([h[by] for h in doc["generations"]], plot,
                                                  f"evolution run {run_id}: share by {by}"))
    elif plot is not None:
        if not iterations:
            raise UserError(f"training run {run_id} has no iterations stored yet; there is nothing to plot")
        from sumo_cli.report.training_plot import training_curves

        doc["plot"] = str(training_curves(run, iterations, plot))

    if any("heldout_gain" in it["metrics"] for it in iterations or ()):  # a meta run (torch imported only then)
        from sumo_cli.selfplay.meta_selfplay import heldout_summary

        doc["heldout"] = heldout_summary([it["metrics"] for it in iterations])
        from sumo_cli.report.heldout import heldout_curve, last_share

        doc["heldout_curve"] = heldout_curve(iterations)
        doc["heldout_last"] = last_share(doc["heldout_curve"], iterations[-1]["iteration"])
    if csv_out:
        doc["csv"] = str(_write_results_csv(csv_out, doc))
    if json_out:
        print_json(doc)
        return
    _print_header(run)
    if iterations is not None:
        _print_iterations(run, iterations, every)
    if doc.get("heldout"):
        err_console.print(heldout_line(doc["heldout"]), highlight=False)
    if doc.get("heldout_curve"):
        from sumo_cli.cli.heldout_view import print_heldout

        print_heldout(doc["heldout_curve"], doc["heldout_last"])
    if kind == "tournament":
        from sumo_cli.cli.tournament_cmd import leaderboard_table, print_categories

        res = doc["results"]
        title = f"leaderboard, run {run_id} ({res['rated']} of {res['total']} games rated)"
        err_console.print(leaderboard_table(res["leaderboard"], title, top))
        print_categories(res["categories"])
    if kind == "evolution":
        from sumo_cli.cli.evolve_cmd import shares_table

        history, now, labels = doc["generations"], doc["current"], None
        if now and now["played"]:
            g = now["generation"]
            labels = [*map(str, range(len(history))), f"{g} so far"]
            history = [*history, now["shares"]]
            err_console.print(f"generation {g} in play: {now['played']} of {now['games']} games played; the column "
                              f"'{g} so far' gives the shares if it ended now", highlight=False)
        err_console.print(shares_table(history, by, labels) if history else "no generations stored yet")
    for key in ("plot", "heatmap", "csv"):
        if key in doc:
            err_console.print(f"figure written to {doc[key]}", highlight=False)


@app.command("export")
@friendly
def export_run(
    ctx: typer.Context,
    run_id: int = typer.Argument(..., help="Run id from `sumo runs`: a tournament, evolution or game experiment."),
    out: str = typer.Option(..., "--out", help="The archive to write (gzip-compressed JSON, e.g. run-7.json.gz)."),
    json_out: bool = typer.Option(False, "--json", help="Print what was written as JSON."),
) -> None:
    """Write a run of games to one file, to continue or report it in another database.

    The archive holds the run's settings, its stored games (every round and bout), ratings and
    evolution members, and names each version it played by agent, version number and checkpoint
    SHA-256. `sumo runs import` stores it in another database, on any machine; an unfinished run
    then continues there with --resume, with the results it would have had here. A run still
    playing is exported as it stands."""
    from pathlib import Path

    from sumo_cli.store.archive import export_run as export, write_archive

    path = check_output(out, "--out", ".gz")
    payload = export(open_db(ctx), run_id)
    write_archive(Path(path), payload)
    doc = {"run_id": run_id, "kind": payload["run"]["kind"], "status": payload["run"]["status"],
           "games": len(payload["matches"]), "versions": len(payload["versions"]), "path": str(path),
           "bytes": Path(path).stat().st_size}
    if json_out:
        print_json(doc)
        return
    err_console.print(f"wrote {path}: {doc['kind']} run {run_id} ({doc['status']}), {doc['games']} games, "
                      f"{doc['versions']} versions, {doc['bytes']:,} bytes", highlight=False, soft_wrap=True)


@app.command("import")
@friendly
def import_run(
    ctx: typer.Context,
    path: str = typer.Argument(..., help="An archive written by `sumo runs export`."),
    json_out: bool = typer.Option(False, "--json", help="Print the new run's id, status and resume command as JSON."),
) -> None:
    """Store a run archive in this database as a new run, to continue or report it here.

    Prints the new run's id, and the command that continues it when it is unfinished. Every version
    the run played must be in this database with the same checkpoint (the shipped agents are in
    every database); otherwise nothing is written."""
    from pathlib import Path

    from sumo_cli.store.archive import import_run as load, read_archive

    payload = read_archive(Path(path))
    db = open_db(ctx)
    run_id, status = load(db, payload)
    row = {"id": run_id, "kind": payload["run"]["kind"], "status": status}
    doc = {**row, "games": len(payload["matches"]), "resume": resume_of(ctx, row)}
    if json_out:
        print_json(doc)
        return
    err_console.print(f"imported {path} as {doc['kind']} run {run_id} ({status}, {doc['games']} games stored)",
                      highlight=False, soft_wrap=True)
    if doc["resume"]:
        err_console.print(f"continue it with: {doc['resume']}", highlight=False, soft_wrap=True)


def _write_results_csv(path: str, doc: dict):  # noqa: ANN202
    """A run's results as CSV: per kind, the rows a table of them would have."""
    from sumo_cli.report import csv_export as C

    kind = doc["run"]["kind"]
    if doc.get("iterations") is not None:
        rows = C.iteration_rows(doc["iterations"])
    elif kind == "tournament":
        rows = doc["results"]["leaderboard"]
    elif kind == "evolution":
        rows = C.share_rows(doc["generations"])
    else:
        rows = [doc["run"]]  # a run of another kind: its record
    return C.write_csv(path, rows)


# ---------------------------------------------------------------------------------------------
# human output


def _print_header(run: dict) -> None:
    what = f"training run ({run['env']})" if run["kind"] == "train" else f"{run['kind']} run"
    unit = {"train": "iterations", "tournament": "games", "evolution": "games"}.get(run["kind"], "done")
    err_console.print(
        f"[bold]#{run['id']}[/] {what}: {run['status']}, {run['done']}/{run['total']} {unit}, seed {run['seed']}",
        markup=True, highlight=False,
    )
    for line in _config_lines(run):
        err_console.print(f"  {line}", highlight=False, soft_wrap=True)
    stamps = [f"{k} {run[k + '_at']}" for k in ("created", "updated", "finished") if run.get(k + "_at")]
    err_console.print(f"  sumo {run['code_version']}; " + ", ".join(stamps), highlight=False, soft_wrap=True)
    if run.get("resume"):
        err_console.print(f"  resume with: {run['resume']}", highlight=False, soft_wrap=True)


def _names(members: list, most: int = 6) -> str:
    names = [m.get("name", "?") if isinstance(m, dict) else str(m) for m in members]
    shown = ", ".join(names[:most])
    return f"{len(names)}: {shown}" + (f", ... ({len(names) - most} more)" if len(names) > most else "")


def _game(game: dict) -> str:
    return f"games of {game.get('rounds')} rounds x {game.get('episodes')} bouts, {game.get('physics')} physics"


def _config_lines(run: dict) -> list[str]:
    """A few readable lines of a run's stored settings (`--json` has all of them)."""
    cfg = run.get("config") or {}
    kind = run["kind"]
    try:
        if kind == "train" and run.get("env") == "locomotion":
            lc = cfg.get("locomotion", {})
            return [
                f"agent {cfg.get('agent')}: arch {lc.get('arch')}, strategy {lc.get('strategy')}, hidden {lc.get('hidden')}",
                (f"{lc.get('iterations')} iterations, {lc.get('n_envs')} envs, horizon {lc.get('horizon')}, "
                 f"{lc.get('physics')} physics, lr {lc.get('lr') or 'default'}"),
            ]
        if kind == "train":
            tc = cfg.get("train", {})
            opponents = ", ".join(tc.get("opponents") or []) or "-"
            return [
                (f"agent {cfg.get('agent')}: body {tc.get('body')}, arch {tc.get('arch')}, "
                 f"strategy {tc.get('strategy')}; opponents {opponents}"),
                (f"{tc.get('iterations')} iterations of {tc.get('n_envs')} envs x {tc.get('num_steps')} steps, "
                 f"{tc.get('physics')} physics, alpha annealed over {tc.get('anneal_iterations')} iterations, "
                 f"lr {tc.get('lr')}"),
            ]
        if kind == "tournament":
            return [f"agents {_names(cfg.get('members', []))}",
                    f"{cfg.get('matches')} games; {_game(cfg.get('game', {}))}"]
        if kind == "evolution":
            return [f"agents {_names(cfg.get('members', []))}",
                    (f"{cfg.get('copies')} copies each, {cfg.get('generations')} generations of "
                     f"{cfg.get('matches')} games; {_game(cfg.get('game', {}))}")]
        if kind in ("adaptation", "sample-complexity", "calibration"):  # sumo experiment
            labels = [{"name": p.get("label", p.get("name"))} for p in cfg.get("agents", [])]
            lines = [f"agents {_names(labels)}"]
            if kind != "calibration":
                lines.append(f"learning opponents {_names(cfg.get('opponents', []))} (from "
                             f"{cfg.get('start_fraction')} K to K)")
            lines.append(f"{cfg.get('repeats')} games each of {cfg.get('rounds')} rounds x "
                         f"{', '.join(map(str, cfg.get('episodes', [])))} bouts, {cfg.get('physics')} physics; "
                         "`sumo report` draws it")
            return lines
    except (AttributeError, TypeError):  # a config of an unexpected shape: fall back to its plain values
        pass
    plain = [f"{k} {v}" for k, v in cfg.items() if isinstance(v, (str, int, float, bool)) or v is None]
    if "agents" in cfg and isinstance(cfg["agents"], list):
        plain.insert(0, f"agents {_names(cfg['agents'])}")
    return [", ".join(plain)] if plain else []


def _fmt(v: object, spec: str) -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return "-"
    return format(v, spec)


# (header, metric key, format) of the iteration table; columns whose key no iteration has are left out
_SUMO_COLUMNS = [
    ("alpha", "alpha", ".2f"), ("win", "win_rate", ".0%"), ("draw", "draw_rate", ".0%"),
    ("loss", "loss_rate", ".0%"), ("return", "mean_return", ".1f"),
    ("closest", "mean_min_dist", ".2f"),
    ("a1", "meta_alpha_0", ".3f"), ("a2", "meta_alpha_1", ".3f"), ("a3", "meta_alpha_2", ".3f"),
    ("adapted", "heldout_return_adapted", ".1f"), ("unadapted", "heldout_return_unadapted", ".1f"),
    ("gain", "heldout_gain", ".1f"), ("+-", "heldout_gain_ci95", ".1f"),
    ("specific", "heldout_specific_gain", ".1f"), ("+- ", "heldout_specific_gain_ci95", ".1f"),
    ("won gain", "heldout_won_gain", "+.0%"), ("steps/s", "steps_per_second", ".0f"),
]
_LOCO_COLUMNS = [
    ("episodes", "episodes", ".0f"), ("return", "mean_return", ".1f"), ("pre", "pre_return", ".1f"),
    ("post", "post_episode_return", ".1f"), ("ep1", "return_ep1", ".1f"), ("ep7", "return_ep7", ".1f"),
    ("steps/s", "steps_per_second", ".0f"),
]
# The columns left out first when a table of iterations does not fit the terminal.
_DROP_FIRST = ("steps/s", "+- ", "won gain", "specific", "+-", "unadapted", "closest", "a2", "a3", "draw", "loss", "alpha", "pre",
               "ep1", "episodes")
# What the terser column headers mean, printed under the table for the columns shown.
_EXPLAIN = {
    "alpha": "alpha: dense-reward weight", "win": "win/draw/loss: the training bouts",
    "return": "return: mean faithful return",
    "closest": "closest: mean closest torso distance", "pre": "pre/post: meta return before/after adapting",
    "ep1": "ep1/ep7: return of the first/last episode of the sequence",
    "a1": "a1-a3: the meta-learner's step sizes (geometric mean over tensors)",
    "adapted": "adapted/unadapted: training return against the held-out next opponent versions after/without "
               "the meta-update (the first and every --heldout-every-th iteration, default 10); gain +- its 95% interval over the tasks",
    "specific": "specific: adapted minus the return of updates adapted on other tasks' opponents, on the same "
                "bouts (the part of the gain specific to the opponent adapted on) +- its 95% interval",
    "won gain": "won gain: share of those held-out bouts won adapted minus unadapted (what games count)",
}


def heldout_line(h: dict) -> str:
    """The held-out summary of a meta run (:func:`~sumo_cli.selfplay.meta_selfplay.heldout_summary`) as one sentence."""
    parts = ""
    if h.get("specific"):
        parts += f"; the part specific to the opponent adapted on {_spread_text(h['specific'])}"
    if h.get("won"):
        parts += f"; the share of bouts won {_spread_text(h['won'], 'points', 100)}"
    return (f"meta-update on the held-out next versions: gain {_spread_text(h)}{parts}; step sizes "
            f"{_slashed(h['alpha_first'])} at the first iteration, {_slashed(h['alpha_last'])} at the last")


def _spread_text(s: dict, unit: str = "per episode", scale: float = 1.0) -> str:
    spread = (f" +- {scale * s['ci95']:.1f} {unit} over {s['n']} measurements (95% t-interval over them)"
              if math.isfinite(s["ci95"]) else f" {unit}, {s['n']} measurement")
    return (f"{_fmt(scale * s['mean'], '+.1f')}{spread}, {s['above']} with their own interval above 0, "
            f"{s['below']} below")


def _slashed(values: list[float]) -> str:
    return "/".join(_fmt(x, ".3f") for x in values)


def pick_rows(iterations: list[dict], every: int | None) -> tuple[list[dict], int]:
    """Every ``every``-th iteration (by iteration number) and always the last; ``every`` defaults
    to the smallest step that prints at most about MAX_ROWS rows."""
    if every is None:
        every = max(1, math.ceil(len(iterations) / MAX_ROWS))
    rows = [it for it in iterations[:-1] if it["iteration"] % every == 0] + iterations[-1:]
    return rows, every


def _print_iterations(run: dict, iterations: list[dict], every: int | None) -> None:
    if not iterations:
        err_console.print("no iterations stored yet")
        return
    rows, every = pick_rows(iterations, every)
    loco = run.get("env") == "locomotion"
    columns = _LOCO_COLUMNS if loco else _SUMO_COLUMNS
    explain = {**_EXPLAIN, "return": "return: mean episode return"} if loco else _EXPLAIN
    present = {k for it in iterations for k in it["metrics"]}
    columns = [c for c in columns if c[1] in present]
    step = "" if every == 1 else f", showing one in {every} and the last"
    from sumo_cli.cli.tables import whole_words_table

    cells = [[str(it["iteration"]), f"{it['env_steps']:,}", *(_fmt(it["metrics"].get(k), spec) for _, k, spec in columns)]
             for it in rows]
    # too wide for the terminal (a meta run has 17 columns): the least telling go first, iteration and
    # env steps stay, and no figure is cut
    table = whole_words_table(f"{len(iterations)} iterations{step}", ["iter", "env steps", *(h for h, _, _ in columns)],
                              cells, err_console.width, drop_order=_DROP_FIRST)
    err_console.print(table)
    shown = {str(c.header) for c in table.columns}
    caption = "; ".join(explain[h] for h, _, _ in columns if h in explain and h in shown)
    if caption:
        err_console.print(caption, highlight=False, soft_wrap=False)
    if len(shown) < len(columns) + 2:
        err_console.print("(columns left out to fit the terminal: --json or --csv has them all)", highlight=False)
