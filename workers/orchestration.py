"""Plan a cognify job, fan it out as one chain per batch, and record each batch's outcome.

No chords: each batch's last task records its report idempotently, and the batch that
completes the set finalises the job (see workers/jobs.py).
"""

from __future__ import annotations

import uuid

from core.catalog import check_dataset_name
from core.models.graph import Node, dataset_id
from core.models.jobs import Job, JobStatus
from pipelines.definitions import get_pipeline
from pipelines.models import DocumentBatch, DocumentRef, WriteReport
from workers.jobs import JobTracker
from workers.runtime import Runtime

MODES = ("changed", "all")


class PlanError(ValueError):
    """The job cannot be planned (unknown dataset, pipeline or mode)."""


def needs_work(doc: Node, version: str, mode: str) -> bool:
    """Whether a document must be (re)processed: new, failed, older pipeline, or forced."""
    props = doc.properties
    return (
        mode == "all"
        or props.get("status") != "processed"
        or props.get("pipeline_version") != version
    )


def _ref(doc: Node) -> DocumentRef:
    props = doc.properties
    return DocumentRef(
        id=doc.id,
        dataset=doc.dataset,
        name=doc.name,
        blob_key=props["blob_key"],
        extension=props.get("extension", ""),
        size=props.get("size", 0),
    )


def cognify(
    runtime: Runtime, dataset: str, pipeline_name: str = "default", mode: str = "changed"
) -> Job:
    """Plan and enqueue a job; returns it (already finished when there is nothing to do)."""
    check_dataset_name(dataset)
    if mode not in MODES:
        raise PlanError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
    pipeline = get_pipeline(pipeline_name)
    if not runtime.graph.get_nodes([dataset_id(dataset)]):
        raise PlanError(
            f"dataset {dataset!r} does not exist; add documents with "
            f"`cogmill add PATH --dataset {dataset}` first"
        )
    docs = [
        _ref(d) for d in runtime.catalog.documents(dataset) if needs_work(d, pipeline.version, mode)
    ]
    size = runtime.settings.batch_size
    batches = [docs[i : i + size] for i in range(0, len(docs), size)]
    job = Job(
        id=uuid.uuid4().hex,
        dataset=dataset,
        pipeline=pipeline.name,
        pipeline_version=pipeline.version,
        mode=mode,
        status=JobStatus.RUNNING,
        total_documents=len(docs),
        total_batches=len(batches),
    )
    jobs = JobTracker(runtime.state, runtime.settings.artifact_ttl_seconds)
    jobs.save(job)
    jobs.event(job.id, "planned", documents=len(docs), batches=len(batches))
    if not batches:
        job = jobs.finalise(job.id)
        job.message = "nothing to do: every document is already processed by this pipeline version"
        jobs.save(job)
        return job
    from workers.tasks import batch_chain, batch_input_key  # tasks import this module

    for index, refs in enumerate(batches):
        payload = DocumentBatch(dataset=dataset, documents=refs).model_dump_json()
        runtime.state.put(
            batch_input_key(job.id, index), payload, ttl=runtime.settings.artifact_ttl_seconds
        )
    for index in range(len(batches)):
        batch_chain(job.id, pipeline.name, pipeline.step_names, index).apply_async()
    return job


def record_batch(runtime: Runtime, job_id: str, batch: int, report: WriteReport | None) -> None:
    """Mark the batch's documents processed or failed, count the batch, finalise after the last."""
    jobs = JobTracker(runtime.state, runtime.settings.artifact_ttl_seconds)
    job = jobs.get(job_id)
    if report is None:
        if jobs.batch_recorded(job_id, batch):
            return  # a failed or parked step already recorded this batch's errors
        report = WriteReport(dataset=job.dataset)  # stopped by a cancel: nothing was written
    updates = [
        Node(
            id=doc_id,
            type="Document",
            dataset=job.dataset,
            properties={
                "status": "processed",
                "pipeline_version": job.pipeline_version,
                "error": "",
            },
        )
        for doc_id in report.documents
    ]
    updates += [
        Node(
            id=e.document_id,
            type="Document",
            dataset=job.dataset,
            properties={"status": "failed", "error": f"{e.step}: {e.message}"},
        )
        for e in report.errors
    ]
    if updates:
        runtime.graph.upsert_nodes(updates)
    if jobs.finish_batch(job_id, batch, report):
        jobs.finalise(job_id)
