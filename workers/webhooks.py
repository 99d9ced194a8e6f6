"""Webhooks (issue 16): subscriptions, the announcement of a finished job, signed deliveries.

A subscription belongs to a tenant (None: the local default tenant) and names the finished
statuses it wants; `cognify --webhook URL` makes one for a single job (all its finished
statuses) with a secret shown once. When a job is stored finished (`JobTracker.save`) each
matching subscription gets one delivery, announced once per status (a marker key, so a
finalise repeated by a redelivered task announces nothing twice). A delivery is the Celery
task `cogmill.deliver_webhook` on the default queue; in embedded mode its first attempt runs
inline in the thread that finished the job (the one-shot CLI process would otherwise stop its
worker threads before the message is taken). A failed attempt is retried with exponential
backoff for `webhook_retry_seconds`; each attempt is appended to the job's delivery log.
Embedded mode's retries live in its in-process broker, so each is also kept in the state store
until it runs, and the next process starting worker threads schedules those left over.

This module reads the job record by its key instead of through `workers.jobs.JobTracker`:
the tracker calls `announce` when a job finishes, so importing it here would be a cycle.
"""

from __future__ import annotations

import json
import logging
import random
import secrets
import time
from dataclasses import asdict, dataclass, field

from celery import Task
from celery.signals import worker_init

from core.access import Caller, Role
from core.errors import NotFound
from core.llm.usage import priced
from core.models.jobs import Job, JobStatus
from core.ports import StateStore
from core.settings import Settings
from runtime import current_runtime
from workers.celery_app import app, task_name
from workers.usage import job_usage
from workers.webhook_post import (
    SIGNATURE_HEADER,
    Reply,
    WebhookError,
    check_url,
    post,
    signature,
)

log = logging.getLogger("cogmill.webhooks")

SUB_PREFIX = "webhooks:sub:"
# Embedded mode: the retries its in-process broker holds, kept until they run so that the next
# cogmill process starting worker threads resumes them (Redis holds them in distributed mode).
PENDING_PREFIX = "webhooks:pending:"
TASK = task_name("deliver_webhook")  # routed in workers/celery_app.py


class WebhookNotFoundError(NotFound):
    """No webhook of the caller's with that id."""

    code = "webhook_not_found"

    def __init__(self, webhook_id: str) -> None:
        super().__init__(f"no webhook {webhook_id!r}")
        self.webhook_id = webhook_id


def finished_statuses() -> list[str]:
    """The statuses a job can finish in (what a subscription may ask for)."""
    return [status.value for status in JobStatus if status.finished]


def job_tenant(job: Job) -> str | None:
    """The tenant owning a job: its dataset's stored name is `tenant:name` (bare: local)."""
    tenant, sep, _ = job.dataset.partition(":")
    return tenant if sep else None


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
        found = [Subscription(**json.loads(raw))
                 for raw in self.state.get_many([SUB_PREFIX + i for i in ids]) if raw]  # fmt: skip
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


def _log_key(job_id: str) -> str:
    return f"job:{job_id}:webhooks"


def _marker(job_id: str, *parts: str) -> str:
    return ":".join(("job", job_id, "webhook", *parts))


def delivery_log(state: StateStore, job_id: str) -> list[dict[str, object]]:
    """Every delivery attempt of a job's webhooks, oldest first."""
    return [json.loads(raw) for _, raw in state.read_events(_log_key(job_id), limit=100_000)]


def occurrence(job: Job) -> str:
    """What one announcement of a finished job is called: its status, and for a budget pause
    (a job resumed may pause again) the time of that pause too."""
    if job.status is JobStatus.PAUSED_BUDGET and job.finished_at is not None:
        return f"{job.status.value}-{round(job.finished_at.timestamp() * 1000)}"
    return job.status.value


def announce(state: StateStore, job: Job) -> int:
    """Start the deliveries of a job just stored finished, once per status (and per pause);
    returns how many."""
    subs, name = Subscriptions(state).for_job(job), occurrence(job)
    if not subs or state.incr(_marker(job.id, "announced", name)) != 1:
        return 0
    first, settings = time.time(), current_runtime().settings
    for sub in subs:
        if settings.embedded_broker:
            deliver(state, settings, job.id, sub.id, job.status.value, 1, first, name)
        else:
            kwargs = {"job_id": job.id, "subscription": sub.id, "event": job.status.value,
                      "attempt": 1, "first_at": first, "occurrence": name}  # fmt: skip
            deliver_webhook.apply_async(kwargs=kwargs)
    return len(subs)


def job_body(state: StateStore, settings: Settings, job_id: str) -> bytes | None:
    """The job record as `GET /api/v1/jobs/{id}` returns it to the job's tenant (None: gone)."""
    raw = state.get(f"job:{job_id}")  # JobTracker.save's key (see the module docstring)
    if raw is None:
        return None
    stored = Job.model_validate_json(raw)
    # As the job's tenant sees it: dataset, message and errors without the stored form.
    job = Caller(job_tenant(stored), Role.READER).unscoped_job(stored)
    usage = priced(job_usage(state, job_id), settings)
    # As api/services/jobs.show builds its JobReport (which this layer cannot import); the
    # webhook tests compare the two, field by field.
    llm = usage["llm"]
    spent = {"usd": llm.cost_usd, "tokens": llm.prompt_tokens + llm.completion_tokens}
    record = {**job.model_dump(mode="json"), **{k: v.model_dump() for k, v in usage.items()}}
    return json.dumps({**record, "spent": spent}).encode()


def backoff(settings: Settings, attempt: int) -> float:
    """Seconds before attempt `attempt + 1`: doubling, capped, with 10% jitter. The cap stays
    under the broker's visibility timeout, past which Redis would hand a waiting retry to a
    second worker."""
    cap = min(settings.webhook_backoff_max_seconds, settings.visibility_timeout_seconds / 2)
    delay = min(settings.webhook_backoff_seconds * 2 ** (attempt - 1), cap)
    return delay * random.uniform(1.0, 1.1)


def deliver(
    state: StateStore,
    settings: Settings,
    job_id: str,
    subscription: str,
    event: str,
    attempt: int,
    first_at: float,
    occurrence: str = "",
) -> bool:
    """Make one attempt (unless already made or the webhook was delivered) and schedule the
    next one when it failed; True when delivered. `occurrence` names the announcement (see
    `occurrence`; "" = `event`)."""
    occurrence = occurrence or event
    done = _marker(job_id, subscription, occurrence, "delivered")
    tried = _marker(job_id, subscription, occurrence, str(attempt))
    if state.get(done) is not None or state.get(tried) is not None:
        return state.get(done) is not None  # a redelivered message: this attempt was made
    sub = Subscriptions(state).get(subscription)
    body = job_body(state, settings, job_id)
    entry: dict[str, object] = {"subscription": subscription, "url": sub.url if sub else None,
                                "event": event, "attempt": attempt, "at": time.time()}  # fmt: skip
    pending = PENDING_PREFIX + f"{job_id}:{subscription}:{occurrence}"
    if sub is None or body is None:
        gone = "the webhook or the job no longer exists"
        _record(state, job_id, tried, {**entry, "outcome": "dropped", "error": gone})
        state.delete(pending)
        return False
    reply = _attempt(sub, body, event, attempt, f"{job_id}.{sub.id}.{occurrence}", settings)
    entry.update(status=reply.status, error=reply.error, ms=round(reply.ms, 1))
    if reply.delivered:
        state.put(done, "1")
        _record(state, job_id, tried, {**entry, "outcome": "delivered"})
        state.delete(pending)
        return True
    delay = backoff(settings, attempt)
    if time.time() + delay - first_at > settings.webhook_retry_seconds:
        _record(state, job_id, tried, {**entry, "outcome": "gave_up"})
        state.delete(pending)
        return False
    # Scheduled before the attempt is marked made: a crash in between repeats the attempt
    # (at least once; receivers dedupe on X-Cogmill-Delivery) instead of ending the retries.
    next_kwargs = {"job_id": job_id, "subscription": subscription, "event": event,
                   "attempt": attempt + 1, "first_at": first_at,
                   "occurrence": occurrence}  # fmt: skip
    if settings.embedded_broker:
        due = {**next_kwargs, "due": time.time() + delay}
        state.put(pending, json.dumps(due), ttl=settings.webhook_retry_seconds + 86_400)
    deliver_webhook.apply_async(kwargs=next_kwargs, countdown=delay)
    _record(state, job_id, tried, {**entry, "outcome": "retrying", "retry_in": round(delay, 1)})
    return False


def _attempt(
    sub: Subscription, body: bytes, event: str, attempt: int, delivery: str, settings: Settings
) -> Reply:
    try:  # checked again now: the name may resolve elsewhere than at registration
        target = check_url(sub.url, allow_private=settings.webhook_allow_private)
    except WebhookError as err:
        return Reply(None, str(err), 0.0)
    stamp = int(time.time())
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "cogmill-webhooks",
        SIGNATURE_HEADER: signature(sub.secret, stamp, body),
        "X-Cogmill-Event": f"job.{event}",
        "X-Cogmill-Delivery": delivery,
        "X-Cogmill-Attempt": str(attempt),
    }
    return post(target, body, headers, settings.webhook_timeout_seconds)


def _record(state: StateStore, job_id: str, tried: str, entry: dict[str, object]) -> None:
    state.append_event(_log_key(job_id), json.dumps(entry))
    state.put(tried, "1")
    log.info("webhook_attempt job=%s subscription=%s attempt=%s outcome=%s status=%s",
             job_id, entry["subscription"], entry["attempt"], entry["outcome"],
             entry.get("status"))  # fmt: skip


@app.task(name=TASK, bind=True, ignore_result=True)
def deliver_webhook(
    self: Task,
    job_id: str,
    subscription: str,
    event: str,
    attempt: int,
    first_at: float,
    occurrence: str = "",
) -> bool:
    """One attempt at POSTing a finished job to a webhook (the next is scheduled on failure)."""
    runtime = current_runtime()
    return deliver(
        runtime.state, runtime.settings, job_id, subscription, event, attempt, first_at, occurrence
    )


@worker_init.connect
def _resume_pending(sender: object = None, **_: object) -> None:
    """Embedded worker threads starting: schedule the retries an earlier process left pending
    (its in-process broker ended with it); each runs when it was due, at once if overdue."""
    conf = getattr(getattr(sender, "app", None), "conf", None)
    if conf is None or not str(conf.broker_url).startswith("memory://"):
        return  # distributed: the broker still holds the retries
    state = current_runtime().state
    for raw in state.get_many(state.keys(PENDING_PREFIX)):
        if raw is not None:
            kwargs = json.loads(raw)
            due = kwargs.pop("due")
            deliver_webhook.apply_async(kwargs=kwargs, countdown=max(0.0, due - time.time()))
