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
from core.access import AccessDeniedError, Caller, Role
from workers.celery_app import app as celery_app

router = APIRouter(tags=["health"])


def metrics_access(request: Request, runtime: RuntimeDep) -> Caller | None:
    """Whose metrics the request may read: None for the whole deployment (the metrics token
    COGMILL_METRICS_TOKEN as a bearer, an operator key, anyone while auth is off), a tenant's
    admin's caller for that tenant's figures only; 403 for other roles."""
    token = runtime.settings.metrics_token
    scheme, _, sent = request.headers.get("authorization", "").partition(" ")
    if token and scheme.lower() == "bearer" and hmac.compare_digest(sent.strip(), token):
        return None
    caller = get_caller(request, runtime)
    if caller.role.allows(Role.OPERATOR):
        return None
    if not caller.role.allows(Role.ADMIN):
        message = "metrics take an admin or operator key, or the COGMILL_METRICS_TOKEN bearer"
        raise AccessDeniedError(message)
    return caller


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {"description": "Prometheus text format", "content": {"text/plain": {}}},
        **error_responses(401, 403, 503),
    },
)
async def metrics(
    runtime: RuntimeDep, tenant: Annotated[Caller | None, Depends(metrics_access)]
) -> Response:
    """Jobs by state, documents, batches, step and search durations, LLM calls, tokens, cost,
    retries and 429s, cache hits, queue depths (see docs/operations.md); a tenant's admin key
    gets its tenant's jobs, documents, batches and model usage only."""
    body = await run_in_threadpool(scrape, runtime, celery_app, tenant)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
