"""Celery worker threads inside the cogmill process, for embedded mode (`memory://` broker).

The in-memory broker is only visible inside one process, and the embedded stores (SQLite,
Qdrant Edge) are owned by one process, so the CLI or API that enqueues a job also runs it.
"""

from __future__ import annotations

import threading
from types import TracebackType

from celery import Celery
from celery.worker import WorkController
from celery.worker import state as worker_state

from workers.celery_app import INGEST_QUEUE, LLM_QUEUE
from workers.runtime import share_cores_between_threads


class _ReadyWorkController(WorkController):
    """A WorkController that signals when its consumer is ready to take tasks."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.ready = threading.Event()
        super().__init__(*args, **kwargs)

    def on_consumer_ready(self, consumer: object) -> None:
        self.ready.set()


class EmbeddedWorker:
    """A thread-pool Celery worker running in this process; use as a context manager."""

    def __init__(self, app: Celery, threads: int = 2, start_timeout: float = 30.0) -> None:
        self.app = app
        self.threads = threads
        self.start_timeout = start_timeout
        self._controller: _ReadyWorkController | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if not self.app.conf.broker_url.startswith("memory://"):
            raise RuntimeError(
                "embedded workers need the memory:// broker; start "
                "`cogmill worker` processes for a Redis broker"
            )
        share_cores_between_threads(self.threads)
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

    def stop(self, timeout: float = 30.0) -> None:
        if self._thread is None:
            return
        # The worker's consumer loop exits when this flag is set (as Celery's test worker does).
        worker_state.should_terminate = 0
        self._thread.join(timeout)
        worker_state.should_terminate = None
        self._thread = None
        self._controller = None

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
