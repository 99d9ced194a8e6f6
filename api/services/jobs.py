"""Cognify jobs: list, show, cancel, resume (a job paused by its budget), and watch (a job's
events as they come, until it ends; sync for the CLI, async and capped per API key and in
total for HTTP streams)."""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import AsyncGenerator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
from pydantic import BaseModel

from api.services.datasets import ensure_idle
from core.access import LOCAL, Caller
from core.errors import CogmillError, RateLimited
from core.llm.usage import UsageTotals, priced
from core.models.jobs import Budget, Job
from core.settings import Settings
from runtime import Runtime
from workers.budgets import InvalidBudget, resume_job
from workers.jobs import JobNotFoundError, JobTracker
from workers.usage import job_usage

# Job ids are uuid4 hex; anything else (a ':' especially) would address other state keys.
JOB_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def tracker(rt: Runtime) -> JobTracker:
    return JobTracker(rt.state, rt.settings.artifact_ttl_seconds)


def checked_id(job_id: str) -> str:
    """The job id when it is well formed; JobNotFoundError otherwise (no such job can exist)."""
    if not JOB_ID.match(job_id):
        raise JobNotFoundError(job_id)
    return job_id


def list_jobs(rt: Runtime) -> list[Job]:
    """Jobs known to the state store, newest first."""
    return sorted(tracker(rt).all(), key=lambda job: job.created_at, reverse=True)


class Spent(BaseModel):
    """What a job's LLM calls spent in all its runs: what its budget counts."""

    usd: float
    tokens: int


class JobReport(Job):
    """A job with the tokens its LLM and embeddings calls used, and their cost."""

    llm: UsageTotals
    embeddings: UsageTotals
    spent: Spent


def show(rt: Runtime, job_id: str) -> JobReport:
    """A job's status, live counts, per-document errors, token usage and what its budget
    counts as spent. Raises JobNotFoundError."""
    job = tracker(rt).get(checked_id(job_id))
    usage = priced(job_usage(rt.state, job.id), rt.settings)
    llm = usage["llm"]
    spent = Spent(usd=llm.cost_usd, tokens=llm.prompt_tokens + llm.completion_tokens)
    return JobReport.model_validate({**dict(job), **usage, "spent": spent})


def budget_of(
    settings: Settings, usd: float | None = None, tokens: int | None = None
) -> Budget | None:
    """The budget asked for (None: none). Raises InvalidBudget for a bad one, or a dollar
    budget without LLM prices to count it in."""
    if usd is None and tokens is None:
        return None
    if tokens is not None and tokens <= 0:
        raise InvalidBudget(f"a token budget must be more than 0, got {tokens}")
    if usd is not None and not usd > 0:  # `not >` refuses NaN too
        raise InvalidBudget(f"a USD budget must be more than 0, got {usd}")
    budget = Budget(usd=usd, tokens=tokens)
    priced_llm = settings.llm_price_input_per_mtok or settings.llm_price_output_per_mtok
    if budget.usd is not None and not priced_llm:
        raise InvalidBudget(
            "a USD budget needs LLM prices: set COGMILL_LLM_PRICE_INPUT_PER_MTOK and "
            "COGMILL_LLM_PRICE_OUTPUT_PER_MTOK, or give a token budget instead"
        )
    return budget


def resume(
    rt: Runtime,
    job_id: str,
    *,
    usd: float | None = None,
    tokens: int | None = None,
    caller: Caller = LOCAL,
) -> Job:
    """Continue a job paused by its budget, under a new budget counting what it spent so far
    (none given: no cap). Raises JobNotFoundError, JobNotResumableError (not paused: 409),
    JobRunningError (another job on its dataset runs: their writes would race) and InvalidInput
    (a bad budget, or one already spent)."""
    budget = budget_of(rt.settings, usd, tokens)
    job = tracker(rt).get(checked_id(job_id), live=False)
    ensure_idle(rt, job.dataset, caller)
    return resume_job(rt, job.id, budget)


def cancel(rt: Runtime, job_id: str) -> Job:
    """Stop a job: queued batches are skipped, running steps stop at their next boundary.
    Raises JobNotFoundError."""
    return tracker(rt).cancel(checked_id(job_id))


def watch(
    rt: Runtime, job_id: str, *, after: int = 0, poll: float = 0.5
) -> Iterator[JobEvent | None]:
    """`follow_job` on a job of this runtime; JobNotFoundError before the first event."""
    jobs = tracker(rt)
    jobs.get(checked_id(job_id))
    return follow_job(jobs, job_id, after=after, poll=poll)


def follower(rt: Runtime, job_id: str, *, after: int = 0) -> JobFollower:
    """A `JobFollower` of a job of this runtime; JobNotFoundError for an unknown job."""
    jobs = tracker(rt)
    jobs.get(checked_id(job_id))
    return JobFollower(jobs, job_id, after)


@dataclass
class JobEvent:
    """One event of a job: stored ones carry their sequence number, derived ones `None`."""

    seq: int | None
    kind: str
    data: dict[str, Any]


class JobFollower:
    """Reads a job's events one poll at a time (blocking reads of the state store), remembering
    where it got to; the sync and the async follower both loop over `poll`."""

    def __init__(self, jobs: JobTracker, job_id: str, after: int = 0) -> None:
        self.jobs, self.job_id, self.after = jobs, job_id, after
        self.ended = False  # the `finished` event was returned
        self.idle = False  # the last poll found no stored event
        self._last_done: int | None = None

    def poll(self) -> list[JobEvent]:
        """The stored events since the last poll, a `progress` event (the live counts) when the
        number of finished batches changed, and `finished` last once the job is over (derived
        from the job record when none was stored, e.g. for a job that had nothing to do).
        Raises JobNotFoundError."""
        jobs, job_id = self.jobs, self.job_id
        job = jobs.get(job_id)
        fresh = jobs.events(job_id, self.after)
        if job.status.finished and not any(e.get("event") == "finished" for _, e in fresh):
            fresh += jobs.events(job_id, fresh[-1][0] if fresh else self.after)  # just written?
        out: list[JobEvent] = []
        final: JobEvent | None = None
        for seq, payload in fresh:
            self.after = seq
            event = JobEvent(seq, str(payload.get("event", "message")), payload)
            if event.kind == "finished":
                final = event
                break
            out.append(event)
        if final is not None and not job.status.finished:
            job = jobs.get(job_id)  # read before the job finished: take its final counts
        done = job.counts.get("batches_done", 0)
        if done != self._last_done:  # the final counts too, just before `finished`
            self._last_done = done
            out.append(JobEvent(None, "progress", {"status": job.status.value, **job.counts}))
        if final is not None or job.status.finished:
            data = {"event": "finished", "status": job.status.value, "message": job.message}
            out.append(final or JobEvent(None, "finished", data))
            self.ended = True
        self.idle = not fresh
        return out


def follow_job(
    jobs: JobTracker,
    job_id: str,
    *,
    after: int = 0,
    poll: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[JobEvent | None]:
    """A job's stored events after `after`, then new ones until it finishes; `None` while idle
    (see `JobFollower.poll`). Raises JobNotFoundError for an unknown job."""
    follower = JobFollower(jobs, job_id, after)
    while True:
        yield from follower.poll()
        if follower.ended:
            return
        if follower.idle:
            yield None
        sleep(poll)


async def follow_job_async(
    follower: JobFollower, *, poll: float, limiter: anyio.CapacityLimiter
) -> AsyncGenerator[JobEvent | None, None]:
    """`follow_job` for an event loop: each poll's blocking reads run in a worker thread under
    `limiter` (so open streams never hold a thread between polls, nor take the threads other
    requests run in), and the wait between polls is an async sleep."""
    while True:
        events = await anyio.to_thread.run_sync(follower.poll, limiter=limiter)
        for event in events:
            yield event
        if follower.ended:
            return
        if follower.idle:
            yield None
        await anyio.sleep(poll)


class JobFailedError(CogmillError):
    """A job a command waited for ended without succeeding; the message gives its errors."""

    code = "job_failed"
    public_message = "the job failed; its status lists the errors"


STREAM_RETRY_AFTER = 5  # seconds: when to try again for a stream slot


class TooManyStreamsError(RateLimited):
    """Every event stream slot the caller may use is taken; the message names the setting."""

    code = "too_many_streams"


class StreamSlots:
    """The job event streams open in this process, capped per API key and in total.

    A stream holds its slot until it ends (the job finished, the client left, or the stream's
    lifetime ran out); `release` is safe to call more than once.
    """

    def __init__(self, threads: int = 8) -> None:
        self._open: Counter[str] = Counter()
        self._lock = threading.Lock()
        # The threads all streams' polls share (each poll is a few quick state store reads).
        self.limiter = anyio.CapacityLimiter(threads)

    def open(self) -> int:
        """How many streams are open now."""
        return sum(self._open.values())

    def take(self, key: str | None, per_key: int, total: int) -> Callable[[], None]:
        """A slot for a stream of API key `key` (None: no key, only the total cap applies);
        returns the function that frees it. Raises TooManyStreamsError."""
        with self._lock:
            if sum(self._open.values()) >= total:
                raise TooManyStreamsError(
                    f"the server has {total} job event streams open, its limit "
                    "(COGMILL_API_MAX_STREAMS); close one or retry later",
                    retry_after=STREAM_RETRY_AFTER,
                )
            if key is not None and self._open[key] >= per_key:
                raise TooManyStreamsError(
                    f"this API key has {per_key} job event streams open, its limit "
                    "(COGMILL_API_MAX_STREAMS_PER_KEY); close one or retry later",
                    retry_after=STREAM_RETRY_AFTER,
                )
            slot = key or ""
            self._open[slot] += 1
        held = [True]

        def release() -> None:
            with self._lock:
                if held.pop() if held else False:
                    self._open[slot] -= 1
                    if self._open[slot] <= 0:
                        del self._open[slot]

        return release
