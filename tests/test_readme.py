"""Every `sumo` command in the README's tour runs, in order, at small settings, so the docs
cannot rot. Settings are shrunk by the substitutions below (e.g. 100 rounds become 2)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"

# Paper-scale settings in the README -> small settings for the test.
SMALL = [
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


def tour_commands() -> list[str]:
    text = README.read_text()
    tour = text.split("## Tour", 1)[1].split("\n## ", 1)[0]
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", tour, re.S):
        for line in block.splitlines():
            line = line.strip()
            if line.startswith("sumo "):
                commands.append(line)
    return commands


def test_readme_has_a_tour():
    assert len(tour_commands()) >= 5


@pytest.mark.slow
def test_readme_tour_runs(tmp_path):
    if not os.environ.get("SUMO_ZOO_DIR"):
        pytest.skip(reason="SUMO_ZOO_DIR is unset: the tour imports the original RoboSumo policies")
    env = {**os.environ, "COLUMNS": "160"}
    env.pop("SUMO_DB", None)
    for cmd in tour_commands():
        for pattern, small in SMALL:
            cmd = re.sub(pattern, small, cmd)
        args = [os.path.expandvars(a) for a in shlex.split(cmd)[1:]]
        proc = subprocess.run([sys.executable, "-m", "sumo_cli", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"README command failed: {cmd}\n{proc.stderr[-3000:]}"
