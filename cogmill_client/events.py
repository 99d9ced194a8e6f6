"""A job's server-sent events, typed: parsed from the `text/event-stream` lines."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import BaseModel, Field

from cogmill_client.models import Job, JobStatus

# Kinds the server sends (others may come later: they arrive as plain events).
KINDS = (
    "planned",
    "batch_done",
    "batch_paused",
    "batch_resumed",
    "cancel_requested",
    "progress",
    "paused",
    "finished",
)


class JobEvent(BaseModel):
    """One event of a job: stored ones carry their `id` (resume after it with Last-Event-ID);
    derived ones (`progress`, a derived `finished`) have none."""

    id: int | None = None
    kind: str
    data: dict[str, Any] = Field(default_factory=dict)

    @property
    def status(self) -> JobStatus | None:
        """The job's status when the event says it (progress, finished)."""
        value = self.data.get("status")
        if isinstance(value, str) and value in JobStatus._value2member_map_:
            return JobStatus(value)
        return None


class Progress(BaseModel):
    """How far a job got: what a `wait` callback receives."""

    job_id: str
    status: JobStatus
    batches_done: int = 0
    total_batches: int = 0
    documents: int = 0  # documents finished without error so far
    total_documents: int = 0

    @property
    def fraction(self) -> float:
        """Batches done out of all (1.0 once finished; 0.0 before the job is planned)."""
        if self.status.finished:
            return 1.0
        return self.batches_done / self.total_batches if self.total_batches else 0.0

    @classmethod
    def of_job(cls, job: Job) -> Progress:
        return cls(
            job_id=job.id,
            status=job.status,
            batches_done=job.counts.get("batches_done", 0),
            total_batches=job.total_batches,
            documents=job.counts.get("documents", 0),
            total_documents=job.total_documents,
        )


class SseParser:
    """Feeds on the lines of an event stream and gives its events, remembering the last id."""

    def __init__(self, last_id: int | None = None) -> None:
        self.last_id = last_id
        self._kind = "message"
        self._id: int | None = None
        self._data: list[str] = []

    def feed(self, lines: Iterable[str]) -> list[JobEvent]:
        """The events the lines complete (a blank line ends an event)."""
        out = []
        for line in lines:
            event = self.line(line)
            if event is not None:
                out.append(event)
        return out

    def line(self, line: str) -> JobEvent | None:
        """Take one line (without its line break); the event it completes, if any."""
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment: the server's keep-alive
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._kind = value
        elif name == "data":
            self._data.append(value)
        elif name == "id" and value.isdigit():
            self._id = int(value)
        return None

    def _dispatch(self) -> JobEvent | None:
        kind, data, seq = self._kind, self._data, self._id
        self._kind, self._data, self._id = "message", [], None
        if not data:
            return None  # e.g. the `retry:` block
        if seq is not None:
            self.last_id = seq
        payload = json.loads("\n".join(data))
        return JobEvent(id=seq, kind=kind, data=payload if isinstance(payload, dict) else {})


class Tracker:
    """What `wait` knows of a job's progress; tells `on_progress` each time it moves."""

    def __init__(self, job: Job, on_progress: Callable[[Progress], None] | None) -> None:
        self.progress = Progress.of_job(job)
        self.on_progress = on_progress
        self._told: Progress | None = None
        self._tell()

    def event(self, event: JobEvent) -> None:
        """Take an event of the stream."""
        data, update = event.data, {}
        if event.kind == "planned":
            update = {
                "total_documents": data.get("documents", 0),
                "total_batches": data.get("batches", 0),
            }
        elif event.kind == "progress":
            update = {
                "batches_done": data.get("batches_done", 0),
                "documents": data.get("documents", 0),
            }
        if event.status is not None:
            update["status"] = event.status
        if update:
            self.progress = self.progress.model_copy(update=update)
            self._tell()

    def job(self, job: Job) -> None:
        """Take the job record (a poll, or the final read)."""
        self.progress = Progress.of_job(job)
        self._tell()

    def _tell(self) -> None:
        if self.on_progress is not None and self.progress != self._told:
            self._told = self.progress
            self.on_progress(self.progress)
