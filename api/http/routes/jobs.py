"""Cognify jobs: list, status, cancel and progress as server-sent events."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from functools import partial
from typing import Annotated, TypeVar

import anyio
from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from api.http.deps import Reader, RuntimeDep, Writer, owned_job_id
from api.http.schemas import JobResume, error_responses
from api.services import jobs, shown
from api.services.jobs import JobEvent, JobReport, StreamSlots
from core.access import Caller
from core.models.jobs import Job

router = APIRouter(prefix="/api/v1/jobs", tags=["jobs"])

POLL_SECONDS = 0.5
EVENTS_RESPONSES = {
    200: {
        "description": "text/event-stream: `id: N`, `event: <kind>`, `data: <json>` per event; "
        "kinds planned, batch_done, batch_resumed, cancel_requested, progress, finished",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    },
    **error_responses(404, 422, 429, 503),
}
JobId = Annotated[str, Depends(owned_job_id)]
T = TypeVar("T")


@router.get("", response_model=list[Job], responses=error_responses(422, 503))
def list_jobs(
    runtime: RuntimeDep,
    caller: Reader,
    offset: Annotated[int, Query(ge=0, description="Skip this many of the newest jobs")] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[Job]:
    """The caller's jobs, newest first; `offset`/`limit` select a window of them."""
    mine = [job for job in jobs.list_jobs(runtime) if caller.owns(job.dataset)]
    return [_shown(job, caller) for job in mine[offset : offset + limit]]


J = TypeVar("J", bound=Job)


def _shown(job: J, caller: Caller) -> J:
    """The job with its dataset (and any stored name in its messages) as the caller knows it."""
    return shown.job(caller, job)


@router.get("/{job_id}", response_model=JobReport, responses=error_responses(404, 422, 503))
def get_job(job_id: JobId, runtime: RuntimeDep, caller: Reader) -> JobReport:
    """A job's status, live counts, per-document errors and LLM/embeddings tokens and cost."""
    return _shown(jobs.show(runtime, job_id), caller)


@router.post(
    "/{job_id}/cancel",
    status_code=202,
    response_model=Job,
    responses=error_responses(404, 422, 503),
)
def cancel_job(job_id: JobId, runtime: RuntimeDep, caller: Writer) -> Job:
    """Stop a job: queued batches are skipped, running steps stop at their next boundary."""
    return _shown(jobs.cancel(runtime, job_id), caller)


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
    resume = partial(jobs.resume, usd=body.budget_usd, tokens=body.budget_tokens, caller=caller)
    return _shown(resume(runtime, job_id), caller)


async def sse_lines(
    events: AsyncGenerator[JobEvent | None, None],
    *,
    heartbeat: float,
    lifetime: float,
    clock: Callable[[], float] = time.monotonic,
) -> AsyncIterator[str]:
    """Server-sent events: `id: N`, `event: kind`, `data: json`; a comment line after
    `heartbeat` seconds without one, and the end (with a comment saying why) once the stream
    is `lifetime` seconds old: an EventSource reconnects with Last-Event-ID and goes on."""
    yield "retry: 2000\n\n"
    started = last = clock()
    async with aclosing(events):
        async for event in events:
            now = clock()
            if now - started >= lifetime:
                yield ": this stream is at its time limit; reconnect with Last-Event-ID\n\n"
                return
            if event is None:
                if now - last >= heartbeat:
                    last = now
                    yield ": keep-alive\n\n"
                continue
            last = now
            head = f"id: {event.seq}\n" if event.seq is not None else ""
            yield f"{head}event: {event.kind}\ndata: {json.dumps(event.data)}\n\n"


class EventStream(StreamingResponse):
    """A text/event-stream answer that frees its stream slot however it ends: the job
    finished, the client went away, or the server stopped."""

    media_type = "text/event-stream"

    def __init__(self, content: AsyncIterator[str], release: Callable[[], None]) -> None:
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        super().__init__(content, headers=headers)
        self.release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.release()


def _stream_slots(request: Request) -> StreamSlots:
    """The app's open streams, made on the first stream (on the event loop: no race)."""
    state = request.app.state
    if getattr(state, "event_streams", None) is None:
        state.event_streams = StreamSlots()
    slots: StreamSlots = state.event_streams
    return slots


def _key_of(request: Request, caller: Caller) -> str | None:
    """Which API key a stream counts against (a digest of it); None without keys (auth off)."""
    if caller.tenant is None:
        return None
    _, _, key = request.headers.get("authorization", "").partition(" ")
    return hashlib.sha256(key.strip().encode()).hexdigest()


# Event ids are a job's sequence numbers; a larger `after` (say 1e23) is refused up front
# instead of overflowing the stores' 64-bit integers once the stream has started.
MAX_EVENT_ID = 2**53


@router.get("/{job_id}/events", response_class=StreamingResponse, responses=EVENTS_RESPONSES)
async def job_events(
    job_id: JobId,
    runtime: RuntimeDep,
    caller: Reader,
    request: Request,
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
    A stream lasts at most COGMILL_API_STREAM_MAX_SECONDS (reconnect with Last-Event-ID);
    over the open streams allowed per key or in all, the answer is a 429 with Retry-After.
    """
    start = after if last_event_id is None else last_event_id
    slots, settings = _stream_slots(request), runtime.settings
    # 404 now, before the stream starts; the store is read off the event loop.
    read = partial(jobs.follower, runtime, job_id, after=start)
    follower = await anyio.to_thread.run_sync(read, limiter=slots.limiter)
    release = slots.take(
        _key_of(request, caller), settings.api_max_streams_per_key, settings.api_max_streams
    )
    events = jobs.follow_job_async(follower, poll=POLL_SECONDS, limiter=slots.limiter)
    body = sse_lines(
        events,
        heartbeat=settings.api_stream_heartbeat_seconds,
        lifetime=settings.api_stream_max_seconds,
    )
    return EventStream(body, release)
