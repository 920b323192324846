"""Processes of this test session, read from /proc (Linux): descendants of a process, and every
process tagged with this session's SUMO_TEST_SESSION value (which orphans keep after reparenting).
Nothing here looks at processes the tests did not start."""

from __future__ import annotations

import os
import time
from pathlib import Path

TAG = "SUMO_TEST_SESSION"


def children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for child in children(todo.pop()):
            found.append(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def tagged(value: str) -> list[int]:
    """Live processes whose environment holds TAG=value (only our own user's are readable)."""
    needle = f"{TAG}={value}".encode()
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in env.split(b"\0") and alive(int(entry.name)):
            out.append(int(entry.name))
    return out


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    """The pids still alive after waiting up to ``timeout`` seconds for them to end."""
    deadline = time.time() + timeout
    while True:
        left = [p for p in pids if alive(p)]
        if not left or time.time() > deadline:
            return left
        time.sleep(0.1)
