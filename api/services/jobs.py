"""Cognify jobs: list, show, cancel, resume (a job paused by its budget), and watch (a job's
events as they come, until it ends)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from core.llm.usage import UsageTotals, priced
from core.models.jobs import Budget, Job
from core.settings import Settings
from workers.budgets import resume_job
from workers.jobs import JobNotFoundError, JobTracker
from workers.runtime import Runtime
from workers.usage import job_usage

# Job ids are uuid4 hex; anything else (a ':' especially) would address other state keys.
JOB_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def tracker(rt: Runtime) -> JobTracker:
    return JobTracker(rt.state, rt.settings.artifact_ttl_seconds)


def checked_id(job_id: str) -> str:
    """The job id when it is well formed; JobNotFoundError otherwise (no such job can exist)."""
    if not JOB_ID.match(job_id):
        raise JobNotFoundError(f"no job {job_id!r}; `cogmill jobs list` shows the known jobs")
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
    """The budget asked for (None: none). Raises ValueError for a bad one, or a dollar
    budget without LLM prices to count it in."""
    if usd is None and tokens is None:
        return None
    budget = Budget(usd=usd, tokens=tokens)  # a pydantic ValidationError is a ValueError
    priced_llm = settings.llm_price_input_per_mtok or settings.llm_price_output_per_mtok
    if budget.usd is not None and not priced_llm:
        raise ValueError(
            "a USD budget needs LLM prices: set COGMILL_LLM_PRICE_INPUT_PER_MTOK and "
            "COGMILL_LLM_PRICE_OUTPUT_PER_MTOK, or give a token budget instead"
        )
    return budget


def resume(rt: Runtime, job_id: str, *, usd: float | None = None, tokens: int | None = None) -> Job:
    """Continue a job paused by its budget, under a new budget counting what it spent so far
    (none given: no cap). Raises JobNotFoundError, JobNotResumableError (not paused: 409)
    and ValueError (a bad budget, or one already spent)."""
    return resume_job(rt, checked_id(job_id), budget_of(rt.settings, usd, tokens))


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


@dataclass
class JobEvent:
    """One event of a job: stored ones carry their sequence number, derived ones `None`."""

    seq: int | None
    kind: str
    data: dict[str, Any]


def follow_job(
    jobs: JobTracker,
    job_id: str,
    *,
    after: int = 0,
    poll: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[JobEvent | None]:
    """A job's stored events after `after`, then new ones until it finishes; `None` while idle.

    Adds a `progress` event (the live counts) whenever the number of finished batches changes,
    and ends with a `finished` event (derived from the job record when none was stored, e.g.
    for a job that had nothing to do). Raises JobNotFoundError for an unknown job.
    """
    last_done: int | None = None
    while True:
        job = jobs.get(job_id)
        fresh = jobs.events(job_id, after)
        if job.status.finished and not any(e.get("event") == "finished" for _, e in fresh):
            fresh += jobs.events(job_id, fresh[-1][0] if fresh else after)  # written just now?
        final: JobEvent | None = None
        for seq, payload in fresh:
            after = seq
            event = JobEvent(seq, str(payload.get("event", "message")), payload)
            if event.kind == "finished":
                final = event
                break
            yield event
        if final is not None and not job.status.finished:
            job = jobs.get(job_id)  # read before the job finished: take its final counts
        done = job.counts.get("batches_done", 0)
        if done != last_done:  # the final counts too, just before `finished`
            last_done = done
            yield JobEvent(None, "progress", {"status": job.status.value, **job.counts})
        if final is not None or job.status.finished:
            data = {"event": "finished", "status": job.status.value, "message": job.message}
            yield final or JobEvent(None, "finished", data)
            return
        if not fresh:
            yield None
        sleep(poll)
