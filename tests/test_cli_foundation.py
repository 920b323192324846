"""The CLI's contract: fast help, db commands, exit code 2 with one sentence for bad input."""

import json
import subprocess
import sys

from sqlalchemy import create_engine, text


def test_help_is_fast_and_imports_nothing_heavy():
    code = (
        "import sys, time; t = time.perf_counter();"
        "from sumo_cli.cli.app import app;"
        "heavy = [m for m in ('torch', 'mujoco', 'alembic', 'matplotlib', 'sqlalchemy', 'ray') if m in sys.modules];"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    subprocess.run([sys.executable, "-m", "sumo_cli", "--help"], capture_output=True, check=True)


def test_db_current_and_upgrade(cli):
    code, out, _ = cli("db", "current", "--json")
    assert code == 0 and json.loads(out)["status"] == "empty"
    code, _, err = cli("db", "upgrade")
    assert code == 0
    code, out, _ = cli("db", "current", "--json")
    doc = json.loads(out)
    assert doc["revision"] == doc["head"] and doc["status"] == "up to date"


def test_future_schema_refused_with_exit_2(cli, tmp_path):
    assert cli("agents")[0] == 0  # creates db/sumo.sqlite at head
    engine = create_engine(f"sqlite:///{tmp_path / 'db' / 'sumo.sqlite'}")
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = 'ffff9999'"))
    engine.dispose()
    code, out, err = cli("agents")
    assert code == 2 and "newer sumo" in err and out == ""
    assert "Traceback" not in err


def test_unknown_agent_exit_2(cli):
    code, _, err = cli("agents", "show", "ant-meta")
    assert code == 2 and "unknown agent" in err


def test_db_option_and_env(cli, tmp_path, monkeypatch):
    other = tmp_path / "elsewhere.sqlite"
    assert cli("--db", str(other), "agents", "--json")[0] == 0
    assert other.exists()
    monkeypatch.setenv("SUMO_DB", f"sqlite:///{tmp_path / 'env.sqlite'}")
    assert cli("agents", "--json")[0] == 0
    assert (tmp_path / "env.sqlite").exists()
