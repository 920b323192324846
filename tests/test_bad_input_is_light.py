"""Bad input is answered before torch or MuJoCo is imported (they take seconds to load), so the
one-sentence answer comes at once. Checked through sys.modules, not by timing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_POLICIES = Path(__file__).resolve().parents[1] / "policies"

PROBE = """
import json, sys
from sumo_cli.cli.app import app
try:
    app(sys.argv[1:], prog_name="sumo")
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "heavy": [m for m in ("torch", "mujoco") if m in sys.modules]}))
"""


@pytest.mark.parametrize("args", [
    ("play", "ant-mlp", "bug-mlp"),
    ("play", "ant-mlp", "bug-mlp", "--rounds", "0"),
    ("tournament", "--agents", "ant-mlp,bug-mlp"),
    ("tournament", "--agents", "ant-mlp,bug-mlp", "--matches", "-1"),
    ("evolve", "--agents", "ant-mlp,bug-mlp"),
    ("evolve", "--agents", "ant-mlp,bug-mlp", "--generations", "0"),
    ("eval", "sumo", "ant-mlp"),
    ("agents", "show", "ant-mlp"),
    ("train", "--body", "antelope"),
    ("train", "--body", "ant", "--recipe", "fastest"),
    ("train", "--body", "ant", "--features", "egocentric"),
    ("train",),
    ("train", "--body", "ant", "--iterations", "0"),
    ("train", "--resume", "99999"),
    ("zoo", "import", "/missing"),
    ("report", "--quick"),
    ("report", "--out", "/nowhere/at/all"),
    ("experiment", "adaptation", "--agents", "ant-mlp:fly"),
    ("experiment", "adaptation", "--agents", "ant-mlp,nobody"),
    ("experiment", "calibration", "--agents", "ant-mlp,ant-lstm"),
], ids=lambda a: "-".join(a)[:40])
def test_bad_input_does_not_import_torch(tmp_path, args):
    _probe(tmp_path, args, os.environ)


@pytest.mark.parametrize("args", [
    ("tournament", "--agents", "ant-mlp,bug-mlp", "-j", "0"),
    ("evolve", "--agents", "ant-mlp,bug-mlp", "-j", "0"),
    ("tournament", "--agents", "ant-mlp,bug-mlp", "--leaderboard-every", "0"),
], ids=lambda a: "-".join(a)[:40])
def test_a_bad_option_beside_real_agents_does_not_import_torch(tmp_path, args):
    """With the shipped agents, so that only the option is wrong."""
    _probe(tmp_path, args, {**os.environ, "SUMO_POLICIES": str(REPO_POLICIES)})


def _probe(tmp_path, args, env) -> None:  # noqa: ANN001
    env = {**env, "PYTHONPATH": os.pathsep.join([str(REPO_POLICIES.parent), env.get("PYTHONPATH", "")])}  # this checkout
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=env)
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert doc["code"] == 2, proc.stderr
    assert doc["heavy"] == [], (args, proc.stderr)
