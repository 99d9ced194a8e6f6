"""The MCP resources: the caller's datasets, and each dataset's documents with their status.

Read as JSON in the HTTP API's schemas (the same lists as GET /api/v1/datasets and
GET /api/v1/datasets/{name}/data). A failure is a resource error with the tools' safe message.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError

from api.http.deps import reader
from api.http.schemas import DatasetPublic, DocumentPublic
from api.mcp.errors import tool_error
from api.mcp.face import current
from api.services import datasets
from api.services.datasets import DatasetNotFoundError

DATASETS = "cogmill://datasets"
DOCUMENTS = "cogmill://datasets/{name}/documents"
JSON = "application/json"


def _read(what: str, read: Callable[[], list[Any]]) -> str:
    try:
        return json.dumps([item.model_dump(mode="json") for item in read()])
    except DatasetNotFoundError as err:
        raise ResourceNotFoundError(str(err)) from None
    except Exception as exc:  # the tools' mapping: safe messages, bugs logged
        error: ToolError = tool_error(what, exc)
        raise ResourceError(str(error)) from None


def list_datasets() -> str:
    """Your datasets with their document counts (JSON: [{name, documents}])."""

    def read() -> list[DatasetPublic]:
        face = current()
        found = datasets.list_datasets(face.runtime, reader(face.caller))
        return [DatasetPublic(name=d.name, documents=d.documents) for d in found]

    return _read(DATASETS, read)


def dataset_documents(name: str) -> str:
    """A dataset's documents (the first 1000) with their processing status: added (not
    cognified yet), processed or failed (JSON: [{id, name, status, size, error...}])."""

    def read() -> list[DocumentPublic]:
        face = current()
        docs = datasets.documents(face.runtime, name, 0, 1000, reader(face.caller))
        return [DocumentPublic.from_node(doc) for doc in docs]

    return _read(DOCUMENTS, read)


def register(server: MCPServer[Any]) -> None:
    """Add the resources to `server`."""
    entries: list[tuple[str, str, Callable[..., str]]] = [
        (DATASETS, "datasets", list_datasets),
        (DOCUMENTS, "dataset_documents", dataset_documents),
    ]
    for uri, name, fn in entries:
        description = inspect.cleandoc(fn.__doc__ or "")
        server.resource(uri, name=name, description=description, mime_type=JSON)(fn)
