"""Graph export of one dataset, streamed as JSON Lines or GraphML (api/services/export.py)."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from api.http.deps import DatasetName, Reader, RuntimeDep
from api.http.schemas import error_responses
from api.services.export import EXPORT_FORMATS
from api.services.export import export_graph as run_export

router = APIRouter(prefix="/api/v1/datasets", tags=["datasets"])

EXPORT_RESPONSES = {
    200: {
        "description": "JSON Lines (one node or edge object per line) or a GraphML document",
        "content": {media: {"schema": {"type": "string"}} for media, _ in EXPORT_FORMATS.values()},
    },
    **error_responses(400, 404, 422, 503),
}


@router.get("/{name}/graph", response_class=StreamingResponse, responses=EXPORT_RESPONSES)
def export_graph(
    name: DatasetName,
    runtime: RuntimeDep,
    caller: Reader,
    format: Annotated[
        Literal["jsonl", "graphml"],
        Query(description="jsonl: one {kind: node|edge, ...} object per line; graphml: GraphML"),
    ] = "jsonl",
    offset: Annotated[int, Query(ge=0, description="Skip this many nodes")] = 0,
    limit: Annotated[
        int | None, Query(ge=1, description="At most this many nodes (default: all)")
    ] = None,
) -> StreamingResponse:
    """Export the dataset's nodes and edges, streamed page by page.

    Nodes come ordered by type name, then id; `offset`/`limit` select a window of them. Each
    edge comes once, after the page holding its source node, so a window holds the edges
    leaving its nodes (their targets may lie outside it).
    """
    lines = run_export(runtime, name, format, offset=offset, limit=limit, caller=caller)
    # Read the first page now: a store failure is then a 503, not a cut-off 200 body.
    first = next(lines, "")
    media, extension = EXPORT_FORMATS[format]
    headers = {"Content-Disposition": f'attachment; filename="{name}.{extension}"'}
    body: Iterator[str] = chain([first], lines)
    return StreamingResponse(body, media_type=media, headers=headers)
