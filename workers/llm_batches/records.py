"""The record of one step-batch's submission to the Batch API, kept in the state store, and its
transitions: claimed, pending (the batch created), done.
"""

from __future__ import annotations

import time
from typing import Literal

from pydantic import BaseModel

from core.llm.batches import BatchAPI, BatchAPIError, BatchState
from core.llm.usage import FIELDS
from runtime import Runtime
from workers.jobs import JobTracker

PENDING = "llm-batches:pending"  # "<job>|<batch>|<step>" of every submission not answered yet
CLAIM_METADATA = "cogmill_claim"  # the metadata key that names a batch's claim


class Submission(BaseModel):
    """One step-batch's requests sent to the Batch API, as the state store keeps it."""

    job: str
    batch: int
    step: str
    gen: int
    claim: str  # the set-if-absent key claimed before uploading, in the batch's metadata
    requests: int
    claimed_at: float
    openai_batch: str = ""
    input_file: str = ""
    submitted_at: float | None = None
    state: Literal["claimed", "pending", "done"] = "claimed"
    outcome: str = ""  # the batch's final status ("lost": never created; "refused")
    answered: int = 0
    reserved: tuple[int, int] = (0, 0)  # prompt, completion tokens set aside in the budget

    @property
    def member(self) -> str:
        return f"{self.job}|{self.batch}|{self.step}"


def record_key(job_id: str, batch: int, step: str) -> str:
    return f"job:{job_id}:artifact:{batch}:{step}:llm-batch"


def load(runtime: Runtime, job_id: str, batch: int, step: str) -> Submission | None:
    raw = runtime.state.get(record_key(job_id, batch, step))
    return Submission.model_validate_json(raw) if raw is not None else None


def save(runtime: Runtime, record: Submission) -> None:
    key = record_key(record.job, record.batch, record.step)
    runtime.state.put(key, record.model_dump_json(), ttl=runtime.settings.artifact_ttl_seconds)


def tracker(runtime: Runtime) -> JobTracker:
    return JobTracker(runtime.state, runtime.settings.artifact_ttl_seconds)


def batch_api(runtime: Runtime) -> BatchAPI:
    s = runtime.settings
    if not s.llm_base_url:
        raise BatchAPIError("batch mode needs an LLM endpoint (COGMILL_LLM_BASE_URL)")
    return BatchAPI(s.llm_base_url, s.llm_api_key, timeout=s.llm_timeout_seconds)


def batch_usage(runtime: Runtime, job_id: str) -> dict[str, int]:
    """The job's LLM usage through the Batch API (part of its `llm` totals)."""
    keys = [f"job:{job_id}:usage:batch_api:llm:{name}" for name in FIELDS]
    return {n: int(v or 0) for n, v in zip(FIELDS, runtime.state.get_many(keys), strict=True)}


def record_submitted(
    runtime: Runtime, record: Submission, created: BatchState, **fields: object
) -> None:
    record.openai_batch, record.input_file = created.id, created.input_file_id
    record.submitted_at, record.state = time.time(), "pending"
    save(runtime, record)  # the same by the submitter and a poller that found it meanwhile
    if runtime.state.incr(record_key(record.job, record.batch, record.step) + ":told") != 1:
        return
    tracker(runtime).event(
        record.job,
        "llm_batch_submitted",
        batch=record.batch,
        step=record.step,
        requests=record.requests,
        openai_batch=created.id,
        **fields,
    )


def close_submission(runtime: Runtime, record: Submission, outcome: str, answered: int) -> None:
    """Mark a submission done: its batch no longer waits (its step runs next)."""
    jobs = tracker(runtime)
    record.state, record.outcome, record.answered = "done", outcome, answered
    save(runtime, record)
    runtime.state.remove_member(PENDING, record.member)
    jobs.event(
        record.job,
        "llm_batch_done",
        batch=record.batch,
        step=record.step,
        status=outcome,
        answered=answered,
        failed=record.requests - answered,
    )
    jobs.wait_llm(record.job, record.batch, waiting=False)
