"""Resume batches whose chain was lost, e.g. a continuation published while the broker was down.

A chain lives only in its messages: when a task finishes and the broker cannot take the next
step's message, the batch stops with nothing left to redeliver. Every worker process runs a
sweeper thread; one process per interval (a lease in the state store) looks for running jobs
that made no progress for longer than any task can run plus its redelivery delay
(`sweep_stall_seconds`, above the visibility timeout) while the queues are empty. Nothing can
then still be working on their unfinished batches, so each is resumed from its last stored
step output. Steps are idempotent, so a resume that races a late message repeats work only.
"""

from __future__ import annotations

import logging
import threading
import time

from celery import Celery
from celery.signals import worker_ready, worker_shutdown

from core.models.jobs import Job
from core.ports import StoreError
from pipelines.definitions import get_pipeline
from pipelines.models import DocumentBatch
from workers.celery_app import INGEST_QUEUE, LLM_QUEUE
from workers.jobs import JobTracker
from workers.runtime import Runtime, current_runtime

log = logging.getLogger("cogmill.sweeper")


def queued_messages(app: Celery) -> int:
    """Messages waiting in the cogmill queues (not counting those a worker holds)."""
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        return sum(
            channel.queue_declare(queue=name, passive=True).message_count
            for name in (INGEST_QUEUE, LLM_QUEUE)
        )


def resume_point(jobs: JobTracker, job_id: str, batch: int) -> tuple[str, list[str], str]:
    """A batch's pipeline, the steps it still has to run, and the key of their first input."""
    from workers.tasks import batch_input_key, step_output_key

    source = DocumentBatch.model_validate_json(jobs.artifact(batch_input_key(job_id, batch)))
    steps = get_pipeline(source.pipeline).step_names
    for done in range(len(steps), 0, -1):
        key = step_output_key(job_id, batch, steps[done - 1])
        if jobs.state.get(key) is not None:
            return source.pipeline, steps[done:], key
    return source.pipeline, steps, batch_input_key(job_id, batch)


def stalled(jobs: JobTracker, job: Job, stall_seconds: float, now: float) -> bool:
    return not job.status.finished and now - jobs.last_progress(job) > stall_seconds


def sweep(runtime: Runtime, app: Celery, stall_seconds: float, now: float | None = None) -> int:
    """Resume the unfinished batches of stalled jobs; returns how many were resumed."""
    from workers.tasks import batch_chain

    now = time.time() if now is None else now
    jobs = JobTracker(runtime.state, runtime.settings.artifact_ttl_seconds)
    candidates = [job for job in jobs.list(live=False) if stalled(jobs, job, stall_seconds, now)]
    if not candidates or queued_messages(app):
        return 0  # queued work may belong to these jobs: waiting is not stalling
    resumed = 0
    for job in candidates:
        if jobs.cancelled(job.id):
            continue  # finish_batch of the live tasks (or a later cancel) ends it
        for batch in jobs.unfinished_batches(job):
            pipeline, steps, in_key = resume_point(jobs, job.id, batch)
            batch_chain(job.id, pipeline, steps, batch, in_key=in_key).apply_async()
            jobs.event(job.id, "batch_resumed", batch=batch, steps=steps)
            resumed += 1
        jobs.touch(job.id)
    if resumed:
        log.warning("resumed %d stalled batches", resumed)
    return resumed


class Sweeper:
    """A daemon thread that sweeps every `interval` seconds, one process per interval."""

    def __init__(self, app: Celery, interval: float, stall_seconds: float) -> None:
        self.app, self.interval, self.stall_seconds = app, interval, stall_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cogmill-sweeper", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                runtime = current_runtime()
                period = int(time.time() // self.interval)
                if runtime.state.incr(f"sweeper:lease:{period}") == 1:
                    runtime.state.delete(f"sweeper:lease:{period - 2}")  # keeps two at most
                    sweep(runtime, self.app, self.stall_seconds)
            except (StoreError, OSError) as err:
                log.warning("sweep skipped: %s", err)
            except Exception:  # noqa: BLE001 - the sweeper must outlive one bad sweep
                log.exception("sweep failed")


_sweeper: Sweeper | None = None


@worker_ready.connect
def _start_sweeper(sender: object = None, **_: object) -> None:
    global _sweeper
    app = getattr(sender, "app", None)
    if app is None or str(app.conf.broker_url).startswith("memory://"):
        return  # embedded mode: the broker lives in this process and loses nothing alone
    settings = current_runtime().settings
    _sweeper = Sweeper(app, settings.sweep_interval_seconds, settings.sweep_stall_seconds)
    _sweeper.start()


@worker_shutdown.connect
def _stop_sweeper(**_: object) -> None:
    if _sweeper is not None:
        _sweeper.stop()
