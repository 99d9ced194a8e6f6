"""Plan a cognify job, fan it out as one chain per batch, and record each batch's outcome.

No chords: each batch's last task records its report idempotently, and the batch that
completes the set finalises the job (see workers/jobs.py).

A batch reads at most `segment_bytes` of documents (or one larger document), and a text
document above `segment_bytes` is planned as segments, one batch each (see
pipelines/formats/segments.py), so no step of any batch holds more than about one segment,
however large the file. The first segment's batch runs first: its write purges what earlier
runs derived from the document, once; its recording releases the other segments' batches,
which then run in parallel. The document is processed when every segment is.
"""

from __future__ import annotations

import uuid
from pathlib import PurePath
from typing import Any

from kombu.exceptions import OperationalError

from core.catalog import check_dataset_name
from core.errors import InvalidInput
from core.models.documents import (
    DEFAULT_PIPELINE,
    DERIVED,
    DOCUMENT_DATE,
    PIPELINE,
    STATUS,
    STRUCTURED_PIPELINE,
    DocumentStatus,
    failed_properties,
    processed_by,
    processed_properties,
)
from core.models.graph import Node, dataset_id
from core.models.jobs import Budget, Job, JobStatus
from core.models.vocabulary import DOCUMENT, NODE_SET
from core.ports import StoreError
from core.stores.redis.connection import redact_url
from pipelines.base import Pipeline
from pipelines.classify import Classify, DocumentProblem, kind_for
from pipelines.definitions import get_pipeline
from pipelines.formats.segments import SEGMENTABLE_KINDS, segment_count
from pipelines.models import DocumentBatch, DocumentRef, WriteReport
from runtime import Runtime
from workers import fairness
from workers.chains import batch_chain
from workers.job_keys import batch_input_key
from workers.jobs import JobTracker
from workers.retention import prune_after_finish

MODES = ("changed", "all")
NOTHING_TO_DO = "nothing to do: every document is already processed by this pipeline version"


class PlanError(InvalidInput):
    """The job cannot be planned (unknown dataset, pipeline or mode)."""

    code = "cannot_plan"


# Pipelines whose documents are planned together, in one batch: their steps relate documents
# to each other (foreign keys between the tables of a dataset).
WHOLE_DATASET_PIPELINES = frozenset({STRUCTURED_PIPELINE})


def pipeline_of(doc: Node) -> str:
    """The pipeline a document is assigned to (`add` picks it; `cognify --pipeline` changes it)."""
    return str(doc.properties.get(PIPELINE) or DEFAULT_PIPELINE)


def needs_work(doc: Node, pipeline: Pipeline, mode: str) -> bool:
    """Whether a document needs (re)processing: new, failed, other pipeline or version, forced."""
    return mode == "all" or not processed_by(doc.properties, pipeline.name, pipeline.version)


def _ref(doc: Node) -> DocumentRef:
    props = doc.properties
    return DocumentRef(
        id=doc.id,
        dataset=doc.dataset,
        name=doc.name,
        blob_key=props["blob_key"],
        extension=props.get("extension", ""),
        size=props.get("size", 0),
        node_set=props.get(NODE_SET, ""),
        document_date=str(props.get(DOCUMENT_DATE) or ""),
        derived=bool(props.get(DERIVED)) or props.get(STATUS) not in (None, DocumentStatus.ADDED),
    )


def segments_of(ref: DocumentRef, pipeline: Pipeline, segment_bytes: int) -> list[DocumentRef]:
    """The document as planned: one ref, or one per segment for a large text document.

    Only the first segment keeps `derived` (its write purges older data); the later ones
    start after it was written (see `record_batch`) and must not purge what it wrote.
    """
    try:
        kind = kind_for(ref.extension or PurePath(ref.name).suffix)
    except DocumentProblem:
        return [ref]  # classify reports it
    count = segment_count(ref.size, segment_bytes)
    if count == 1 or kind not in SEGMENTABLE_KINDS or Classify not in pipeline.steps[:1]:
        return [ref]
    return [
        ref.model_copy(
            update={
                "segment": k,
                "segments": count,
                "segment_bytes": segment_bytes,
                "derived": ref.derived and k == 0,
            }
        )
        for k in range(count)
    ]


def _groups(refs: list[DocumentRef], size: int, max_bytes: int) -> list[list[DocumentRef]]:
    """Batches of at most `size` documents and `max_bytes` bytes (or one larger document);
    each segment of a segmented document in a batch of its own."""
    groups: list[list[DocumentRef]] = []
    current: list[DocumentRef] = []
    used = 0
    for ref in refs:
        if current and (ref.segments > 1 or len(current) >= size or used + ref.size > max_bytes):
            groups.append(current)
            current, used = [], 0
        if ref.segments > 1:
            groups.append([ref])
            continue
        current.append(ref)
        used += ref.size
    if current:
        groups.append(current)
    return groups


def plan_batches(
    runtime: Runtime,
    dataset: str,
    pipeline_name: str | None,
    mode: str,
    only: set[str] | None = None,
) -> list[DocumentBatch]:
    """The batches a job must run: each document through its pipeline (or the one forced);
    with `only`, just those of these ids that need it (a sync's changes).

    A batch whose first document is a segmented document's first segment lists the batches of
    its other segments as `followers` (they come right after it).
    """
    by_pipeline: dict[str, list[Node]] = {}
    for doc in runtime.catalog.documents(dataset):
        by_pipeline.setdefault(pipeline_name or pipeline_of(doc), []).append(doc)
    size, segment_bytes = runtime.settings.batch_size, runtime.settings.segment_bytes
    batches: list[DocumentBatch] = []
    for name in sorted(by_pipeline):
        pipeline = get_pipeline(name)
        docs = by_pipeline[name]
        todo = [d for d in docs if needs_work(d, pipeline, mode) and (only is None or d.id in only)]
        if not todo:
            continue
        if pipeline_name is not None:
            _assign(runtime, dataset, todo, name)
        if name in WHOLE_DATASET_PIPELINES:
            # Every document: the unchanged ones are the changed ones' context.
            groups = [[_ref(d) for d in docs]]
        else:
            refs = [seg for d in todo for seg in segments_of(_ref(d), pipeline, segment_bytes)]
            groups = _groups(refs, size, segment_bytes)
        for group in groups:
            first = group[0]
            followers = []
            if first.segments > 1 and first.segment == 0:
                followers = list(range(len(batches) + 1, len(batches) + first.segments))
            batches.append(
                DocumentBatch(dataset=dataset, pipeline=name, documents=group, followers=followers)
            )
    return batches


def _assign(runtime: Runtime, dataset: str, docs: list[Node], pipeline: str) -> None:
    """Make `pipeline` the documents' own, so a later plain `cognify` keeps using it."""
    runtime.graph.upsert_nodes(
        [
            Node(id=d.id, type=DOCUMENT, dataset=dataset, properties={"pipeline": pipeline})
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
    budget: Budget | None = None,
) -> Job:
    """Plan and enqueue a job; returns it (already finished when there is nothing to do).

    Without `pipeline_name` every document goes through its own pipeline (`default` unless
    `add` chose another, e.g. `structured` for record files); with one, all documents do.
    `options` reach every step of the job (see `Pipeline.build_step`); `budget` caps what
    its LLM calls may spend (workers/budgets.py).
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
    job = Job(
        id=uuid.uuid4().hex,
        dataset=dataset,
        pipeline=pipeline_name or DEFAULT_PIPELINE,
        pipeline_version="",
        mode=mode,
        options=options or {},
        budget=budget,
        status=JobStatus.RUNNING,
    )
    return run_job(runtime, job, pipeline_name)


def run_job(
    runtime: Runtime, job: Job, pipeline_name: str | None = None, only: set[str] | None = None
) -> Job:
    """Plan a job's batches over its dataset (`only`: these documents) and enqueue them; the
    job as saved (already finished when there is nothing to do, keeping a message it came
    with). A sync makes its job first (QUEUED while it reads its source) and plans it here,
    over the documents it changed, once the dataset mirrors the source."""
    batches = plan_batches(runtime, job.dataset, pipeline_name, job.mode, only)
    used = sorted({b.pipeline for b in batches}) or [pipeline_name or DEFAULT_PIPELINE]
    job = job.model_copy(
        update={
            "pipeline": pipeline_name or "+".join(used),
            "pipeline_version": ",".join(get_pipeline(name).version for name in used),
            "status": JobStatus.RUNNING,
            "total_documents": len({d.id for b in batches for d in b.documents}),
            "total_batches": len(batches),
        }
    )
    jobs = JobTracker(runtime.state, runtime.settings.artifact_ttl_seconds, runtime.graph)
    jobs.save(job)
    jobs.event(job.id, "planned", documents=job.total_documents, batches=len(batches))
    if not batches:
        message = job.message
        job = jobs.finalise(job.id)
        job.message = message or NOTHING_TO_DO
        jobs.save(job)
        return job
    for index, batch in enumerate(batches):
        runtime.state.put(
            batch_input_key(job.id, index),
            batch.model_dump_json(),
            ttl=runtime.settings.artifact_ttl_seconds,
        )
    held = {follower for batch in batches for follower in batch.followers}
    jobs.hold(job.id, sorted(held))
    published = [index for index in range(len(batches)) if index not in held]
    fairness.queued(runtime.state, runtime.settings, job.dataset, job.id, published)
    try:
        for index in published:
            chain = batch_chain(job.id, index, batches[index])
            # No result is kept: the result backend has nothing to do with the publish.
            chain.apply_async(retry_policy=PLAN_PUBLISH_RETRY, ignore_result=True)
    except (OperationalError, OSError, RuntimeError) as err:
        where = redact_url(runtime.settings.broker_url)
        problem = (
            f"cannot publish the job's batches to the broker at {where}: {str(err).rstrip('.')}"
        )
        jobs.abandon(job.id, problem)
        raise StoreError(
            f"{problem}; job {job.id} is failed and nothing of it runs: run cognify again once "
            "the broker answers (COGMILL_BROKER_URL)"
        ) from err
    return job


# The planner's first publish gives up within seconds (the caller waits and can try again);
# a chain's later steps ride out a broker restart (workers/celery_app.py).
PLAN_PUBLISH_RETRY = {"max_retries": 2, "interval_start": 0.5, "interval_step": 0.5}


def record_batch(runtime: Runtime, job_id: str, batch: int, report: WriteReport | None) -> None:
    """Mark the batch's documents processed or failed, count the batch, finalise after the last.

    A segmented document is marked failed as soon as one segment fails, and processed only when
    its last segment is recorded and none failed.
    """
    jobs = JobTracker(runtime.state, runtime.settings.artifact_ttl_seconds, runtime.graph)
    job = jobs.get(job_id, live=False)
    fairness.release(runtime.state, job.dataset, job_id, batch)
    if job.status.finished or jobs.batch_recorded(job_id, batch):
        return  # a late or concurrent delivery: the batch's artifacts went with its recording
    source = DocumentBatch.model_validate_json(jobs.artifact(batch_input_key(job_id, batch)))
    pipeline = get_pipeline(source.pipeline)
    if report is None:
        report = WriteReport(dataset=job.dataset)  # stopped by a cancel: nothing was written
    segmented = {ref.id: ref for ref in source.documents if ref.segments > 1}
    for e in report.errors:
        if e.document_id in segmented:  # before the status: see _segment_done
            error = f"{e.step}: {e.message}"
            runtime.state.put(_segment_key(job_id, e.document_id, "failed"), error)
    updates = [
        _processed(job.dataset, doc_id, pipeline)
        for doc_id in report.documents
        if doc_id not in segmented
    ]
    updates += [
        _failed(job.dataset, e.document_id, f"{e.step}: {e.message}") for e in report.errors
    ]
    if updates:
        runtime.graph.upsert_nodes(updates)
    failed = {e.document_id for e in report.errors}
    for ref in segmented.values():
        if ref.id in report.documents and ref.id not in failed:
            _segment_done(runtime, job_id, ref, pipeline)
    _release_followers(runtime, jobs, job_id, source, report)
    if jobs.finish_batch(job_id, batch, report, pipeline.step_names):
        jobs.finalise(job_id)
        prune_after_finish(runtime)


def _processed(dataset: str, doc_id: str, pipeline: Pipeline) -> Node:
    properties = processed_properties(pipeline.name, pipeline.version)
    return Node(id=doc_id, type=DOCUMENT, dataset=dataset, properties=properties)


def _failed(dataset: str, doc_id: str, error: str) -> Node:
    properties = failed_properties(error)
    return Node(id=doc_id, type=DOCUMENT, dataset=dataset, properties=properties)


def _segment_key(job_id: str, doc_id: str, what: str) -> str:
    """Job-scoped segment bookkeeping, dropped with the job's artifacts when it finishes."""
    return f"job:{job_id}:artifact:segments:{doc_id}:{what}"


def _segment_done(runtime: Runtime, job_id: str, ref: DocumentRef, pipeline: Pipeline) -> None:
    """Count a segment written; the last one marks the document processed unless one failed."""
    state, done = runtime.state, _segment_key(job_id, ref.id, "done")
    state.add_member(done, str(ref.segment))  # a set: a repeated recording counts once
    failed = _segment_key(job_id, ref.id, "failed")
    if state.count_members(done) < ref.segments or state.get(failed) is not None:
        return
    runtime.graph.upsert_nodes([_processed(ref.dataset, ref.id, pipeline)])
    # A segment failing meanwhile stored its error before marking the document failed, so
    # either it marked it after this or its error is seen here.
    if (error := state.get(failed)) is not None:
        runtime.graph.upsert_nodes([_failed(ref.dataset, ref.id, error)])


def _release_followers(
    runtime: Runtime, jobs: JobTracker, job_id: str, source: DocumentBatch, report: WriteReport
) -> None:
    """Start the later segments' batches once the first segment is recorded (each once).

    When the first segment failed (the document is failed with its error) or the job was
    cancelled, they are recorded as having written nothing instead of being run.
    """
    if not source.followers:
        return
    first = source.documents[0].id
    written = first in report.documents and all(e.document_id != first for e in report.errors)
    stopped = not written or jobs.cancelled(job_id)
    for follower in source.followers:
        if not jobs.release(job_id, follower):
            continue  # released by an earlier recording of this batch
        if stopped:
            record_batch(runtime, job_id, follower, None)
        else:
            planned = jobs.artifact(batch_input_key(job_id, follower))
            fairness.queued(runtime.state, runtime.settings, source.dataset, job_id, [follower])
            batch_chain(job_id, follower, DocumentBatch.model_validate_json(planned)).apply_async()
