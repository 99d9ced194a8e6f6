"""Job records kept in the state store."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator


class JobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    # Stopped by its budget with its unfinished batches parked; `jobs resume` continues it.
    PAUSED_BUDGET = "paused_budget"

    @property
    def finished(self) -> bool:
        """Whether no work of the job runs (a paused job may be resumed)."""
        return self in (
            JobStatus.SUCCEEDED,
            JobStatus.FAILED,
            JobStatus.CANCELLED,
            JobStatus.PAUSED_BUDGET,
        )


# An error's message is cut after this many characters: a parser's or a model's exception can
# quote its whole input, and a job keeps (and lists) one error per failed document.
MESSAGE_CHARS = 2000


class DocumentError(BaseModel):
    """Why one document could not be processed."""

    document_id: str
    document_name: str
    step: str
    message: str

    @field_validator("message")
    @classmethod
    def _bounded(cls, message: str) -> str:
        if len(message) <= MESSAGE_CHARS:
            return message
        kept = MESSAGE_CHARS - 40  # room for the note, so a cut message is not cut again
        return f"{message[:kept]}... ({len(message) - kept} more characters cut)"


class Budget(BaseModel):
    """What a job's LLM calls may spend in all, counting every run of the job: dollars at the
    settings' prices, tokens (prompt + completion), or both (whichever runs out first)."""

    usd: float | None = Field(default=None, gt=0, description="LLM cost cap in USD")
    tokens: int | None = Field(default=None, gt=0, description="LLM prompt + completion tokens")

    @model_validator(mode="after")
    def _some_cap(self) -> Budget:
        if self.usd is None and self.tokens is None:
            raise ValueError("a budget needs usd or tokens (or both)")
        return self


def utcnow() -> datetime:
    return datetime.now(UTC)


class Job(BaseModel):
    """A cognify job: which dataset, how far it got, and what went wrong per document."""

    id: str
    dataset: str
    pipeline: str
    pipeline_version: str
    mode: str = "changed"
    # Step options chosen for this job (e.g. a custom graph model); every step task reads them.
    options: dict[str, Any] = Field(default_factory=dict)
    # Its LLM spending cap (None: none); reached, the job pauses instead of calling the LLM.
    budget: Budget | None = None
    status: JobStatus = JobStatus.QUEUED
    total_documents: int = 0
    total_batches: int = 0
    counts: dict[str, int] = Field(default_factory=dict)
    errors: list[DocumentError] = Field(default_factory=list)
    created_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None
    message: str = ""


class Claim(BaseModel):
    """Which worker process runs (or last ran) a batch's step, in which generation of the batch.

    A batch's generation grows each time the sweeper re-publishes it; a delivery of an older
    generation (a late redelivery of a dead worker's message) then does nothing.
    """

    step: str
    worker: str
    gen: int = 0
    # running: a worker took (or runs) `step`; done: `step` is stored, its worker is handing
    # the batch on; handed_on: the next step's message is published; republished: the sweeper
    # published the batch again from `step`. In the last two no worker holds the batch.
    state: Literal["running", "done", "handed_on", "republished"] = "running"

    @property
    def held(self) -> bool:
        """Whether the claim says a worker holds the batch."""
        return self.state in ("running", "done")

    at: float  # time.time() when the state was set

    def token(self, job_id: str, batch: int) -> str:
        """The step as its worker's heartbeat lists it while running it."""
        return f"{job_id}:{batch}:{self.gen}:{self.step}"
