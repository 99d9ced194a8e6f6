"""Jobs through real Celery worker threads: idempotent re-runs, per-document errors, cancel."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from celery import Celery
from celery.signals import task_postrun

from api.services.demo import SAMPLE_CORPUS
from core.catalog import AddReport
from core.models.jobs import Job, JobStatus
from core.models.vocabulary import INDEX_FIELDS
from core.settings import Settings
from core.stores.redis.state import RedisStateStore
from pipelines.models import DocumentBatch
from runtime import Runtime
from tests.backends import (
    FAKEREDIS,
    REDIS,
    add_files,
    finished,
    installed_runtime,
    redis_backend_of,
    worker_threads,
)
from workers.celery_app import FINISH, configure, task_name
from workers.embedded import EmbeddedWorker
from workers.job_keys import batch_input_key
from workers.jobs import JobTracker
from workers.orchestration import cognify

SQLITE = "sqlite"


@pytest.fixture(params=[SQLITE, FAKEREDIS, pytest.param(REDIS, marks=pytest.mark.services)])
def idle_runtime(
    request: pytest.FixtureRequest, tmp_path: Path, models: dict[str, object]
) -> Iterator[Runtime]:
    """A runtime with no worker running yet, its job state (the JobTracker's store) in SQLite,
    in fakeredis or in the test Redis; the graph and vectors are the embedded ones."""
    shared, redis_backend = dict(models), None
    if request.param != SQLITE:
        redis_backend = redis_backend_of(request.param)
        client = redis_backend.adapter_client(decode_responses=True)
        shared["state"] = RedisStateStore(
            redis_backend.url, prefix=redis_backend.prefix, client=client
        )
    with installed_runtime(Settings(home=tmp_path / "home", batch_size=2), shared) as rt:
        yield rt
    if redis_backend is not None:
        redis_backend.clean()


@pytest.fixture
def runtime(idle_runtime: Runtime) -> Iterator[Runtime]:
    """The runtime with two worker threads running."""
    with worker_threads(idle_runtime):
        yield idle_runtime


def add_sample(rt: Runtime, dataset: str = "sample") -> AddReport:
    return add_files(rt, dataset, sorted(SAMPLE_CORPUS.iterdir()))


def run(rt: Runtime, mode: str = "changed", timeout: float = 120) -> Job:
    return finished(rt, cognify(rt, "sample", "default", mode), timeout)


def finished_with_hook(rt: Runtime, app: Celery, job: Job, hook: Callable[..., None]) -> Job:
    """The job run to its end on one worker thread, `hook` called after each task (Celery's
    `task_postrun`)."""
    task_postrun.connect(hook, weak=False)
    try:
        with EmbeddedWorker(app, threads=1):
            return finished(rt, job, timeout=120)
    finally:
        task_postrun.disconnect(hook)


def snapshot(rt: Runtime) -> dict[str, int]:
    counts = rt.graph.count("sample")
    for node_type, fields in INDEX_FIELDS.items():
        for field in fields:
            counts[f"vectors:{node_type}_{field}"] = rt.vectors.count(
                f"{node_type}_{field}", dataset="sample"
            )
    return counts


@pytest.mark.slow
def test_rerunning_every_document_leaves_the_stores_unchanged(runtime: Runtime) -> None:
    add_sample(runtime)
    first = run(runtime)
    assert first.status is JobStatus.SUCCEEDED and first.counts["documents"] == 8
    assert first.total_batches == 4 and first.counts["batches_done"] == 4
    before = snapshot(runtime)
    assert before["Entity"] > 20 and before["vectors:Entity_name"] == before["Entity"]
    again = run(runtime, mode="all")
    assert again.status is JobStatus.SUCCEEDED and again.counts["documents"] == 8
    assert snapshot(runtime) == before


@pytest.mark.slow
def test_a_broken_document_is_reported_and_the_others_processed(runtime: Runtime) -> None:
    add_sample(runtime)
    [doc] = runtime.graph.find_nodes("sample", "Document", name="warsaw.md")
    runtime.blobs.delete(doc.properties["blob_key"])  # the stored bytes vanish before cognify
    job = run(runtime)
    assert job.status is JobStatus.SUCCEEDED
    assert [(e.document_name, e.step) for e in job.errors] == [("warsaw.md", "classify")]
    assert job.counts["documents"] == 7
    [doc] = runtime.graph.find_nodes("sample", "Document", name="warsaw.md")
    assert doc.properties["status"] == "failed"
    chunks = runtime.graph.find_nodes("sample", "DocumentChunk", limit=100)
    assert "warsaw.md" not in {c.properties["document_name"] for c in chunks}
    # The failed document is picked up again by the next plain cognify.
    assert cognify(runtime, "sample").total_documents == 1


@pytest.mark.slow
def test_cancel_stops_the_job_and_leaves_consistent_stores(runtime: Runtime) -> None:
    add_sample(runtime)
    job = cognify(runtime, "sample")
    tracker = JobTracker(runtime.state)
    tracker.cancel(job.id)
    job = finished(runtime, job, 60)
    assert job.status is JobStatus.CANCELLED
    processed = runtime.graph.find_nodes("sample", "Document", limit=100)
    done = {d.id for d in processed if d.properties.get("status") == "processed"}
    chunk_docs = {
        c.properties["document_id"] for c in runtime.graph.find_nodes("sample", "DocumentChunk")
    }
    assert chunk_docs <= done  # nothing written for documents the job did not finish
    resumed = run(runtime)
    assert resumed.status is JobStatus.SUCCEEDED
    assert resumed.counts["documents"] == 8 - len(done)


@pytest.mark.slow
def test_a_batch_whose_workers_keep_dying_is_parked_with_its_error(
    idle_runtime: Runtime,
) -> None:
    runtime = idle_runtime
    add_sample(runtime)
    app = configure(runtime.settings)
    app.control.purge()  # nothing left from other tests in this process's memory broker
    tracker = JobTracker(runtime.state)
    job = cognify(runtime, "sample")  # no worker yet: the chains wait in the queue
    # As if every earlier delivery of batch 0's first step had died with its worker.
    for _ in range(runtime.settings.max_deliveries):
        tracker.count_delivery(job.id, 0, "classify")
    first = DocumentBatch.model_validate_json(tracker.artifact(batch_input_key(job.id, 0)))
    with EmbeddedWorker(app, threads=2):
        job = finished(runtime, job, timeout=120)
    parked = [e for e in job.errors if "parked" in e.message]
    assert sorted(e.document_id for e in parked) == sorted(d.id for d in first.documents)
    assert parked and all(e.step == "classify" for e in parked)
    assert job.status is JobStatus.SUCCEEDED and job.counts["documents"] == 8 - len(parked)


@pytest.mark.slow
def test_a_cancel_after_a_batchs_write_still_records_its_documents(
    idle_runtime: Runtime,
) -> None:
    """The cancel lands once the first batch's data is stored and before its later steps
    (reconcile, judge) start: those steps still run, so its documents end `processed`, and
    the job, cancelled, holds no document written but not recorded."""
    runtime = idle_runtime
    add_sample(runtime)  # 8 documents, 2 a batch: 4 batches
    app = configure(runtime.settings)
    app.control.purge()
    job = cognify(runtime, "sample")
    tracker = JobTracker(runtime.state)
    cancelled_after: list[int] = []

    def after_write(task: object = None, kwargs: dict | None = None, **_: object) -> None:
        if getattr(task, "name", "") == task_name("add_data_points") and not cancelled_after:
            tracker.cancel(job.id)
            cancelled_after.append(int((kwargs or {})["batch"]))

    job = finished_with_hook(runtime, app, job, after_write)
    assert job.status is JobStatus.CANCELLED and cancelled_after
    documents = runtime.graph.find_nodes("sample", "Document", limit=100)
    done = {d.id for d in documents if d.properties.get("status") == "processed"}
    chunk_docs = {
        c.properties["document_id"] for c in runtime.graph.find_nodes("sample", "DocumentChunk")
    }
    assert chunk_docs and chunk_docs == done, (chunk_docs, done)


@pytest.mark.slow
def test_a_recorded_batch_drops_its_artifacts_while_the_job_runs(idle_runtime: Runtime) -> None:
    """A job's Redis memory holds its batches in flight, not every batch it ran: a batch's
    input and step outputs go once it is recorded, not with the job's end."""
    runtime = idle_runtime
    add_sample(runtime)  # 8 documents, 2 a batch: 4 batches
    app = configure(runtime.settings)
    app.control.purge()
    job = cognify(runtime, "sample")
    seen: list[tuple[int, list[str], int, bool]] = []

    def after_finish(task: object = None, kwargs: dict | None = None, **_: object) -> None:
        if getattr(task, "name", "") != task_name(FINISH) or seen:
            return
        batch = int((kwargs or {})["batch"])
        left = runtime.state.keys(f"job:{job.id}:artifact:{batch}:")
        others = sum(
            runtime.state.get(batch_input_key(job.id, b)) is not None
            for b in range(job.total_batches)
            if b != batch
        )
        seen.append((batch, left, others, JobTracker(runtime.state).get(job.id).status.finished))

    job = finished_with_hook(runtime, app, job, after_finish)
    assert job.status is JobStatus.SUCCEEDED and job.total_batches == 4
    [(batch, left, others, was_finished)] = seen
    assert not was_finished and others >= 1, "the first batch recorded while others still ran"
    assert left == [], f"batch {batch} kept {left}"
