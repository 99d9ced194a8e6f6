"""The async job event stream's parts: the follower on a real SQLite state store, the stream
slots' caps, and the stream's time limit (tests/e2e/test_event_streams.py serves them)."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from pathlib import Path

import anyio
import pytest

from api.http.routes.jobs import sse_lines
from api.services.jobs import (
    JobEvent,
    JobFollower,
    StreamSlots,
    TooManyStreamsError,
    follow_job,
    follow_job_async,
)
from core.models.jobs import Job, JobStatus
from core.stores.sqlite.state import SQLiteStateStore
from pipelines.models import WriteReport
from workers.jobs import JobTracker

DS = "streams"


def test_the_async_follower_yields_what_the_sync_one_does(tmp_path: Path) -> None:
    jobs = JobTracker(SQLiteStateStore(tmp_path / "state.db"))
    job = Job(
        id="j1",
        dataset=DS,
        pipeline="default",
        pipeline_version="1",
        status=JobStatus.RUNNING,
        total_documents=2,
        total_batches=2,
    )
    jobs.save(job)
    jobs.event(job.id, "planned", documents=2, batches=2)
    jobs.finish_batch(job.id, 0, WriteReport(dataset=DS, documents=["a"]))
    jobs.finish_batch(job.id, 1, WriteReport(dataset=DS, documents=["b"]))
    jobs.finalise(job.id)

    async def follow() -> list[JobEvent | None]:
        limiter = anyio.CapacityLimiter(1)
        events = follow_job_async(JobFollower(jobs, job.id), poll=0.01, limiter=limiter)
        return [event async for event in events]

    followed = anyio.run(follow)
    expected = list(follow_job(jobs, job.id, poll=0.0))
    assert [(e.seq, e.kind) for e in followed if e] == [(e.seq, e.kind) for e in expected if e]
    assert followed[-1] is not None and followed[-1].kind == "finished"
    assert followed[-1].data["status"] == "succeeded"


def test_stream_slots_cap_each_key_and_the_total_and_free_on_release() -> None:
    slots = StreamSlots()
    a1 = slots.take("a", per_key=2, total=3)
    slots.take("a", per_key=2, total=3)
    with pytest.raises(TooManyStreamsError, match="COGMILL_API_MAX_STREAMS_PER_KEY"):
        slots.take("a", per_key=2, total=3)
    slots.take("b", per_key=2, total=3)
    with pytest.raises(TooManyStreamsError, match=r"\(COGMILL_API_MAX_STREAMS\)"):
        slots.take("b", per_key=2, total=3)
    assert slots.open() == 3
    a1()
    a1()  # a second release frees nothing more
    assert slots.open() == 2
    slots.take("a", per_key=2, total=3)
    with pytest.raises(TooManyStreamsError, match=r"\(COGMILL_API_MAX_STREAMS\)"):
        slots.take(None, per_key=2, total=3)  # no key (auth off): only the total applies
    keyless = StreamSlots()
    for _ in range(3):
        keyless.take(None, per_key=1, total=3)
    assert keyless.open() == 3


def test_a_stream_ends_at_its_time_limit_and_closes_the_follower() -> None:
    closed = []
    ticks = iter([0.0, 1.0, 2.0, 3.0, 10.0])  # the start, then the clock at each event

    async def source() -> AsyncGenerator[JobEvent | None, None]:
        try:
            seq = 0
            while True:
                seq += 1
                yield JobEvent(seq, "batch_done", {"n": seq})
        finally:
            closed.append(True)

    async def read() -> list[str]:
        lines = sse_lines(source(), heartbeat=60.0, lifetime=5.0, clock=lambda: next(ticks))
        return [line async for line in lines]

    lines = anyio.run(read)
    assert [line.split("\n")[0] for line in lines[1:-1]] == ["id: 1", "id: 2", "id: 3"]
    assert lines[-1] == ": this stream is at its time limit; reconnect with Last-Event-ID\n\n"
    assert closed == [True]
