"""Every `sumo ...` command that the code names in backticks (error messages, hints, help) exists:
its subcommands resolve and its options belong to the command they are given to."""

from __future__ import annotations

import re
from pathlib import Path

import typer.main

from sumo_cli.cli.app import app

SOURCES = Path(__file__).resolve().parents[1] / "sumo_cli"


def suggested() -> list[tuple[str, str]]:
    out = []
    for path in sorted(SOURCES.rglob("*.py")):
        for command in re.findall(r"`(sumo(?: [^`]*)?)`", path.read_text()):
            out.append((f"{path.relative_to(SOURCES)}", command))
    return out


def unknown_parts(command: str) -> list[str]:
    """The words of ``command`` that name no subcommand or option where they stand."""
    cmd = typer.main.get_command(app)
    anywhere = {o for p in cmd.params for o in p.opts}  # sumo's own options (--db) go after a subcommand too
    bad = []
    words = command.split()[1:]
    descending = True
    for word in words:
        if word.startswith("{") or word.startswith("<") or word == "...":
            descending = False  # a placeholder argument
            continue
        if word.startswith("-"):
            opts = {o for p in cmd.params for o in (*p.opts, *getattr(p, "secondary_opts", []))}
            if word.split("=", 1)[0] not in opts | anywhere | {"--help"}:
                bad.append(word)
            continue
        if descending and hasattr(cmd, "commands") and word in cmd.commands:
            cmd = cmd.commands[word]
        else:
            descending = False  # an argument (A, RUN, PATH, a value of the option before it)
    return bad


def test_the_code_names_commands():
    assert len(suggested()) > 20


def test_every_suggested_command_exists():
    wrong = {(where, command): unknown_parts(command) for where, command in suggested()}
    assert {k: v for k, v in wrong.items() if v} == {}


def test_the_check_catches_a_command_that_does_not_exist():
    assert unknown_parts("sumo tournament --show {run_id}") == ["--show"]
    assert unknown_parts("sumo runs show RUN --plot") == []
