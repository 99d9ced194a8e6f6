"""remember and forget over a Runtime, shared by the CLI and the HTTP API.

Sessions are per server (or per Redis prefix): the API has no tenants yet, so anyone who can
call it can read a session whose id they know. When API keys map to tenants, the session key
prefix must carry the tenant.
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from core.catalog import AddReport, CatalogError, check_dataset_name
from core.models.graph import dataset_id
from core.models.jobs import Job
from retrieval.sessions import Note, SessionStore
from workers.jobs import JobTracker
from workers.runtime import Runtime

# The API lists datasets from this registry (api/routes/datasets.py); memory writes keep it.
DATASET_REGISTRY = "api:dataset:"


def sessions(runtime: Runtime) -> SessionStore:
    return SessionStore(runtime.state, runtime.settings.session_ttl_seconds)


def remember_note(runtime: Runtime, session: str, text: str) -> Note:
    """Keep a note in a session (expires with the session TTL)."""
    return sessions(runtime).add_note(session, text)


def memory_document_name(text: str) -> str:
    """The document a remembered text becomes: named by its content, so remembering the same
    text twice is one document."""
    return f"memory-{hashlib.sha256(text.strip().encode()).hexdigest()[:16]}.txt"


def remember_in_dataset(runtime: Runtime, dataset: str, text: str) -> tuple[str, Job]:
    """Add the text to a dataset as a small document and start a cognify job for it.

    Returns the document name and the job (already finished when the text was known).
    """
    from pipelines.classify import check_supported
    from workers.orchestration import cognify

    check_dataset_name(dataset)
    if not text.strip():
        raise ValueError("the text is empty; pass the text to remember")
    name = memory_document_name(text)
    runtime.catalog.ensure_dataset(dataset)
    runtime.state.put(DATASET_REGISTRY + dataset, dataset)
    report = AddReport()
    with tempfile.TemporaryDirectory(prefix=".memory-", dir=runtime.settings.home) as tmp:
        path = Path(tmp) / name
        path.write_text(text.strip() + "\n", encoding="utf-8")
        runtime.catalog.add_file(dataset, path, name, report, check_supported)
    if report.rejected:
        raise ValueError(f"cannot remember this text: {report.rejected[0][1]}")
    return name, cognify(runtime, dataset)


@dataclass
class Forgotten:
    """What forget removed."""

    session_keys: int = 0
    sessions: list[str] = field(default_factory=list)
    datasets: list[str] = field(default_factory=list)
    documents: list[str] = field(default_factory=list)
    graph_items: int = 0


def forget(
    runtime: Runtime,
    *,
    session: str | None = None,
    dataset: str | None = None,
    document: str | None = None,
    everything: bool = False,
    confirm: bool = False,
) -> Forgotten:
    """Forget one session, one document of a dataset, a dataset, or everything.

    Exactly one target: `session`, `dataset` (with `document` for one document), or
    `everything` (which needs `confirm`). Raises ValueError for a bad combination and
    LookupError for something that does not exist.
    """
    targets = sum((session is not None, dataset is not None, everything))
    if targets != 1:
        raise ValueError(
            "forget needs exactly one target: a session, a dataset (optionally with a "
            "document), or everything"
        )
    if document is not None and dataset is None:
        raise ValueError("a document is forgotten from a dataset: give the dataset too")
    done = Forgotten()
    if everything:
        if not confirm:
            raise ValueError("forgetting everything deletes every dataset and session; confirm it")
        return _forget_everything(runtime, done)
    if session is not None:
        store = sessions(runtime)
        if not store.exists(session):
            raise LookupError(f"no session {session!r} (never used, forgotten or expired)")
        done.session_keys, done.sessions = store.forget(session), [session]
        return done
    assert dataset is not None
    check_dataset_name(dataset)
    if not runtime.graph.get_nodes([dataset_id(dataset)]):
        raise LookupError(f"dataset {dataset!r} does not exist")
    if document is not None:
        try:
            removed = runtime.catalog.remove_named(dataset, document)
        except CatalogError as err:
            raise LookupError(str(err)) from None
        done.documents = [document]
    else:
        removed = runtime.catalog.remove_dataset(dataset)
        runtime.state.delete(DATASET_REGISTRY + dataset)
        done.datasets = [dataset]
    done.graph_items = len(removed.node_ids) + len(removed.edge_ids)
    return done


def known_datasets(runtime: Runtime) -> list[str]:
    """Datasets the state store knows of (the API registry and cognify jobs) that still exist.

    The graph port cannot list datasets, so one only ever `cogmill add`-ed and never cognified
    is not found here (see `forget --dataset`).
    """
    names = {key.removeprefix(DATASET_REGISTRY) for key in runtime.state.keys(DATASET_REGISTRY)}
    names |= {job.dataset for job in JobTracker(runtime.state).list()}
    existing = {n.id for n in runtime.graph.get_nodes([dataset_id(n) for n in sorted(names)])}
    return sorted(n for n in names if dataset_id(n) in existing)


def _forget_everything(runtime: Runtime, done: Forgotten) -> Forgotten:
    store = sessions(runtime)
    done.sessions = store.sessions()
    done.session_keys = store.forget_all()
    for name in known_datasets(runtime):
        removed = runtime.catalog.remove_dataset(name)
        runtime.state.delete(DATASET_REGISTRY + name)
        done.datasets.append(name)
        done.graph_items += len(removed.node_ids) + len(removed.edge_ids)
    return done
