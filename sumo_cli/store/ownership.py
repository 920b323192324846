"""Which process runs a run: an owner string ("host:pid:token") that a process writes into the run
when it starts or resumes it and that every one of its writes checks, so that two processes never
write one run (a second `--resume` of a run still running is refused; a process whose run another
one has taken over stops at its next write).

A holder on this machine is alive while its process is (and is a sumo process: pids are reused);
on another machine (a shared PostgreSQL database) while the run was written to in the last
``OTHER_HOST_STALE``, the longest a run goes without a write being far shorter (one training
iteration, one game)."""

from __future__ import annotations

import os
import socket
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

from sumo_cli.store import runs as store_runs

OTHER_HOST_STALE = timedelta(minutes=10)


def new_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def _parts(owner: str) -> tuple[str, int]:
    host, pid, _ = owner.rsplit(":", 2)
    return host, int(pid)


def describe(owner: str) -> str:
    host, pid = _parts(owner)
    return f"process {pid} on {host}"


def pid(owner: str) -> int:
    return _parts(owner)[1]


def is_alive(owner: str | None, last_write: datetime | None) -> bool:
    """Whether the process that ``owner`` names may still be running (see the module's rule). No
    owner: a run written but not yet claimed by the process starting it (it loads its agents
    first), alive while it was written in the last ``OTHER_HOST_STALE``."""
    if owner is None:
        return _recent(last_write)
    try:
        host, pid = _parts(owner)
    except ValueError:
        return False
    if host != socket.gethostname():
        return _recent(last_write)
    if pid == os.getpid():  # this process: what it held before is its own to take again
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    try:
        return b"sumo" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # no /proc: trust the pid
        return True


def _recent(last_write: datetime | None) -> bool:
    if last_write is None:
        return False
    if last_write.tzinfo is None:  # SQLite returns naive UTC
        last_write = last_write.replace(tzinfo=timezone.utc)
    return datetime.now(timezone.utc) - last_write < OTHER_HOST_STALE


def _busy(run_id: int, holder: str):  # noqa: ANN202 - a UserError
    from sumo_cli.errors import UserError

    return UserError(f"run {run_id} is being run by {describe(holder)}; stop it first (SIGTERM, `kill {pid(holder)}` "
                     "on its machine, saves what it has done) or let it finish")


def check_not_running(run) -> None:  # noqa: ANN001 - a stored Run
    """A UserError while another live process runs ``run`` (checked again, atomically, by :func:`claim`)."""
    held = store_runs.live_holder(run, is_alive)
    if held:
        raise _busy(run.id, held)


def claim(db, run_id: int) -> str:  # noqa: ANN001 - a store.database.Database
    """This process's claim on run ``run_id``, the one writer from now on; a UserError, with nothing
    written, while another live process runs it. Every write of the run then passes the claim
    (``store.runs.set_run_status(..., owner=)``, ``check_owner``)."""
    owner = new_owner()
    with db.write() as s:
        held = store_runs.claim_run(s, run_id, owner, is_alive)
    if held:
        raise _busy(run_id, held)
    return owner
