"""Datasets and their documents: upload (files or JSON texts) and list."""

from __future__ import annotations

from itertools import islice
from typing import Annotated

from fastapi import APIRouter, Query

from api.deps import DatasetName, KnownDataset, RuntimeDep, UploadsDep
from api.schemas import AddResult, DatasetPublic, DocumentPublic, error_responses
from core.catalog import AddReport
from core.models.graph import dataset_id
from pipelines.classify import check_supported
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
