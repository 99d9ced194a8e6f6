"""Sync a dataset with its source now: one job reads the source, mirrors it into the dataset
and cognifies what changed (workers/sync.py); its report says what was added, replaced,
renamed, removed, left unchanged and refused."""

from __future__ import annotations

from typing import Any

from api.services.cognify import default_budget
from api.services.datasets import JobRunningError, checked, register
from api.services.jobs import budget_of, checked_id, tracker
from core.access import LOCAL, Caller
from core.models.jobs import Budget, Job
from pipelines.sources import SourceSpec
from pipelines.sources.access import check_access
from runtime import Runtime
from workers.sync import (
    DatasetBusyError,
    SourceRecord,
    queue_sync,
    save_source,
    sync_report,
)


def follow(
    rt: Runtime, dataset: str, spec: SourceSpec, caller: Caller = LOCAL, *, remote: bool = False
) -> tuple[str, str]:
    """Check a source for the caller and keep it as one the dataset follows: (stored dataset
    name, source id). Raises CatalogError for a bad dataset name, SourceError (a ValueError)
    for a bad source or one over a bound, SourceAccessError (an AccessDeniedError) for one
    the caller may not have read (`remote`: asked over HTTP)."""
    stored = checked(dataset, caller)
    spec.check(rt.settings)
    check_access(spec, rt.settings, caller.tenant, remote)
    source_id = spec.identity(stored)
    record = SourceRecord(spec=spec, dataset=stored, tenant=caller.tenant, remote=remote)
    save_source(rt.state, source_id, record)
    register(rt, stored)
    return stored, source_id


def job_budget(rt: Runtime, caller: Caller, usd: float | None, tokens: int | None) -> Budget | None:
    """The budget of a job or a schedule's runs: the one given, else the tenant's, else the
    `job_budget_usd` setting. ValueError for a bad one."""
    if usd is None and tokens is None:
        usd = default_budget(rt, caller)
    return budget_of(rt.settings, usd, tokens)


def sync(
    rt: Runtime,
    dataset: str,
    spec: SourceSpec,
    caller: Caller = LOCAL,
    *,
    remote: bool = False,
    webhook: str | None = None,
    budget_usd: float | None = None,
    budget_tokens: int | None = None,
) -> Job:
    """Start a sync job of the dataset (created if new) with the source; the job (QUEUED while
    it reads the source, then a cognify of what changed). Raises what `follow` raises,
    JobRunningError while another job on the dataset is unfinished, ValueError for a bad
    budget."""
    budget = job_budget(rt, caller, budget_usd, budget_tokens)
    stored, source_id = follow(rt, dataset, spec, caller, remote=remote)
    options: dict[str, Any] = {"webhook": webhook} if webhook else {}
    try:
        job = queue_sync(rt, stored, source_id, budget=budget, options=options)
    except DatasetBusyError as err:
        raise JobRunningError(caller.unscoped(stored), err.job_ids) from err
    return caller.unscoped_job(job)


def report(rt: Runtime, job_id: str) -> dict[str, Any] | None:
    """What a sync job's source phase did: counts, and up to 1,000 names per outcome (None
    before it did it, or for another kind of job). Raises JobNotFoundError."""
    job = tracker(rt).get(checked_id(job_id), live=False)
    return sync_report(rt.state, job.id)
