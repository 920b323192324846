"""The Ray path of the executor, on a real local Ray instance: a tournament and a training run given
``--address`` end exactly as the same commands run on local processes.

Ray must stay on loopback. Its head takes the machine's outward address as its node address whatever
``--node-ip-address`` says, so the head and the commands run inside a network namespace made for the
test (``unshare -n``), where loopback is the only interface. Ray 2.60 turns token authentication
on by default; the throw-away cluster runs with it disabled (RAY_AUTH_MODE=disabled on both sides).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

PORT = 6390


def _skip_reason() -> str | None:
    try:
        import ray  # noqa: F401
    except ImportError:
        return "Ray is not installed (pip install -e '.[ray]')"
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "unshare and ip are needed to keep the test's Ray cluster inside its own network namespace"
    if os.geteuid() != 0:
        return "a private network namespace (unshare -n) needs root"
    return None


def _in_private_network(tmp_path: Path, commands: list[list[str]]) -> list[str]:
    """Start a Ray head on 127.0.0.1 in a fresh network namespace, run each command there (stdout of
    each into a file), stop Ray; return the stdouts."""
    bindir = Path(sys.executable).parent
    lines = [
        "set -e",
        "ip link set lo up",
        "export RAY_USAGE_STATS_ENABLED=0 RAY_AUTH_MODE=disabled",
        f"export PATH={bindir}:$PATH",
        "trap 'ray stop --force >/dev/null 2>&1 || true' EXIT",
        f"ray start --head --node-ip-address=127.0.0.1 --port={PORT} --num-cpus=2 --include-dashboard=false "
        f"--disable-usage-stats >{tmp_path / 'ray-start.log'} 2>&1",
    ]
    outs = []
    for i, cmd in enumerate(commands):
        out = tmp_path / f"out{i}.json"
        quoted = " ".join(f"'{c}'" for c in cmd)
        lines.append(f"{quoted} >{out} 2>{tmp_path / f'err{i}.txt'}")
        outs.append(out)
    script = tmp_path / "in-namespace.sh"
    script.write_text("\n".join(lines) + "\n")
    proc = subprocess.run(["unshare", "-n", "bash", str(script)], capture_output=True, text=True, timeout=480,
                          env={**os.environ, "COLUMNS": "200"})
    if proc.returncode != 0:
        errs = "\n".join(p.read_text() for p in sorted(tmp_path.glob("err*.txt")))
        raise AssertionError(f"in-namespace script failed ({proc.returncode}): {proc.stderr}\n{errs}")
    return [p.read_text() for p in outs]


def _sumo(db: Path, *args) -> list[str]:
    return [sys.executable, "-m", "sumo_cli", "--db", str(db), *map(str, args)]


def test_tournament_and_training_through_ray_match_local_processes(zoo_dir, tmp_path):
    reason = _skip_reason()
    if reason:
        pytest.skip(reason=reason)
    from sumo_cli.store.library import import_zoo
    from sumo_cli.store.database import open_database

    db = tmp_path / "ray.sqlite"
    handle = open_database(str(db))
    import_zoo(handle, zoo_dir)
    handle.dispose()
    local_db = tmp_path / "local.sqlite"
    shutil.copy(db, local_db)

    agents = "zoo-ant-lstm-v3,zoo-bug-lstm-v3,zoo-spider-mlp-v3"
    tour = ("tournament", "--agents", agents, "--matches", 4, "--rounds", 1, "--episodes", 1, "--seed", 7, "--json")
    train = ("train", "--body", "ant", "--arch", "mlp", "--name", "ray-ant", "--iterations", 2, "--envs", 2,
             "--steps", 32, "--shards", 2, "--seed", 3, "--json")
    address = ("--address", f"127.0.0.1:{PORT}")
    ray_tour, ray_train, ray_agent = _in_private_network(
        tmp_path, [_sumo(db, *tour, *address), _sumo(db, *train, *address), _sumo(db, "agents", "show", "ray-ant", "--json")])

    def local(*args) -> str:
        proc = subprocess.run(_sumo(local_db, *args), capture_output=True, text=True, timeout=480)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    local_tour, local_train = local(*tour, "-j", 2), local(*train, "-j", 2)
    local_agent = local("agents", "show", "ray-ant", "--json")

    def board(doc: str) -> list:
        return [(r["agent"], r["mu"], r["sigma"], r["wins"], r["draws"], r["losses"]) for r in json.loads(doc)["leaderboard"]]

    assert len(board(ray_tour)) == 3 and sum(r[3] for r in board(ray_tour)) > 0
    assert board(ray_tour) == board(local_tour)

    ray_doc, local_doc = json.loads(ray_train), json.loads(local_train)
    assert ray_doc["iterations"] == local_doc["iterations"] == 2
    assert ray_doc["last_iteration"] == local_doc["last_iteration"]

    def digests(doc: str) -> list:
        return [(v["version"], v["sha256"]) for v in json.loads(doc)["versions"]]

    assert len(digests(ray_agent)) >= 2  # one version per iteration: the same weights, bit for bit
    assert digests(ray_agent) == digests(local_agent)
