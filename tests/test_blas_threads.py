"""sumo runs one BLAS thread per process unless the user chose otherwise (sumo_cli/__init__.py)."""

import os
import subprocess
import sys

CHECK = "import sumo_cli, numpy, os; print(os.environ['OPENBLAS_NUM_THREADS'])"


def _run(env: dict) -> str:
    return subprocess.run([sys.executable, "-c", CHECK], env=env, capture_output=True, text=True, check=True).stdout.strip()


def test_one_blas_thread_by_default_and_the_users_choice_kept():
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    assert _run(env) == "1"
    assert _run({**env, "OPENBLAS_NUM_THREADS": "2"}) == "2"
