"""`GET /metrics`: the deployment's metrics in the Prometheus text format."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from fastapi.concurrency import run_in_threadpool
from prometheus_client import CONTENT_TYPE_LATEST

from api.http.deps import RuntimeDep, get_caller
from api.http.schemas import error_responses
from api.services.metrics import scrape
from core.access import AccessDeniedError, Role
from workers.celery_app import app as celery_app

router = APIRouter(tags=["health"])


def metrics_access(request: Request, runtime: RuntimeDep) -> None:
    """The metrics token (COGMILL_METRICS_TOKEN) as a bearer, or an admin key; anyone while
    auth is off (the local default tenant, as for every other route)."""
    token = runtime.settings.metrics_token
    scheme, _, sent = request.headers.get("authorization", "").partition(" ")
    if token and scheme.lower() == "bearer" and hmac.compare_digest(sent.strip(), token):
        return
    caller = get_caller(request, runtime)
    if not caller.role.allows(Role.ADMIN):
        message = "metrics take an admin key or the COGMILL_METRICS_TOKEN bearer"
        raise AccessDeniedError(message)


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {"description": "Prometheus text format", "content": {"text/plain": {}}},
        **error_responses(401, 403, 503),
    },
)
async def metrics(runtime: RuntimeDep, _: Annotated[None, Depends(metrics_access)]) -> Response:
    """Jobs by state, documents, batches, step and search durations, LLM calls, tokens, cost,
    retries and 429s, cache hits, queue depths (see docs/operations.md)."""
    body = await run_in_threadpool(scrape, runtime, celery_app)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
