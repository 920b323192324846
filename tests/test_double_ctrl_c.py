"""Two Ctrl-C in quick succession end a command with its one line and exit code 130, never a
KeyboardInterrupt traceback (the second one lands in the first one's message or exit handlers)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import atexit, sys, time
from sumo_cli.cli import app as A
from sumo_cli.cli.common import friendly

atexit.register(lambda: time.sleep(0.3))  # exit handlers that take a while (a pool's clean-up)

@A.app.command("nap")
@friendly
def nap():
    print("ready", flush=True)
    time.sleep(60)

sys.argv = ["sumo", "nap"]
A.main()
"""


@pytest.mark.parametrize("gap", [0.02, 0.1, 0.2])
def test_a_second_ctrl_c_prints_no_traceback(tmp_path, gap):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", PROBE], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as on a terminal, even
    # when the tests run in the background (which starts them with Ctrl-C ignored)
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGINT)
    time.sleep(gap)
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "interrupted; nothing was written" in err
