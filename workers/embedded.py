"""Celery worker threads inside the cogmill process, for embedded mode (`memory://` broker).

The in-memory broker is only visible inside one process, and the embedded stores (SQLite,
Qdrant Edge) are owned by one process, so the CLI or API that enqueues a job also runs it.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from celery import Celery
from celery.signals import task_prerun
from celery.worker import WorkController
from celery.worker import state as worker_state

from core.settings import Settings
from runtime import Runtime, current_runtime, share_cores_between_threads, use_runtime
from workers.celery_app import INGEST_QUEUE, LLM_QUEUE, configure
from workers.llm_batches.polling import Poller, start_poller

# Longest wait of the worker's consumer loop for a message before it looks at the stop flag.
# Celery's loop for a thread pool waits 2 s per turn, and one more full turn after it saw the
# flag (`synloop`: `try: maybe_shutdown() finally: _loop_cycle()`): 2-4 s per stop. The memory
# transport only polls its queues anyway, so shorter turns cost loop iterations alone (an idle
# worker: 0.3% of a core instead of 0.1%) and a stop takes about two turns (~0.1 s).
DRAIN_TIMEOUT = 0.05
log = logging.getLogger("cogmill.worker")


def _short_drains(connection: Any, cap: float = DRAIN_TIMEOUT) -> None:
    """Make the consumer loop's `connection.drain_events(timeout=2.0)` wait at most `cap`.

    The loop treats the resulting `socket.timeout` as "no message yet" and turns again, so
    nothing but the wait changes: messages are taken and acknowledged exactly as before.
    """
    if getattr(connection, "_cogmill_short_drains", False):
        return  # the consumer restarted on the same connection: already capped
    drain = connection.drain_events

    def drain_events(timeout: float | None = None, **kwargs: Any) -> Any:
        return drain(timeout=cap if timeout is None else min(timeout, cap), **kwargs)

    connection.drain_events = drain_events
    connection._cogmill_short_drains = True


class _ReadyWorkController(WorkController):
    """A WorkController that signals when its consumer is ready to take tasks."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.ready = threading.Event()
        super().__init__(*args, **kwargs)

    def on_consumer_ready(self, consumer: Any) -> None:
        # Called by the consumer loop itself, before its first turn: patch its connection.
        _short_drains(consumer.connection)
        self.ready.set()


class EmbeddedWorker:
    """A thread-pool Celery worker running in this process; use as a context manager."""

    def __init__(
        self, app: Celery, threads: int = 2, start_timeout: float = 30.0, nice: int = 0
    ) -> None:
        """`nice`: the niceness the task threads take on their first task (Linux; niceness is
        per thread there), so that a process serving searches too gives them the cores first."""
        self.app = app
        self.threads = threads
        self.start_timeout = start_timeout
        self.nice = nice
        self._niced = threading.local()
        self._controller: _ReadyWorkController | None = None
        self._thread: threading.Thread | None = None
        self._poller: Poller | None = None  # the Batch API's (workers/llm_batches/polling.py)

    def start(self) -> None:
        if not self.app.conf.broker_url.startswith("memory://"):
            raise RuntimeError(
                "embedded workers need the memory:// broker; start "
                "`cogmill worker` processes for a Redis broker"
            )
        share_cores_between_threads(self.threads)
        if self.nice and sys.platform == "linux":
            task_prerun.connect(self._lower_priority, weak=False)
        self._controller = _ReadyWorkController(
            app=self.app,
            pool_cls="threads",
            concurrency=self.threads,
            loglevel="WARNING",
            queues=[INGEST_QUEUE, LLM_QUEUE],
            hostname=f"embedded@{threading.get_ident()}",
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
        )
        self._thread = threading.Thread(
            target=self._controller.start, name="cogmill-worker", daemon=True
        )
        self._thread.start()
        if not self._controller.ready.wait(self.start_timeout):
            raise RuntimeError(f"embedded worker did not start within {self.start_timeout}s")
        self._poller = start_poller(current_runtime(), own=True)

    def stop(self, timeout: float = 30.0) -> None:
        """Take no more tasks, let the running ones finish (at most `timeout` seconds), stop.

        A warm shutdown: the consumer loop sees the flag within a turn (`DRAIN_TIMEOUT`), then
        the thread pool waits for the tasks it runs, so the stores they write stay open until
        they are done. Messages not yet taken stay queued for the next worker.
        """
        if self._poller is not None:
            self._poller.stop()
            self._poller = None
        task_prerun.disconnect(self._lower_priority)
        if self._thread is None:
            return
        worker_state.should_stop = 0  # read by the consumer loop (celery.worker.state)
        self._thread.join(timeout)
        worker_state.should_stop = None
        self._thread = None
        self._controller = None

    def _lower_priority(self, task: Any = None, **_: Any) -> None:
        """task_prerun, in the thread about to run a task of this worker: once per thread."""
        if task is None or task.app is not self.app or getattr(self._niced, "done", False):
            return
        self._niced.done = True
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self.nice)
        except OSError as err:  # e.g. a container's policy; the tasks run all the same
            log.warning("could not lower the worker threads' priority: %s", err)

    def __enter__(self) -> EmbeddedWorker:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@contextmanager
def open_runtime(settings: Settings, *, with_worker: bool = True) -> Iterator[Runtime]:
    """A runtime for one command, current while it runs, with embedded worker threads when
    the broker is in-process and `with_worker` (otherwise tasks go to the configured broker)."""
    runtime = Runtime(settings)
    use_runtime(runtime)
    worker = None
    try:
        if with_worker and settings.embedded_broker:
            worker = EmbeddedWorker(configure(settings), threads=settings.worker_threads)
            worker.start()
        elif with_worker:
            configure(settings)
        yield runtime
    finally:
        if worker is not None:
            worker.stop()
        runtime.close()
        use_runtime(None)
