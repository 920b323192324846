"""The one small interface that runs independent jobs (rollouts, games) in parallel.

Local processes by default (spawn-based, one torch/BLAS thread each); Ray when an address is given
(``--address`` or RAY_ADDRESS; ``pip install -e '.[ray]'``). Jobs are plain functions of plain
arguments returning plain results: only the driver touches the database. Work a job reports while
it runs (:mod:`sumo_cli.runtime.progress`) reaches ``run``'s ``on_progress`` in the driver, locally;
Ray tasks report nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any, Callable, Iterable, Iterator, Protocol

from sumo_cli.errors import UserError
from sumo_cli.runtime import progress

#: How often the driver looks at the work its pool workers reported while it waits for results.
PROGRESS_POLL_S = 0.5


def _exit_with(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


def _init_worker(parent: int | None = None, reported=None) -> None:  # noqa: ANN001 - a shared Array
    # Ctrl-C reaches the whole process group: the driver alone handles it and ends its workers,
    # which would otherwise print tracebacks and finish the games in flight first.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if parent is not None:
        # A driver killed with SIGKILL cannot end its workers: they notice being orphaned instead.
        threading.Thread(target=_exit_with, args=(parent,), daemon=True, name="sumo-parent-watch").start()
    if reported is not None:
        progress.attach(reported)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:  # pragma: no cover
        pass


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: the workers' initializer still ignores SIGINT
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class Executor(Protocol):
    workers: int

    def run(self, fn: Callable[..., Any], jobs: Iterable[tuple[int, tuple]],
            on_progress: progress.Callback | None = None) -> Iterator[tuple[int, Any]]:
        """Yield (key, fn(*args)) for each (key, args) as results complete (any order); call
        ``on_progress(units, seconds)`` with the work jobs report while they run, where possible."""

    def close(self) -> None: ...


def _stream(jobs: Iterable[tuple[int, tuple]], limit: int, submit: Callable, finished: Callable) -> Iterator[tuple[int, Any]]:
    """Keep at most ``limit`` jobs in flight so results stream back as they complete: ``submit(args)``
    returns a handle, ``finished(pending)`` blocks until some complete and returns (handle, result)."""
    pending: dict[Any, int] = {}
    it = iter(jobs)
    exhausted = False
    while True:
        while not exhausted and len(pending) < limit:
            try:
                key, args = next(it)
            except StopIteration:
                exhausted = True
                break
            pending[submit(args)] = key
        if not pending:
            return
        for handle, result in finished(pending):
            yield pending.pop(handle), result


class InlineExecutor:
    """Runs jobs one after another in this process (workers = 1; also the easiest to debug)."""

    workers = 1

    def run(self, fn, jobs, on_progress=None):  # noqa: ANN001
        for key, args in jobs:
            with progress.calling(on_progress):
                result = fn(*args)
            yield key, result

    def close(self) -> None:
        pass


#: The warning multiprocessing's resource tracker prints when the driver was killed (SIGKILL) with
#: its pool's semaphores unreleased: the tracker releases them itself, so the lines ("6 leaked
#: semaphore objects") are noise on the user's terminal after `kill -9`. The tracker takes its
#: warning filters from the driver's -W options when it starts.
TRACKER_LEAK_WARNING = "ignore:resource_tracker:UserWarning"


def _quiet_resource_tracker() -> None:
    import sys

    if TRACKER_LEAK_WARNING not in sys.warnoptions:
        sys.warnoptions.append(TRACKER_LEAK_WARNING)


class ProcessExecutor:
    """A spawn-based process pool; keeps at most 2 x workers jobs in flight so results stream."""

    def __init__(self, workers: int):
        import multiprocessing as mp

        _quiet_resource_tracker()  # before the pool's first semaphore starts the tracker
        self.workers = workers
        context = mp.get_context("spawn")
        self._reported = context.Array("d", 2)  # progress.report's [units, seconds], summed over workers
        self._seen = (0.0, 0.0)
        self._pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_init_worker,
                                         initargs=(os.getpid(), self._reported))
        # Start every worker now with SIGINT ignored (a disposition kept across exec), so that a
        # Ctrl-C while a worker is still starting up cannot interrupt it either.
        with _sigint_ignored():
            for _ in range(workers):
                self._pool.submit(int)

    def run(self, fn, jobs, on_progress=None):  # noqa: ANN001
        def finished(pending: dict) -> list:
            while True:
                done, _ = wait(pending, timeout=PROGRESS_POLL_S, return_when=FIRST_COMPLETED)
                self._pass_on(on_progress)
                if done:
                    return [(fut, fut.result()) for fut in done]

        return _stream(jobs, 2 * self.workers, lambda args: self._pool.submit(fn, *args), finished)

    def _pass_on(self, on_progress: progress.Callback | None) -> None:
        totals = progress.shared_totals(self._reported)
        if totals is None:
            return
        units, seconds = totals
        d_units, d_seconds = units - self._seen[0], seconds - self._seen[1]
        self._seen = (units, seconds)
        if on_progress is not None and d_units > 0:
            on_progress(d_units, d_seconds)

    def close(self) -> None:
        """Cancel what has not started and end the workers at once: after a Ctrl-C, games in flight
        are not waited for (their results would be thrown away)."""
        processes = list((getattr(self._pool, "_processes", None) or {}).values())
        # The pool's manager thread holds its queues; were it the last to let go of them when it
        # ends, it would unlink their semaphores while the interrupted driver skips its teardown
        # (os._exit), and the resource tracker would print warnings after the resume command.
        # Joining it here, and holding it until it has ended, frees them in this thread instead.
        manager = getattr(self._pool, "_executor_manager_thread", None)
        self._pool.shutdown(wait=False, cancel_futures=True)
        for proc in processes:
            if proc.is_alive():
                proc.kill()
        for proc in processes:
            proc.join(timeout=5)
        if manager is not None:
            manager.join(timeout=5)
        del manager


class RayExecutor:
    """Jobs as Ray tasks on a cluster; the driver consumes results as they arrive."""

    def __init__(self, address: str, workers: int | None = None):
        try:
            import ray
        except ImportError:
            raise UserError("--address needs Ray: pip install -e '.[ray]'") from None
        self._ray = ray
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        self.workers = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))

    def run(self, fn, jobs, on_progress=None):  # noqa: ANN001 - Ray tasks report no progress
        ray = self._ray
        remote = ray.remote(num_cpus=1)(fn)

        def finished(pending: dict) -> list:
            done, _ = ray.wait(list(pending), num_returns=1)
            return [(ref, ray.get(ref)) for ref in done]

        return _stream(jobs, 2 * self.workers, lambda args: remote.remote(*args), finished)

    def close(self) -> None:
        pass


def make_executor(workers: int | None = None, address: str | None = None) -> Executor:
    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        return RayExecutor(address, workers)
    workers = workers if workers is not None else (os.cpu_count() or 1)
    if workers < 1:
        raise UserError(f"--workers must be at least 1, got {workers}")
    return InlineExecutor() if workers == 1 else ProcessExecutor(workers)
