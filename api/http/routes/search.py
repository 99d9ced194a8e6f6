"""Synchronous search over datasets (the same answer as `cogmill search --json`)."""

from __future__ import annotations

from fastapi import APIRouter

from api.http.deps import Reader, RuntimeDep, check_bounds
from api.http.schemas import SearchRequest, error_responses
from api.services import search as service
from retrieval.models import SearchResponse

router = APIRouter(prefix="/api/v1", tags=["search"])


@router.post(
    "/search",
    response_model=SearchResponse,
    # Every field, null when unset, exactly as `cogmill search --json` prints them.
    responses=error_responses(400, 404, 422, 503),
)
def search(body: SearchRequest, runtime: RuntimeDep, caller: Reader) -> SearchResponse:
    """Search datasets; results carry the chunks and documents they came from."""
    check_bounds(runtime, body.query, body.datasets)
    searched = service.search(
        runtime,
        body.query,
        body.datasets,
        body.search_type,
        body.top_k,
        body.response_model,
        caller=caller,
        as_of=body.as_of,
        known_at=body.known_at,
    )
    return searched.response
