"""Budgets: a batch whose LLM request the job's budget refused is parked; a paused job resumes.

When a step's request would take the job over its budget (workers/usage.py `JobBudget`), the
step stops without storing an output and without turning its documents into errors: its
batch is parked (its chain ends; what earlier steps stored is kept), and so are the segments
it holds back. The job refuses every later request, so batches still queued park at their
first LLM step, and batches in flight finish what they had sent. Once every batch is recorded
or parked the job is finalised as `paused_budget`.

`resume_job` re-publishes the parked batches from the step that was refused, in a new
generation of each (stale deliveries do nothing), under the new budget. Requests the parked
steps had answered before are answered by the LLM cache, so nothing is paid twice.
"""

from __future__ import annotations

from core.errors import Conflict, InvalidInput
from core.models.graph import dataset_id
from core.models.jobs import Budget, Job, JobStatus
from pipelines.models import DocumentBatch
from runtime import Runtime
from workers import fairness
from workers.job_keys import batch_input_key
from workers.jobs import JobTracker
from workers.sweeper import republish
from workers.usage import describe, job_usage, nano_usd, rebase_budget


class JobNotResumableError(Conflict):
    """The job is not paused by its budget (or its parked work expired): nothing to resume."""

    code = "job_not_resumable"

    def __init__(self, job_id: str, message: str) -> None:
        super().__init__(message)
        self.job_id = job_id


class InvalidBudget(InvalidInput):
    """A budget that cannot be used: not more than 0, already spent, or in USD without prices."""

    code = "invalid_budget"


def tracker(runtime: Runtime) -> JobTracker:
    return JobTracker(runtime.state, runtime.settings.artifact_ttl_seconds, runtime.graph)


def park_batch(runtime: Runtime, job_id: str, batch: int, step: str) -> None:
    """Park a batch whose `step` the budget refused, with the segments it holds back; pause
    the job when nothing else is left to run."""
    jobs = tracker(runtime)
    source = DocumentBatch.model_validate_json(jobs.artifact(batch_input_key(job_id, batch)))
    held_back = jobs.held_back(job_id)
    for follower in source.followers:  # released only by this batch's recording
        if follower in held_back:
            jobs.park(job_id, follower, "held")
    jobs.park(job_id, batch, step)
    # Its slot goes back before the job can show paused (the task shell would, just after).
    fairness.release(runtime.state, source.dataset, job_id, batch)
    if jobs.settled(job_id):
        jobs.finalise(job_id)


def resume_job(runtime: Runtime, job_id: str, budget: Budget | None = None) -> Job:
    """Continue a job paused by its budget under `budget` (None: without a cap), counting
    what it spent so far. Raises JobNotFoundError, JobNotResumableError (not paused, already
    resumed, its dataset deleted or its parked inputs expired) and ValueError (a budget
    already spent)."""
    jobs = tracker(runtime)
    job = jobs.get(job_id, live=False)
    if job.status is not JobStatus.PAUSED_BUDGET:
        raise JobNotResumableError(
            job_id,
            f"job {job_id} is {job.status.value}: only a job paused by its budget "
            f"({JobStatus.PAUSED_BUDGET.value}) can be resumed",
        )
    if not runtime.graph.get_nodes([dataset_id(job.dataset)]):
        raise JobNotResumableError(job_id, f"job {job_id}'s dataset was deleted: nothing to resume")
    if budget is not None:
        check_covers_spent(runtime, job_id, budget)
    parked = jobs.parked(job_id)
    waiting = jobs.held_back(job_id)  # their first segment's recording releases them
    for batch in sorted(parked - waiting):
        if runtime.state.get(batch_input_key(job_id, batch)) is None:
            raise JobNotResumableError(
                job_id,
                f"job {job_id}'s parked work expired (kept {runtime.settings.artifact_ttl_seconds}"
                f" s, COGMILL_ARTIFACT_TTL_SECONDS); run cognify on {job.dataset} again: the "
                "documents it processed are skipped",
            )
    # One resume per pause, however many callers race (the pause's time names it).
    if runtime.state.incr(f"job:{job_id}:resumed:{job.finished_at}") != 1:
        raise JobNotResumableError(job_id, f"job {job_id} is being resumed already")
    rebase_budget(runtime.state, job_id, runtime.settings)
    update = {"status": JobStatus.RUNNING, "budget": budget, "finished_at": None, "message": ""}
    # Without the errors and counts its pause merged in: they are read live again.
    job = job.model_copy(update={**update, "errors": [], "counts": {}})
    jobs.save(job)
    jobs.event(job_id, "resumed", batches=len(parked), budget=describe(budget) if budget else "")
    for batch in sorted(parked):
        jobs.unpark(job_id, batch)
        if batch not in waiting:
            republish(jobs, job_id, batch, "batch_resumed")
    jobs.touch(job_id)
    return jobs.get(job_id)


def check_covers_spent(runtime: Runtime, job_id: str, budget: Budget) -> None:
    """InvalidBudget when the job already spent `budget` (a resume would pause at once)."""
    llm = job_usage(runtime.state, job_id)["llm"]
    tokens = llm["prompt_tokens"] + llm["completion_tokens"]
    nano = nano_usd(
        llm["prompt_tokens"], llm["completion_tokens"], llm["cached_tokens"], runtime.settings
    )
    if budget.tokens is not None and budget.tokens <= tokens:
        raise InvalidBudget(
            f"job {job_id} already spent {tokens} tokens; give a larger --budget-tokens "
            "(a budget counts every run of the job)"
        )
    if budget.usd is not None and round(budget.usd * 1e9) <= nano:
        raise InvalidBudget(
            f"job {job_id} already spent ${nano / 1e9:.6f}; give a larger --budget-usd "
            "(a budget counts every run of the job)"
        )
