"""Cognify jobs: list, status, cancel and progress as server-sent events."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from functools import partial
from typing import Annotated, TypeVar

from fastapi import APIRouter, Depends, Header, Query
from fastapi.responses import StreamingResponse

from api.http.deps import Reader, RuntimeDep, Writer, owned_job_id
from api.http.schemas import ApiError, JobResume, error_responses
from api.services import jobs, shown
from api.services.jobs import JobEvent, JobReport
from core.models.jobs import Job
from core.tenants import Caller
from workers.budgets import JobNotResumableError
from workers.jobs import JobNotFoundError
from workers.runtime import Runtime

router = APIRouter(prefix="/api/v1/jobs", tags=["jobs"])

POLL_SECONDS = 0.5
KEEPALIVE_SECONDS = 15.0
EVENTS_RESPONSES = {
    200: {
        "description": "text/event-stream: `id: N`, `event: <kind>`, `data: <json>` per event; "
        "kinds planned, batch_done, batch_resumed, cancel_requested, progress, finished",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    },
    **error_responses(404, 422, 503),
}
JobId = Annotated[str, Depends(owned_job_id)]
T = TypeVar("T")


def _found(use_case: Callable[[Runtime, str], T], runtime: Runtime, job_id: str) -> T:
    """The use case's answer; an unknown (or malformed) job id is a 404 naming this face's list."""
    try:
        return use_case(runtime, job_id)
    except JobNotFoundError as err:
        message = f"no job {job_id!r}; GET /api/v1/jobs lists the known jobs"
        raise ApiError(404, "job_not_found", message) from err


@router.get("", response_model=list[Job], responses=error_responses(503))
def list_jobs(runtime: RuntimeDep, caller: Reader) -> list[Job]:
    """The caller's jobs, newest first."""
    mine = [job for job in jobs.list_jobs(runtime) if caller.owns(job.dataset)]
    return [_shown(job, caller) for job in mine]


J = TypeVar("J", bound=Job)


def _shown(job: J, caller: Caller) -> J:
    """The job with its dataset (and any stored name in its messages) as the caller knows it."""
    return shown.job(caller, job)


@router.get("/{job_id}", response_model=JobReport, responses=error_responses(404, 422, 503))
def get_job(job_id: JobId, runtime: RuntimeDep, caller: Reader) -> JobReport:
    """A job's status, live counts, per-document errors and LLM/embeddings tokens and cost."""
    return _shown(_found(jobs.show, runtime, job_id), caller)


@router.post(
    "/{job_id}/cancel",
    status_code=202,
    response_model=Job,
    responses=error_responses(404, 422, 503),
)
def cancel_job(job_id: JobId, runtime: RuntimeDep, caller: Writer) -> Job:
    """Stop a job: queued batches are skipped, running steps stop at their next boundary."""
    return _shown(_found(jobs.cancel, runtime, job_id), caller)


@router.post(
    "/{job_id}/resume",
    status_code=202,
    response_model=Job,
    responses=error_responses(404, 409, 422, 503),
)
def resume_job(
    job_id: JobId, runtime: RuntimeDep, caller: Writer, body: JobResume | None = None
) -> Job:
    """Continue a job paused by its budget (status paused_budget) from where it stopped, under
    a new budget counting what it spent already (none: no cap); 409 for any other job."""
    body = body or JobResume()
    resume = partial(jobs.resume, usd=body.budget_usd, tokens=body.budget_tokens)
    try:
        return _shown(_found(resume, runtime, job_id), caller)
    except JobNotResumableError as err:
        hint = f"GET /api/v1/jobs/{job_id} shows its status"
        raise ApiError(409, "job_not_resumable", f"{err} ({hint})") from err


def sse_lines(events: Iterator[JobEvent | None], *, poll: float, keepalive: float) -> Iterator[str]:
    """Server-sent events: `id: N`, `event: kind`, `data: json`; a comment line as keep-alive."""
    yield "retry: 2000\n\n"
    idle = 0.0
    for event in events:
        if event is None:
            idle += poll
            if idle >= keepalive:
                idle = 0.0
                yield ": keep-alive\n\n"
            continue
        idle = 0.0
        head = f"id: {event.seq}\n" if event.seq is not None else ""
        yield f"{head}event: {event.kind}\ndata: {json.dumps(event.data)}\n\n"


# Event ids are a job's sequence numbers; a larger `after` (say 1e23) is refused up front
# instead of overflowing the stores' 64-bit integers once the stream has started.
MAX_EVENT_ID = 2**53


@router.get("/{job_id}/events", response_class=StreamingResponse, responses=EVENTS_RESPONSES)
def job_events(
    job_id: JobId,
    runtime: RuntimeDep,
    after: Annotated[
        int, Query(ge=0, le=MAX_EVENT_ID, description="Replay only events after this id")
    ] = 0,
    last_event_id: Annotated[
        int | None,
        Header(ge=0, le=MAX_EVENT_ID, description="Sent by EventSource clients when reconnecting"),
    ] = None,
) -> StreamingResponse:
    """Follow a job: its events so far, then new ones until it finishes (then the stream ends).

    A `progress` event (no id) carries the live counts whenever a batch finishes; the last
    event is `finished` with the job's status. A comment line keeps idle connections open.
    """
    start = after if last_event_id is None else last_event_id
    # 404 now, before the stream starts.
    events = _found(lambda rt, job: jobs.watch(rt, job, after=start, poll=POLL_SECONDS),
                    runtime, job_id)  # fmt: skip
    body = sse_lines(events, poll=POLL_SECONDS, keepalive=KEEPALIVE_SECONDS)
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(body, media_type="text/event-stream", headers=headers)
