"""Datasets and their documents: upload (files or JSON texts), list and delete."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from api.http.deps import DatasetName, Reader, RuntimeDep, UploadsDep, Writer
from api.http.schemas import (
    DOCUMENT_DATE_HELP,
    AddResult,
    DatasetPublic,
    DeleteResult,
    DocumentPublic,
    error_responses,
)
from api.services import datasets, delete
from api.services.add import AddOptions, add_files

router = APIRouter(prefix="/api/v1/datasets", tags=["datasets"])

UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "files": {"type": "array", "items": {"type": "string", "format": "binary"}},
                        "node_set": {
                            "type": "string",
                            "description": "Group the documents in a node set (e.g. coding_rules)",
                        },
                        "document_date": {
                            "type": "string",
                            "maxLength": 64,
                            "description": DOCUMENT_DATE_HELP,
                        },
                    },
                    "required": ["files"],
                }
            },
            "application/json": {"schema": {"$ref": "#/components/schemas/DocumentsAdd"}},
        },
    }
}


@router.get("", response_model=list[DatasetPublic], responses=error_responses(503))
def list_datasets(runtime: RuntimeDep, caller: Reader) -> list[DatasetPublic]:
    """Datasets with their document counts."""
    return [
        DatasetPublic(name=found.name, documents=found.documents)
        for found in datasets.list_datasets(runtime, caller)
    ]


@router.post(
    "/{name}/data",
    response_model=AddResult,
    responses=error_responses(400, 413, 415, 422, 503),
    openapi_extra=UPLOAD_BODY,
)
def add_documents(
    caller: Writer, name: DatasetName, uploads: UploadsDep, runtime: RuntimeDep
) -> AddResult:
    """Add documents (unchanged content is skipped; a known name with new content replaces).

    Send one or many files as multipart/form-data `files` parts (text formats, PDF, Word,
    e-mail, records, code, SQLite databases), with optional `node_set` and `document_date`
    fields; or JSON texts.
    A file above COGMILL_MAX_FILE_BYTES fails the whole request with 413 before anything is
    stored.
    """
    files = [(upload.name, upload.path) for upload in uploads.files]
    options = AddOptions(node_set=uploads.node_set, document_date=uploads.document_date)
    added = add_files(runtime, name, files, options, caller)
    return AddResult.from_report(added.report)


@router.get(
    "/{name}/data",
    response_model=list[DocumentPublic],
    responses=error_responses(400, 404, 422, 503),
)
def list_documents(
    name: DatasetName,
    runtime: RuntimeDep,
    caller: Reader,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> list[DocumentPublic]:
    """The dataset's documents with their processing status."""
    docs = datasets.documents(runtime, name, offset, limit, caller)
    return [DocumentPublic.from_node(doc) for doc in docs]


def _result(deleted: delete.Deleted) -> DeleteResult:
    return DeleteResult(
        dataset=deleted.dataset,
        document=deleted.document,
        nodes_removed=deleted.nodes_removed,
        edges_removed=deleted.edges_removed,
    )


@router.delete(
    "/{name}/data/{document_name}",
    response_model=DeleteResult,
    responses=error_responses(400, 404, 409, 422, 503),
)
def delete_document(
    name: DatasetName,
    document_name: Annotated[str, Path(description="The document's file name, as added")],
    runtime: RuntimeDep,
    caller: Writer,
) -> DeleteResult:
    """Delete a document: its chunks and whatever only it supported (graph, vectors, lexical
    index); shared entities and edges only lose its support."""
    return _result(delete.delete_document(runtime, name, document_name, caller))


@router.delete(
    "/{name}",
    response_model=DeleteResult,
    responses=error_responses(400, 404, 409, 422, 503),
)
def delete_dataset(name: DatasetName, runtime: RuntimeDep, caller: Writer) -> DeleteResult:
    """Delete a whole dataset: every node, edge, vector, index entry and stored file."""
    return _result(delete.delete_dataset(runtime, name, caller))
