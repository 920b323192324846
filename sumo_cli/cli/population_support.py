"""What `sumo population` adds to a plan before anything runs: every training step's options parsed
by `sumo train`'s own parser (an unknown option or a bad value is one sentence naming the step, not a
failure hours later), and a log folder of the runner's own (a second runner never writes into the
first one's logs)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from sumo_cli.errors import UserError


def check_steps(plan) -> None:  # noqa: ANN001 - population_plan.Plan
    """Parse every training step's options as its ``sumo train`` child will; refuse the first step
    they do not parse for, in one sentence naming the plan and the step."""
    import typer

    from sumo_cli.cli.train_cmd import _check_names, train as train_function

    alone = typer.Typer()
    alone.command("train")(train_function)
    train = typer.main.get_command(alone)  # the very parser of `sumo train`, without the whole app
    for step in plan.steps:
        if not step.trains:
            continue
        if {"--help", "--version"} & {t.split("=", 1)[0] for t in step.train}:
            raise UserError(f"{plan.path}, step {step.name}: its train options ask for help instead of a run")
        try:
            p = train.make_context("train", ["--name", step.name, *step.train], resilient_parsing=False).params
        except typer.TyperException as exc:  # typer's own click: usage errors and bad values
            why = " ".join(getattr(exc, "format_message", exc.__str__)().split()).rstrip(".")
            raise UserError(f"{plan.path}, step {step.name}: `sumo train` does not take its options ({why})") from None
        try:  # the names train checks before it loads anything (body, arch, strategy, recipe, features)
            _check_names(None, p.get("env"), p.get("body"), p.get("arch"), p.get("strategy"), p.get("recipe"),
                         p.get("features"), None)
        except UserError as exc:
            raise UserError(f"{plan.path}, step {step.name}: {exc}") from None


def own_log_dir(parent: Path) -> Path:
    """A folder for this runner's logs under ``parent``, named by its start time and process id."""
    return parent / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"


def say_plan_fills(members, on_plan: bool, quiet: bool) -> None:  # noqa: ANN001 - population.Member
    """One line when a tournament or evolution on ``--plan`` plays agents the plan did not make:
    the slots its steps leave empty are filled by the database's agents of the canonical names (the
    shipped ones, unless agents were trained under those names)."""
    from sumo_cli.cli.common import err_console
    from sumo_cli.names import canonical_name

    if not on_plan or quiet:
        return
    played = sorted({m.name.split("@", 1)[0] for m in members})
    others = sorted({m.name.split("@", 1)[0] for m in members
                     if m.name.split("@", 1)[0] == canonical_name(m.body, m.arch, m.strategy)})
    if not others:
        return
    shown = ", ".join(others[:6]) + (f" and {len(others) - 6} more" if len(others) > 6 else "")
    err_console.print(f"the plan fills {len(played) - len(others)} of the population's {len(played)} agents; the other "
                      f"{len(others)} are the database's agents of their canonical names ({shown}: the shipped ones "
                      "unless you trained agents under those names)", highlight=False, soft_wrap=True)
