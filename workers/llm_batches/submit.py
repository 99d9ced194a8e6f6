"""Sending a step-batch's deferred LLM requests to the Batch API (`through_batch_api`): claimed
and recorded before the upload, their estimated tokens set aside in the job's budget.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import TypeVar

from core.llm import deferral
from core.llm.batches import BatchAPIError
from core.llm.deferral import Deferred
from core.llm.usage import Meter, Spending, Usage, current_meter, metering
from core.models.jobs import Job
from pipelines.base import LLM
from pipelines.definitions import get_step
from runtime import Runtime
from workers.delivery import Delivery
from workers.llm_batches.records import (
    CLAIM_METADATA,
    PENDING,
    Submission,
    batch_api,
    close_submission,
    load,
    record_submitted,
    save,
    tracker,
)

log = logging.getLogger("cogmill.llm_batches")
T = TypeVar("T")


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
    record = Submission(
        job=job_id,
        batch=work.batch,
        step=work.step,
        gen=work.gen,
        claim=claim,
        requests=len(requests),
        claimed_at=time.time(),
        reserved=reserved,
    )
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
        close_submission(runtime, record, "refused", 0)  # this delivery runs the step itself
        return False
    finally:
        api.close()
    record_submitted(runtime, record, created)
    return True


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
