"""The `structured` pipeline: tables become Table/TableRow nodes, foreign keys REFERENCES edges.

ReadTables (read_tables.py) profiles every table of the batch in one streamed pass (the
artifact it hands on holds profiles, never rows). LinkRows, here, settles each table's keys
(foreign_keys.py, key_declarations.py), purges what earlier runs derived from the documents,
then streams the rows again to write them in batches: nodes, IN_TABLE edges and row-text
vectors first, REFERENCES edges in a second pass (an edge needs both rows stored). No LLM is
involved.

Identity: Table id = uuid5(dataset, table name); TableRow id = uuid5(table id, key values), or
the row's position when the table has no key. A row is its own provenance: its support is
(document, row id), so graph search cites rows the way it cites chunks, and deleting a document
removes its rows and the references that touch them. A row's name cells become entities it
MENTIONS (row_entities.py), so graph search reaches a row from text naming the same thing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import ExitStack
from typing import ClassVar

from core.models.documents import STRUCTURED_PIPELINE, processed_by
from core.models.graph import Edge, Node, Support, stable_id
from core.models.jobs import DocumentError
from core.models.vocabulary import (
    IN_TABLE,
    REFERENCES,
    ROW_COLLECTION,
    TABLE,
    TABLE_COLLECTION,
    TABLE_ROW,
)
from core.ports import BlobStore, Embedder, GraphStore, LexicalIndex, VectorStore
from core.purge import purge_document
from pipelines.add_data_points import AddDataPoints
from pipelines.base import INGEST, StepContext, StepQueue, StepServices
from pipelines.built_graph import BuiltGraph, EmbedItem
from pipelines.models import DocumentRef, WriteReport
from pipelines.structured.foreign_keys import KeyPlan, Reference, plan_keys
from pipelines.structured.key_declarations import load_declarations
from pipelines.structured.read_tables import TableBatch, TableInfo
from pipelines.structured.row_entities import add_row_entities, name_columns
from pipelines.structured.tables import TableProblem, TableSource, key_text, open_tables

log = logging.getLogger("cogmill.structured")

ROW_TEXT_CHARS = 2000


def table_id(dataset: str, table: str) -> str:
    return stable_id("table", dataset, table)


def row_id(table: str, key: tuple[str, ...] | None, index: int) -> str:
    """A row's id from its table id and key values, or its position when it has no key."""
    return stable_id("row", table, *key) if key else stable_id("row", table, f"#{index}")


class LinkRows:
    """Settles keys, then replaces the batch's tables in the stores with rows and references.

    The report counts rows as `chunks` (a row is its own evidence) and REFERENCES edges as
    `relationships`.
    """

    name: ClassVar[str] = "link_rows"
    queue: ClassVar[StepQueue] = INGEST

    @classmethod
    def build(cls, services: StepServices, context: StepContext) -> LinkRows:
        """Writing rows stamped with the job's pipeline version, in the settings' batches."""
        s = services.settings
        return cls(
            services.graph,
            services.vectors,
            services.embedder,
            services.blobs,
            lexical=services.lexical,
            pipeline_version=context.version,
            embed_batch_size=s.embed_batch_size,
            write_batch_size=s.write_batch_size,
        )

    def __init__(
        self,
        graph: GraphStore,
        vectors: VectorStore,
        embedder: Embedder,
        blobs: BlobStore,
        *,
        lexical: LexicalIndex | None = None,
        pipeline_version: str,
        embed_batch_size: int = 64,
        write_batch_size: int = 2000,
    ) -> None:
        self.graph, self.vectors, self.blobs, self.lexical = graph, vectors, blobs, lexical
        self.version = pipeline_version
        self.batch_size = write_batch_size
        self.writer = AddDataPoints(
            graph,
            vectors,
            embedder,
            embed_batch_size=embed_batch_size,
            write_batch_size=write_batch_size,
        )

    def run(self, batch: TableBatch) -> WriteReport:
        report = WriteReport(dataset=batch.dataset, errors=list(batch.errors))
        with ExitStack() as stack:
            sources = self._open(batch, stack, report)
            tables = [t for t in batch.tables if t.name in sources]
            plan = plan_keys(
                tables,
                load_declarations(self.graph, batch.dataset),
                lambda name, columns: self._lookup(batch.dataset, sources[name], columns),
            )
            for name, problem in plan.problems.items():
                info = next(t for t in tables if t.name == name)
                _fail(report, info.document, self.name, problem)
            failed = {e.document_id for e in report.errors}
            tables = [t for t in tables if t.document.id not in failed]
            documents = [d for d in batch.documents if d.id not in failed]
            reuse = self._purge(batch.dataset, documents)
            report.vectors += self._write_tables(batch.dataset, tables, plan)
            # A table's name is embedded again whatever it held: its vector stays.
            written: set[str] = {table_id(batch.dataset, t.name) for t in tables}
            for info in tables:
                rows, vectors = self._write_rows(
                    batch.dataset, info, sources[info.name], plan, reuse, written
                )
                report.chunks += rows
                report.vectors += vectors
            for info in tables:
                report.relationships += self._write_references(
                    batch.dataset, info, sources[info.name], plan
                )
        # Vectors of rows that the new keys no longer produce (new ones were embedded above).
        self.vectors.delete(sorted(reuse - written))
        report.documents = [d.id for d in documents]
        return report

    def _open(
        self, batch: TableBatch, stack: ExitStack, report: WriteReport
    ) -> dict[str, TableSource]:
        sources: dict[str, TableSource] = {}
        for ref in batch.documents:
            try:
                for source in stack.enter_context(open_tables(self.blobs, ref)):
                    sources[source.name] = source
            except TableProblem as err:  # the stored file vanished since read_tables
                _fail(report, ref, self.name, str(err))
        return sources

    def _lookup(
        self, dataset: str, source: TableSource, columns: list[str]
    ) -> tuple[dict[tuple[str, ...], str], int]:
        """Key values -> row id of a table keyed by `columns`, and how many rows repeat a key."""
        lookup: dict[tuple[str, ...], str] = {}
        repeats = 0
        tid = table_id(dataset, source.name)
        for index, row in enumerate(source.rows()):
            key = _key(row, columns)
            if key is None:
                continue
            repeats += key in lookup
            lookup[key] = row_id(tid, key, index)
        return lookup, repeats

    def _purge(self, dataset: str, documents: list[DocumentRef]) -> set[str]:
        """Remove what earlier runs derived; returns the row ids whose vectors can be kept.

        A document processed before by this pipeline version renders the same row texts
        again, so its rows keep their vectors instead of being embedded again.
        """
        current = {d.id: d for d in self.graph.get_nodes([d.id for d in documents])}
        reuse: set[str] = set()
        for doc in documents:
            props = current[doc.id].properties if doc.id in current else {}
            same = processed_by(props, STRUCTURED_PIPELINE, self.version)
            removed = purge_document(
                self.graph, self.vectors, self.lexical, dataset, doc.id, keep_node_vectors=same
            )
            reuse |= set(removed.node_ids) if same else set()
        return reuse

    def _write_tables(self, dataset: str, tables: list[TableInfo], plan: KeyPlan) -> int:
        built = BuiltGraph()
        for info in tables:
            tid = table_id(dataset, info.name)
            refs = plan.references.get(info.name, [])
            built.add_node(
                Node(
                    id=tid,
                    type=TABLE,
                    dataset=dataset,
                    name=info.name,
                    support=[Support(document_id=info.document.id, chunk_id=tid)],
                    properties={
                        "columns": info.columns,
                        "rows": info.profile.rows,
                        "primary_key": plan.primary_keys.get(info.name, []),
                        "foreign_keys": [r.describe() for r in refs],
                        "document_id": info.document.id,
                        "document_name": info.document.name,
                    },
                )
            )
            built.embed(TABLE_COLLECTION, EmbedItem(tid, info.name, {"type": TABLE}))
        return self.writer.write(dataset, built)

    def _write_rows(
        self,
        dataset: str,
        info: TableInfo,
        source: TableSource,
        plan: KeyPlan,
        reuse: set[str],
        written: set[str],
    ) -> tuple[int, int]:
        tid = table_id(dataset, info.name)
        pk = plan.primary_keys.get(info.name, [])
        names = name_columns(info.name, info.profile.columns, pk)
        rows = vectors = 0
        for part in _batches(enumerate(source.rows()), self.batch_size):
            built = BuiltGraph()
            for index, row in part:
                key = _key(row, pk)
                rid = row_id(tid, key, index)
                support = [Support(document_id=info.document.id, chunk_id=rid)]
                text = row_text(info.name, row)
                built.add_node(
                    Node(
                        id=rid,
                        type=TABLE_ROW,
                        dataset=dataset,
                        name=f"{info.name} {'/'.join(key)}"
                        if key
                        else f"{info.name} row {index + 1}",
                        support=support,
                        properties={
                            "table": info.name,
                            "index": index,
                            "values": row,
                            "text": text,
                            "document_id": info.document.id,
                            "document_name": info.document.name,
                        },
                    )
                )
                built.add_edge(
                    Edge(source=rid, target=tid, name=IN_TABLE, dataset=dataset, support=support)
                )
                if rid in reuse:
                    written.add(rid)
                else:
                    built.embed(ROW_COLLECTION, EmbedItem(rid, text, {"type": TABLE_ROW}))
                # The entities the row names (row_entities.py); kept vectors stay kept.
                entities = add_row_entities(built, dataset, info.name, row, names, support, reuse)
                written.update(e for e in entities if e in reuse)
            rows += len(part)
            vectors += self.writer.write(dataset, built)
        return rows, vectors

    def _write_references(
        self, dataset: str, info: TableInfo, source: TableSource, plan: KeyPlan
    ) -> int:
        references = plan.references.get(info.name, [])
        if not references:
            return 0
        tid = table_id(dataset, info.name)
        pk = plan.primary_keys.get(info.name, [])
        total = dangling = 0
        for part in _batches(enumerate(source.rows()), self.batch_size):
            built = BuiltGraph()
            for index, row in part:
                rid = row_id(tid, _key(row, pk), index)
                for ref in references:
                    key = _key(row, ref.columns)
                    target = plan.lookups[ref.target_key].get(key) if key else None
                    if key and target is None:
                        dangling += 1
                    if target is None or target == rid:
                        continue
                    built.add_edge(_reference(dataset, info, ref, rid, target, plan))
            total += len(built.edges)
            self.writer.write(dataset, built)
        if dangling:
            log.info("dangling_references table=%s count=%s", info.name, dangling)
            self.graph.upsert_nodes(
                [
                    Node(
                        id=tid,
                        type=TABLE,
                        dataset=dataset,
                        properties={"dangling_references": dangling},
                    )
                ]
            )
        return total


def _reference(
    dataset: str, info: TableInfo, ref: Reference, source: str, target: str, plan: KeyPlan
) -> Edge:
    support = [Support(document_id=info.document.id, chunk_id=source)]
    target_doc = plan.documents.get(ref.ref_table)
    if target_doc and target_doc != info.document.id:
        # The edge stands on both rows: deleting either table's file removes it.
        support.append(Support(document_id=target_doc, chunk_id=target))
    return Edge(
        source=source,
        target=target,
        name=REFERENCES,
        dataset=dataset,
        support=support,
        properties={"via": ref.describe(), "origin": ref.origin},
    )


def row_text(table: str, row: dict[str, str]) -> str:
    """The embedded rendering of a row: `table: column: value, ...` (empty cells left out)."""
    cells = ", ".join(f"{column}: {value}" for column, value in row.items() if value)
    return f"{table}: {cells}"[:ROW_TEXT_CHARS]


def _key(row: dict[str, str], columns: list[str]) -> tuple[str, ...] | None:
    """A row's values of `columns` as key texts; None when there are no columns or one is empty."""
    if not columns:
        return None
    values = tuple(key_text(row.get(c, "")) for c in columns)
    return None if "" in values else values


def _batches(items: Iterator, size: int) -> Iterator[list]:
    part: list = []
    for item in items:
        part.append(item)
        if len(part) >= size:
            yield part
            part = []
    if part:
        yield part


def _fail(report: WriteReport, ref: DocumentRef, step: str, message: str) -> None:
    if all(e.document_id != ref.id for e in report.errors):
        report.errors.append(
            DocumentError(document_id=ref.id, document_name=ref.name, step=step, message=message)
        )
