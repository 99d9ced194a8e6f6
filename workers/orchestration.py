"""Plan a cognify job, fan it out as one chain per batch, and record each batch's outcome.

No chords: each batch's last task records its report idempotently, and the batch that
completes the set finalises the job (see workers/jobs.py).
"""

from __future__ import annotations

import uuid
from typing import Any

from core.catalog import check_dataset_name
from core.models.graph import Node, dataset_id
from core.models.jobs import Job, JobStatus
from pipelines.base import Pipeline
from pipelines.definitions import get_pipeline
from pipelines.models import DocumentBatch, DocumentRef, WriteReport
from workers.jobs import JobTracker
from workers.runtime import Runtime

MODES = ("changed", "all")


class PlanError(ValueError):
    """The job cannot be planned (unknown dataset, pipeline or mode)."""


DEFAULT_PIPELINE = "default"
# Pipelines whose documents are planned together, in one batch: their steps relate documents
# to each other (foreign keys between the tables of a dataset).
WHOLE_DATASET_PIPELINES = frozenset({"structured"})


def pipeline_of(doc: Node) -> str:
    """The pipeline a document is assigned to (`add` picks it; `cognify --pipeline` changes it)."""
    return str(doc.properties.get("pipeline") or DEFAULT_PIPELINE)


def needs_work(doc: Node, pipeline: Pipeline, mode: str) -> bool:
    """Whether a document needs (re)processing: new, failed, other pipeline or version, forced."""
    props = doc.properties
    return (
        mode == "all"
        or props.get("status") != "processed"
        or props.get("processed_pipeline", DEFAULT_PIPELINE) != pipeline.name
        or props.get("pipeline_version") != pipeline.version
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
        node_set=props.get("node_set", ""),
        derived=bool(props.get("derived")) or props.get("status", "added") != "added",
    )


def plan_batches(
    runtime: Runtime, dataset: str, pipeline_name: str | None, mode: str
) -> list[DocumentBatch]:
    """The batches a job must run: each document through its pipeline (or the one forced)."""
    by_pipeline: dict[str, list[Node]] = {}
    for doc in runtime.catalog.documents(dataset):
        by_pipeline.setdefault(pipeline_name or pipeline_of(doc), []).append(doc)
    size = runtime.settings.batch_size
    batches: list[DocumentBatch] = []
    for name in sorted(by_pipeline):
        pipeline = get_pipeline(name)
        docs = by_pipeline[name]
        todo = [d for d in docs if needs_work(d, pipeline, mode)]
        if not todo:
            continue
        if pipeline_name is not None:
            _assign(runtime, dataset, todo, name)
        if name in WHOLE_DATASET_PIPELINES:
            groups = [docs]  # every document: the unchanged ones are the changed ones' context
        else:
            groups = [todo[i : i + size] for i in range(0, len(todo), size)]
        batches += [
            DocumentBatch(dataset=dataset, pipeline=name, documents=[_ref(d) for d in group])
            for group in groups
        ]
    return batches


def _assign(runtime: Runtime, dataset: str, docs: list[Node], pipeline: str) -> None:
    """Make `pipeline` the documents' own, so a later plain `cognify` keeps using it."""
    runtime.graph.upsert_nodes(
        [
            Node(id=d.id, type="Document", dataset=dataset, properties={"pipeline": pipeline})
            for d in docs
            if pipeline_of(d) != pipeline
        ]
    )


def cognify(
    runtime: Runtime,
    dataset: str,
    pipeline_name: str | None = None,
    mode: str = "changed",
    options: dict[str, Any] | None = None,
) -> Job:
    """Plan and enqueue a job; returns it (already finished when there is nothing to do).

    Without `pipeline_name` every document goes through its own pipeline (`default` unless
    `add` chose another, e.g. `structured` for record files); with one, all documents do.
    `options` reach every step of the job (see `Runtime.step`).
    """
    check_dataset_name(dataset)
    if mode not in MODES:
        raise PlanError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
    if pipeline_name is not None:
        get_pipeline(pipeline_name)  # unknown names fail before anything is planned
    if not runtime.graph.get_nodes([dataset_id(dataset)]):
        raise PlanError(
            f"dataset {dataset!r} does not exist; add documents with "
            f"`cogmill add PATH --dataset {dataset}` first"
        )
    batches = plan_batches(runtime, dataset, pipeline_name, mode)
    used = sorted({b.pipeline for b in batches}) or [pipeline_name or DEFAULT_PIPELINE]
    job = Job(
        id=uuid.uuid4().hex,
        dataset=dataset,
        pipeline=pipeline_name or "+".join(used),
        pipeline_version=",".join(get_pipeline(name).version for name in used),
        mode=mode,
        options=options or {},
        status=JobStatus.RUNNING,
        total_documents=sum(len(b.documents) for b in batches),
        total_batches=len(batches),
    )
    jobs = JobTracker(runtime.state, runtime.settings.artifact_ttl_seconds)
    jobs.save(job)
    jobs.event(job.id, "planned", documents=job.total_documents, batches=len(batches))
    if not batches:
        job = jobs.finalise(job.id)
        job.message = "nothing to do: every document is already processed by this pipeline version"
        jobs.save(job)
        return job
    from workers.tasks import batch_chain, batch_input_key  # tasks import this module

    for index, batch in enumerate(batches):
        runtime.state.put(
            batch_input_key(job.id, index),
            batch.model_dump_json(),
            ttl=runtime.settings.artifact_ttl_seconds,
        )
    for index, batch in enumerate(batches):
        pipeline = get_pipeline(batch.pipeline)
        batch_chain(job.id, pipeline.name, pipeline.step_names, index).apply_async()
    return job


def record_batch(runtime: Runtime, job_id: str, batch: int, report: WriteReport | None) -> None:
    """Mark the batch's documents processed or failed, count the batch, finalise after the last."""
    jobs = JobTracker(runtime.state, runtime.settings.artifact_ttl_seconds)
    job = jobs.get(job_id)
    from workers.tasks import batch_input_key

    source = DocumentBatch.model_validate_json(jobs.artifact(batch_input_key(job_id, batch)))
    pipeline = get_pipeline(source.pipeline)
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
                "processed_pipeline": pipeline.name,
                "pipeline_version": pipeline.version,
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
