"""Thin Celery task shells: load a step's input by key, run the step, store its output.

Every step of the registry (pipelines/definitions.py's `STEPS`) is its own task,
`cogmill.<step>`, on the queue the step declares; all share one shell (`run_step`). A batch is
a chain of them, then `finish_batch` (workers/chains.py). Tasks pass artifact keys, never
payloads. A step that fails for a whole batch turns into per-document errors, so the job still
ends; store outages are retried with backoff before that.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from celery import Task
from celery.signals import task_postrun, task_received

from core import cancellation
from core.llm import outage
from core.llm.usage import BudgetExceeded
from core.models.jobs import Claim, DocumentError
from core.ports import StoreError
from pipelines.base import Step, step_types
from pipelines.definitions import STEPS, get_pipeline
from pipelines.models import DocumentBatch, WriteReport
from runtime import Runtime, current_runtime
from workers import fairness
from workers.budgets import park_batch
from workers.celery_app import FINISH, TASK_STEPS, app, task_name
from workers.chains import batch_chain
from workers.delivery import Delivery
from workers.heartbeat import Heartbeat, ensure_heartbeat, worker_id
from workers.job_keys import batch_input_key
from workers.jobs import JobTracker
from workers.llm_batches.submit import through_batch_api
from workers.orchestration import record_batch
from workers.usage import metered

log = logging.getLogger("cogmill.tasks")

STORE_RETRY_PAUSES = (0.5, 1, 2, 4, 8, 15, 30)  # ~1 minute in all
T = TypeVar("T")
STALE = "stale"  # what _run_step returns for a delivery that must do nothing
PARKED = "parked"  # ... for a step the budget refused, or waiting for the Batch API
DEFERRED = "deferred"  # ... for a first step over its tenant's cap (workers/fairness.py)
RETRIES: dict[str, Any] = {
    "autoretry_for": (StoreError,),
    "retry_backoff": 2,
    "retry_jitter": True,
}


def tracker() -> JobTracker:
    runtime = current_runtime()
    return JobTracker(runtime.state, runtime.settings.artifact_ttl_seconds, runtime.graph)


def _step_task(step: type[Step]) -> Task:
    """Register `cogmill.<step>`: the shared shell, for this step (routed to the step's queue
    by the app's `task_routes`, workers/celery_app.py)."""

    def run(
        self: Task,
        in_key: str | None,
        job_id: str,
        dataset: str,
        pipeline: str,
        batch: int,
        documents: int = 0,
        gen: int = 0,
    ) -> str | None:
        return run_step(self, Delivery(in_key, job_id, pipeline, step.name, batch, gen, dataset))

    run.__name__ = run.__qualname__ = step.name
    run.__doc__ = (
        f"Run {step.__name__} on one batch of `documents` documents of a job on `dataset`; "
        "returns the key of its output (None once stopped)."
    )
    options = {"bind": True, "retry_backoff_max": 60, "max_retries": 5, **RETRIES}
    task: Task = app.task(name=task_name(step.name), **options)(run)
    return task


def run_step(task: Task, work: Delivery) -> str | None:
    """The shell of every step task: run one step on one batch, unless the delivery is stale.

    `work.gen` is the batch's generation: a delivery of an older one (a dead worker's message,
    redelivered after the sweeper re-published its batch) ends the chain without running.
    """
    deliveries: list[int] = []  # counted once per delivery, however often the body is retried
    output = ride_out_store_outages(lambda: _run_step(work, deliveries))
    if output is PARKED:  # waits for a resume or the Batch API, on no worker
        fairness.release(current_runtime().state, work.dataset, work.job_id, work.batch)
    if output is STALE or output is PARKED or output is DEFERRED:
        task.request.chain = None  # the batch's live generation (or a resume) runs the rest
        return None
    return output


# One task per step of every pipeline, by step name.
STEP_TASKS: dict[str, Task] = {name: _step_task(step) for name, step in STEPS.items()}


def ride_out_store_outages(work: Callable[[], T]) -> T:
    """Retry `work` in this process while a store is unreachable.

    Celery's own retry republishes the task to the broker; when the outage is the broker's
    Redis itself, that publish fails and the task is dropped with its chain. Waiting here
    needs no broker. After the last pause the error goes to Celery's retry as before.
    """
    for pause in STORE_RETRY_PAUSES:
        try:
            return work()
        except StoreError as err:
            log.warning("store_unavailable retry_in=%ss error=%s", pause, err)
            time.sleep(pause * random.uniform(0.8, 1.2))
    return work()


def ride_out_llm_outages(pauses: list[float], run: Callable[[], T], what: str) -> T:
    """Run a step again after each pause while some of its LLM or embeddings calls gave up
    because the endpoint did not answer (core/llm/outage.py); the last run's output (or
    error) stands. Steps are pure functions of their input, and the LLM cache answers the
    calls that succeeded before, so a second run redoes only what failed."""
    for pause in pauses:
        with outage.watching() as unanswered:
            try:
                output = run()
            except Exception:
                if not unanswered.calls:
                    raise
        if not unanswered.calls:
            return output
        log.warning("llm_unavailable %s calls=%d run_again_in=%ss", what, unanswered.calls, pause)
        time.sleep(pause)
    return run()


def _run_step(work: Delivery, counted: list[int]) -> str | None:
    jobs, job_id, batch = tracker(), work.job_id, work.batch
    runtime = current_runtime()
    state, settings = runtime.state, runtime.settings
    stoppable = not work.after_write
    if work.in_key is None or (stoppable and jobs.cancelled(job_id)):
        if work.first:
            fairness.started(state, work.dataset, job_id, batch)
        return None
    if work.stale(jobs):
        log.info(
            "stale_delivery step=%s job=%s batch=%s gen=%s", work.step, job_id, batch, work.gen
        )
        return STALE
    first = not counted and work.first
    if first and not fairness.admit(state, settings, work.dataset, job_id, batch):
        _defer(runtime, jobs, work)
        return DEFERRED
    if not counted:
        counted.append(jobs.count_delivery(job_id, batch, work.step))
    with _claimed(runtime, jobs, work) as done:
        deliveries = counted[0]
        if deliveries > runtime.settings.max_deliveries:
            # Every earlier delivery died with its worker (acks_late redelivers it): park the
            # batch with an error instead of killing workers forever.
            error = RuntimeError(f"started {deliveries - 1} times without finishing; parked")
            report = _failed_report(jobs, job_id, batch, work.step, error)
            record_batch(runtime, job_id, batch, report)
            return None
        job = jobs.get(job_id, live=False)
        instance = get_pipeline(work.pipeline).build_step(work.step, runtime, job.options)
        input_type = step_types(type(instance))[0]
        data = input_type.model_validate_json(jobs.artifact(work.in_key))

        def step() -> Any:  # None: the batch now waits for the Batch API (workers/llm_batches/)
            return through_batch_api(runtime, job, work, lambda: instance.run(data))

        try:
            with cancellation.watching(lambda: stoppable and jobs.cancelled(job_id)):
                output = ride_out_llm_outages(
                    runtime.settings.llm_outage_pauses_seconds,
                    lambda: metered(runtime.state, job_id, work.step, step, data),
                    f"step={work.step} job={job_id} batch={batch}",
                )
            if output is None:
                return PARKED
        except StoreError:
            raise
        except cancellation.Cancelled:  # as if cancelled before it started: nothing stored
            log.info("step_cancelled step=%s job=%s batch=%s", work.step, job_id, batch)
            return None
        except BudgetExceeded as err:  # not the documents' fault: no errors, the batch waits
            log.info("budget_reached step=%s job=%s batch=%s: %s", work.step, job_id, batch, err)
            park_batch(runtime, job_id, batch, work.step)
            return PARKED
        except Exception as err:  # noqa: BLE001 - a failed step becomes per-document errors
            log.exception("step_failed step=%s job=%s batch=%s", work.step, job_id, batch)
            report = _failed_report(jobs, job_id, batch, work.step, err)
            record_batch(runtime, job_id, batch, report)
            return None  # the rest of the chain passes the None through
        key = jobs.put_artifact(job_id, f"{batch}:{work.step}", output.model_dump_json())
        done()
    jobs.touch(job_id)
    return key


def _defer(runtime: Runtime, jobs: JobTracker, work: Delivery) -> None:
    """Put a first step over its tenant's cap back in its queue, after a short countdown, as
    if this worker had never taken it: no claim, nothing held, no delivery counted."""
    log.info(
        "batch_deferred job=%s batch=%s dataset=%s %s",
        *(work.job_id, work.batch, work.dataset),
        fairness.shares(runtime.state, work.dataset),
    )
    source = DocumentBatch.model_validate_json(
        jobs.artifact(batch_input_key(work.job_id, work.batch))
    )
    jobs.unclaim(work.job_id, work.batch)
    again = batch_chain(work.job_id, work.batch, source, in_key=work.in_key, gen=work.gen)
    again.apply_async(countdown=runtime.settings.tenant_deferral_seconds)
    beat = _heartbeat(runtime)
    if beat:
        beat.release(work.claim(beat.worker, "running").token(work.job_id, work.batch))


@contextmanager
def _claimed(runtime: Runtime, jobs: JobTracker, work: Delivery) -> Iterator[Callable[[], None]]:
    """Claim the batch's step for this process while the block runs; the block calls what it
    is given once the step's output is stored.

    With separate worker processes the step stays listed in the process's heartbeat until the
    task has handed its batch on (`_handed_on`, after Celery published the chain's next
    message): the sweeper re-publishes a claim no live worker lists (workers/sweeper.py).
    Embedded mode has one process, which cannot outlive its own threads: no heartbeat.
    """
    beat = _heartbeat(runtime)
    claim = work.claim(beat.worker if beat else worker_id(), "running")
    if beat:
        beat.hold(claim.token(work.job_id, work.batch))
        _handing_on.__dict__.setdefault("claims", []).append((work, claim))
    jobs.claim(work.job_id, work.batch, claim)

    def done() -> None:
        done = work.claim(claim.worker, "done")
        jobs.claim(work.job_id, work.batch, done)
        if beat:
            _handing_on.claims[-1] = (work, done)

    jobs.touch(work.job_id)
    yield done


def _heartbeat(runtime: Runtime) -> Heartbeat | None:
    """This process's heartbeat, when workers are separate processes."""
    if runtime.settings.embedded_broker:
        return None
    settings = runtime.settings
    beat_s = settings.worker_heartbeat_seconds
    # A step held longer than any task may run was lost (e.g. a retry the broker did not take).
    max_hold = settings.task_time_limit_seconds + beat_s
    return ensure_heartbeat(runtime.state, beat_s, max_hold, _dropped_receipts)


# The steps this process holds since their messages came (`_hold_on_receipt`), by task id,
# with the time each came.
_received: dict[str, tuple[str, float]] = {}
os.register_at_fork(after_in_child=_received.clear)  # a pool process receives no messages
RECEIPT_GRACE_S = 1.0  # Celery registers a request just after `task_received` fires


def _dropped_receipts() -> list[str]:
    """Held steps whose messages this worker no longer has: they ended, or the consumer lost
    its broker connection and dropped those not yet started (Celery's `Consumer.on_close`),
    which it could not put back while the broker was down. Released, they are re-published
    by the sweeper at once rather than after `max_hold`."""
    from celery.worker.state import requests  # what this worker's consumer still has

    came_before = time.monotonic() - RECEIPT_GRACE_S
    gone = [i for i, (_, at) in list(_received.items()) if at < came_before and i not in requests]
    return [held[0] for i in gone if (held := _received.pop(i, None))]


# The claims this thread's current task made, released once the task has handed its batch on.
_handing_on = threading.local()


@task_postrun.connect
def _handed_on(state: str | None = None, **_: object) -> None:
    """After a task: a step that stored its output and whose next message Celery published
    (state SUCCESS) marks its batch handed on; its worker stops listing the step either way."""
    claims: list[tuple[Delivery, Claim]] = _handing_on.__dict__.pop("claims", [])
    if not claims:
        return
    runtime = current_runtime()
    beat, jobs = _heartbeat(runtime), tracker()
    for work, claim in claims:
        if claim.state == "done" and state == "SUCCESS":
            handed_on = claim.model_copy(update={"state": "handed_on", "at": time.time()})
            jobs.claim(work.job_id, work.batch, handed_on)
        if beat:
            beat.release(claim.token(work.job_id, work.batch))


@task_received.connect
def _hold_on_receipt(request: Any = None, **_: object) -> None:
    """A worker that takes a step's message holds it from then on: a worker killed before the
    step started (the message waited for a free pool process) is noticed like any other."""
    if request is None or request.name not in TASK_STEPS:
        return
    beat = _heartbeat(current_runtime())
    if beat is None:
        return
    jobs, work = tracker(), Delivery.of_message(request.name, request.kwargs)
    try:
        if work.stale(jobs):
            return
        claim = work.claim(beat.worker, "running")
        beat.hold(token := claim.token(work.job_id, work.batch))
        _received[request.id] = (token, time.monotonic())
        jobs.claim(work.job_id, work.batch, claim)
    except (StoreError, LookupError, ValueError) as err:  # the step itself will tell
        log.warning("claim_on_receipt_failed job=%s batch=%s: %s", work.job_id, work.batch, err)


def _failed_report(
    jobs: JobTracker, job_id: str, batch: int, step: str, err: Exception
) -> WriteReport:
    source = DocumentBatch.model_validate_json(jobs.artifact(batch_input_key(job_id, batch)))
    message = f"{type(err).__name__}: {err}"
    return WriteReport(
        dataset=source.dataset,
        errors=[
            DocumentError(document_id=d.id, document_name=d.name, step=step, message=message)
            for d in source.documents
        ],
    )


@app.task(name=task_name(FINISH), max_retries=10, **RETRIES)
def finish_batch(
    report_key: str | None,
    job_id: str,
    batch: int,
    gen: int = 0,
    dataset: str = "",
    pipeline: str = "",
    documents: int = 0,
) -> None:
    """Record a batch's outcome on its documents and the job; the last batch finalises."""
    delivery = Delivery(report_key, job_id, pipeline, FINISH, batch, gen)

    def work() -> None:
        report = None
        jobs, runtime = tracker(), current_runtime()
        if delivery.stale(jobs):
            return
        with _claimed(runtime, jobs, delivery):
            if report_key is not None:
                report = WriteReport.model_validate_json(jobs.artifact(report_key))
            record_batch(runtime, job_id, batch, report)

    ride_out_store_outages(work)
