"""The physics threads' fork-join pool survives a Ctrl-C landing anywhere in a dispatch: closing it
afterwards neither raises nor leaves a thread raising ("release unlocked lock" ended `sumo play`
with a traceback instead of exit 130)."""

from __future__ import annotations

import threading

import pytest

from sumo_cli.sim.workers import ForkJoinPool


class _InterruptedAfterRelease:
    """A lock whose release is followed at once by a Ctrl-C, as a signal can land between two
    bytecodes of the dispatch loop."""

    def __init__(self, lock):  # noqa: ANN001
        self.lock = lock

    def release(self) -> None:
        self.lock.release()
        raise KeyboardInterrupt

    def acquire(self, *args) -> bool:  # noqa: ANN002
        return self.lock.acquire(*args)


class _InterruptedAcquire(_InterruptedAfterRelease):
    """A lock whose first acquire is interrupted by a Ctrl-C before it gets the lock (Python's lock
    waits are interruptible)."""

    def __init__(self, lock):  # noqa: ANN001
        super().__init__(lock)
        self.interrupted = False

    def release(self) -> None:
        self.lock.release()

    def acquire(self, *args) -> bool:  # noqa: ANN002
        if not self.interrupted:
            self.interrupted = True
            raise KeyboardInterrupt
        return self.lock.acquire(*args)


@pytest.mark.parametrize("where", ["in-the-callers-share", "between-the-go-releases", "while-joining"])
def test_ctrl_c_anywhere_in_a_dispatch_then_close(where, monkeypatch):
    raised: list = []
    monkeypatch.setattr(threading, "excepthook", lambda args: raised.append(args.exc_value))
    pool = ForkJoinPool(3)
    done_items = []

    def work(counter, main: threading.Thread) -> None:  # noqa: ANN001
        done_items.append(next(counter))
        if where == "in-the-callers-share" and threading.current_thread() is main:
            raise KeyboardInterrupt

    if where == "between-the-go-releases":
        pool._go[0] = _InterruptedAfterRelease(pool._go[0])
    elif where == "while-joining":
        pool._done[0] = _InterruptedAcquire(pool._done[0])
    with pytest.raises(KeyboardInterrupt):
        pool.run(work, threading.current_thread())
    pool.close()
    for t in pool._threads:
        t.join(timeout=1)  # parked threads stay (daemons); finishing ones end without raising
    assert raised == []

    # what runs after it (storing the rounds played) may still step physics: on this thread alone
    before = len(done_items)
    pool.run(work, None)
    assert len(done_items) == before + 1
