"""Bad input is answered before torch or MuJoCo is imported (they take seconds to load), so the
one-sentence answer comes at once. Checked through sys.modules, not by timing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

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
    ("report", "--quick"),
    ("report", "--out", "/nowhere/at/all"),
    ("experiment", "adaptation", "--agents", "ant-mlp:fly"),
    ("experiment", "adaptation", "--agents", "ant-mlp,nobody"),
    ("experiment", "calibration", "--agents", "ant-mlp,ant-lstm"),
], ids=lambda a: "-".join(a)[:40])
def test_bad_input_does_not_import_torch(tmp_path, args):
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert doc["code"] == 2, proc.stderr
    assert doc["heavy"] == [], (args, proc.stderr)
