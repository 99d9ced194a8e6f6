"""Webhooks: a tenant's subscriptions (add, list, remove), a job's own webhook (`cognify
--webhook`), and a job's delivery log. The delivery itself is workers/webhooks/'s."""

from __future__ import annotations

from dataclasses import dataclass

from api.services.jobs import checked_id, tracker
from api.services.tenants import TenantError, Tenants, check_tenant_name
from core.access import LOCAL, Caller
from runtime import Runtime
from workers.webhooks.deliveries import delivery_log
from workers.webhooks.subscriptions import Subscription, Subscriptions


@dataclass(frozen=True)
class Attempt:
    """One delivery attempt of a job's webhook, as the delivery log holds it."""

    subscription: str
    url: str | None
    event: str
    attempt: int
    at: float
    outcome: str  # delivered, retrying, gave_up or dropped
    status: int | None = None
    error: str = ""
    ms: float | None = None
    retry_in: float | None = None


def _tenant(rt: Runtime, tenant: str | None) -> str | None:
    """A named tenant that exists (None: the local default tenant); TenantError otherwise."""
    if tenant is not None and not Tenants(rt.state).exists(check_tenant_name(tenant)):
        raise TenantError(f"tenant {tenant!r} does not exist; `cogmill tenants list` shows them")
    return tenant


def add(
    rt: Runtime, url: str, events: list[str] | None = None, *, tenant: str | None = None
) -> Subscription:
    """Subscribe `tenant` (None: the local default tenant) to its jobs' finished statuses
    (`events`; default all). Returns the subscription with its secret, shown this once.
    Raises WebhookError (an InvalidInput) for a URL that may not be used, TenantError."""
    return Subscriptions(rt.state).add(_tenant(rt, tenant), url, events, settings=rt.settings)


def list_subscriptions(rt: Runtime, *, tenant: str | None = None) -> list[Subscription]:
    """The tenant's subscriptions, oldest first (secrets included: callers show `public()`)."""
    return Subscriptions(rt.state).of_tenant(_tenant(rt, tenant))


def remove(rt: Runtime, sub_id: str, *, tenant: str | None = None) -> Subscription:
    """Remove a subscription of the tenant; LookupError when it has none with that id."""
    return Subscriptions(rt.state).remove(_tenant(rt, tenant), sub_id)


def for_job(rt: Runtime, url: str, caller: Caller = LOCAL) -> Subscription:
    """A webhook for one job of the caller, every finished status: pass its id to
    `cognify(..., webhook=...)` and show its secret once. Raises WebhookError."""
    return Subscriptions(rt.state).add(
        caller.tenant, url, None, settings=rt.settings, job_only=True
    )


def deliveries(rt: Runtime, job_id: str) -> list[Attempt]:
    """Every delivery attempt of the job's webhooks, oldest first. Raises JobNotFoundError."""
    job = tracker(rt).get(checked_id(job_id), live=False)
    return [Attempt(**entry) for entry in delivery_log(rt.state, job.id)]  # type: ignore[arg-type]
