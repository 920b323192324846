"""Opening a database: URL resolution, SQLite pragmas, the schema guard, sessions.

A brand-new database is created at the head revision. A database at an older revision is refused
with "back up, then run `sumo db upgrade`"; one from a newer sumo is refused too. Writers take the
SQLite lock up front (BEGIN IMMEDIATE), so a read-then-write transaction can never deadlock.
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, NoSuchModuleError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from sumo_cli.errors import UserError
from sumo_cli.runtime.interrupts import uninterrupted

DEFAULT_DB_PATH = Path("db") / "sumo.sqlite"
MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"
SQLITE_BUSY_TIMEOUT_MS = 30_000


def resolve_url(db: str | None) -> str:
    """--db / SUMO_DB: any SQLAlchemy URL, or a plain file path meaning an SQLite file."""
    value = db or os.environ.get("SUMO_DB") or str(DEFAULT_DB_PATH)
    if "://" in value:
        return value
    return f"sqlite:///{Path(value).expanduser().resolve()}"


def _is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def sqlite_path(url: str) -> Path | None:
    """The file of an SQLite URL, or None (a server, or an in-memory database)."""
    if not _is_sqlite(url):
        return None
    path = url.split("///", 1)[-1] if "///" in url else ""
    return None if path in ("", ":memory:") else Path(path)


def check_location(url: str) -> None:
    """Refuse an SQLite file in a folder that does not exist (a typo must not create databases);
    only the default folder, ``db/`` under the current directory, is created on first use."""
    path = sqlite_path(url)
    if path is None or path.parent.is_dir():
        return
    if path.parent.resolve() == (Path.cwd() / DEFAULT_DB_PATH.parent).resolve():
        return
    raise UserError(f"the folder {path.parent} of the database does not exist; create it first, or check --db / SUMO_DB")


def _make_engine(url: str, immediate: bool) -> Engine:
    if _is_sqlite(url):
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record):  # noqa: ANN001
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            cur.close()

        @event.listens_for(engine, "begin")
        def _begin(conn):  # noqa: ANN001
            conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

        return engine
    return create_engine(url, pool_pre_ping=True)


def alembic_config(url: str, connection=None):  # noqa: ANN001
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


_REVISION_LINE = re.compile(r"^(revision|down_revision)\s*(?::[^=\n]*)?=\s*(.+?)\s*$", re.M)


def head_revision() -> str:
    """The newest migration, read from the ``revision``/``down_revision`` lines of its file:
    importing Alembic to ask it costs 0.3-0.6 s at the start of every command (tests/test_store.py
    checks the two answers agree). Alembic answers when the files do not parse that simply."""
    import ast

    try:
        revisions, parents = set(), set()
        for path in (MIGRATIONS_DIR / "versions").glob("*.py"):
            found = dict(_REVISION_LINE.findall(path.read_text()))
            revisions.add(ast.literal_eval(found["revision"]))
            down = ast.literal_eval(found["down_revision"])
            parents.update(down if isinstance(down, tuple) else [down] if down else [])
        (head,) = revisions - parents
        return head
    except (KeyError, ValueError, SyntaxError):
        from alembic.script import ScriptDirectory

        return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


def known_revisions() -> set[str]:
    from alembic.script import ScriptDirectory

    return {s.revision for s in ScriptDirectory.from_config(alembic_config("sqlite://")).walk_revisions()}


def current_revision_of(conn) -> str | None:  # noqa: ANN001
    if not inspect(conn).has_table("alembic_version"):
        return None
    row = conn.execute(text("SELECT version_num FROM alembic_version")).first()
    return row[0] if row else None


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return current_revision_of(conn)


def _has_tables(engine: Engine) -> bool:
    with engine.connect() as conn:
        return bool(inspect(conn).get_table_names())


def upgrade(url: str, revision: str = "head") -> None:
    from alembic import command

    # Holding the write lock from the start: two processes creating the same new SQLite file wait
    # for each other, and the second finds the schema in place, instead of one failing "locked".
    engine = _make_engine(url, immediate=True)
    try:
        with engine.begin() as conn:
            command.upgrade(alembic_config(url, conn), revision)
    finally:
        engine.dispose()


def create_schema(url: str) -> None:
    """Bring an empty database to the newest schema; refuse one that holds other tables."""
    from alembic import command

    engine = _make_engine(url, immediate=True)
    try:
        with engine.begin() as conn:
            if inspect(conn).get_table_names() and current_revision_of(conn) is None:
                raise UserError(f"{url} holds tables but no sumo schema version; point --db at a sumo database")
            command.upgrade(alembic_config(url, conn), "head")
    finally:
        engine.dispose()


def downgrade(url: str, revision: str) -> None:
    from alembic import command

    engine = _make_engine(url, immediate=False)
    try:
        with engine.begin() as conn:
            command.downgrade(alembic_config(url, conn), revision)
    finally:
        engine.dispose()


def _first_line(exc: object) -> str:
    """An exception's message without SQLAlchemy's background link or the SQL it ran."""
    text_ = str(exc).split("\n", 1)[0]
    return re.sub(r"\s*\(Background on this error at: .*\)$", "", text_).strip() or type(exc).__name__


class Database:
    """An open, schema-checked database. ``write()`` and ``read()`` yield sessions that commit or
    roll back as a unit."""

    def __init__(self, url: str, check_schema: bool = True):
        self.url = url
        try:
            self._write_engine = _make_engine(url, immediate=True)
            self._read_engine = _make_engine(url, immediate=False)
            if check_schema:
                self._guard_schema()
        except UserError:
            raise
        except (DBAPIError, OperationalError) as exc:
            raise UserError(f"cannot open the database {self.display_url}: {_first_line(exc.orig)}") from None
        except NoSuchModuleError:
            raise UserError(f"{self.display_url} is not a database URL this sumo can open; give an SQLite file "
                            "path, or a sqlite:// or postgresql+psycopg:// URL") from None
        except ImportError as exc:
            raise UserError(f"cannot open the database {self.display_url}: its driver is not installed "
                            f"({exc.name or exc})") from None
        except (SQLAlchemyError, ValueError) as exc:
            raise UserError(f"cannot open the database {self.display_url}: {_first_line(exc)}") from None
        self._writer = sessionmaker(self._write_engine, expire_on_commit=False)
        self._reader = sessionmaker(self._read_engine, expire_on_commit=False)

    @property
    def display_url(self) -> str:
        from sqlalchemy.engine import make_url

        try:
            return make_url(self.url).render_as_string(hide_password=True)
        except Exception:  # noqa: BLE001 - a malformed URL is shown as given
            return self.url

    @property
    def is_sqlite(self) -> bool:
        return _is_sqlite(self.url)

    def _guard_schema(self) -> None:
        head = head_revision()
        current = current_revision(self._read_engine)
        if current is None:
            if _has_tables(self._read_engine):
                raise UserError(
                    f"{self.display_url} holds tables but no sumo schema version; point --db at a sumo database"
                )
            create_schema(self.url)
            return
        if current == head:
            return
        if current in known_revisions():
            raise UserError(
                f"the database {self.display_url} is at an older schema ({current}, this sumo needs {head}): "
                "back up, then run `sumo db upgrade`"
            )
        raise UserError(
            f"the database {self.display_url} was written by a newer sumo (schema {current}, this sumo "
            f"knows up to {head}); upgrade sumo to use it"
        )

    @contextmanager
    def write(self) -> Iterator[Session]:
        with uninterrupted(), self._writer() as session, session.begin():  # a Ctrl-C waits for the commit
            yield session

    @contextmanager
    def read(self) -> Iterator[Session]:
        with uninterrupted(), self._reader() as session, session.begin():
            yield session

    def dispose(self) -> None:
        self._write_engine.dispose()
        self._read_engine.dispose()


def open_database(db: str | None = None) -> Database:
    return Database(resolve_url(db))
