"""Sections that a Ctrl-C (or SIGTERM) must not cut in two: database transactions.

An interrupt raised inside SQLAlchemy's commit leaves the session half-closed, and what surfaces is
then not the KeyboardInterrupt but an error of the session ("This transaction is closed"): a
traceback and exit 1 instead of the saved work, the resume command and exit 130. The CLI's signal
handler asks :func:`defer` first: inside a section the interrupt is remembered and raised as the
outermost section ends (transactions are milliseconds long), outside it is raised at once."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

_state = threading.local()  # per thread: signal handlers run in the main thread, and defer for it alone


@contextmanager
def uninterrupted() -> Iterator[None]:
    depth = getattr(_state, "depth", 0)
    _state.depth = depth + 1
    try:
        yield
    finally:
        _state.depth = depth
    if depth == 0 and getattr(_state, "pending", False):
        _state.pending = False
        raise KeyboardInterrupt


def defer() -> bool:
    """For a signal handler: True, with the interrupt remembered, inside a section of this thread."""
    if getattr(_state, "depth", 0):
        _state.pending = True
        return True
    return False
