"""Datasets: the one registry every face lists from, existence checks and the running-job guard.

Dataset names enter every use case through `checked` (a new or any name) or `existing` (a
dataset that must exist), which scope them by the caller's tenant (docs/security.md): a tenant's
`docs` is stored as `<tenant>:docs`, the local default tenant's as `docs`. Everything else
here takes stored names, and what goes back to a caller is unscoped again.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from itertools import islice

from api.services import shown
from core.access import LOCAL, Caller
from core.catalog import CatalogError, check_dataset_name
from core.errors import Conflict, InvalidInput, NotFound
from core.migrations import once
from core.models.graph import Node, dataset_id
from core.models.vocabulary import DOCUMENT
from runtime import Runtime
from workers.jobs import JobTracker

# The graph port cannot list datasets across the store, so their names are kept in a set in
# the state store by every use case that creates one (add, remember) and dropped by the ones
# that delete one. Before the set, each had a key under REGISTRY: found by a key scan (which
# walks the whole store) once, then `INDEXED` says they are in the set.
DATASETS = "api:datasets"
INDEXED = "api:datasets:complete"
REGISTRY = "api:dataset:"


class DatasetNotFoundError(NotFound):
    """The dataset does not exist (never added to, or deleted)."""

    code = "dataset_not_found"

    def __init__(self, dataset: str) -> None:
        super().__init__(f"dataset {dataset!r} does not exist")
        self.dataset = dataset


class JobRunningError(Conflict):
    """A cognify job on the dataset is unfinished: deleting under it would race its writes (the
    job could write again what was just removed)."""

    code = "job_running"

    def __init__(self, dataset: str, job_ids: list[str]) -> None:
        super().__init__(
            f"dataset {dataset!r} has a running cognify job ({', '.join(job_ids)}); wait for it "
            "to finish or cancel it, then try again"
        )
        self.dataset, self.job_ids = dataset, job_ids


@dataclass(frozen=True)
class DatasetInfo:
    """A dataset and how many documents it holds."""

    name: str
    documents: int


def checked(name: str, caller: Caller = LOCAL) -> str:
    """The stored name of the caller's dataset `name`, valid; CatalogError (an InvalidInput) says
    what is allowed."""
    if ":" in name:  # reserved: it separates a tenant from its dataset names
        raise CatalogError(
            f"invalid dataset name {name!r}: ':' is not allowed; use letters, digits, '_', '-' "
            "or '.'"
        )
    return caller.scoped(check_dataset_name(name))


def exists(rt: Runtime, stored: str) -> bool:
    return bool(rt.graph.get_nodes([dataset_id(check_dataset_name(stored))]))


def existing(rt: Runtime, name: str, caller: Caller = LOCAL) -> str:
    """The stored name of the caller's dataset `name` when it exists; DatasetNotFoundError
    otherwise (also for another tenant's: its existence does not leak)."""
    stored = checked(name, caller)
    if not exists(rt, stored):
        raise DatasetNotFoundError(name)
    return stored


def register(rt: Runtime, stored: str) -> None:
    """Create the dataset (if new) and list it."""
    rt.catalog.ensure_dataset(check_dataset_name(stored))
    rt.state.add_member(DATASETS, stored)


def unregister(rt: Runtime, name: str) -> None:
    """Stop listing a dataset (after deleting it)."""
    _registered(rt)  # an older registration must not bring it back
    rt.state.remove_member(DATASETS, name)


def _registered(rt: Runtime) -> set[str]:
    """The registered names; those registered before the set are moved into it once."""
    once(rt.state, INDEXED, lambda: _move_older_registrations(rt))
    return rt.state.add_members({DATASETS: []})[DATASETS]


def _move_older_registrations(rt: Runtime) -> None:
    older = [key.removeprefix(REGISTRY) for key in rt.state.keys(REGISTRY)]
    if older:
        rt.state.add_members({DATASETS: older})
    for name in older:
        rt.state.delete(REGISTRY + name)


def names(rt: Runtime, caller: Caller | None = LOCAL) -> list[str]:
    """The stored names of the caller's datasets (None: every tenant's) that exist, sorted:
    the registered ones and those of known jobs (datasets added before `add` registered them
    but cognified since)."""
    known = _registered(rt) | {job.dataset for job in JobTracker(rt.state).all(live=False)}
    known = {n for n in known if caller is None or caller.owns(n)}
    found = {node.id for node in rt.graph.get_nodes([dataset_id(n) for n in sorted(known)])}
    return sorted(n for n in known if dataset_id(n) in found)


def list_datasets(rt: Runtime, caller: Caller = LOCAL) -> list[DatasetInfo]:
    """The caller's datasets, by the names it knows them by, with their document counts."""
    return [
        DatasetInfo(caller.unscoped(n), rt.graph.count(n).get(DOCUMENT, 0))
        for n in names(rt, caller)
    ]


def documents(
    rt: Runtime, name: str, offset: int = 0, limit: int = 1000, caller: Caller = LOCAL
) -> list[Node]:
    """A window of the dataset's Document nodes (with their processing status), as the caller
    is shown them; empty past the last document. Raises DatasetNotFoundError, InvalidInput
    for a negative offset or limit."""
    if offset < 0 or limit < 0:
        raise InvalidInput(f"offset and limit must be 0 or more, got {offset} and {limit}")
    stored = existing(rt, name, caller)
    # islice takes no bound past sys.maxsize; no dataset holds that many documents.
    start, stop = min(offset, sys.maxsize), min(offset + limit, sys.maxsize)
    window = islice(rt.catalog.documents(stored), start, stop)
    return [shown.graph_item(caller, doc) for doc in window]


def stored_bytes(rt: Runtime, caller: Caller) -> int:
    """Bytes of the documents stored in all the caller's datasets (summed in the store)."""
    return rt.graph.total(names(rt, caller), DOCUMENT, "size")


def running_jobs(rt: Runtime, name: str) -> list[str]:
    """Ids of the unfinished cognify jobs on a dataset."""
    return [job.id for job in JobTracker(rt.state).running() if job.dataset == name]


def ensure_idle(rt: Runtime, stored: str, caller: Caller = LOCAL) -> None:
    """Raise JobRunningError when a cognify job on the dataset is unfinished."""
    running = running_jobs(rt, stored)
    if running:
        raise JobRunningError(caller.unscoped(stored), running)
