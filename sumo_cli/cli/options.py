"""The options of the commands that play many games as a stored run (tournament, evolve, experiment),
declared once as types: a signature says ``rounds: Rounds = 100``; Typer takes the default from
there and the flag and help from the type."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from sumo_cli.cli.common import workers_help

Rounds = Annotated[int, typer.Option("--rounds", help="Rounds per game (paper: 100).")]
Episodes = Annotated[int, typer.Option("--episodes", help="Episodes per round (paper: 3).")]
Physics = Annotated[str, typer.Option("--physics", help="faithful or fast.")]
GameSeed = Annotated[int, typer.Option("--seed", help="Seed of every game.")]
ScheduleSeed = Annotated[int, typer.Option("--seed", help="Seed of the schedule and of every game.")]
GameWorkers = Annotated[Optional[int], typer.Option("-j", "--workers", envvar="SUMO_WORKERS",
                                                    help=workers_help("Games played"))]
Address = Annotated[Optional[str], typer.Option("--address", envvar="RAY_ADDRESS", help="Ray cluster address.")]
Resume = Annotated[Optional[int], typer.Option("--resume", help="Continue the interrupted run with this id.")]

# The population a tournament or an evolution plays (cli.common.chosen_population).
Members = Annotated[Optional[str], typer.Option(
    "--agents", help="Comma-separated agents instead of the paper's population, e.g. zoo-ant-lstm-v3,ant-meta@5,ant-lstm:track "
    "(NAME[@V][:STRATEGY]: :none, :track or :meta plays a policy with another strategy).")]
Bodies = Annotated[Optional[str], typer.Option("--bodies", help="Only these bodies (comma-separated).")]
Kinds = Annotated[Optional[str], typer.Option("--kinds", help="Only these combinations, e.g. lstm-meta,mlp-none.")]
Plan = Annotated[Optional[Path], typer.Option(
    "--plan", help="The population a plan trained (sumo population train --plan FILE) instead of the shipped one.")]
