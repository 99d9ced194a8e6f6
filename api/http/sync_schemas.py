"""Request bodies of syncs and schedules (their answers: JobAccepted, SchedulePublic)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from pipelines.structured.key_declarations import TableDeclaration

SOURCE_HELP = (
    "A folder or git repository on the server (inside COGMILL_SYNC_ROOTS), a git URL "
    "(https, ssh) or a SQLAlchemy URL"
)


class SyncSource(BaseModel):
    """A source a dataset follows, and what of it the dataset takes."""

    source: str = Field(min_length=1, max_length=4096, description=SOURCE_HELP)
    kind: Literal["folder", "git", "sql"] | None = Field(
        default=None, description="Default: guessed from `source`"
    )
    ref: str | None = Field(default=None, max_length=255, description="Git branch or tag")
    include: list[str] = Field(default_factory=list, description="Globs of files to take")
    exclude: list[str] = Field(default_factory=list, description="Globs of files to leave out")
    tables: list[str] = Field(default_factory=list, description="SQL tables (default: all)")
    keys: dict[str, TableDeclaration] | None = Field(
        default=None,
        description="SQL: declared keys by table, {primary_key: col, foreign_keys: {col: "
        "'table.col'}}",
    )
    updated: dict[str, str] = Field(
        default_factory=dict,
        description="SQL: the column that grows with every insert and update, per table "
        "('*': every table having it)",
    )

    def spec(self) -> Any:
        """The source as the services take it. Raises SourceError, KeyDeclarationError."""
        from pipelines.sources.spec import parse_source
        from pipelines.structured.key_declarations import KeyDeclarations

        keys = None if self.keys is None else KeyDeclarations(tables=self.keys)
        fields = self.model_dump(exclude={"source", "kind", "keys"})
        return parse_source(self.source, self.kind, **fields, keys=keys)


class SyncRequest(SyncSource):
    """Sync a dataset with a source now."""

    webhook: str | None = Field(default=None, description="POST the job record here when done")
    budget_usd: float | None = Field(default=None, gt=0)
    budget_tokens: int | None = Field(default=None, gt=0)


class ScheduleCreate(BaseModel):
    """A schedule: a sync of `sync` or a cognify, every `every` or on `cron`."""

    dataset: str = Field(min_length=1, max_length=128)
    sync: SyncSource | None = Field(default=None, description="Sync this source")
    cognify: bool = Field(default=False, description="Cognify instead (new and changed)")
    all: bool = Field(default=False, description="With cognify: every document")
    every: str | None = Field(default=None, max_length=32, description="e.g. 15m, 1h, 1d")
    cron: str | None = Field(default=None, max_length=200, description="e.g. '0 3 * * 1-5'")
    budget_usd: float | None = Field(default=None, gt=0)
    budget_tokens: int | None = Field(default=None, gt=0)
