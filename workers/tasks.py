"""Thin Celery task shells: load a step's input by key, run the step, store its output.

A batch is a chain: one task per pipeline step, then `finish_batch`. Tasks pass artifact keys,
never payloads. A step that fails for a whole batch turns into per-document errors, so the
job still ends; store outages are retried with backoff before that.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from celery import Signature, Task, chain
from celery.signals import task_postrun, task_received

from core.models.jobs import Claim, DocumentError
from core.ports import StoreError
from pipelines.base import step_types
from pipelines.definitions import get_pipeline
from pipelines.models import DocumentBatch, WriteReport
from workers.celery_app import INGEST_QUEUE, LLM_QUEUE, PRIORITY_LEVELS, app
from workers.heartbeat import Heartbeat, ensure_heartbeat, worker_id
from workers.jobs import JobTracker
from workers.orchestration import record_batch
from workers.runtime import Runtime, current_runtime

log = logging.getLogger("cogmill.tasks")

LLM_STEPS = frozenset({"extract_graph", "extract_events", "summarize_documents"})
STORE_RETRY_PAUSES = (0.5, 1, 2, 4, 8, 15, 30)  # ~1 minute in all
T = TypeVar("T")
STALE = "stale"  # what _run_step returns for a delivery that must do nothing
FINISH = "finish_batch"  # the step name finish_batch claims under


def tracker() -> JobTracker:
    runtime = current_runtime()
    return JobTracker(runtime.state, runtime.settings.artifact_ttl_seconds)


def batch_input_key(job_id: str, batch: int) -> str:
    return f"job:{job_id}:artifact:{batch}:input"


def step_output_key(job_id: str, batch: int, step: str) -> str:
    return f"job:{job_id}:artifact:{batch}:{step}"


@app.task(
    name="cogmill.run_step",
    bind=True,
    autoretry_for=(StoreError,),
    retry_backoff=2,
    retry_backoff_max=60,
    retry_jitter=True,
    max_retries=5,
)
def run_step(
    self: Task,
    in_key: str | None,
    job_id: str,
    pipeline: str,
    step: str,
    batch: int,
    gen: int = 0,
) -> str | None:
    """Run one pipeline step on one batch; returns the key of its output (None once stopped).

    `gen` is the batch's generation: a delivery of an older one (a dead worker's message,
    redelivered after the sweeper re-published its batch) ends the chain without running.
    """
    deliveries: list[int] = []  # counted once per delivery, however often the body is retried
    work = Step(in_key, job_id, pipeline, step, batch, gen)
    output = ride_out_store_outages(lambda: _run_step(work, deliveries))
    if output is STALE:
        self.request.chain = None  # the batch's live generation runs the rest
        return None
    return output


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


@dataclass(frozen=True)
class Step:
    """One delivery's work: a step of a batch of a job, in one generation of the batch."""

    in_key: str | None
    job_id: str
    pipeline: str
    name: str
    batch: int
    gen: int

    def claim(self, worker: str, state: Literal["running", "done"]) -> Claim:
        return Claim(step=self.name, worker=worker, gen=self.gen, state=state, at=time.time())

    def stale(self, jobs: JobTracker) -> bool:
        """Whether this delivery must do nothing: the batch is recorded, re-published in a
        later generation, or already past this step (a message redelivered after its step
        ended and the chain moved on, e.g. its worker died before acknowledging it)."""
        recorded, gen, claim = jobs.position(self.job_id, self.batch)
        if recorded or gen > self.gen:
            return True
        if claim is None or claim.gen != self.gen or self.name == FINISH:
            return False
        order = [*get_pipeline(self.pipeline).step_names, FINISH]
        if claim.step not in order:
            return False
        passed = order.index(claim.step) - order.index(self.name)
        return passed > 0 or (passed == 0 and claim.state in ("done", "handed_on"))


def _run_step(work: Step, counted: list[int]) -> str | None:
    jobs, job_id, batch = tracker(), work.job_id, work.batch
    if work.in_key is None or jobs.cancelled(job_id):
        return None
    if work.stale(jobs):
        log.info(
            "stale_delivery step=%s job=%s batch=%s gen=%s", work.name, job_id, batch, work.gen
        )
        return STALE
    runtime = current_runtime()
    if not counted:
        counted.append(jobs.count_delivery(job_id, batch, work.name))
    with _claimed(runtime, jobs, work) as done:
        deliveries = counted[0]
        if deliveries > runtime.settings.max_deliveries:
            # Every earlier delivery died with its worker (acks_late redelivers it): park the
            # batch with an error instead of killing workers forever.
            error = RuntimeError(f"started {deliveries - 1} times without finishing; parked")
            report = _failed_report(jobs, job_id, batch, work.name, error)
            record_batch(runtime, job_id, batch, report)
            return None
        job = jobs.get(job_id, live=False)
        instance = runtime.step(get_pipeline(work.pipeline), work.name, job.options)
        input_type = step_types(type(instance))[0]
        data = input_type.model_validate_json(jobs.artifact(work.in_key))
        try:
            output = instance.run(data)
        except StoreError:
            raise
        except Exception as err:  # noqa: BLE001 - a failed step becomes per-document errors
            log.exception("step_failed step=%s job=%s batch=%s", work.name, job_id, batch)
            report = _failed_report(jobs, job_id, batch, work.name, err)
            record_batch(runtime, job_id, batch, report)
            return None  # the rest of the chain passes the None through
        key = jobs.put_artifact(job_id, f"{batch}:{work.name}", output.model_dump_json())
        done()
    jobs.touch(job_id)
    return key


@contextmanager
def _claimed(runtime: Runtime, jobs: JobTracker, work: Step) -> Iterator[Callable[[], None]]:
    """Claim the batch's step for this process while the block runs; the block calls what it
    is given once the step's output is stored.

    With separate worker processes the step stays listed in the process's heartbeat until the
    task has handed its batch on (`_handed_on`, after Celery published the chain's next
    message): the sweeper re-publishes a claim no live worker lists (workers/sweeper.py).
    Embedded mode has one process, which cannot outlive its own threads: no heartbeat.
    """
    beat = _heartbeat(runtime)
    claim = work.claim(beat.worker if beat else worker_id(), "running")
    token = claim.token(work.job_id, work.batch)
    if beat:
        beat.hold(token)
        _handing_on.__dict__.setdefault("claims", []).append((work, claim))

    def done() -> None:
        done = claim.model_copy(update={"state": "done", "at": time.time()})
        jobs.claim(work.job_id, work.batch, done)
        if beat:
            _handing_on.claims[-1] = (work, done)

    jobs.claim(work.job_id, work.batch, claim)
    jobs.touch(work.job_id)
    yield done


def _heartbeat(runtime: Runtime) -> Heartbeat | None:
    """This process's heartbeat, when workers are separate processes."""
    if runtime.settings.embedded_broker:
        return None
    settings = runtime.settings
    # A step held longer than any task may run was lost (e.g. a retry the broker did not take).
    max_hold = settings.task_time_limit_seconds + settings.worker_heartbeat_seconds
    return ensure_heartbeat(runtime.state, settings.worker_heartbeat_seconds, max_hold)


# The claims this thread's current task made, released once the task has handed its batch on.
_handing_on = threading.local()


@task_postrun.connect
def _handed_on(state: str | None = None, **_: object) -> None:
    """After a task: a step that stored its output and whose next message Celery published
    (state SUCCESS) marks its batch handed on; its worker stops listing the step either way."""
    claims: list[tuple[Step, Claim]] = _handing_on.__dict__.pop("claims", [])
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
    if request is None or request.name not in (run_step.name, finish_batch.name):
        return
    runtime = current_runtime()
    beat = _heartbeat(runtime)
    if beat is None:
        return
    kwargs, jobs = request.kwargs, tracker()
    work = Step(
        None, kwargs["job_id"], kwargs.get("pipeline", ""), kwargs.get("step", FINISH),
        kwargs["batch"], kwargs.get("gen", 0),
    )  # fmt: skip
    try:
        if work.stale(jobs):
            return
        claim = work.claim(beat.worker, "running")
        beat.hold(claim.token(work.job_id, work.batch))
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


@app.task(
    name="cogmill.finish_batch",
    autoretry_for=(StoreError,),
    retry_backoff=2,
    retry_jitter=True,
    max_retries=10,
)
def finish_batch(report_key: str | None, job_id: str, batch: int, gen: int = 0) -> None:
    """Record a batch's outcome on its documents and the job; the last batch finalises."""
    work_ = Step(report_key, job_id, "", FINISH, batch, gen)

    def work() -> None:
        report = None
        jobs, runtime = tracker(), current_runtime()
        if work_.stale(jobs):
            return
        with _claimed(runtime, jobs, work_):
            if report_key is not None:
                report = WriteReport.model_validate_json(jobs.artifact(report_key))
            record_batch(runtime, job_id, batch, report)

    ride_out_store_outages(work)


def step_priority(position: int) -> int:
    """A later step is served first (0 is first): a batch that got its LLM answers moves on to
    its writes instead of waiting behind every other batch's first steps, so writing overlaps
    the LLM calls still running, and a job drains steadily instead of all at its end."""
    return max(0, PRIORITY_LEVELS - 1 - position)


def batch_chain(
    job_id: str,
    pipeline: str,
    steps: list[str],
    batch: int,
    in_key: str | None = None,
    gen: int = 0,
) -> Signature:
    """The chain of one batch: each of `steps` on its queue, then `finish_batch`.

    `in_key` is the first step's input (default: the batch's planned input); the sweeper
    resumes a batch with the steps left after its last stored output, in a new generation.
    """
    order = get_pipeline(pipeline).step_names
    signatures = [
        run_step.signature(
            kwargs={
                "job_id": job_id,
                "pipeline": pipeline,
                "step": step,
                "batch": batch,
                "gen": gen,
            },
            queue=LLM_QUEUE if step in LLM_STEPS else INGEST_QUEUE,
            priority=step_priority(order.index(step)),
        )
        for step in steps
    ]
    first_input = in_key or batch_input_key(job_id, batch)
    finish = finish_batch.signature(
        kwargs={"job_id": job_id, "batch": batch, "gen": gen},
        queue=INGEST_QUEUE,
        priority=step_priority(len(order)),
    )
    (signatures[0] if signatures else finish).args = (first_input,)
    return chain(*signatures, finish)
