"""Shared fixtures: a fresh database per test (SQLite; PostgreSQL where a server is reachable),
the CLI runner, and the zoo location (tests that need the original policies skip without it)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

ZOO_DIR = os.environ.get("SUMO_ZOO_DIR")
POSTGRES_URL = os.environ.get("SUMO_TEST_POSTGRES")
# The agents shipped in policies/ would join every test database (and take the canonical names
# tests train under); tests that are about them set SUMO_POLICIES themselves.
os.environ["SUMO_POLICIES"] = ""

# Every process the tests start inherits this tag, orphans included; the session ends by checking
# that none of them is left (see pytest_sessionfinish). Unrelated processes are never looked at.
SESSION_TAG = uuid.uuid4().hex
os.environ["SUMO_TEST_SESSION"] = SESSION_TAG


def _own_helpers() -> set[int]:
    """multiprocessing's resource tracker and fork server of this pytest process (when a test
    started them): they end with pytest itself."""
    import sys

    tracker = sys.modules.get("multiprocessing.resource_tracker")
    server = sys.modules.get("multiprocessing.forkserver")
    pids = {getattr(getattr(tracker, "_resource_tracker", None), "_pid", None) if tracker else None,
            getattr(getattr(server, "_forkserver", None), "_forkserver_pid", None) if server else None}
    return {p for p in pids if p}


def pytest_collection_modifyitems(config, items):  # noqa: ANN001
    """``SUMO_TEST_ORDER_SEED=N``: run the tests in a random order drawn from seed N (no plugin
    needed), so that a test that depends on the ones before it shows up; the same seed gives the
    same order again."""
    seed = os.environ.get("SUMO_TEST_ORDER_SEED")
    if seed:
        import random

        random.Random(int(seed)).shuffle(items)


def pytest_report_header(config):  # noqa: ANN001
    seed = os.environ.get("SUMO_TEST_ORDER_SEED")
    return f"tests in random order, SUMO_TEST_ORDER_SEED={seed}" if seed else None


def pytest_sessionfinish(session, exitstatus):  # noqa: ANN001
    import processes

    left = [p for p in processes.tagged(SESSION_TAG) if p not in _own_helpers()]
    left = processes.wait_gone(left, timeout=10)
    if left:
        lines = "\n".join(f"  {p}: {processes.cmdline(p)[:200]}" for p in left)
        session.config.get_terminal_writer().line(
            f"\nthe test session left {len(left)} process(es) behind:\n{lines}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED

@pytest.fixture(autouse=True)
def environment_as_the_session_began():
    """Every test sees the environment variables the session began with, whatever the tests before
    it ran: code that sets them for the process (choosing a GL backend sets MUJOCO_GL and
    PYOPENGL_PLATFORM) must not make a later test depend on the order of the tests."""
    saved = dict(os.environ)
    yield
    if dict(os.environ) != saved:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture
def one_torch_thread():
    """Tiny tensors: one intra-op thread is faster, and the machine's cores are shared."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture
def zoo_dir() -> Path:
    if not ZOO_DIR:
        pytest.skip(reason="SUMO_ZOO_DIR is unset: the original RoboSumo policies are test data outside the project")
    return Path(ZOO_DIR)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'db' / 'sumo.sqlite'}"


def _postgres_url() -> str:
    """A fresh, empty PostgreSQL database for one test, dropped afterwards by the fixture."""
    if not POSTGRES_URL:
        pytest.skip(reason="SUMO_TEST_POSTGRES is unset: no PostgreSQL server to test against (.ci/run starts one)")
    from sqlalchemy import create_engine, text

    name = f"sumo_test_{uuid.uuid4().hex[:10]}"
    admin = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return POSTGRES_URL.rsplit("/", 1)[0] + "/" + name


def _drop_postgres(url: str) -> None:
    from sqlalchemy import create_engine, text

    name = url.rsplit("/", 1)[1]
    admin = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_db_url(request, tmp_path: Path):  # noqa: ANN001
    """The same test on SQLite and on a real PostgreSQL server."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'db' / 'sumo.sqlite'}"
        return
    url = _postgres_url()
    yield url
    _drop_postgres(url)


@pytest.fixture
def cli(tmp_path: Path, monkeypatch):  # noqa: ANN001
    """Run `sumo ...` in-process in a fresh working directory; returns (exit_code, stdout, stderr)."""
    from typer.testing import CliRunner

    from sumo_cli.cli.app import app

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SUMO_DB", raising=False)
    # the commands run inside the test's process: one worker (no pool of processes to start, seconds
    # each) unless a test asks for more with -j
    monkeypatch.setenv("SUMO_WORKERS", "1")
    runner = CliRunner()

    def run(*args: str):
        result = runner.invoke(app, [str(a) for a in args], catch_exceptions=False)
        return result.exit_code, result.stdout, result.stderr

    return run


@pytest.fixture(scope="session")
def zoo_db(tmp_path_factory) -> Path:
    """A database with the original policies imported, built once per session (tests copy it)."""
    if not ZOO_DIR:
        pytest.skip(reason="SUMO_ZOO_DIR is unset: the original RoboSumo policies are test data outside the project")
    from sumo_cli.store.library import import_zoo
    from sumo_cli.store.database import open_database

    root = tmp_path_factory.mktemp("zoo-db")
    db = open_database(str(root / "db" / "sumo.sqlite"))
    import_zoo(db, ZOO_DIR)
    db.dispose()
    return root / "db" / "sumo.sqlite"


@pytest.fixture
def shipped_ants(tmp_path: Path, monkeypatch) -> Path:  # noqa: ANN001
    """A policies/ folder of two shipped Ant MLPs (``ant-mlp`` and ``sparring-ant``, version 7, fresh
    weights) trained without adaptation, which every test database then holds."""
    import torch

    from sumo_cli.store import shipped
    from sumo_cli.nets import policy as P
    from sumo_cli.nets.checkpoint import checkpoint_tensors, save_checkpoint
    from sumo_cli.nets.normalizer import new_stats

    folder = tmp_path / "policies"
    spec = P.PolicySpec("mlp", 133, 8, features="ego")
    for name in ("ant-mlp", "sparring-ant"):
        params = P.init_params(spec, torch.Generator().manual_seed(7))
        base = tmp_path / "run" / name / "v00007"
        base.parent.mkdir(parents=True, exist_ok=True)
        sha = save_checkpoint(base, checkpoint_tensors(params, new_stats(133)), spec, body="ant", strategy="none",
                              metadata={"agent": name, "version": 7})
        shipped.ship(folder, name, "ant", "mlp", "none", [(7, base, sha, 7, 700)], {"command": "test"})
    monkeypatch.setenv("SUMO_POLICIES", str(folder))
    return folder
