"""What adding a batch of files does to the catalog, decided file by file exactly as adding
them one by one would, against the batch's documents read in one go.

`core/catalog.py` looks at each file (size, kind, content hash), reads the documents that
carry the batch's names in one query, asks the plan what each file does, puts the blobs of
the files it stores, and applies the plan: one upsert of every record written, then the
removal of every replaced document.

Only documents under the batch's names can change a decision: a file's content stored under
another name is renamed by the upsert (which merges into the stored record), and no later
file of the batch looks that old name up, or it would have been read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.models.documents import DOCUMENT_DATE, PIPELINE, STATUS, DocumentStatus
from core.models.graph import Node
from core.models.vocabulary import DOCUMENT, NODE_SET


@dataclass(frozen=True)
class LookedAt:
    """A file accepted for a batch: its name, where it is, its content's hash and document id,
    and the pipeline chosen for it (explicit, `structured` for record files, or None)."""

    name: str
    path: Path
    digest: str
    doc_id: str
    pipeline: str | None


@dataclass
class BatchPlan:
    """The documents under the batch's names as the adds so far left them, the records to
    write (merged into what is stored) and the documents to remove."""

    dataset: str
    docs: dict[str, Node] = field(default_factory=dict)
    writes: dict[str, Node] = field(default_factory=dict)
    removed: dict[str, Node] = field(default_factory=dict)

    @classmethod
    def of(cls, dataset: str, stored: list[Node]) -> BatchPlan:
        """A plan over the stored documents read for the batch (duplicates and other types
        dropped)."""
        docs = {n.id: n for n in stored if n.type == DOCUMENT and n.dataset == dataset}
        return cls(dataset, {i: n.model_copy(deep=True) for i, n in sorted(docs.items())})

    def named(self, name: str) -> list[Node]:
        """The documents now called `name`, in id order (as the store's find_nodes gives)."""
        return sorted((n for n in self.docs.values() if n.name == name), key=lambda n: n.id)

    def must_flush(self, file: LookedAt) -> bool:
        """Whether the file re-adds a document this batch removes: one by one, the removal
        (its derived data, its record, its blob) happens first, so the plan so far must be
        applied before the file is decided."""
        return file.doc_id in self.removed

    def same(self, file: LookedAt) -> tuple[Node | None, list[Node]]:
        """The document already holding the file under its name (None when there is none),
        and every document of that name."""
        existing = self.named(file.name)[:10]  # as many as a lookup by name gives
        return next((n for n in existing if n.id == file.doc_id), None), existing

    def keep(self, doc: Node, node_set: str | None, document_date: str | None = None) -> None:
        """The file is unchanged: a new node set or document date re-marks it for cognify
        (re-labels chunks, re-dates facts)."""
        changes = {}
        if node_set is not None and doc.properties.get(NODE_SET, "") != node_set:
            changes[NODE_SET] = node_set
        if document_date is not None and doc.properties.get(DOCUMENT_DATE, "") != document_date:
            changes[DOCUMENT_DATE] = document_date
        if changes:
            self._merge(doc.id, {**changes, STATUS: DocumentStatus.ADDED.value})

    def store(
        self,
        file: LookedAt,
        blob: tuple[str, int],
        node_set: str | None,
        document_date: str | None = None,
    ) -> None:
        """The file's record (new, or a renamed content taking the name); its blob is put."""
        key, size = blob
        props: dict[str, Any] = {
            "content_hash": file.digest,
            "blob_key": key,
            "size": size,
            "extension": Path(file.name).suffix.lower().lstrip("."),
            STATUS: DocumentStatus.ADDED.value,
            **({NODE_SET: node_set} if node_set else {}),
            **({DOCUMENT_DATE: document_date} if document_date else {}),
        }
        self._merge(file.doc_id, props, name=file.name)

    def remove(self, doc: Node) -> None:
        """A document the file replaces: removed (with its blob) after the writes."""
        self.docs.pop(doc.id, None)
        self.writes.pop(doc.id, None)
        self.removed[doc.id] = doc

    def assign_pipeline(self, file: LookedAt, explicit: str | None) -> None:
        """Record the pipeline: a document just (re-)marked ADDED gets the chosen one, an older
        one only an explicit choice (a plain re-add keeps what `cognify --pipeline` set)."""
        chosen = file.pipeline
        if chosen is None:
            return
        for doc in self.named(file.name)[:10]:
            current = doc.properties.get(PIPELINE)
            added = doc.properties.get(STATUS) == DocumentStatus.ADDED
            if current != chosen and (explicit or added):
                self._merge(doc.id, {PIPELINE: chosen})

    def _merge(self, doc_id: str, props: dict[str, Any], name: str = "") -> None:
        """Merge into the document as an upsert would, and into the record to write."""
        doc = self.docs.get(doc_id) or Node(id=doc_id, type=DOCUMENT, dataset=self.dataset)
        doc.properties.update(props)
        doc.name = name or doc.name
        self.docs[doc_id] = doc
        write = self.writes.setdefault(doc_id, Node(id=doc_id, type=DOCUMENT, dataset=self.dataset))
        write.properties.update(props)
        write.name = name or write.name
