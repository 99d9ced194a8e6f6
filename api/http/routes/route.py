"""The query router over HTTP: which search type a question would get (`cogmill route --json`)."""

from __future__ import annotations

from fastapi import APIRouter

from api.http.deps import RuntimeDep, check_bounds
from api.http.schemas import RouteRequest, error_responses
from api.services import search as service
from retrieval.models import Route

router = APIRouter(prefix="/api/v1", tags=["search"])


@router.post("/route", response_model=Route, responses=error_responses(422))
def route(body: RouteRequest, runtime: RuntimeDep) -> Route:
    """The rule-based router's search type, confidence and runner-up (no LLM, no stores)."""
    check_bounds(runtime, body.query, [])
    return service.route(body.query)
