"""A finished job announced to its subscriptions and each delivery attempted, logged and, when
it failed, retried with backoff (the Celery task `cogmill.deliver_webhook`).

This module reads the job record by its key instead of through `workers.jobs.JobTracker`:
the tracker calls `announce` when a job finishes, so importing it here would be a cycle.
"""

from __future__ import annotations

import json
import logging
import random
import time

from celery import Task
from celery.signals import worker_init

from core.access import Caller, Role
from core.llm.usage import priced
from core.models.jobs import Job, JobStatus
from core.ports import StateStore
from core.settings import Settings
from runtime import current_runtime
from workers.celery_app import app, task_name
from workers.usage import job_usage
from workers.webhooks.post import (
    SIGNATURE_HEADER,
    Reply,
    WebhookError,
    check_url,
    post,
    signature,
)
from workers.webhooks.subscriptions import Subscription, Subscriptions, job_tenant

log = logging.getLogger("cogmill.webhooks")

# Embedded mode: the retries its in-process broker holds, kept until they run so that the next
# cogmill process starting worker threads resumes them (Redis holds them in distributed mode).
PENDING_PREFIX = "webhooks:pending:"
TASK = task_name("deliver_webhook")  # routed in workers/celery_app.py


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
            kwargs = {
                "job_id": job.id,
                "subscription": sub.id,
                "event": job.status.value,
                "attempt": 1,
                "first_at": first,
                "occurrence": name,
            }
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
    entry: dict[str, object] = {
        "subscription": subscription,
        "url": sub.url if sub else None,
        "event": event,
        "attempt": attempt,
        "at": time.time(),
    }
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
    next_kwargs = {
        "job_id": job_id,
        "subscription": subscription,
        "event": event,
        "attempt": attempt + 1,
        "first_at": first_at,
        "occurrence": occurrence,
    }
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
    log.info(
        "webhook_attempt job=%s subscription=%s attempt=%s outcome=%s status=%s",
        job_id,
        entry["subscription"],
        entry["attempt"],
        entry["outcome"],
        entry.get("status"),
    )


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
