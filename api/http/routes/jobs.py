"""Cognify jobs: list, status, cancel and progress as server-sent events."""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Path, Query
from fastapi.responses import StreamingResponse

from api.export import follow_job, sse_lines
from api.http.deps import JobsDep
from api.http.schemas import ApiError, error_responses
from core.models.jobs import Job
from workers.jobs import JobNotFoundError, JobTracker

router = APIRouter(prefix="/api/v1/jobs", tags=["jobs"])

# Job ids are uuid4 hex; anything else (a ':' especially) would address other state keys.
JOB_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
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


def job_id(job_id: Annotated[str, Path(description="Id returned by cognify")]) -> str:
    if not JOB_ID.match(job_id):
        raise _not_found(job_id)
    return job_id


JobId = Annotated[str, Depends(job_id)]


def _not_found(job_id: str) -> ApiError:
    return ApiError(
        404, "job_not_found", f"no job {job_id!r}; GET /api/v1/jobs lists the known jobs"
    )


def _get(jobs: JobTracker, job_id: str, cancel: bool = False) -> Job:
    try:
        return jobs.cancel(job_id) if cancel else jobs.get(job_id)
    except JobNotFoundError as err:
        raise _not_found(job_id) from err


@router.get("", response_model=list[Job], responses=error_responses(503))
def list_jobs(jobs: JobsDep) -> list[Job]:
    """Jobs known to the state store, newest first."""
    return sorted(jobs.list(), key=lambda job: job.created_at, reverse=True)


@router.get("/{job_id}", response_model=Job, responses=error_responses(404, 422, 503))
def get_job(job_id: JobId, jobs: JobsDep) -> Job:
    """A job's status, live counts and per-document errors."""
    return _get(jobs, job_id)


@router.post(
    "/{job_id}/cancel",
    status_code=202,
    response_model=Job,
    responses=error_responses(404, 422, 503),
)
def cancel_job(job_id: JobId, jobs: JobsDep) -> Job:
    """Stop a job: queued batches are skipped, running steps stop at their next boundary."""
    return _get(jobs, job_id, cancel=True)


@router.get("/{job_id}/events", response_class=StreamingResponse, responses=EVENTS_RESPONSES)
def job_events(
    job_id: JobId,
    jobs: JobsDep,
    after: Annotated[int, Query(ge=0, description="Replay only events after this id")] = 0,
    last_event_id: Annotated[
        int | None, Header(ge=0, description="Sent by EventSource clients when reconnecting")
    ] = None,
) -> StreamingResponse:
    """Follow a job: its events so far, then new ones until it finishes (then the stream ends).

    A `progress` event (no id) carries the live counts whenever a batch finishes; the last
    event is `finished` with the job's status. A comment line keeps idle connections open.
    """
    _get(jobs, job_id)  # 404 now, before the stream starts
    start = after if last_event_id is None else last_event_id
    events = follow_job(jobs, job_id, after=start, poll=POLL_SECONDS)
    body = sse_lines(events, poll=POLL_SECONDS, keepalive=KEEPALIVE_SECONDS)
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(body, media_type="text/event-stream", headers=headers)
