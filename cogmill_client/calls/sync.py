"""Calls of syncs and schedules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from cogmill_client import models as m
from cogmill_client import schedules as s
from cogmill_client.calls.base import Parts, body, model, operation


def _source(
    source: str,
    kind: Literal["folder", "git", "sql"] | None,
    ref: str | None,
    include: Sequence[str],
    exclude: Sequence[str],
    tables: Sequence[str],
    keys: dict[str, Any] | None,
    updated: dict[str, str] | None,
) -> dict[str, Any]:
    return {
        "source": source,
        "kind": kind,
        "ref": ref,
        "include": list(include),
        "exclude": list(exclude),
        "tables": list(tables),
        "keys": keys,
        "updated": updated or {},
    }


@operation("POST", "/api/v1/datasets/{name}/sync")
def sync(
    dataset: str,
    source: str,
    *,
    kind: Literal["folder", "git", "sql"] | None = None,
    ref: str | None = None,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    tables: Sequence[str] = (),
    keys: dict[str, Any] | None = None,
    updated: dict[str, str] | None = None,
    webhook: str | None = None,
    budget_usd: float | None = None,
    budget_tokens: int | None = None,
) -> Parts[m.JobAccepted]:
    """Start a job making the dataset mirror a source (a folder or repository on the server, a
    git URL, a SQLAlchemy URL) and cognifying what changed; `wait(job.job_id)` follows it."""
    fields = _source(source, kind, ref, include, exclude, tables, keys, updated)
    request = s.SyncRequest(
        **fields, webhook=webhook, budget_usd=budget_usd, budget_tokens=budget_tokens
    )
    return Parts(model(m.JobAccepted), {"name": dataset}, json=body(request))


@operation("GET", "/api/v1/schedules")
def list_schedules() -> Parts[list[s.SchedulePublic]]:
    """The caller's schedules with their next and last runs."""
    return Parts(model(list[s.SchedulePublic]))


@operation("POST", "/api/v1/schedules")
def add_schedule(
    dataset: str,
    *,
    sync: str | None = None,
    cognify: bool = False,
    all: bool = False,
    every: str | None = None,
    cron: str | None = None,
    kind: Literal["folder", "git", "sql"] | None = None,
    ref: str | None = None,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    tables: Sequence[str] = (),
    keys: dict[str, Any] | None = None,
    updated: dict[str, str] | None = None,
    budget_usd: float | None = None,
    budget_tokens: int | None = None,
) -> Parts[s.SchedulePublic]:
    """A schedule syncing the dataset with `sync` (a source) or cognifying it (`cognify`;
    `all`: every document), every `every` (15m, 1h) or on `cron` (UTC)."""
    source = None
    if sync is not None:
        fields = _source(sync, kind, ref, include, exclude, tables, keys, updated)
        source = s.SyncSource(**fields)
    request = s.ScheduleCreate(
        dataset=dataset,
        sync=source,
        cognify=cognify,
        all=all,
        every=every,
        cron=cron,
        budget_usd=budget_usd,
        budget_tokens=budget_tokens,
    )
    return Parts(model(s.SchedulePublic), json=body(request))


@operation("POST", "/api/v1/schedules/{schedule_id}/pause")
def pause_schedule(schedule_id: str) -> Parts[s.SchedulePublic]:
    """Stop firing a schedule until it is resumed."""
    return Parts(model(s.SchedulePublic), {"schedule_id": schedule_id})


@operation("POST", "/api/v1/schedules/{schedule_id}/resume")
def resume_schedule(schedule_id: str) -> Parts[s.SchedulePublic]:
    """Fire a paused schedule again, from its next run time on."""
    return Parts(model(s.SchedulePublic), {"schedule_id": schedule_id})


@operation("DELETE", "/api/v1/schedules/{schedule_id}")
def remove_schedule(schedule_id: str) -> Parts[s.SchedulePublic]:
    """Remove a schedule (a run already started goes on)."""
    return Parts(model(s.SchedulePublic), {"schedule_id": schedule_id})
