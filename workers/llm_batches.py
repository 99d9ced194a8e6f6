"""Batch API mode (`cognify --llm-mode batch`, COGMILL_LLM_MODE=batch): a batch's LLM steps
send their requests as one file through the OpenAI Batch API, and the chain waits parked.

A step on the LLM queue first runs with its uncached requests deferred (core/llm/deferral.py).
When the cache answered everything, that run is the step's run. Otherwise the deferred
requests are submitted as one JSONL file per step-batch (custom_id: the LLM cache key) and
the batch waits, its chain ended: no worker thread holds it, the sweeper leaves it alone
(`JobTracker.llm_waiting`) and the job stays running. Once per `llm_batch_poll_seconds` one
process (a lease in the state store) asks about the pending submissions; a finished one's
answers go into the LLM cache, its usage into the job's accounting, and the batch is
re-published from the waiting step in a new generation (as `jobs resume` does for a budget's
parked batch). That run is the normal one: cache hits for the answered requests, the normal
synchronous path (retries, outage pauses) for failed lines; an expired or failed batch sends
everything that way.

Crash safety: a submission is claimed with an atomic key per (job, batch, step, generation)
before anything is uploaded, and recorded (with the batch waiting) before the upload; the key
is the batch's metadata. A worker that died between creating the batch and recording its id
is recovered by listing the batches and matching that metadata, never by submitting again;
one that died before creating it is taken as never sent after `llm_batch_claim_grace_seconds`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Literal, TypeVar

from celery.signals import worker_ready, worker_shutdown
from pydantic import BaseModel

from core.llm import deferral
from core.llm.batches import Answer, BatchAPI, BatchAPIError, BatchState
from core.llm.cache import LLMCache
from core.llm.deferral import Deferred
from core.llm.usage import FIELDS, Meter, Spending, Usage, current_meter, metering
from core.models.jobs import Job
from core.ports import StoreError
from pipelines.base import LLM
from pipelines.definitions import get_step
from runtime import Runtime, current_runtime
from workers.delivery import Delivery
from workers.jobs import JobTracker
from workers.sweeper import republish
from workers.usage import add_usage, job_budget

log = logging.getLogger("cogmill.llm_batches")
T = TypeVar("T")
PENDING = "llm-batches:pending"  # "<job>|<batch>|<step>" of every submission not answered yet
LEASE = "llm-batches:lease:"
CLAIM_METADATA = "cogmill_claim"  # the metadata key that names a batch's claim


class Submission(BaseModel):
    """One step-batch's requests sent to the Batch API, as the state store keeps it."""

    job: str
    batch: int
    step: str
    gen: int
    claim: str  # the set-if-absent key claimed before uploading, in the batch's metadata
    requests: int
    claimed_at: float
    openai_batch: str = ""
    input_file: str = ""
    submitted_at: float | None = None
    state: Literal["claimed", "pending", "done"] = "claimed"
    outcome: str = ""  # the batch's final status ("lost": never created; "refused")
    answered: int = 0
    reserved: tuple[int, int] = (0, 0)  # prompt, completion tokens set aside in the budget

    @property
    def member(self) -> str:
        return f"{self.job}|{self.batch}|{self.step}"


def record_key(job_id: str, batch: int, step: str) -> str:
    return f"job:{job_id}:artifact:{batch}:{step}:llm-batch"


def batch_mode(job: Job, step: str) -> bool:
    """Whether the job's `step` goes through the Batch API (the job's option `llm_mode`)."""
    return job.options.get("llm_mode") == "batch" and get_step(step).queue == LLM


def through_batch_api(runtime: Runtime, job: Job, work: Delivery, run: Callable[[], T]) -> T | None:
    """The step's output, or None when its batch now waits for the Batch API (submitted, or
    already waiting). Outside batch mode, and once the step's batch was answered, `run()`."""
    if not batch_mode(job, work.step):
        return run()
    found = load(runtime, job.id, work.batch, work.step)
    if found is not None and found.state != "done":
        # Another delivery of a waiting step (a submitter that died before it marked the
        # batch waiting is completed here): the poller resumes it.
        runtime.state.add_member(PENDING, found.member)
        tracker(runtime).wait_llm(job.id, work.batch)
        return None
    if found is not None:  # answered (or never sent): the normal run, the cache answers
        output = run()
        if (meter := current_meter()) is not None:
            meter.add("llm", cache_hits=-found.answered)  # paid for as batch calls
        return output
    outer = current_meter()
    with deferral.collecting() as collector, metering(Meter(owners=_owners(outer))) as trial:
        output = run()
    deferred = collector.deferred()
    if not deferred:
        _merge(outer, trial)  # every request was a cache hit: that was the step's run
        return output
    if submit(runtime, job.id, work, deferred, outer.guard if outer else None):
        return None
    return run()  # the endpoint refused the batch: the normal path


def submit(
    runtime: Runtime,
    job_id: str,
    work: Delivery,
    requests: list[Deferred],
    budget: Spending | None = None,
) -> bool:
    """Claim, record and submit the requests of one step-batch; the batch waits from then on.
    False when the endpoint refused the batch (nothing was created: run the step as usual).
    Raises BudgetExceeded, claiming nothing, when the job's budget cannot cover them all."""
    state, jobs = runtime.state, tracker(runtime)
    claim = f"job:{job_id}:llm-batch:{work.batch}:{work.step}:{work.gen}:claim"
    if state.get(claim) is not None:
        return True  # this generation's submission is another delivery's
    reserved = _reserve(runtime, budget, requests)  # BudgetExceeded: the shell parks the batch
    if state.incr(claim) != 1:
        _release(budget, reserved)
        return True
    state.put(claim, "1", ttl=runtime.settings.artifact_ttl_seconds)
    record = Submission(job=job_id, batch=work.batch, step=work.step, gen=work.gen, claim=claim,
                        requests=len(requests), claimed_at=time.time(),
                        reserved=reserved)  # fmt: skip
    save(runtime, record)
    jobs.wait_llm(job_id, work.batch)
    state.add_member(PENDING, record.member)
    metadata = {CLAIM_METADATA: claim, "cogmill_job": job_id, "cogmill_step": work.step}
    api = batch_api(runtime)
    try:
        created = api.submit(requests, metadata)
    except BatchAPIError as err:
        if not err.refused:  # maybe created: the poller finds it, or gives up after a grace
            log.warning("llm_batch_submit_unknown job=%s batch=%s: %s", job_id, work.batch, err)
            return True
        log.warning("llm_batch_refused job=%s batch=%s: %s", job_id, work.batch, err)
        _release(budget, reserved)  # the step's requests reserve one by one instead
        _close(runtime, record, "refused", 0)  # this delivery runs the step itself
        return False
    finally:
        api.close()
    _submitted(runtime, record, created)
    return True


def _submitted(runtime: Runtime, record: Submission, created: BatchState, **fields: object) -> None:
    record.openai_batch, record.input_file = created.id, created.input_file_id
    record.submitted_at, record.state = time.time(), "pending"
    save(runtime, record)  # the same by the submitter and a poller that found it meanwhile
    if runtime.state.incr(record_key(record.job, record.batch, record.step) + ":told") != 1:
        return
    tracker(runtime).event(record.job, "llm_batch_submitted", batch=record.batch,
                           step=record.step, requests=record.requests,
                           openai_batch=created.id, **fields)  # fmt: skip


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
        _submitted(runtime, record, found, recovered=True)
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
            budget.settle(llm["prompt_tokens"] - prompt,
                          llm["completion_tokens"] - completion, llm["cached_tokens"])  # fmt: skip
        for name, value in meter.totals()["llm"].items():
            if value:
                state.incr(f"job:{record.job}:usage:batch_api:llm:{name}", value)
    _close(runtime, record, outcome, answered)
    try:
        republish(jobs, record.job, record.batch, "llm_batch_answered", step=record.step)
    except LookupError as err:  # the job's inputs expired or were deleted: nothing to run
        log.warning("llm_batch_orphaned job=%s batch=%s: %s", record.job, record.batch, err)
        return 0
    jobs.touch(record.job)
    return 1


def _close(runtime: Runtime, record: Submission, outcome: str, answered: int) -> None:
    """Mark a submission done: its batch no longer waits (its step runs next)."""
    jobs = tracker(runtime)
    record.state, record.outcome, record.answered = "done", outcome, answered
    save(runtime, record)
    runtime.state.remove_member(PENDING, record.member)
    jobs.event(record.job, "llm_batch_done", batch=record.batch, step=record.step,
               status=outcome, answered=answered, failed=record.requests - answered)  # fmt: skip
    jobs.wait_llm(record.job, record.batch, waiting=False)


def _reserve(
    runtime: Runtime, budget: Spending | None, requests: list[Deferred]
) -> tuple[int, int]:
    """Set the requests' estimated tokens aside in the job's budget, all or none (prompts at
    ~4 characters a token with their schema, `llm_estimate_completion_tokens` each reply)."""
    if budget is None:
        return (0, 0)
    chars = sum(len(json.dumps(r.messages)) + len(json.dumps(r.schema_json)) for r in requests)
    estimate = (chars // 4, len(requests) * runtime.settings.llm_estimate_completion_tokens)
    budget.reserve(*estimate)
    return estimate


def _release(budget: Spending | None, reserved: tuple[int, int]) -> None:
    if budget is not None and any(reserved):
        budget.settle(-reserved[0], -reserved[1], 0)


def _count(meter: Meter, found: Answer) -> None:
    details = found.usage.get("prompt_tokens_details") or {}
    meter.add("llm", calls=1, prompt_tokens=int(found.usage.get("prompt_tokens") or 0),
              completion_tokens=int(found.usage.get("completion_tokens") or 0),
              cached_tokens=int(details.get("cached_tokens") or 0))  # fmt: skip


def batch_usage(runtime: Runtime, job_id: str) -> dict[str, int]:
    """The job's LLM usage through the Batch API (part of its `llm` totals)."""
    keys = [f"job:{job_id}:usage:batch_api:llm:{name}" for name in FIELDS]
    return {n: int(v or 0) for n, v in zip(FIELDS, runtime.state.get_many(keys), strict=True)}


def _owners(meter: Meter | None) -> dict[str, str]:
    return dict(meter.owners) if meter is not None else {}


def _merge(outer: Meter | None, trial: Meter) -> None:
    """Add a trial run's counts to the step's meter (its per-document ones too)."""
    if outer is None:
        return
    for kind, counts in trial.totals().items():
        outer.add(kind, **counts)
    for document, counts in trial.by_document().items():
        usage = outer.documents.setdefault(document, Usage())
        for name, value in counts.items():
            setattr(usage, name, getattr(usage, name) + value)


def load(runtime: Runtime, job_id: str, batch: int, step: str) -> Submission | None:
    raw = runtime.state.get(record_key(job_id, batch, step))
    return Submission.model_validate_json(raw) if raw is not None else None


def save(runtime: Runtime, record: Submission) -> None:
    key = record_key(record.job, record.batch, record.step)
    runtime.state.put(key, record.model_dump_json(), ttl=runtime.settings.artifact_ttl_seconds)


def tracker(runtime: Runtime) -> JobTracker:
    return JobTracker(runtime.state, runtime.settings.artifact_ttl_seconds, runtime.graph)


def batch_api(runtime: Runtime) -> BatchAPI:
    s = runtime.settings
    if not s.llm_base_url:
        raise BatchAPIError("batch mode needs an LLM endpoint (COGMILL_LLM_BASE_URL)")
    return BatchAPI(s.llm_base_url, s.llm_api_key, timeout=s.llm_timeout_seconds)


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
