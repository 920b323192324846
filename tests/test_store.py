"""The schema guard, migrations (pytest-alembic style) and the registry, on SQLite and PostgreSQL."""

import hashlib

import pytest
from sqlalchemy import create_engine, text

from sumo_cli.errors import UserError
from sumo_cli.store import registry
from sumo_cli.store.database import Database, alembic_config, current_revision, downgrade, head_revision, upgrade


def test_single_head():
    from alembic.script import ScriptDirectory

    assert len(ScriptDirectory.from_config(alembic_config("sqlite://")).get_heads()) == 1


def test_head_read_from_the_files_is_alembics_head(tmp_path, monkeypatch):
    """head_revision reads the migration files without importing Alembic (bad input answers sooner);
    it must name Alembic's head, also with a third migration in the newer annotated style."""
    from alembic.script import ScriptDirectory

    from sumo_cli.store import database as D

    assert head_revision() == ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
    versions = tmp_path / "versions"
    versions.mkdir()
    for f in (D.MIGRATIONS_DIR / "versions").glob("*.py"):
        (versions / f.name).write_text(f.read_text())
    (versions / "9999_next.py").write_text(
        f'revision: str = "9999"\ndown_revision: Union[str, None] = "{head_revision()}"\n')
    monkeypatch.setattr(D, "MIGRATIONS_DIR", tmp_path)
    assert head_revision() == "9999"


def test_new_database_is_created_at_head(any_db_url):
    db = Database(any_db_url)
    assert current_revision(db._read_engine) == head_revision()
    db.dispose()


def test_models_match_migrations(any_db_url):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from sumo_cli.store.models import Base

    upgrade(any_db_url)
    engine = create_engine(any_db_url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
    engine.dispose()
    assert diff == []


def test_every_downgrade_runs(any_db_url):
    from alembic.script import ScriptDirectory

    upgrade(any_db_url)
    revisions = list(ScriptDirectory.from_config(alembic_config("sqlite://")).walk_revisions())
    for rev in revisions:  # newest first
        downgrade(any_db_url, rev.down_revision or "base")
    engine = create_engine(any_db_url)
    assert current_revision(engine) is None
    engine.dispose()
    upgrade(any_db_url)  # and back up again


def test_older_schema_is_refused_with_upgrade_advice(any_db_url):
    upgrade(any_db_url, "0001")
    with pytest.raises(UserError, match=r"back up, then run `sumo db upgrade`"):
        Database(any_db_url)
    upgrade(any_db_url)
    Database(any_db_url).dispose()


def test_newer_schema_is_refused(any_db_url):
    Database(any_db_url).dispose()
    engine = create_engine(any_db_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = 'ffff9999'"))
    engine.dispose()
    with pytest.raises(UserError, match="newer sumo"):
        Database(any_db_url)


def test_sqlite_pragmas(sqlite_url):
    db = Database(sqlite_url)
    with db.write() as s:
        assert s.execute(text("PRAGMA foreign_keys")).scalar() == 1
        assert s.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert s.execute(text("PRAGMA busy_timeout")).scalar() >= 5000
    db.dispose()


def _register(db, name="ant-meta", sha=None):
    with db.write() as s:
        agent = registry.create_agent(s, name, "ant", "lstm", "meta", "trained", {})
        for k in (1, 2, 3):
            registry.add_version(s, agent, k, f"/ckpt/{name}/v{k}", sha or hashlib.sha256(bytes([k])).hexdigest(), iteration=k * 10)


def test_resolve_picks_latest_or_requested_version(any_db_url):
    db = Database(any_db_url)
    _register(db)
    with db.read() as s:
        assert registry.resolve(s, "ant-meta").version == 3
        assert registry.resolve(s, "ant-lstm-meta@2").version == 2
        with pytest.raises(UserError, match="no version 9"):
            registry.resolve(s, "ant-meta@9")
        with pytest.raises(UserError, match="close matches: ant-meta"):
            registry.resolve(s, "ant-mlp-meta")
    db.dispose()


def test_foreign_keys_are_enforced(any_db_url):
    from sqlalchemy.exc import IntegrityError

    from sumo_cli.store.models import Version

    db = Database(any_db_url)
    with pytest.raises(IntegrityError):
        with db.write() as s:
            s.add(Version(agent_id=12345, version=1, checkpoint_path="x", sha256="0" * 64))
    db.dispose()


def test_corrupt_checkpoint_row_is_refused(sqlite_url):
    db = Database(sqlite_url)
    _register(db)
    with db.write() as s:
        s.execute(text("UPDATE versions SET sha256 = 'not-a-hash' WHERE version = 3"))
    with db.read() as s, pytest.raises(UserError, match="corrupt"):
        registry.resolve(s, "ant-meta")
    db.dispose()


def test_each_database_gets_its_own_checkpoint_folder(tmp_path, monkeypatch):
    """Agent names and run ids repeat across databases: two databases side by side must not share
    (and overwrite) checkpoint files."""
    from sumo_cli.store.registry import checkpoint_root

    monkeypatch.delenv("SUMO_CHECKPOINTS", raising=False)
    monkeypatch.chdir(tmp_path)
    a = checkpoint_root(f"sqlite:///{tmp_path}/runs/a.sqlite")
    b = checkpoint_root(f"sqlite:///{tmp_path}/runs/b.sqlite")
    assert a == tmp_path / "runs" / "a-checkpoints" and b == tmp_path / "runs" / "b-checkpoints"
    assert checkpoint_root("postgresql+psycopg://u@host/team") == tmp_path / "checkpoints" / "team"
    assert checkpoint_root("postgresql+psycopg://u@host/other") != checkpoint_root("postgresql+psycopg://u@host/team")
    monkeypatch.setenv("SUMO_CHECKPOINTS", str(tmp_path / "elsewhere"))
    assert checkpoint_root(f"sqlite:///{tmp_path}/runs/a.sqlite") == tmp_path / "elsewhere"
