"""An entity's facts over time with their sources (api/services/facts.py)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from api.http.deps import DatasetName, Reader, RuntimeDep
from api.http.schemas import error_responses
from api.services import facts as service
from retrieval.fact_timeline import MAX_LIMIT, MAX_NAME, FactTimeline

router = APIRouter(prefix="/api/v1/datasets", tags=["search"])
TIME = "2019, March 2019, 2019-03-15"


@router.get(
    "/{name}/facts",
    response_model=FactTimeline,
    responses=error_responses(400, 404, 422, 503),
)
def facts(
    name: DatasetName,
    runtime: RuntimeDep,
    caller: Reader,
    entity: Annotated[str, Query(min_length=1, max_length=MAX_NAME, description="Its name")],
    relation: Annotated[
        str | None,
        Query(max_length=MAX_NAME, description="Only relations with these words (e.g. ceo)"),
    ] = None,
    as_of: Annotated[
        str | None, Query(max_length=64, description=f"Mark the facts that held then ({TIME})")
    ] = None,
    known_at: Annotated[
        str | None,
        Query(max_length=64, description="Only what was recorded by then (2026-12-07T10:00Z)"),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="At most this many facts")] = 100,
) -> FactTimeline:
    """The entity's facts in time order: when each held, when cogmill learnt it and that it
    ended, what superseded it, and the passages that said so."""
    return service.facts(
        runtime,
        name,
        entity,
        relation=relation,
        as_of=as_of,
        known_at=known_at,
        limit=limit,
        caller=caller,
    )
