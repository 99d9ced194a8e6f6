"""A sync's source cursor (file hashes, the commit, the tables' high-water marks), kept only
once the sync's job succeeds.

The sync stages the cursor of what it read under its job (`stage`); `JobTracker.save` keeps
it as the source's cursor when it stores the job succeeded (`keep`). A sync that fails, is
cancelled, paused by its budget or killed leaves the previous cursor, so the next sync reads
from there again; the dataset, not the cursor, is what a sync compares the source with, so
reading more than needed changes nothing.

Imported by workers/jobs.py, so it imports no other worker module.
"""

from __future__ import annotations

import json
from typing import Any

from core.models.jobs import Job, JobStatus
from core.ports import StateStore

CURSOR = "sync:cursor:"
PENDING = "sync:pending:"
SYNC = "sync"  # the job option naming the source a sync job reads ({"source": id, ...})


def source_of(job: Job) -> str | None:
    """The id of the source a sync job reads (None: not a sync job)."""
    sync = job.options.get(SYNC)
    return str(sync["source"]) if isinstance(sync, dict) and sync.get("source") else None


def cursor(state: StateStore, source_id: str) -> dict[str, Any]:
    """The cursor the source's last successful sync kept ({} before the first)."""
    raw = state.get(CURSOR + source_id)
    return json.loads(raw) if raw else {}


def stage(state: StateStore, job_id: str, value: dict[str, Any], ttl: float) -> None:
    """Hold a sync's new cursor until its job ends."""
    state.put(PENDING + job_id, json.dumps(value, separators=(",", ":")), ttl=ttl)


def keep(state: StateStore, job: Job) -> None:
    """Keep the staged cursor as the source's when the job succeeded (again: nothing)."""
    source = source_of(job)
    if source is None or job.status is not JobStatus.SUCCEEDED:
        return
    raw = state.get(PENDING + job.id)
    if raw is not None:
        state.put(CURSOR + source, raw)
        state.delete(PENDING + job.id)


def forget(state: StateStore, source_id: str) -> None:
    """Drop a source's cursor (its next sync reads everything again)."""
    state.delete(CURSOR + source_id)
