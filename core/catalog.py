"""The document catalog: datasets and their documents, kept as nodes in the graph store.

A Document node is the catalog record (name, content hash, blob key, status). It is written
with no support of its own, so purging a document's derived data (core/purge.py) keeps the
record; `remove_document` drops both.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from core.entity_keys import EntityKeyIndex
from core.models.documents import PIPELINE, STATUS, STRUCTURED_PIPELINE, DocumentStatus
from core.models.graph import Node, Removed, dataset_id, document_id
from core.models.vocabulary import DATASET, DOCUMENT, NODE_SET
from core.ports import BlobStore, GraphStore, LexicalIndex, VectorStore
from core.purge import purge_document

# A tenant's datasets are stored as `<tenant>:<name>` (core/tenants.py); a caller names them
# without the prefix, which api/services/datasets.py adds.
DATASET_NAME = re.compile(r"^(?:[a-z0-9][a-z0-9_\-]{0,31}:)?[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")
HEAD_BYTES = 8192

# (file name, first bytes) -> a rejection reason, or None when the file looks acceptable
FileCheck = Callable[[str, bytes], "str | None"]


SQLITE_MAGIC = b"SQLite format 3\x00"


def record_pipeline(name: str, head: bytes) -> str | None:
    """`structured` for record files, judged by name and first bytes; None for other files.

    Record files: .csv, .tsv, .jsonl/.ndjson, a .json holding a list of objects, and SQLite
    databases (any name, by their header).
    """
    if head.startswith(SQLITE_MAGIC):
        return STRUCTURED_PIPELINE
    ext = Path(name).suffix.lower().lstrip(".")
    if ext in ("csv", "tsv", "jsonl", "ndjson"):
        return STRUCTURED_PIPELINE
    text = head.decode("utf-8", errors="ignore").lstrip("\ufeff \t\r\n")
    if ext == "json" and text.startswith("[") and text[1:].lstrip().startswith("{"):
        return STRUCTURED_PIPELINE
    return None


class CatalogError(ValueError):
    """A catalog request is invalid (bad dataset name, unknown dataset...)."""


def check_dataset_name(name: str) -> str:
    """Return the name or raise CatalogError saying what is allowed."""
    if not DATASET_NAME.fullmatch(name):
        raise CatalogError(
            f"invalid dataset name {name!r}: use 1-64 letters, digits, '_', '-' or '.', "
            "starting with a letter or digit (no spaces or slashes)"
        )
    return name


NODE_SET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")


def check_node_set(name: str) -> str:
    """Return the node set name or raise CatalogError saying what is allowed."""
    if not NODE_SET_NAME.fullmatch(name):
        raise CatalogError(
            f"invalid node set name {name!r}: use 1-64 letters, digits, '_', '-' or '.', "
            "starting with a letter or digit (e.g. coding_rules)"
        )
    return name


@dataclass
class AddReport:
    """What `add` did with each input."""

    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)


def iter_files(paths: list[Path]) -> Iterator[tuple[Path, str | None]]:
    """Files under the given paths (directories recursively, sorted), or an error per path."""
    for path in paths:
        if path.is_dir():
            for child in sorted(p for p in path.rglob("*") if p.is_file()):
                if not any(part.startswith(".") for part in child.relative_to(path).parts):
                    yield child, None
        elif path.is_file():
            yield path, None
        elif path.exists():
            yield path, "not a regular file"
        else:
            yield path, "no such file or directory"


class Catalog:
    """Adds, lists and removes documents of datasets."""

    def __init__(
        self,
        graph: GraphStore,
        vectors: VectorStore,
        blobs: BlobStore,
        max_bytes: int,
        lexical: LexicalIndex | None = None,
        entity_keys: EntityKeyIndex | None = None,
    ) -> None:
        self.graph = graph
        self.vectors = vectors
        self.blobs = blobs
        self.max_bytes = max_bytes
        self.lexical = lexical
        self.entity_keys = entity_keys

    def ensure_dataset(self, dataset: str) -> None:
        check_dataset_name(dataset)
        self.graph.upsert_nodes(
            [Node(id=dataset_id(dataset), type=DATASET, dataset=dataset, name=dataset)]
        )

    def documents(self, dataset: str, page: int = 1000) -> Iterator[Node]:
        """Every Document node of a dataset, streamed page by page."""
        offset = 0
        while True:
            batch = self.graph.find_nodes(dataset, DOCUMENT, limit=page, offset=offset)
            yield from batch
            if len(batch) < page:
                return
            offset += page

    def add_file(
        self,
        dataset: str,
        path: Path,
        name: str,
        report: AddReport,
        check: FileCheck,
        node_set: str | None = None,
        pipeline: str | None = None,
    ) -> None:
        """Add one file: reject it, skip it as unchanged, or store it (replacing older versions).

        The document's pipeline is `pipeline` when given (also for an unchanged file), else
        `structured` for record files (see `record_pipeline`), else each cognify's default.

        `node_set` names a group the document's chunks belong to (e.g. "coding_rules"), which
        retrievers can search on its own.
        """
        if node_set is not None:
            check_node_set(node_set)
        size = path.stat().st_size
        if size > self.max_bytes:
            report.rejected.append(
                (
                    name,
                    f"file is {size} bytes, above the limit of {self.max_bytes} "
                    "(raise COGMILL_MAX_FILE_BYTES to accept it)",
                )
            )
            return
        with path.open("rb") as stream:
            head = stream.read(HEAD_BYTES)
            problem = check(name, head)
            if problem:
                report.rejected.append((name, problem))
                return
            stream.seek(0)
            self._store(dataset, name, stream, report, node_set)
            self._assign_pipeline(dataset, name, pipeline or record_pipeline(name, head), pipeline)

    def _assign_pipeline(
        self, dataset: str, name: str, chosen: str | None, explicit: str | None
    ) -> None:
        """Record the document's pipeline: a new document gets `chosen`, an older one only an
        explicit choice (a plain re-add keeps what `cognify --pipeline` set)."""
        if chosen is None:
            return
        for doc in self.graph.find_nodes(dataset, DOCUMENT, name=name, limit=10):
            current = doc.properties.get(PIPELINE)
            added = doc.properties.get(STATUS) == DocumentStatus.ADDED
            if current != chosen and (explicit or added):
                self.graph.upsert_nodes(
                    [Node(id=doc.id, type=DOCUMENT, dataset=dataset,
                          properties={PIPELINE: chosen})]
                )  # fmt: skip

    def _store(
        self, dataset: str, name: str, stream: BinaryIO, report: AddReport, node_set: str | None
    ) -> None:
        digest = _hash_stream(stream)
        doc_id = document_id(dataset, digest)
        existing = self.graph.find_nodes(dataset, DOCUMENT, name=name, limit=10)
        same = next((node for node in existing if node.id == doc_id), None)
        if same is not None:
            if node_set is not None and same.properties.get(NODE_SET, "") != node_set:
                # A new node set for the same content: the next cognify re-labels its chunks.
                props = {NODE_SET: node_set, STATUS: DocumentStatus.ADDED.value}
                self.graph.upsert_nodes(
                    [Node(id=doc_id, type=DOCUMENT, dataset=dataset, properties=props)]
                )
            report.unchanged.append(name)
            return
        stream.seek(0)
        blob_key = f"{dataset}/{doc_id}"
        size = self.blobs.put(blob_key, stream)
        self.graph.upsert_nodes(
            [
                Node(
                    id=doc_id,
                    type=DOCUMENT,
                    dataset=dataset,
                    name=name,
                    properties={
                        "content_hash": digest,
                        "blob_key": blob_key,
                        "size": size,
                        "extension": Path(name).suffix.lower().lstrip("."),
                        STATUS: DocumentStatus.ADDED.value,
                        **({NODE_SET: node_set} if node_set else {}),
                    },
                )
            ]
        )
        for old in existing:
            self.remove_document(dataset, old)
        (report.replaced if existing else report.added).append(name)

    def remove_document(self, dataset: str, doc: Node) -> Removed:
        """Remove a document, what only it supported (graph and vectors), and its blob."""
        removed = purge_document(
            self.graph, self.vectors, self.lexical, dataset, doc.id, with_record=True
        )
        self.blobs.delete(doc.properties.get("blob_key", f"{dataset}/{doc.id}"))
        return removed

    def remove_named(self, dataset: str, name: str) -> Removed:
        """Remove the document added under `name`. Raises CatalogError when there is none."""
        docs = self.graph.find_nodes(check_dataset_name(dataset), DOCUMENT, name=name, limit=10)
        if not docs:
            raise CatalogError(f"dataset {dataset!r} has no document named {name!r}")
        removed = Removed()
        for doc in docs:
            step = self.remove_document(dataset, doc)
            removed.node_ids += step.node_ids
            removed.edge_ids += step.edge_ids
        return removed

    def remove_dataset(self, dataset: str) -> Removed:
        """Remove a whole dataset: graph, vectors and stored files."""
        check_dataset_name(dataset)
        # Stored files first: they are found only through the graph's documents, so a delete
        # killed after the graph went would leave them for good; the rest is found by dataset.
        for doc in self.documents(dataset):
            if key := doc.properties.get("blob_key", ""):
                self.blobs.delete(key)
        removed = self.graph.delete_dataset(dataset)
        self.vectors.delete_dataset(dataset)
        if self.lexical is not None:
            self.lexical.remove_dataset(dataset)
        if self.entity_keys is not None:
            self.entity_keys.forget_dataset(dataset)
        return removed


def _hash_stream(stream: BinaryIO) -> str:
    digest = hashlib.sha256()
    for block in iter(lambda: stream.read(1 << 20), b""):
        digest.update(block)
    return digest.hexdigest()
