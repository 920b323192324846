"""A tiny fork-join pool for stepping physics on native threads with little dispatch latency.

``ThreadPoolExecutor.submit`` + ``Future.result`` costs ~150 µs per round trip on a small VM, a
large share of a batched env step (~2 ms). Here each worker thread waits on its own ``Lock``; a
dispatch releases the locks, the calling thread works too, then it takes each worker's done-lock.
That is about a third of the latency. Work is shared through one ``itertools.count`` (its
``next`` is atomic under the GIL), so faster threads simply take more items.

Threads reference only the pool, never its owner, so an owner can be garbage collected; its
finaliser calls ``close``.

A Ctrl-C (KeyboardInterrupt) can land between any two of the dispatch's lock operations, after
which no one knows which locks are held. So anything raised through a dispatch abandons the pool
instead of closing it: its daemon threads finish the item they are on and stay parked (the process
is ending, as a rule), and a later ``run`` works on the calling thread alone.
"""

from __future__ import annotations

import itertools
import threading
from typing import Callable


class ForkJoinPool:
    """``run(fn, *args)`` calls ``fn(counter, *args)`` on the calling thread and on every worker
    (n_threads - 1 of them), with one shared counter, and returns when all have returned."""

    def __init__(self, n_threads: int, name: str = "sumo-physics"):
        self.n_workers = max(0, int(n_threads) - 1)
        self._go = [threading.Lock() for _ in range(self.n_workers)]
        self._done = [threading.Lock() for _ in range(self.n_workers)]
        for lock in self._go + self._done:
            lock.acquire()
        self._job: tuple | None = None
        self._errors: list[BaseException] = []
        self._closed = False
        self._threads = [
            threading.Thread(target=self._loop, args=(k,), name=f"{name}-{k}", daemon=True)
            for k in range(self.n_workers)
        ]
        for t in self._threads:
            t.start()

    def _loop(self, k: int) -> None:
        go, done = self._go[k], self._done[k]
        while True:
            go.acquire()
            job = self._job
            if job is None:          # closing
                done.release()
                return
            fn, counter, args = job
            try:
                fn(counter, *args)
            except BaseException as exc:  # handed to the caller of run()
                self._errors.append(exc)
            finally:
                del fn, args, job
                done.release()

    def run(self, fn: Callable, *args) -> None:
        counter = itertools.count()
        if self._closed or not self.n_workers:
            fn(counter, *args)
            return
        self._job = (fn, counter, args)
        try:
            for lock in self._go:
                lock.release()
            fn(counter, *args)
            for lock in self._done:
                lock.acquire()
        except BaseException:
            self._abandon()
            raise
        self._job = None
        if self._errors:
            err = self._errors[0]
            self._errors.clear()
            raise err

    def _abandon(self) -> None:
        self._job = None  # a worker not yet started on this job ends instead
        self._closed = True

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._job = None
        for lock in self._go:
            lock.release()
        for lock in self._done:
            lock.acquire()
        for t in self._threads:
            t.join(timeout=5)
