"""Bodies and answers of syncs and schedules (checked against the OpenAPI document, as the
other models are, by tests/unit/test_client_schema.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from cogmill_client.models import ApiModel, Budget


class TableDeclaration(ApiModel):
    primary_key: str | None = None
    foreign_keys: dict[str, str] = Field(default_factory=dict)  # column -> "table.column"


class SyncSource(ApiModel):
    source: str  # a folder or repository on the server, a git URL, a SQLAlchemy URL
    kind: Literal["folder", "git", "sql"] | None = None
    ref: str | None = None
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    tables: list[str] = Field(default_factory=list)
    keys: dict[str, TableDeclaration] | None = None
    updated: dict[str, str] = Field(default_factory=dict)


class SyncRequest(SyncSource):
    webhook: str | None = None
    budget_usd: float | None = None
    budget_tokens: int | None = None


class ScheduleCreate(ApiModel):
    dataset: str
    sync: SyncSource | None = None
    cognify: bool = False
    all: bool = False
    every: str | None = None
    cron: str | None = None
    budget_usd: float | None = None
    budget_tokens: int | None = None


class ScheduleRun(ApiModel):
    due_at: datetime
    fired_at: datetime
    job_id: str | None = None
    outcome: str
    note: str = ""


class SchedulePublic(ApiModel):
    id: str
    dataset: str
    action: str
    source: str | None = None
    every_seconds: float | None = None
    cron: str | None = None
    all: bool = False
    budget: Budget | None = None
    paused: bool
    next_run: datetime | None = None
    last_run: ScheduleRun | None = None
    runs: dict[str, int]
    created: datetime
