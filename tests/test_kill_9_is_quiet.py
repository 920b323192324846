"""A driver killed with SIGKILL (kill -9) while its pool runs leaves no "leaked semaphore objects"
lines on the terminal: the resource tracker cleans them up quietly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import time
from sumo_cli.runtime.executor import ProcessExecutor

pool = ProcessExecutor(2)
list(pool.run(abs, [(0, (-1,)), (1, (-2,))]))
print("ready", flush=True)
time.sleep(60)
"""


def test_kill_9_of_a_pool_driver_prints_no_leak_warning(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", PROBE], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    proc.kill()
    _, err = proc.communicate(timeout=120)  # until the workers and the tracker, which share stderr, are gone
    assert "leaked" not in err, err
