"""Datasets and their documents: upload (files or JSON texts), list and delete."""

from __future__ import annotations

from itertools import islice
from typing import Annotated

from fastapi import APIRouter, Path, Query

from api.http.deps import DatasetName, JobsDep, KnownDataset, RuntimeDep, UploadsDep
from api.http.schemas import (
    AddResult,
    ApiError,
    DatasetPublic,
    DeleteResult,
    DocumentPublic,
    error_responses,
)
from core.catalog import AddReport, CatalogError
from core.models.graph import Removed, dataset_id
from pipelines.classify import check_supported
from workers.jobs import JobTracker
from workers.runtime import Runtime

router = APIRouter(prefix="/api/v1/datasets", tags=["datasets"])

# The graph port cannot list datasets across the store, so the API keeps their names in the
# state store; datasets created only through `cogmill add` are not listed (see the report).
REGISTRY = "api:dataset:"

UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "files": {"type": "array", "items": {"type": "string", "format": "binary"}}
                    },
                    "required": ["files"],
                }
            },
            "application/json": {"schema": {"$ref": "#/components/schemas/DocumentsAdd"}},
        },
    }
}


def dataset_names(runtime: Runtime) -> list[str]:
    """Registered datasets that still exist in the graph, sorted."""
    names = [key.removeprefix(REGISTRY) for key in runtime.state.keys(REGISTRY)]
    existing = {node.id for node in runtime.graph.get_nodes([dataset_id(n) for n in names])}
    return sorted(n for n in names if dataset_id(n) in existing)


@router.get("", response_model=list[DatasetPublic], responses=error_responses(503))
def list_datasets(runtime: RuntimeDep) -> list[DatasetPublic]:
    """Datasets with their document counts."""
    return [
        DatasetPublic(name=name, documents=runtime.graph.count(name).get("Document", 0))
        for name in dataset_names(runtime)
    ]


@router.post(
    "/{name}/data",
    response_model=AddResult,
    responses=error_responses(400, 413, 415, 422, 503),
    openapi_extra=UPLOAD_BODY,
)
def add_documents(name: DatasetName, uploads: UploadsDep, runtime: RuntimeDep) -> AddResult:
    """Add documents (unchanged content is skipped; a known name with new content replaces).

    Send one or many files as multipart/form-data `files` parts, or JSON texts. A file above
    COGMILL_MAX_FILE_BYTES fails the whole request with 413 before anything is stored.
    """
    runtime.catalog.ensure_dataset(name)
    runtime.state.put(REGISTRY + name, name)
    report = AddReport()
    for upload in uploads:
        runtime.catalog.add_file(name, upload.path, upload.name, report, check_supported)
    return AddResult.from_report(report)


@router.get(
    "/{name}/data",
    response_model=list[DocumentPublic],
    responses=error_responses(400, 404, 422, 503),
)
def list_documents(
    name: KnownDataset,
    runtime: RuntimeDep,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> list[DocumentPublic]:
    """The dataset's documents with their processing status."""
    docs = islice(runtime.catalog.documents(name), offset, offset + limit)
    return [DocumentPublic.from_node(doc) for doc in docs]


def refuse_while_running(jobs: JobTracker, dataset: str) -> None:
    """409 when a cognify job on the dataset is unfinished: deleting under it would race its
    writes (the job could re-create what was just removed)."""
    running = [job.id for job in jobs.list() if job.dataset == dataset and not job.status.finished]
    if running:
        raise ApiError(
            409,
            "job_running",
            f"dataset {dataset!r} has a running cognify job ({', '.join(running)}); wait for "
            f"it to finish (GET /api/v1/jobs/{running[0]}/events) or cancel it "
            f"(POST /api/v1/jobs/{running[0]}/cancel), then delete again",
        )


def _result(dataset: str, document: str | None, removed: Removed) -> DeleteResult:
    return DeleteResult(
        dataset=dataset,
        document=document,
        nodes_removed=len(removed.node_ids),
        edges_removed=len(removed.edge_ids),
    )


@router.delete(
    "/{name}/data/{document_name}",
    response_model=DeleteResult,
    responses=error_responses(400, 404, 409, 422, 503),
)
def delete_document(
    name: KnownDataset,
    document_name: Annotated[str, Path(description="The document's file name, as added")],
    runtime: RuntimeDep,
    jobs: JobsDep,
) -> DeleteResult:
    """Delete a document: its chunks and whatever only it supported (graph, vectors, lexical
    index); shared entities and edges only lose its support."""
    refuse_while_running(jobs, name)
    try:
        removed = runtime.catalog.remove_named(name, document_name)
    except CatalogError as err:
        raise ApiError(
            404,
            "document_not_found",
            f"{err}; GET /api/v1/datasets/{name}/data lists its documents",
        ) from err
    return _result(name, document_name, removed)


@router.delete(
    "/{name}",
    response_model=DeleteResult,
    responses=error_responses(400, 404, 409, 422, 503),
)
def delete_dataset(name: KnownDataset, runtime: RuntimeDep, jobs: JobsDep) -> DeleteResult:
    """Delete a whole dataset: every node, edge, vector, index entry and stored file."""
    refuse_while_running(jobs, name)
    removed = runtime.catalog.remove_dataset(name)
    runtime.state.delete(REGISTRY + name)
    return _result(name, None, removed)
