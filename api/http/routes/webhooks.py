"""Webhooks: the caller's tenant's subscriptions, and a job's delivery log."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path
from pydantic import BaseModel, Field

from api.http.deps import Reader, RuntimeDep, Writer, owned_job_id
from api.http.schemas import error_responses
from api.services import webhooks
from api.services.webhooks import Attempt
from workers.webhooks.subscriptions import Subscription

router = APIRouter(prefix="/api/v1", tags=["webhooks"])
JobId = Annotated[str, Depends(owned_job_id)]


class WebhookCreate(BaseModel):
    url: str = Field(max_length=2048, description="http(s) URL with a public address")
    events: list[str] | None = Field(
        default=None, description="Finished statuses to send (default: all of them)"
    )


class WebhookPublic(BaseModel):
    id: str
    url: str
    events: list[str]
    created: float


class WebhookCreated(WebhookPublic):
    secret: str = Field(description="Signs the deliveries (X-Cogmill-Signature); shown only here")


def _public(sub: Subscription) -> WebhookPublic:
    return WebhookPublic(id=sub.id, url=sub.url, events=sub.events, created=sub.created)


@router.post(
    "/webhooks",
    status_code=201,
    response_model=WebhookCreated,
    responses=error_responses(422, 503),
)
def add_webhook(body: WebhookCreate, runtime: RuntimeDep, caller: Writer) -> WebhookCreated:
    """Subscribe to the caller's jobs ending (a 422 for a URL that is not public http(s))."""
    sub = webhooks.add(runtime, body.url, body.events, tenant=caller.tenant)
    return WebhookCreated(**_public(sub).model_dump(), secret=sub.secret)


@router.get("/webhooks", response_model=list[WebhookPublic], responses=error_responses(503))
def list_webhooks(runtime: RuntimeDep, caller: Reader) -> list[WebhookPublic]:
    """The caller's tenant's webhook subscriptions (without their secrets)."""
    return [_public(sub) for sub in webhooks.list_subscriptions(runtime, tenant=caller.tenant)]


@router.delete(
    "/webhooks/{webhook_id}",
    response_model=WebhookPublic,
    responses=error_responses(404, 422, 503),
)
def remove_webhook(
    webhook_id: Annotated[str, Path(max_length=64)], runtime: RuntimeDep, caller: Writer
) -> WebhookPublic:
    """Stop sending to a subscription (deliveries already scheduled find it gone)."""
    return _public(webhooks.remove(runtime, webhook_id, tenant=caller.tenant))


@router.get(
    "/jobs/{job_id}/webhooks",
    response_model=list[Attempt],
    responses=error_responses(404, 422, 503),
)
def job_webhooks(job_id: JobId, runtime: RuntimeDep, caller: Reader) -> list[Attempt]:
    """Every delivery attempt of the job's webhooks, oldest first."""
    return webhooks.deliveries(runtime, job_id)
