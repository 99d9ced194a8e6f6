"""Schedules of a caller's datasets: add (a sync of a source, or a cognify), list, pause,
resume and remove. The beat fires them (workers/beat.py); a tenant sees and changes only its
own, and has at most COGMILL_SCHEDULES_PER_TENANT."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from pydantic import BaseModel, Field

from api.services.datasets import existing
from api.services.sync import follow, job_budget
from core.access import LOCAL, Caller
from core.models.jobs import Budget
from pipelines.sources import SourceSpec
from runtime import Runtime
from workers.beat import LEADER
from workers.schedules import (
    LastRun,
    Schedule,
    ScheduleError,
    Schedules,
    check_cron,
    new_id,
    parse_interval,
)


class ScheduleRun(BaseModel):
    """A schedule's latest run: when it was due and fired, its job, and whether it ran."""

    due_at: datetime
    fired_at: datetime
    job_id: str | None = None
    outcome: str = Field(description="fired, or skipped (see note)")
    note: str = ""


class SchedulePublic(BaseModel):
    """A schedule as its owner sees it."""

    id: str
    dataset: str
    action: str = Field(description="sync (of `source`) or cognify")
    source: str | None = None
    every_seconds: float | None = None
    cron: str | None = None
    all: bool = Field(default=False, description="cognify: every document, not only changed")
    budget: Budget | None = None
    paused: bool
    next_run: datetime | None = None
    last_run: ScheduleRun | None = None
    runs: dict[str, int] = Field(description="Runs fired, started, skipped and missed")
    created: datetime


def _time(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def public(rt: Runtime, schedule: Schedule, caller: Caller) -> SchedulePublic:
    store = Schedules(rt.state)
    last: LastRun | None = store.last(schedule.id)
    run = None
    if last is not None:
        run = ScheduleRun(
            due_at=_time(last.slot),
            fired_at=_time(last.fired_at),
            job_id=last.job,
            outcome=last.outcome,
            note=caller.unscoped_text(last.note),
        )
    return SchedulePublic(
        id=schedule.id,
        dataset=caller.unscoped(schedule.dataset),
        action=schedule.action,
        source=schedule.source_name or None,
        every_seconds=schedule.every,
        cron=schedule.cron,
        all=schedule.everything,
        budget=schedule.budget,
        paused=schedule.paused,
        next_run=None if schedule.paused else _time(store.due(schedule)),
        last_run=run,
        runs=store.counts(schedule.id),
        created=_time(schedule.created),
    )


def add(
    rt: Runtime,
    dataset: str,
    *,
    source: SourceSpec | None = None,
    every: str | None = None,
    cron: str | None = None,
    everything: bool = False,
    caller: Caller = LOCAL,
    remote: bool = False,
    budget_usd: float | None = None,
    budget_tokens: int | None = None,
) -> SchedulePublic:
    """A new schedule: sync the dataset with `source` (else cognify it; `everything`: every
    document) every `every` (`15m`, `1h`) or on `cron`. Raises ScheduleError (a ValueError)
    for a bad or too frequent timing or one schedule too many, what `sync.follow` raises for
    the source, DatasetNotFoundError for a cognify of a dataset that does not exist."""
    minimum = rt.settings.schedule_min_seconds
    if (every is None) == (cron is None):
        raise ScheduleError("give exactly one of an interval (every, e.g. 15m) or a cron")
    seconds = parse_interval(every, minimum) if every is not None else None
    expression = check_cron(cron, minimum) if cron is not None else None
    budget = job_budget(rt, caller, budget_usd, budget_tokens)
    if source is not None:
        if everything:
            raise ScheduleError("`all` applies to cognify schedules; a sync cognifies changes")
        stored, source_id = follow(rt, dataset, source, caller, remote=remote)
        name = source.display()
    else:
        stored, source_id, name = existing(rt, dataset, caller), None, ""
    schedule = Schedule(
        id=new_id(),
        tenant=caller.tenant,
        dataset=stored,
        action="sync" if source is not None else "cognify",
        source=source_id,
        source_name=name,
        every=seconds,
        cron=expression,
        everything=everything,
        budget=budget,
    )
    Schedules(rt.state).add(schedule, rt.settings.schedules_per_tenant)
    return public(rt, schedule, caller)


def list_schedules(rt: Runtime, caller: Caller = LOCAL) -> list[SchedulePublic]:
    """The caller's schedules, oldest first."""
    return [public(rt, s, caller) for s in Schedules(rt.state).of_tenant(caller.tenant)]


def beat_running(rt: Runtime) -> bool:
    """Whether a beat led (fired schedules) within its last lease windows."""
    return rt.state.get(LEADER) is not None


def set_paused(
    rt: Runtime, schedule_id: str, paused: bool, caller: Caller = LOCAL
) -> SchedulePublic:
    """Pause a schedule (no run fires) or resume it (its next run is the first due from now).
    Raises ScheduleNotFoundError."""
    store = Schedules(rt.state)
    schedule = store.get(schedule_id, caller.tenant)
    if schedule.paused != paused:
        schedule = schedule.model_copy(update={"paused": paused})
        store.save(schedule)
        if not paused:
            store.set_due(schedule, schedule.following(time.time()))
    return public(rt, schedule, caller)


def remove(rt: Runtime, schedule_id: str, caller: Caller = LOCAL) -> SchedulePublic:
    """Remove a schedule (a run already started goes on). Raises ScheduleNotFoundError."""
    store = Schedules(rt.state)
    schedule = store.get(schedule_id, caller.tenant)
    shown = public(rt, schedule, caller)
    store.remove(schedule)
    return shown
