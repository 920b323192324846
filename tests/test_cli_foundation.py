"""The CLI's contract: fast help, db commands, exit code 2 with one sentence for bad input."""

import json
import subprocess
import sys

import pytest
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


def test_db_in_a_missing_folder_is_refused_and_nothing_created(cli, tmp_path):
    typo = tmp_path / "typo" / "sumo.sqlite"
    for args in (("agents",), ("play", "zoo-ant-lstm-v3", "zoo-bug-lstm-v3"), ("db", "current"), ("db", "upgrade")):
        code, out, err = cli("--db", str(typo), *args)
        assert code == 2 and "typo" in err and "does not exist" in err and out == "", (args, err)
    assert not (tmp_path / "typo").exists()
    assert cli("agents")[0] == 0 and (tmp_path / "db" / "sumo.sqlite").exists()  # the default folder is made


def test_unusable_database_urls_are_one_sentence(cli, tmp_path):
    (tmp_path / "notes.sqlite").write_text("not a database\n" * 100)
    for db in ("mysql://x/y", "nosuchdialect://x/y", str(tmp_path / "notes.sqlite")):
        code, out, err = cli("--db", db, "agents")
        assert code == 2 and out == "", (db, err)
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and "Traceback" not in err and "sqlalche.me" not in err, (db, err)


def test_db_current_names_the_right_cure_for_a_newer_database(cli, tmp_path):
    assert cli("agents")[0] == 0
    engine = create_engine(f"sqlite:///{tmp_path / 'db' / 'sumo.sqlite'}")
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = 'ffff9999'"))
    engine.dispose()
    code, out, _ = cli("db", "current", "--json")
    status = json.loads(out)["status"]
    assert code == 0 and "db upgrade" not in status and "newer sumo" in status


@pytest.mark.slow
def test_processes_creating_one_new_database_at_once_all_succeed(tmp_path):
    code = "import sys; from sumo_cli.store.database import open_database; open_database(sys.argv[1]).dispose()"
    for attempt in range(4):
        path = tmp_path / f"race{attempt}" / "sumo.sqlite"
        path.parent.mkdir()
        procs = [subprocess.Popen([sys.executable, "-c", code, str(path)], stderr=subprocess.PIPE, text=True)
                 for _ in range(3)]
        for proc in procs:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err


def test_help_shows_no_value_after_flags(cli):
    for args in (("runs", "--help"), ("tournament", "--help"), ("train", "--help")):
        code, out, _ = cli(*args)
        assert code == 0 and "--json" in out and "<bool>" not in out, out
    code, out, _ = cli("runs", "--help")
    assert "<int>" in out  # options that take a value still say which


def test_an_option_name_has_one_meaning_and_one_default():
    """-j/--workers is all cores (or SUMO_WORKERS) wherever it appears; --threads the physics threads
    of one game; --every only picks the rows of runs show (the leaderboard's and the frames' have
    names of their own)."""
    import typer.main

    from sumo_cli.cli.app import app

    def commands(cmd, path=()):  # noqa: ANN001, ANN202
        for name, sub in getattr(cmd, "commands", {}).items():
            yield (*path, name), sub
            yield from commands(sub, (*path, name))

    seen: dict[str, set] = {}
    for path, cmd in commands(typer.main.get_command(app)):
        if path[0] == "bench":
            continue  # benchmarks measure set configurations
        for p in cmd.params:
            for opt in p.opts:
                if opt in ("-j", "--workers", "--threads", "--every"):
                    seen.setdefault(opt, set()).add((p.default, getattr(p, "envvar", None)))
                    if opt == "--every":
                        assert path == ("runs", "show"), path
    assert seen["--workers"] == {(None, "SUMO_WORKERS")} == seen["-j"]
    assert seen["--threads"] == {(None, None)}
