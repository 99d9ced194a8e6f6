"""Job retention (workers/retention.py) on every state store: SQLite, fakeredis, the test Redis.

Jobs that ended past the retention go with every key they left; the others stay whole; what
GET /metrics counts of the deleted ones moves to the retired totals once, however many
processes prune at the same time. tests/e2e/test_job_retention.py runs it after real jobs.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import pytest

from core.models.jobs import DocumentError, Job, JobStatus
from pipelines.models import WriteReport
from tests.contracts.state_store import _run_threads
from workers.jobs import JobNotFoundError, JobTracker
from workers.retention import PER_CALL, prune_jobs, retired

DAY = 86_400
NOW = time.time()


def job_of(jobs: JobTracker, name: str, status: JobStatus, days_ago: float) -> Job:
    """A job as a run leaves it: record, events, two batch reports, usage counters (per job,
    step and document) and a done set; `days_ago` it ended (or started, when unfinished)."""
    at = datetime.fromtimestamp(NOW - days_ago * DAY, UTC)
    job = Job(
        id=f"{name}-{int(days_ago)}",
        dataset="d",
        pipeline="p",
        pipeline_version="1",
        status=JobStatus.RUNNING,
        total_documents=3,
        total_batches=2,
        created_at=at,
    )
    jobs.save(job)
    jobs.event(job.id, "planned", batches=2)
    error = DocumentError(document_id="c", document_name="c.txt", step="s", message="bad")
    jobs.finish_batch(job.id, 0, WriteReport(dataset="d", documents=["a", "b"], chunks=2))
    jobs.finish_batch(job.id, 1, WriteReport(dataset="d", errors=[error]))
    usage = {"calls": 2, "prompt_tokens": 100, "completion_tokens": 40}
    jobs.state.incr_many(
        {f"job:{job.id}:usage:llm:{field}": n for field, n in usage.items()}
        | {f"job:{job.id}:usage:step:extract:llm:{field}": n for field, n in usage.items()}
        | {f"job:{job.id}:usage:document:a:llm:{field}": n for field, n in usage.items()}
        | {f"job:{job.id}:usage:embeddings:calls": 5}
    )
    if status is not JobStatus.RUNNING:
        job = jobs.finalise(job.id)  # its counts and errors, as any ended job has them
        job.status, job.finished_at = status, at
        jobs.save(job)
    return job


def keys_of(jobs: JobTracker, job_id: str) -> list[str]:
    return jobs.state.keys(f"job:{job_id}")  # the record and every job:<id>: key


def test_jobs_ended_past_the_retention_go_with_every_key(tracker: JobTracker) -> None:
    old = [
        job_of(tracker, f"old-{s.value}", s, 40)
        for s in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)
    ]
    kept = [
        job_of(tracker, "paused", JobStatus.PAUSED_BUDGET, 40),  # waits for its resume
        job_of(tracker, "recent", JobStatus.SUCCEEDED, 29),
        job_of(tracker, "running", JobStatus.RUNNING, 40),
    ]
    kept_keys = {job.id: keys_of(tracker, job.id) for job in kept}
    assert all(len(keys) > 10 for keys in kept_keys.values())
    tracker.state.put("jobs-unrelated", "x")

    assert prune_jobs(tracker.state, 0, now=NOW) == []  # 0 keeps every job
    assert sorted(prune_jobs(tracker.state, 30, now=NOW)) == sorted(job.id for job in old)

    for job in old:
        assert keys_of(tracker, job.id) == []
        with pytest.raises(JobNotFoundError):
            tracker.get(job.id)
    assert {job.id: keys_of(tracker, job.id) for job in kept} == kept_keys
    assert sorted(job.id for job in tracker.all()) == sorted(job.id for job in kept)
    assert tracker.state.get("jobs-unrelated") == "x"
    counts, usage = retired(tracker.state)
    # Each old job: 2 documents processed, 1 failed, 2 batches planned and done.
    assert counts == {
        "documents": 6,
        "documents_failed": 3,
        "batches_planned": 6,
        "batches_done": 6,
    }
    assert usage["llm"] == {
        "calls": 6,
        "prompt_tokens": 300,
        "completion_tokens": 120,
        "cached_tokens": 0,
        "cache_hits": 0,
    }
    assert usage["embeddings"]["calls"] == 15
    assert prune_jobs(tracker.state, 30, now=NOW) == []
    assert retired(tracker.state) == (counts, usage)  # nothing counted twice


def test_concurrent_pruners_delete_and_count_each_job_once(tracker: JobTracker) -> None:
    old = [job_of(tracker, f"old{i}", JobStatus.SUCCEEDED, 31 + i) for i in range(PER_CALL + 2)]
    pruned: list[str] = []
    lock = threading.Lock()

    def prune(_: int) -> None:
        for _ in range(2):
            ids = prune_jobs(tracker.state, 30, now=NOW)
            with lock:
                pruned.extend(ids)

    _run_threads(4, prune)
    assert sorted(pruned) == sorted(job.id for job in old)
    assert list(tracker.all()) == []
    assert retired(tracker.state)[0]["documents"] == 2 * len(old)


def test_a_call_deletes_at_most_its_share_oldest_first(tracker: JobTracker) -> None:
    old = [job_of(tracker, f"old{i}", JobStatus.SUCCEEDED, 31 + i) for i in range(PER_CALL + 2)]
    first = prune_jobs(tracker.state, 30, now=NOW)
    assert first == [job.id for job in reversed(old)][:PER_CALL]
    assert prune_jobs(tracker.state, 30, now=NOW) == [old[1].id, old[0].id]
