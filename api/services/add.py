"""Add documents to a dataset: files and folders, received uploads, SQL sources.

Every add registers the dataset (so every face lists it), accepts the same kinds (text
formats and SQLite databases), and takes a node set, a pipeline and declared table keys.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from api.services.datasets import checked, register
from api.services.quota import storage_reserved
from core.access import LOCAL, Caller
from core.catalog import AddReport, check_node_set, iter_files
from core.document_names import document_name
from core.errors import InvalidInput
from core.facts.when import document_day
from core.models.documents import STRUCTURED_PIPELINE
from pipelines.definitions import get_pipeline
from pipelines.structured.key_declarations import KeyDeclarations, declare_keys
from pipelines.structured.snapshot import snapshot_sql
from pipelines.structured.tables import check_source
from runtime import Runtime

SQL_PIPELINE = STRUCTURED_PIPELINE


@dataclass
class Added:
    """What an add did with each input, the tables a SQL source gave, and the tables whose
    declared keys changed (the next cognify relinks them)."""

    dataset: str
    report: AddReport = field(default_factory=AddReport)
    copied_tables: list[str] = field(default_factory=list)
    relinked_tables: list[str] = field(default_factory=list)

    @property
    def stored(self) -> int:
        """Inputs now stored (added, replaced or unchanged)."""
        report = self.report
        return len(report.added) + len(report.replaced) + len(report.unchanged)


@dataclass(frozen=True)
class AddOptions:
    """How added documents are processed: their node set (e.g. coding_rules), their pipeline
    (default: `structured` for record files, else each cognify's), declared table keys."""

    node_set: str | None = None
    pipeline: str | None = None
    keys: KeyDeclarations | None = None
    # The day the documents speak of ("2023-03-15", "March 2023"): their facts without a
    # date of their own held then (core/facts/).
    document_date: str | None = None

    def check(self) -> str | None:
        """Raise CatalogError / InvalidInput for a bad node set, an unknown pipeline or a bad
        document date; the document date as an ISO day."""
        if self.node_set is not None:
            check_node_set(self.node_set)
        if self.pipeline is not None:
            get_pipeline(self.pipeline)  # an unknown name is an error listing the known ones
        if self.document_date is None:
            return None
        return document_day(self.document_date, "the document date")


def add_files(
    rt: Runtime,
    dataset: str,
    files: Iterable[tuple[str, Path]],
    options: AddOptions | None = None,
    caller: Caller = LOCAL,
) -> Added:
    """Add files, each `(name, path)`: rejected (with the reason), skipped as unchanged, or
    stored. A name from outside is a label, never a path: it is reduced to its base name
    (core/document_names.py) or rejected. Raises CatalogError for a bad dataset or node set
    name, InvalidInput for an unknown pipeline, before anything is stored."""
    return _add(rt, dataset, (_named(name, path) for name, path in files), options, caller)


def _named(name: str, path: Path) -> tuple[str, Path, str | None]:
    try:
        return document_name(name), path, None
    except ValueError as err:
        return name[:80], path, str(err)


def add_paths(
    rt: Runtime, dataset: str, paths: Sequence[Path], options: AddOptions | None = None
) -> Added:
    """`add_files` for files and folders (recursively, hidden entries skipped) named by their
    file name; a missing path is rejected."""
    found = (
        (path.name if problem is None else str(path), path, problem)
        for path, problem in iter_files(list(paths))
    )
    return _add(rt, dataset, found, options)


def sql_source_name(url: str) -> str:
    """The document name of a SQL source: its URL with the password hidden. InvalidInput for a
    string that is no SQLAlchemy URL."""
    # SQLAlchemy is imported here: every `cogmill` command and worker loads this module.
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        raise InvalidInput(
            "the source is not a database URL; give a SQLAlchemy URL such as sqlite:///shop.db"
        ) from None


def add_sql(
    rt: Runtime,
    dataset: str,
    url: str,
    tables: Sequence[str] = (),
    keys: KeyDeclarations | None = None,
) -> Added:
    """Copy the tables of a database (all, or `tables`) into a SQLite snapshot with their keys
    and add it as one document named after the URL (`structured` pipeline)."""
    checked(dataset)  # before a long copy
    name = sql_source_name(url)
    options = AddOptions(pipeline=SQL_PIPELINE, keys=keys)
    with tempfile.TemporaryDirectory() as tmp:
        snapshot = Path(tmp) / "snapshot.sqlite"
        copied = snapshot_sql(url, snapshot, list(tables))
        added = _add(rt, dataset, [(name, snapshot, None)], options)
    added.copied_tables = copied
    return added


def _accepted(
    files: Iterable[tuple[str, Path, str | None]], report: AddReport
) -> Iterator[tuple[str, Path]]:
    """The files without a problem, streamed; the others reported rejected as they come, so
    the rejections keep the inputs' order with the catalog's own."""
    for name, path, problem in files:
        if problem is None:
            yield name, path
        else:
            report.rejected.append((name, problem))


def _add(
    rt: Runtime,
    dataset: str,
    files: Iterable[tuple[str, Path, str | None]],
    options: AddOptions | None,
    caller: Caller = LOCAL,
) -> Added:
    options = options or AddOptions()
    document_date = options.check()
    shown, dataset = dataset, checked(dataset, caller)
    incoming = 0
    if caller.tenant is not None and rt.settings.tenant_storage_bytes:
        files = list(files)  # counted before anything is stored
        incoming = sum(path.stat().st_size for _, path, problem in files if problem is None)
    with storage_reserved(rt, caller, incoming):
        register(rt, dataset)
        added = Added(shown)
        rt.catalog.add_files(
            dataset,
            _accepted(files, added.report),
            added.report,
            check_source,
            options.node_set,
            options.pipeline,
            document_date=document_date,
        )
    if options.keys is not None and declare_keys(rt.graph, dataset, options.keys):
        added.relinked_tables = sorted(options.keys.tables)
    return added
