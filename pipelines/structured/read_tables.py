"""Step 1 of the `structured` pipeline: open each document as tables and profile them.

One streamed pass per table (structured.py's LinkRows streams the rows again to write them):
the artifact handed on holds each table's columns, profile and schema-declared keys, never its
rows. Unreadable documents, and a table name two documents would share, become errors.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, Field

from core.models.jobs import DocumentError
from core.ports import BlobStore
from pipelines.base import INGEST, StepContext, StepQueue, StepServices
from pipelines.models import DocumentBatch, DocumentRef
from pipelines.structured.foreign_keys import TableProfile, profile_rows
from pipelines.structured.tables import TableProblem, TableSource, open_tables


class SchemaReference(BaseModel):
    """A foreign key read from a SQLite schema (empty ref_columns: the referenced primary key)."""

    columns: list[str]
    ref_table: str
    ref_columns: list[str] = Field(default_factory=list)


class TableInfo(BaseModel):
    """One table of the batch: where it is, its columns, profile and schema-declared keys."""

    name: str
    document: DocumentRef
    columns: list[str]
    profile: TableProfile
    schema_primary_key: list[str] = Field(default_factory=list)
    schema_references: list[SchemaReference] = Field(default_factory=list)


class TableBatch(BaseModel):
    dataset: str
    documents: list[DocumentRef] = Field(default_factory=list)
    tables: list[TableInfo] = Field(default_factory=list)
    errors: list[DocumentError] = Field(default_factory=list)


class ReadTables:
    """Opens each document as tables and profiles them; unreadable documents become errors."""

    name: ClassVar[str] = "read_tables"
    queue: ClassVar[StepQueue] = INGEST

    @classmethod
    def build(cls, services: StepServices, context: StepContext) -> ReadTables:
        """Reading blobs up to the settings' file size."""
        return cls(services.blobs, services.settings.max_file_bytes)

    def __init__(self, blobs: BlobStore, max_bytes: int) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be at least 1, got {max_bytes}")
        self.blobs, self.max_bytes = blobs, max_bytes

    def run(self, batch: DocumentBatch) -> TableBatch:
        out = TableBatch(dataset=batch.dataset)
        owners: dict[str, str] = {}
        for ref in sorted(batch.documents, key=lambda d: (d.name, d.id)):
            try:
                tables = self._read(ref)
                for info in tables:
                    if info.name in owners:
                        raise TableProblem(
                            f"table {info.name!r} also comes from {owners[info.name]}; a table "
                            "is named after its file (or its SQLite table): rename one of them"
                        )
            except TableProblem as err:
                out.errors.append(
                    DocumentError(
                        document_id=ref.id, document_name=ref.name, step=self.name, message=str(err)
                    )
                )
                continue
            owners.update((info.name, ref.name) for info in tables)
            out.documents.append(ref)
            out.tables += tables
        return out

    def _read(self, ref: DocumentRef) -> list[TableInfo]:
        if ref.size > self.max_bytes:
            raise TableProblem(
                f"the file is larger than the limit of {self.max_bytes} bytes; split it or "
                "raise COGMILL_MAX_FILE_BYTES"
            )
        with open_tables(self.blobs, ref) as sources:
            return [_profile(ref, source) for source in sources]


def _profile(ref: DocumentRef, source: TableSource) -> TableInfo:
    columns, profile = profile_rows(source.columns, source.rows())
    if not columns:
        raise TableProblem(f"table {source.name!r} has no columns; give it a header row")
    return TableInfo(
        name=source.name,
        document=ref,
        columns=columns,
        profile=profile,
        schema_primary_key=source.primary_key,
        schema_references=[
            SchemaReference(columns=f.columns, ref_table=f.ref_table, ref_columns=f.ref_columns)
            for f in source.foreign_keys
        ],
    )
