"""Delete a document or a whole dataset, refused while a cognify job on the dataset runs."""

from __future__ import annotations

from dataclasses import dataclass

from api.services import shown
from api.services.datasets import ensure_idle, existing, unregister
from core.access import LOCAL, Caller
from core.catalog import CatalogError
from core.errors import NotFound
from core.models.graph import Removed
from runtime import Runtime
from workers.schedules import Schedules


class DocumentNotFoundError(NotFound):
    """No document of the dataset was added under that name."""

    code = "document_not_found"

    def __init__(self, dataset: str, document: str, reason: str) -> None:
        super().__init__(reason)
        self.dataset, self.document = dataset, document


@dataclass(frozen=True)
class Deleted:
    """What a delete removed: the graph's nodes and edges (with their vectors and index
    entries)."""

    dataset: str
    document: str | None
    nodes_removed: int
    edges_removed: int

    @classmethod
    def of(cls, dataset: str, document: str | None, removed: Removed) -> Deleted:
        return cls(dataset, document, len(removed.node_ids), len(removed.edge_ids))


def delete_document(rt: Runtime, dataset: str, document: str, caller: Caller = LOCAL) -> Deleted:
    """Delete a document: its chunks and whatever only it supported (graph, vectors, lexical
    index); shared entities and edges only lose its support. Raises DatasetNotFoundError,
    DocumentNotFoundError, JobRunningError."""
    stored = existing(rt, dataset, caller)
    ensure_idle(rt, stored, caller)
    try:
        removed = rt.catalog.remove_named(stored, document)
    except CatalogError as err:
        raise DocumentNotFoundError(dataset, document, shown.text(caller, str(err))) from err
    return Deleted.of(dataset, document, removed)


def delete_dataset(rt: Runtime, dataset: str, caller: Caller = LOCAL) -> Deleted:
    """Delete a whole dataset: every node, edge, vector, index entry and stored file, and its
    schedules. Raises DatasetNotFoundError, JobRunningError."""
    stored = existing(rt, dataset, caller)
    ensure_idle(rt, stored, caller)
    removed = rt.catalog.remove_dataset(stored)
    unregister(rt, stored)
    schedules = Schedules(rt.state)  # a schedule would sync the dataset back into being
    for schedule in schedules.of_tenant(caller.tenant):
        if schedule.dataset == stored:
            schedules.remove(schedule)
    return Deleted.of(dataset, None, removed)
