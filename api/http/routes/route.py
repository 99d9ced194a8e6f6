"""The query router over HTTP: which search type a question would get (`cogmill route --json`)."""

from __future__ import annotations

from fastapi import APIRouter

from api.http.schemas import RouteRequest, error_responses
from api.services import search as service
from retrieval.models import Route

router = APIRouter(prefix="/api/v1", tags=["search"])


@router.post("/route", response_model=Route, responses=error_responses(422))
def route(body: RouteRequest) -> Route:
    """The rule-based router's search type, confidence and runner-up (no LLM, no stores)."""
    return service.route(body.query)
