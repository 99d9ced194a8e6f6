"""The document catalog: datasets and their documents, kept as nodes in the graph store.

A Document node is the catalog record (name, content hash, blob key, status). It is written
with no support of its own, so purging a document's derived data (core/purge.py) keeps the
record; `remove_document` drops both.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from core.catalog_batch import BatchPlan, LookedAt
from core.entity_keys import EntityKeyIndex
from core.errors import BadRequest
from core.models.documents import STRUCTURED_PIPELINE
from core.models.graph import Node, Removed, dataset_id, document_id
from core.models.vocabulary import DATASET, DOCUMENT
from core.ports import BlobStore, GraphStore, LexicalIndex, VectorStore
from core.purge import purge_document

# A tenant's datasets are stored as `<tenant>:<name>` (core/access.py); a caller names them
# without the prefix, which api/services/datasets.py adds.
DATASET_NAME = re.compile(r"^(?:[a-z0-9][a-z0-9_\-]{0,31}:)?[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")
HEAD_BYTES = 8192
# Files decided and written together by `Catalog.add_files` (one read, one write per batch).
ADD_BATCH = 500

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


class CatalogError(BadRequest):
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
        *,
        document_date: str | None = None,
    ) -> None:
        """Add one file (see `add_files`)."""
        self.add_files(
            dataset, [(name, path)], report, check, node_set, pipeline, document_date=document_date
        )

    def add_files(
        self,
        dataset: str,
        files: Iterable[tuple[str, Path]],
        report: AddReport,
        check: FileCheck,
        node_set: str | None = None,
        pipeline: str | None = None,
        *,
        batch: int = ADD_BATCH,
        document_date: str | None = None,
    ) -> None:
        """Add files, each `(name, path)`: reject it, skip it as unchanged, or store it
        (replacing older versions of that name), with the outcome of adding them one by one.

        The files are streamed: read and hashed one at a time, decided and written `batch`
        at a time, with one read of the batch's documents and one write of their records
        (core/catalog_batch.py); blobs are written one by one.

        The document's pipeline is `pipeline` when given (also for an unchanged file), else
        `structured` for record files (see `record_pipeline`), else each cognify's default.

        `node_set` names a group the document's chunks belong to (e.g. "coding_rules"), which
        retrievers can search on its own. `document_date` (an ISO day) is the day the
        documents speak of: their facts without a date of their own held then.
        """
        if node_set is not None:
            check_node_set(node_set)
        if batch < 1:
            raise ValueError(f"batch must be >= 1, got {batch}")
        looked: list[LookedAt] = []
        try:
            for name, path in files:
                if (file := self._look(dataset, name, path, report, check, pipeline)) is not None:
                    looked.append(file)
                if len(looked) == batch:
                    ready, looked = looked, []
                    self._add_batch(dataset, ready, report, (node_set, document_date), pipeline)
        except Exception:  # an unreadable file: those before it are stored, as one by one
            if looked:
                self._add_batch(dataset, looked, report, (node_set, document_date), pipeline)
            raise
        if looked:
            self._add_batch(dataset, looked, report, (node_set, document_date), pipeline)

    def _look(
        self,
        dataset: str,
        name: str,
        path: Path,
        report: AddReport,
        check: FileCheck,
        pipeline: str | None,
    ) -> LookedAt | None:
        """The file's hash and pipeline, or None once its rejection is reported."""
        size = path.stat().st_size
        if size > self.max_bytes:
            reason = (
                f"file is {size} bytes, above the limit of {self.max_bytes} "
                "(raise COGMILL_MAX_FILE_BYTES to accept it)"
            )
            report.rejected.append((name, reason))
            return None
        with path.open("rb") as stream:
            head = stream.read(HEAD_BYTES)
            problem = check(name, head)
            if problem:
                report.rejected.append((name, problem))
                return None
            digest = hashlib.sha256(head)
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
        chosen = pipeline or record_pipeline(name, head)
        doc_id = document_id(dataset, digest.hexdigest())
        return LookedAt(name, path, digest.hexdigest(), doc_id, chosen)

    def _add_batch(
        self,
        dataset: str,
        files: list[LookedAt],
        report: AddReport,
        labels: tuple[str | None, str | None],
        explicit: str | None,
    ) -> None:
        """Decide and write a batch (`labels`: its node set and document date); what a file
        can only do after the writes so far (re-add a document the batch removed) starts the
        next round, read again."""
        while files:
            names = sorted({file.name for file in files})
            stored = self.graph.find_nodes(dataset, DOCUMENT, names=names, limit=10 * len(names))
            plan = BatchPlan.of(dataset, stored)
            try:
                files = self._decide(plan, files, report, labels, explicit)
            finally:  # what was decided (blobs put) is written, also when a later file fails
                self.graph.upsert_nodes(list(plan.writes.values()))
                for doc in plan.removed.values():
                    self.remove_document(dataset, doc)

    def _decide(
        self,
        plan: BatchPlan,
        files: list[LookedAt],
        report: AddReport,
        labels: tuple[str | None, str | None],
        explicit: str | None,
    ) -> list[LookedAt]:
        """Decide files in order, putting the blobs of those stored; the files left when one
        must wait for the plan so far to be written."""
        for i, file in enumerate(files):
            if plan.must_flush(file):
                return files[i:]
            same, existing = plan.same(file)
            if same is not None:
                plan.keep(same, *labels)
                report.unchanged.append(file.name)
            else:
                key = f"{plan.dataset}/{file.doc_id}"
                with file.path.open("rb") as stream:
                    plan.store(file, (key, self.blobs.put(key, stream)), *labels)
                for old in existing:
                    plan.remove(old)
                (report.replaced if existing else report.added).append(file.name)
            plan.assign_pipeline(file, explicit)
        return []

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
        # killed after the graph went would leave them for good. The graph last: its dataset
        # node is what a repeated delete finds the dataset by, so a delete killed before it
        # went can be run again to remove the rest (the other stores are found by dataset).
        for doc in self.documents(dataset):
            if key := doc.properties.get("blob_key", ""):
                self.blobs.delete(key)
        self.vectors.delete_dataset(dataset)
        if self.lexical is not None:
            self.lexical.remove_dataset(dataset)
        if self.entity_keys is not None:
            self.entity_keys.forget_dataset(dataset)
        return self.graph.delete_dataset(dataset)
