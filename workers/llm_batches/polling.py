"""The Batch API's poller: once per `llm_batch_poll_seconds` one process asks about the
pending submissions; a finished one's answers and usage are stored and its batch re-published.
"""

from __future__ import annotations

import logging
import threading
import time

from celery.signals import worker_ready, worker_shutdown

from core.llm.batches import Answer, BatchAPI, BatchAPIError
from core.llm.cache import LLMCache
from core.llm.usage import Meter
from core.ports import StoreError
from runtime import Runtime, current_runtime
from workers.llm_batches.records import (
    CLAIM_METADATA,
    PENDING,
    Submission,
    batch_api,
    close_submission,
    load,
    record_key,
    record_submitted,
    tracker,
)
from workers.sweeper import republish
from workers.usage import add_usage, job_budget

log = logging.getLogger("cogmill.llm_batches")
LEASE = "llm-batches:lease:"


def poll(runtime: Runtime, api: BatchAPI | None = None) -> int:
    """Ask about every pending submission once; returns how many step-batches were answered
    (or given up) and re-published."""
    members = runtime.state.add_members({PENDING: []})[PENDING]
    if not members:
        return 0
    own = api is None
    api = api or batch_api(runtime)
    resumed = 0
    try:
        for member in sorted(members):
            job_id, batch, step = member.rsplit("|", 2)
            record = load(runtime, job_id, int(batch), step)
            if record is None or record.state == "done":
                runtime.state.remove_member(PENDING, member)
                continue
            try:
                resumed += _poll_one(runtime, api, record)
            except BatchAPIError as err:
                log.warning("llm_batch_poll_failed job=%s batch=%s: %s", job_id, batch, err)
    finally:
        if own:
            api.close()
    return resumed


def _poll_one(runtime: Runtime, api: BatchAPI, record: Submission) -> int:
    if tracker(runtime).cancelled(record.job):
        if record.openai_batch:  # stop paying for it; its step ends the batch at once
            api.cancel(record.openai_batch)
        return _settle(runtime, record, "cancelled")
    if not record.openai_batch:
        found = api.find(CLAIM_METADATA, record.claim, since=record.claimed_at - 600)
        if found is None:
            if time.time() - record.claimed_at < runtime.settings.llm_batch_claim_grace_seconds:
                return 0
            return _settle(runtime, record, "lost")  # never created: the step runs as usual
        record_submitted(runtime, record, found, recovered=True)
    batch = api.state(record.openai_batch)
    if not batch.finished:
        return 0
    return _settle(runtime, record, batch.status, api.answers(batch))


def _settle(
    runtime: Runtime, record: Submission, outcome: str, answers: list[Answer] | None = None
) -> int:
    """Store a finished batch's answers and usage (once), then re-publish its step."""
    state, jobs, answers = runtime.state, tracker(runtime), answers or []
    answered = sum(1 for a in answers if a.content is not None)
    if state.incr(record_key(record.job, record.batch, record.step) + ":settled") == 1:
        cache = LLMCache(state, ttl=runtime.settings.llm_cache_ttl_seconds)
        meter = Meter()
        for found in answers:
            if found.content is not None:
                cache.put(found.custom_id, found.content)
            if found.usage:
                _count(meter, found)
        add_usage(state, record.job, record.step, meter)
        llm = meter.totals()["llm"]
        if (budget := job_budget(state, record.job)) is not None:  # the estimate, settled
            prompt, completion = record.reserved
            budget.settle(
                llm["prompt_tokens"] - prompt,
                llm["completion_tokens"] - completion,
                llm["cached_tokens"],
            )
        for name, value in meter.totals()["llm"].items():
            if value:
                state.incr(f"job:{record.job}:usage:batch_api:llm:{name}", value)
    close_submission(runtime, record, outcome, answered)
    try:
        republish(jobs, record.job, record.batch, "llm_batch_answered", step=record.step)
    except LookupError as err:  # the job's inputs expired or were deleted: nothing to run
        log.warning("llm_batch_orphaned job=%s batch=%s: %s", record.job, record.batch, err)
        return 0
    jobs.touch(record.job)
    return 1


def _count(meter: Meter, found: Answer) -> None:
    details = found.usage.get("prompt_tokens_details") or {}
    meter.add(
        "llm",
        calls=1,
        prompt_tokens=int(found.usage.get("prompt_tokens") or 0),
        completion_tokens=int(found.usage.get("completion_tokens") or 0),
        cached_tokens=int(details.get("cached_tokens") or 0),
    )


class Poller:
    """A daemon thread that polls the pending batches every `interval` seconds, one process
    per interval (a lease in the state store, like the sweeper's)."""

    def __init__(self, interval: float, runtime: Runtime | None = None) -> None:
        self.interval, self.runtime = interval, runtime  # None: the process's current one
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cogmill-llm-batches", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                runtime = self.runtime or current_runtime()
                period = int(time.time() // self.interval)
                if runtime.state.incr(f"{LEASE}{period}") == 1:
                    runtime.state.delete(f"{LEASE}{period - 2}")  # keeps two at most
                    poll(runtime)
            except (StoreError, BatchAPIError, OSError) as err:
                log.warning("llm batch poll skipped: %s", err)
            except Exception:  # noqa: BLE001 - the poller must outlive one bad poll
                log.exception("llm batch poll failed")


_poller: Poller | None = None


def start_poller(runtime: Runtime, *, own: bool = False) -> Poller:
    """Start a poller (the embedded worker and every worker process run one); `own`: on
    `runtime` alone, not on whichever runtime is current when it polls."""
    poller = Poller(runtime.settings.llm_batch_poll_seconds, runtime if own else None)
    poller.start()
    return poller


@worker_ready.connect
def _start_poller(sender: object = None, **_: object) -> None:
    global _poller
    app = getattr(sender, "app", None)
    if app is None or str(app.conf.broker_url).startswith("memory://"):
        return  # embedded mode: workers/embedded.py starts and stops its own
    _poller = start_poller(current_runtime())


@worker_shutdown.connect
def _stop_poller(**_: object) -> None:
    if _poller is not None:
        _poller.stop()
