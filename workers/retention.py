"""Job retention: a job that ended `job_retention_days` ago is deleted with every key it left.

A job leaves its record, events, batch reports, claims and usage counters (three per document
it read: 56,700 keys after an 18,900-document job) in the state store; kept for ever, they grow
the store with every job run. Whenever a job ends, the jobs that ended (succeeded, failed or
were cancelled; a paused job waits for its resume) longer ago than the retention are deleted,
`PER_CALL` at a time (the next job's end takes the rest). What GET /metrics counts of them
(documents, batches, calls, tokens, cost) goes into the retired totals first, so those counters
never go down.

A job is claimed (a key of its own that one process sets, kept a day after the job is gone,
so a process that read the job just before cannot claim it again), taken out of the job index,
its totals added, then its keys deleted: a process that dies in between leaves at most that one
job's keys unlisted, or its totals uncounted.
"""

from __future__ import annotations

import logging
import time

from core.llm.usage import FIELDS, KINDS
from core.models.jobs import Job, JobStatus
from core.ports import StateStore
from runtime import Runtime
from workers.jobs import JOBS, JobTracker
from workers.usage import job_usage

log = logging.getLogger("cogmill.retention")
PER_CALL = 10  # jobs deleted per call: each is a key scan (Redis walks the whole keyspace)
ENDED = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)
RETIRED = "jobs:retired:"
CLAIMS = "jobs:retiring:"  # a job's claim outlives its keys by a day: a late reader skips it
COUNTS = ("documents", "documents_failed", "batches_planned", "batches_done")


def prune_after_finish(runtime: Runtime) -> None:
    """Delete the jobs past the retention; a failure is logged, never the finishing job's."""
    try:
        prune_jobs(runtime.state, runtime.settings.job_retention_days)
    except Exception:  # noqa: BLE001 - the job that just ended must not fail for older ones
        log.exception("pruning ended jobs failed; the next job's end tries again")


def prune_jobs(state: StateStore, days: float, now: float | None = None) -> list[str]:
    """Delete up to PER_CALL jobs that ended more than `days` ago (0: keep every job); returns
    their ids."""
    if days <= 0:
        return []
    cutoff = (time.time() if now is None else now) - days * 86_400
    due = [job for job in JobTracker(state).all(live=False) if _expired(job, cutoff)]
    pruned = []
    for job in sorted(due, key=lambda job: job.finished_at or job.created_at)[:PER_CALL]:
        if not state.add_member(CLAIMS + job.id, "1", ttl=86_400):
            continue  # another process is pruning it, or did while this one read the job
        state.remove_member(JOBS, job.id)
        state.incr_many({RETIRED + name: value for name, value in _totals(state, job).items()})
        state.delete(f"job:{job.id}", *state.keys(f"job:{job.id}:"))
        pruned.append(job.id)
    if pruned:
        log.info("deleted %d jobs that ended over %g days ago", len(pruned), days)
    return pruned


def _expired(job: Job, cutoff: float) -> bool:
    ended = job.finished_at.timestamp() if job.finished_at is not None else None
    return job.status in ENDED and ended is not None and ended < cutoff


def _totals(state: StateStore, job: Job) -> dict[str, int]:
    """What GET /metrics counts of the job, under the names of the retired totals."""
    totals = {
        "documents": job.counts.get("documents", 0),
        "documents_failed": len({e.document_id for e in job.errors}),
        "batches_planned": job.total_batches,
        "batches_done": job.counts.get("batches_done", 0),
    }
    for kind, counts in job_usage(state, job.id).items():
        totals.update({f"usage:{kind}:{name}": value for name, value in counts.items()})
    return {name: value for name, value in totals.items() if value}


def retired(state: StateStore) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """The deleted jobs' totals: (COUNTS, {kind: {field: count}}), one round trip."""
    names = COUNTS + tuple(f"usage:{kind}:{name}" for kind in KINDS for name in FIELDS)
    values = state.get_many([RETIRED + name for name in names])
    found = {name: int(raw or 0) for name, raw in zip(names, values, strict=True)}
    usage = {kind: {name: found[f"usage:{kind}:{name}"] for name in FIELDS} for kind in KINDS}
    return {name: found[name] for name in COUNTS}, usage
