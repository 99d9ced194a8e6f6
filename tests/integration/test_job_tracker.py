"""The job bookkeeping (workers/jobs.py) on every state store: SQLite, fakeredis, the test Redis.

No worker and no pipeline: the tracker's own promises, in seconds. tests/integration/test_jobs.py
runs whole jobs through worker threads on the same three stores.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.models.jobs import DocumentError, Job, JobStatus
from core.ports import StateStore
from core.stores.redis.state import RedisStateStore
from core.stores.sqlite.state import SQLiteStateStore
from pipelines.models import WriteReport
from tests.backends import FAKEREDIS, REDIS, redis_backend_of
from tests.contracts.state_store import _run_threads
from workers.jobs import JobNotFoundError, JobTracker

pytestmark = pytest.mark.integration
SQLITE = "sqlite"


@pytest.fixture(params=[SQLITE, FAKEREDIS, pytest.param(REDIS, marks=pytest.mark.services)])
def tracker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JobTracker]:
    state: StateStore
    if request.param == SQLITE:
        state = SQLiteStateStore(tmp_path / "state.db")
        yield JobTracker(state)
        state.close()
        return
    backend = redis_backend_of(request.param)
    client = backend.adapter_client(decode_responses=True)
    state = RedisStateStore(backend.url, prefix=backend.prefix, client=client)
    yield JobTracker(state)
    state.close()
    backend.clean()


def new_job(tracker: JobTracker, batches: int = 3, documents: int = 6) -> Job:
    job = Job(
        id="job1", dataset="ds", pipeline="default", pipeline_version="1",
        total_batches=batches, total_documents=documents, status=JobStatus.RUNNING,
    )  # fmt: skip
    tracker.save(job)
    return job


def report(batch: int, *, failed: str | None = None) -> WriteReport:
    """Batch `batch`'s report: documents d(2b) and d(2b+1), `failed` among them failed."""
    errors = []
    if failed is not None:
        errors = [
            DocumentError(document_id=failed, document_name=failed, step="chunk", message="x")
        ]
    return WriteReport(
        dataset="ds", documents=[f"d{2 * batch}", f"d{2 * batch + 1}"], chunks=3, entities=5,
        relationships=2, vectors=7, errors=errors,
    )  # fmt: skip


def test_a_saved_job_reads_back_and_an_unknown_one_is_named(tracker: JobTracker) -> None:
    job = new_job(tracker)
    assert tracker.get(job.id, live=False) == job
    assert [j.id for j in tracker.all()] == [job.id]
    assert [j.id for j in tracker.running()] == [job.id]
    with pytest.raises(JobNotFoundError, match="no job 'nope'") as caught:
        tracker.get("nope")
    assert caught.value.job_id == "nope"  # each face names its own way to list jobs


def test_jobs_are_listed_from_their_index_and_older_ones_are_found_once(
    tracker: JobTracker, request: pytest.FixtureRequest
) -> None:
    """Listing jobs (`GET /jobs`, `/metrics`, datasets) must not walk the keyspace: a job that
    read 20,000 documents left 60,000 usage counters there, and the LLM cache and lexical
    index live there too (Redis: 354 ms to list 2 jobs after one such job)."""
    older = new_job(tracker).model_copy(update={"id": "older"})
    tracker.state.put("job:older", older.model_dump_json())  # as saved before the index
    for n in range(50):  # a document's usage counters: keys under the job's, not jobs
        tracker.state.incr(f"job:older:usage:document:d{n}:llm:calls")
    assert sorted(j.id for j in tracker.all()) == ["job1", "older"]
    tracker.save(older.model_copy(update={"id": "newer"}))
    store = request.node.callspec.params["tracker"]
    scans = _scans(tracker, store)
    assert sorted(j.id for j in tracker.all(live=False)) == ["job1", "newer", "older"]
    assert _scans(tracker, store) == scans


def _scans(tracker: JobTracker, store: str) -> int | None:
    """SCAN commands the test Redis has run (None on the other stores)."""
    if store != REDIS:
        return None
    stats = tracker.state._redis.info("commandstats")  # type: ignore[attr-defined]
    return int(stats.get("cmdstat_scan", {}).get("calls", 0))


def test_the_last_batch_completes_the_job_once_however_often_recorded(
    tracker: JobTracker,
) -> None:
    job = new_job(tracker)
    assert tracker.finish_batch(job.id, 0, report(0)) is False
    assert tracker.finish_batch(job.id, 0, report(0)) is False  # a redelivery: counted once
    assert tracker.finish_batch(job.id, 2, report(2, failed="d5")) is False
    assert tracker.batches_done(job.id) == 2 and not tracker.batch_recorded(job.id, 1)
    live = tracker.get(job.id)
    assert live.counts["batches_done"] == 2 and live.counts["documents"] == 3
    assert (live.counts["chunks"], live.counts["vectors"]) == (6, 14)
    assert tracker.finish_batch(job.id, 1, report(1)) is True
    assert tracker.finish_batch(job.id, 1, report(1)) is True  # redelivered last: still done
    done = [e["batch"] for _, e in tracker.events(job.id) if e["event"] == "batch_done"]
    assert sorted(done) == [0, 1, 2]


def test_concurrent_batch_reports_complete_the_job_exactly(tracker: JobTracker) -> None:
    job = new_job(tracker, batches=40, documents=80)
    completed: list[bool] = []

    def work(worker: int) -> None:
        # Every batch reported by two workers at once, as a redelivery racing the original.
        for batch in range(worker // 2, 40, 2):
            completed.append(tracker.finish_batch(job.id, batch, report(batch)))

    _run_threads(4, work)
    assert tracker.batches_done(job.id) == 40 and True in completed
    final = tracker.finalise(job.id)
    assert final.status is JobStatus.SUCCEEDED and final.counts["documents"] == 80
    assert final.counts["chunks"] == 40 * 3


def test_no_batch_completes_the_job_before_every_batch_done_is_written(
    tracker: JobTracker,
) -> None:
    """Batch 0 is stopped while it writes its `batch_done`; batch 1, recorded meanwhile, must
    not complete the job (whose `finished` event would then come before batch 0's)."""
    job = new_job(tracker, batches=2, documents=4)
    writing, go_on = threading.Event(), threading.Event()
    event = tracker.event

    def slow_event(job_id: str, kind: str, **fields: object) -> None:
        if fields.get("batch") == 0:
            writing.set()
            assert go_on.wait(30)
        event(job_id, kind, **fields)

    tracker.event = slow_event  # type: ignore[method-assign]
    first: list[bool] = []
    thread = threading.Thread(
        target=lambda: first.append(tracker.finish_batch(job.id, 0, report(0)))
    )
    thread.start()
    assert writing.wait(30)
    assert tracker.finish_batch(job.id, 1, report(1)) is False  # batch 0 is not done yet
    go_on.set()
    thread.join(30)
    assert first == [True]  # the batch whose event came last completes the job


def test_finalise_fixes_counts_drops_artifacts_and_leaves_running(tracker: JobTracker) -> None:
    job = new_job(tracker, batches=1, documents=2)
    key = tracker.put_artifact(job.id, "0:chunk", "chunks")
    assert tracker.artifact(key) == "chunks"
    tracker.finish_batch(job.id, 0, report(0, failed="d1"))
    final = tracker.finalise(job.id)
    assert final.status is JobStatus.SUCCEEDED and final.finished_at is not None
    assert final.counts["documents"] == 1 and [e.document_id for e in final.errors] == ["d1"]
    with pytest.raises(LookupError, match="expired or the job was cleaned up"):
        tracker.artifact(key)
    assert tracker.finalise(job.id) == final  # again: nothing changes
    assert tracker.get(job.id) == final and tracker.running() == []
    finished = [e for _, e in tracker.events(job.id) if e["event"] == "finished"]
    assert [e["status"] for e in finished] == ["succeeded"]


def test_a_job_whose_every_document_failed_is_failed(tracker: JobTracker) -> None:
    job = new_job(tracker, batches=1, documents=1)
    tracker.finish_batch(job.id, 0, WriteReport(dataset="ds", errors=report(0, failed="d0").errors))
    assert tracker.finalise(job.id).status is JobStatus.FAILED


def test_a_cancelled_job_ends_cancelled_and_takes_no_cancel_after(tracker: JobTracker) -> None:
    job = new_job(tracker)
    assert not tracker.cancelled(job.id)
    tracker.cancel(job.id)
    tracker.cancel(job.id)
    assert tracker.cancelled(job.id)
    assert tracker.finalise(job.id).status is JobStatus.CANCELLED
    tracker.cancel(job.id)  # finished: no new request
    kinds = [e["event"] for _, e in tracker.events(job.id)]
    assert kinds == ["cancel_requested", "cancel_requested", "finished"]


def test_deliveries_are_counted_per_batch_and_step(tracker: JobTracker) -> None:
    job = new_job(tracker)
    assert [tracker.count_delivery(job.id, 0, "classify") for _ in range(3)] == [1, 2, 3]
    assert tracker.count_delivery(job.id, 0, "chunk") == 1
    assert tracker.count_delivery(job.id, 1, "classify") == 1


def test_held_batches_wait_for_one_release(tracker: JobTracker) -> None:
    job = new_job(tracker, batches=3)
    tracker.hold(job.id, [2, 1])
    assert tracker.unfinished_batches(job) == [0]
    assert tracker.release(job.id, 2) is True
    assert tracker.release(job.id, 2) is False  # its chain is enqueued once
    assert tracker.unfinished_batches(job) == [0, 2]
    tracker.finish_batch(job.id, 0, report(0))
    assert tracker.unfinished_batches(job) == [2]


def test_events_are_read_after_a_sequence_number(tracker: JobTracker) -> None:
    job = new_job(tracker)
    for i in range(5):
        tracker.event(job.id, "tick", i=i)
    assert [(seq, e["i"]) for seq, e in tracker.events(job.id, after=3)] == [(4, 3), (5, 4)]
