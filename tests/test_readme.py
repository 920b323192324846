"""Every `sumo` command in the README's tour runs, in order, at small settings, so the docs
cannot rot. Settings are shrunk by the substitutions below (e.g. 100 rounds become 2)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"

# Paper-scale settings in the README -> small settings for the test.
SMALL = [
    (r"^(sumo train --body .*)--iterations \d+", r"\1--iterations 2 --envs 4 --steps 64"),
    (r"--rounds \d+", "--rounds 2"),
    (r"--episodes \d+", "--episodes 1"),
    (r"--matches \d+", "--matches 3"),
    (r"--generations \d+", "--generations 1"),
    (r"--copies \d+", "--copies 1"),
    (r"--population \d+", "--population 4"),
    (r"--iterations \d+", "--iterations 2"),
    (r"--bouts \d+", "--bouts 2"),
    (r"--repeats \d+", "--repeats 2"),
]


#: The first line of a tour block whose lines need the original policies (not shipped).
ZOO_MARK = "# needs SUMO_ZOO_DIR"


def tour_blocks() -> list[tuple[bool, list[str]]]:
    """The tour's bash blocks in order: (needs the zoo, its `sumo` lines)."""
    text = README.read_text()
    tour = text.split("## Tour", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", tour, re.S)
    return [(block.lstrip().startswith(ZOO_MARK),
             [ln.strip() for ln in block.splitlines() if ln.strip().startswith("sumo ")]) for block in blocks]


def tour_commands(zoo: bool = True) -> list[str]:
    return [line for needs_zoo, lines in tour_blocks() if zoo or not needs_zoo for line in lines]


def test_the_tour_marks_every_line_that_needs_the_original_policies():
    """A fresh clone has no zoo: every line that names one of its agents or SUMO_ZOO_DIR is in a
    block marked as needing it, and the other lines run without it."""
    for needs_zoo, lines in tour_blocks():
        for line in lines:
            assert needs_zoo or not ("zoo-" in line or "SUMO_ZOO_DIR" in line), line
    assert any(needs_zoo for needs_zoo, _ in tour_blocks()) and len(tour_commands(zoo=False)) >= 20


ACTIVATE = ". .venv/bin/activate"


def setup_section() -> str:
    return README.read_text().split("## Set-up", 1)[1].split("\n## ", 1)[0]


def test_readme_has_a_tour():
    assert len(tour_commands()) >= 5


def test_setup_says_to_activate_the_environment():
    """`sumo` exists only inside the virtual environment: the set-up activates it, and says to do
    so in every new shell, as its own command."""
    blocks = [b.strip() for b in re.findall(r"```bash\n(.*?)```", setup_section(), re.S)]
    assert ACTIVATE in blocks
    assert f"&& {ACTIVATE} && sumo " in blocks[0]


def first_command() -> str:
    """The `sumo ...` part of the set-up's first command (after the install and the activation)."""
    first = re.findall(r"```bash\n(.*?)```", setup_section(), re.S)[0].strip()
    return first.split(f"&& {ACTIVATE} && ", 1)[1]


def test_setup_starts_with_a_game_of_the_shipped_agents():
    """The first thing a newcomer runs is a real job, a short iterated game between the agents that
    ship with sumo, not a benchmark of unexplained figures."""
    from sumo_cli.store.shipped import read_manifest

    shipped = {a.name for a in read_manifest(Path(__file__).resolve().parents[1] / "policies")}
    words = first_command().split()
    assert words[:2] == ["sumo", "play"] and set(words[2:4]) <= shipped, first_command()


def fresh_shell_env() -> dict:
    """The environment of a new login shell: no virtual environment active, sumo not on the PATH."""
    # SUMO_POLICIES: the tour uses the agents shipped in policies/, as a new user's database does
    env = {k: v for k, v in os.environ.items() if k not in ("SUMO_DB", "VIRTUAL_ENV", "SUMO_POLICIES")}
    venv_bin = str(Path(sys.prefix) / "bin")
    env["PATH"] = ":".join(p for p in env.get("PATH", "/usr/bin:/bin").split(":") if p != venv_bin)
    return {**env, "COLUMNS": "160"}


@pytest.mark.slow
def test_setup_first_command_runs(tmp_path):
    """The set-up's first command after the install, in a fresh shell in a new folder: the game
    runs on the shipped agents of a new database and is stored there."""
    (tmp_path / ".venv").symlink_to(sys.prefix)
    cmd = first_command()
    for pattern, small in SMALL:
        cmd = re.sub(pattern, small, cmd)
    proc = subprocess.run(["bash", "-c", f"{ACTIVATE} && {cmd}"], cwd=tmp_path, env=fresh_shell_env(),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"README command failed: {cmd}\n{proc.stderr[-3000:]}"
    assert "match #1" in proc.stderr and "95% CI" in proc.stderr, proc.stderr
    assert (tmp_path / "db" / "sumo.sqlite").exists()


@pytest.mark.slow
def test_readme_tour_runs(tmp_path):
    """Each line pasted into a fresh shell after the set-up: bash, the activation, then the line."""
    (tmp_path / ".venv").symlink_to(sys.prefix)  # the set-up's .venv, here the one running the tests
    zoo = bool(os.environ.get("SUMO_ZOO_DIR"))  # the marked zoo block runs where the original policies are
    for needs_zoo, lines in tour_blocks():
        if needs_zoo and not zoo:
            continue
        env = fresh_shell_env()
        if not needs_zoo:  # as in a fresh clone: no zoo
            env.pop("SUMO_ZOO_DIR", None)
        for cmd in lines:
            for pattern, small in SMALL:
                cmd = re.sub(pattern, small, cmd)
            proc = subprocess.run(["bash", "-c", f"{ACTIVATE} && {cmd}"], cwd=tmp_path, env=env,
                                  capture_output=True, text=True, timeout=600)
            assert proc.returncode == 0, f"README command failed: {cmd}\n{proc.stderr[-3000:]}"
