"""Webhook subscriptions: where to POST a tenant's finished jobs, kept in the state store and
indexed by tenant; a job's own subscription (`cognify --webhook`) is not listed.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import asdict, dataclass, field

from core.errors import NotFound
from core.models.jobs import Job, JobStatus
from core.ports import StateStore
from core.settings import Settings
from workers.webhooks.post import WebhookError, check_url

SUB_PREFIX = "webhooks:sub:"


def finished_statuses() -> list[str]:
    """The statuses a job can finish in (what a subscription may ask for)."""
    return [status.value for status in JobStatus if status.finished]


def job_tenant(job: Job) -> str | None:
    """The tenant owning a job: its dataset's stored name is `tenant:name` (bare: local)."""
    tenant, sep, _ = job.dataset.partition(":")
    return tenant if sep else None


class WebhookNotFoundError(NotFound):
    """No webhook of the caller's with that id."""

    code = "webhook_not_found"

    def __init__(self, webhook_id: str) -> None:
        super().__init__(f"no webhook {webhook_id!r}")
        self.webhook_id = webhook_id


@dataclass(frozen=True)
class Subscription:
    """Where to POST finished jobs of a tenant, and the secret their signature is made with."""

    id: str
    tenant: str | None
    url: str
    events: list[str]
    secret: str
    created: float = field(default_factory=time.time)
    job_only: bool = False  # made by `cognify --webhook` for one job; not listed

    def public(self) -> dict[str, object]:
        """The subscription without its secret (for lists)."""
        return {k: v for k, v in asdict(self).items() if k != "secret"}


def _tenant_index(tenant: str | None) -> str:
    return f"webhooks:tenant:{tenant or ''}"


class Subscriptions:
    """Webhook subscriptions in the state store, indexed by tenant."""

    def __init__(self, state: StateStore) -> None:
        self.state = state

    def add(
        self,
        tenant: str | None,
        url: str,
        events: list[str] | None,
        *,
        settings: Settings,
        job_only: bool = False,
    ) -> Subscription:
        """A new subscription (its secret generated); WebhookError for a URL that may not be
        used or an unknown event."""
        allowed = finished_statuses()
        chosen = list(dict.fromkeys(events or allowed))
        unknown = [event for event in chosen if event not in allowed]
        if unknown:
            raise WebhookError(f"unknown event(s) {', '.join(unknown)}; use {', '.join(allowed)}")
        check_url(url, allow_private=settings.webhook_allow_private)
        sub = Subscription(
            id="wh_" + secrets.token_hex(8),
            tenant=tenant,
            url=url,
            events=chosen,
            secret="whsec_" + secrets.token_urlsafe(32),
            job_only=job_only,
        )
        # A job's own subscription lives as long as its deliveries may be retried.
        ttl = settings.webhook_retry_seconds + 86_400 if job_only else None
        self.state.put(SUB_PREFIX + sub.id, json.dumps(asdict(sub)), ttl=ttl)
        if not job_only:
            self.state.add_member(_tenant_index(tenant), sub.id)
        return sub

    def get(self, sub_id: str) -> Subscription | None:
        raw = self.state.get(SUB_PREFIX + sub_id)
        return Subscription(**json.loads(raw)) if raw else None

    def of_tenant(self, tenant: str | None) -> list[Subscription]:
        """The tenant's standing subscriptions, oldest first."""
        index = _tenant_index(tenant)
        ids = sorted(self.state.add_members({index: []})[index])
        found = [
            Subscription(**json.loads(raw))
            for raw in self.state.get_many([SUB_PREFIX + i for i in ids])
            if raw
        ]
        return sorted(found, key=lambda sub: sub.created)

    def remove(self, tenant: str | None, sub_id: str) -> Subscription:
        """Remove one of the tenant's subscriptions; WebhookNotFoundError when it has none by
        that id."""
        sub = self.get(sub_id)
        if sub is None or sub.tenant != tenant or sub.job_only:
            raise WebhookNotFoundError(sub_id)
        self.state.delete(SUB_PREFIX + sub_id)
        self.state.remove_member(_tenant_index(tenant), sub_id)
        return sub

    def for_job(self, job: Job) -> list[Subscription]:
        """The subscriptions a job's finished status goes to."""
        subs = [s for s in self.of_tenant(job_tenant(job)) if job.status.value in s.events]
        own = self.get(str(job.options.get("webhook", ""))) if job.options.get("webhook") else None
        if own is not None and own.tenant == job_tenant(job):
            subs.append(own)
        return subs
