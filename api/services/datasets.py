"""Datasets: the one registry every face lists from, existence checks and the running-job guard.

Dataset names enter every use case through `checked` (a new or any name) or `existing` (a
dataset that must exist): the one place where a caller's tenant will scope them (issue 14).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice

from core.catalog import check_dataset_name
from core.models.graph import Node, dataset_id
from core.models.vocabulary import DOCUMENT
from workers.jobs import JobTracker
from workers.runtime import Runtime

# The graph port cannot list datasets across the store, so their names are kept in the state
# store under this prefix by every use case that creates one (add, remember) and dropped by
# the ones that delete one.
REGISTRY = "api:dataset:"


class DatasetNotFoundError(LookupError):
    """The dataset does not exist (never added to, or deleted)."""

    def __init__(self, dataset: str) -> None:
        super().__init__(f"dataset {dataset!r} does not exist")
        self.dataset = dataset


class JobRunningError(RuntimeError):
    """A cognify job on the dataset is unfinished: deleting under it would race its writes (the
    job could write again what was just removed)."""

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


def checked(name: str) -> str:
    """The dataset name, valid; CatalogError (a ValueError) says what is allowed."""
    return check_dataset_name(name)


def exists(rt: Runtime, name: str) -> bool:
    return bool(rt.graph.get_nodes([dataset_id(checked(name))]))


def existing(rt: Runtime, name: str) -> str:
    """The name of a dataset that exists; DatasetNotFoundError otherwise."""
    if not exists(rt, name):
        raise DatasetNotFoundError(name)
    return name


def register(rt: Runtime, name: str) -> None:
    """Create the dataset (if new) and list it."""
    rt.catalog.ensure_dataset(checked(name))
    rt.state.put(REGISTRY + name, name)


def unregister(rt: Runtime, name: str) -> None:
    """Stop listing a dataset (after deleting it)."""
    rt.state.delete(REGISTRY + name)


def names(rt: Runtime) -> list[str]:
    """The datasets that exist, sorted: the registered ones and those of known jobs (datasets
    added before `add` registered them but cognified since)."""
    known = {key.removeprefix(REGISTRY) for key in rt.state.keys(REGISTRY)}
    known |= {job.dataset for job in JobTracker(rt.state).list()}
    found = {node.id for node in rt.graph.get_nodes([dataset_id(n) for n in sorted(known)])}
    return sorted(n for n in known if dataset_id(n) in found)


def list_datasets(rt: Runtime) -> list[DatasetInfo]:
    """Every dataset with its document count."""
    return [DatasetInfo(n, rt.graph.count(n).get(DOCUMENT, 0)) for n in names(rt)]


def documents(rt: Runtime, name: str, offset: int = 0, limit: int = 1000) -> list[Node]:
    """A window of the dataset's Document nodes (with their processing status). Raises
    DatasetNotFoundError."""
    return list(islice(rt.catalog.documents(existing(rt, name)), offset, offset + limit))


def running_jobs(rt: Runtime, name: str) -> list[str]:
    """Ids of the unfinished cognify jobs on a dataset."""
    jobs = JobTracker(rt.state).list()
    return [job.id for job in jobs if job.dataset == name and not job.status.finished]


def ensure_idle(rt: Runtime, name: str) -> None:
    """Raise JobRunningError when a cognify job on the dataset is unfinished."""
    running = running_jobs(rt, name)
    if running:
        raise JobRunningError(name, running)
