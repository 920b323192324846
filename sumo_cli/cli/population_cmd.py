"""`sumo population`: train a population from a plan (policies/population.toml, or --plan of your
own) and show where it stands."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from sumo_cli.cli.common import (
    err_console, first_interrupt_only, friendly, open_db, print_json, resolve_workers, resume_command, workers_option,
)
from sumo_cli.cli.markup import esc
from sumo_cli.cli.population_support import check_steps, own_log_dir
from sumo_cli.compete.wording import count

app = typer.Typer(help="Train the paper's population from a plan, or your own; show where it stands.",
                  no_args_is_help=True)

_PLAN_HELP = "The population plan (TOML; default: the shipped policies/population.toml)."


def _hms(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _rows(states, running: list[str]) -> list[dict]:  # noqa: ANN001 - population_runner.StepState
    out = []
    for st in states:
        state = "running" if st.step.name in running else st.state
        ship = f"{st.shipped_step.member}@{st.shipped_step.final}" if st.shipped_step and st.continues == "from shipped" else None
        out.append({"step": st.step.name, "member": st.step.member, "kind": st.step.kind, "state": state,
                    "continues": st.continues or None, "shipped": ship, "shipped_iterations": st.shipped,
                    "run": st.run_id, "iterations": st.done if st.step.trains else None, "of": st.total,
                    "seconds_per_iteration": round(st.rate, 2) if st.rate else None,
                    "env_steps": st.env_steps, "depends": list(st.step.depends)})
    return out


def _totals(states, plan, workers: int) -> dict:  # noqa: ANN001
    """The plan at a glance: steps done, seconds left, env steps and training seconds so far."""
    from sumo_cli.runs.population_runner import DONE, eta_seconds

    return {"done": sum(st.state.startswith(DONE) for st in states), "eta_seconds": eta_seconds(states, plan, workers),
            "env_steps": sum(st.env_steps for st in states),
            "training_seconds": round(sum(st.seconds for st in states), 1)}


def _table(states, running: list[str], plan, workers: int):  # noqa: ANN001, ANN202
    from rich.table import Table

    t = _totals(states, plan, workers)
    table = Table(title=f"population plan {plan.path.name}: {t['done']}/{len(states)} steps done, "
                        f"about {_hms(t['eta_seconds'])} left on {count(workers, 'worker')}; so far {t['env_steps'] / 1e6:.1f} M "
                        f"env steps and {t['training_seconds'] / 3600:.1f} h of training (the steps' own wall time)",
                  title_justify="left")
    for col in ("step", "member", "state", "continues", "iterations", "s/it"):
        table.add_column(col, no_wrap=col in ("step", "member"), justify="right" if col in ("iterations", "s/it") else "left")
    for r in _rows(states, running):
        its = "-" if r["iterations"] is None else f"{r['iterations']}/{r['of']}"
        state = f"{r['state']} (from shipped)" if r["state"] == "done" and r["continues"] == "from shipped" else r["state"]
        where = "-" if r["state"].startswith("done") or not r["continues"] else (
            f"from shipped {r['shipped']}" if r["shipped"] else r["continues"])
        table.add_row(r["step"], r["member"] or "-", state, where, its,
                      "-" if r["seconds_per_iteration"] is None else f"{r['seconds_per_iteration']:.1f}")
    return table


def _plain_line(states, running: list[str], plan, workers: int) -> str:  # noqa: ANN001
    t = _totals(states, plan, workers)
    now = ", ".join(f"{st.step.name} {st.done}/{st.total}" for st in states if st.step.name in running)
    return (f"{time.strftime('%H:%M:%S')} plan {t['done']}/{len(states)} steps done; running: {now or 'none'}; "
            f"ETA {_hms(t['eta_seconds'])}")


@app.command("train")
@friendly
def train(
    ctx: typer.Context,
    plan_path: Optional[Path] = typer.Option(None, "--plan", help=_PLAN_HELP),
    workers: Optional[int] = workers_option("Steps trained side by side, one process each,"),
    address: Optional[str] = typer.Option(None, "--address", envvar="RAY_ADDRESS",
                                          help="Ray cluster address: every step's rollouts run there."),
    logs: Optional[Path] = typer.Option(None, "--logs", help="Folder of the steps' logs, in a subfolder of this "
                                        "runner's own (default: population-logs/ beside the checkpoints)."),
) -> None:
    """Train every step of the plan not done yet, in dependency order: finished steps are skipped,
    interrupted ones resumed exactly; Ctrl-C stops every step after it saves and prints the command
    that continues."""
    from sumo_cli.runs.population_plan import load_plan

    workers = resolve_workers(workers)
    plan = load_plan(plan_path)
    check_steps(plan)
    from rich.live import Live

    from sumo_cli.runs import population_runner as PR
    from sumo_cli.runtime.progress_lines import EVERY_S
    from sumo_cli.store.registry import checkpoint_root

    db = open_db(ctx)
    log_dir = own_log_dir(logs or checkpoint_root(db.url) / "population-logs")
    live = Live(console=err_console, refresh_per_second=1, transient=False) if err_console.is_terminal else None
    last_line = [0.0]

    def on_update(states, running) -> None:  # noqa: ANN001
        if live is not None:
            live.update(_table(states, running, plan, workers))
        elif time.monotonic() - last_line[0] >= EVERY_S:
            last_line[0] = time.monotonic()
            err_console.print(_plain_line(states, running, plan, workers), highlight=False, soft_wrap=True)

    again = resume_command(ctx, f"population train{' --plan ' + str(plan.path.resolve()) if plan_path else ''} -j {workers}")
    err_console.print(f"population plan {plan.path} ({len(plan.steps)} steps), {count(workers, 'worker')}; logs in {log_dir}",
                      highlight=False, soft_wrap=True)
    try:
        with first_interrupt_only():
            if live is not None:
                with live:
                    states = PR.run_plan(db, plan, workers, address, log_dir, on_update)
            else:
                states = PR.run_plan(db, plan, workers, address, log_dir, on_update)
    except PR.PlanInterrupted:
        err_console.print(f"[yellow]interrupted[/]: every step saved what it had done. Continue with: {esc(again)}",
                          markup=True, highlight=False, soft_wrap=True)
        raise typer.Exit(130) from None
    err_console.print(f"the plan is done: {len(states)} steps; `sumo tournament --plan {plan.path}` plays its population",
                      highlight=False, soft_wrap=True)


@app.command("show")
@friendly
def show(
    ctx: typer.Context,
    plan_path: Optional[Path] = typer.Option(None, "--plan", help=_PLAN_HELP),
    workers: Optional[int] = workers_option("Steps the time left assumes side by side"),
    json_out: bool = typer.Option(False, "--json", help="Print JSON on stdout."),
) -> None:
    """Where each step of the plan stands in the database, and the time left for the whole plan."""
    from sumo_cli.runs.population_plan import load_plan

    workers = resolve_workers(workers)
    plan = load_plan(plan_path)
    from sumo_cli.runs import population_runner as PR

    check_steps(plan)
    db = open_db(ctx)
    states = PR.step_states(db, plan)
    if json_out:
        t = _totals(states, plan, workers)
        print_json({"plan": str(plan.path), "eta_seconds": t["eta_seconds"], "env_steps": t["env_steps"],
                    "training_seconds": t["training_seconds"], "steps": _rows(states, [])})
        return
    err_console.print(_table(states, [], plan, workers))
