"""`add` decides and writes files a batch at a time (core/catalog_batch.py), on both backends:
a batch costs a constant number of store transactions whatever its size, and the outcome
(reports, records, blobs) is what adding the same files one at a time gives, for a mix of new,
unchanged, renamed, changed, duplicate-content and rejected files."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from api.services.add import add_files as add_service
from core.catalog import AddReport
from core.models.documents import PIPELINE, STATUS, DocumentStatus
from core.models.graph import Node
from core.models.vocabulary import DOCUMENT, NODE_SET
from pipelines.classify import check_supported
from runtime import Runtime
from tests.backends import Backend, installed_runtime

MAX_FILE_BYTES = 4096
PROCESSED = DocumentStatus.PROCESSED.value

# What the dataset holds before the mixed adds: keep.txt and rows.csv as if cognified, and
# rows.csv given the default pipeline by `cognify --pipeline default`.
SETUP = [
    ("keep.txt", b"Kept text."),
    ("old_name.txt", b"Renamed text."),
    ("changed.txt", b"First version."),
    ("scores.csv", b"a,b\n1,2\n"),
    ("rows.csv", b"x,y\n5,6\n"),
]
MIXED = [
    ("new.txt", b"New text."),  # added
    ("keep.txt", b"Kept text."),  # unchanged
    ("new_name.txt", b"Renamed text."),  # added: old_name.txt's content takes the new name
    ("changed.txt", b"Second version."),  # replaced
    ("dup.txt", b"New text."),  # added: new.txt's content (this batch's) takes the name
    ("tool.exe", b"MZ\x90\x00 binary"),  # rejected: unsupported
    ("empty.txt", b""),  # rejected: empty
    ("twice.txt", b"Twice, first."),  # added
    ("twice.txt", b"Twice, second."),  # replaced (what this batch just added)
    ("twice.txt", b"Twice, first."),  # replaced: re-adds what this batch removed
    ("old_name.txt", b"Renamed text."),  # added: renamed back
    ("scores.csv", b"a,b\n1,2\n3,4\n"),  # replaced: a changed record file
    ("huge.txt", b"word " * 1000),  # rejected: above COGMILL_MAX_FILE_BYTES
    ("rows.csv", b"x,y\n5,6\n"),  # unchanged: keeps the pipeline cognify gave it
]
NODE_SET_ADDS = [("keep.txt", b"Kept text."), ("dup.txt", b"New text.")]
EXPLICIT_ADDS = [("scores.csv", b"a,b\n1,2\n3,4\n")]

# name -> (content, status, pipeline, node set) once everything above is added
FINAL = {
    "keep.txt": (b"Kept text.", "added", None, "rules"),
    "dup.txt": (b"New text.", "added", None, "rules"),
    "old_name.txt": (b"Renamed text.", "added", None, None),
    "changed.txt": (b"Second version.", "added", None, None),
    "twice.txt": (b"Twice, first.", "added", None, None),
    "scores.csv": (b"a,b\n1,2\n3,4\n", "added", "default", None),
    "rows.csv": (b"x,y\n5,6\n", PROCESSED, "default", None),
}

Adder = Callable[[Runtime, str, list[tuple[str, Path]], AddReport, dict[str, Any]], None]


def one_by_one(
    rt: Runtime,
    dataset: str,
    files: list[tuple[str, Path]],
    report: AddReport,
    options: dict[str, Any],
) -> None:
    for name, path in files:
        rt.catalog.add_file(dataset, path, name, report, check_supported, **options)


def batched(size: int) -> Adder:
    def add(
        rt: Runtime,
        dataset: str,
        files: list[tuple[str, Path]],
        report: AddReport,
        options: dict[str, Any],
    ) -> None:
        rt.catalog.add_files(dataset, files, report, check_supported, **options, batch=size)

    return add


@pytest.fixture
def runtime(backend: Backend) -> Iterator[Runtime]:
    with installed_runtime(backend.settings(max_file_bytes=MAX_FILE_BYTES)) as rt:
        try:
            yield rt
        finally:
            backend.clean(rt)


class Files:
    """Writes each added file at a path of its own (the same name may come twice)."""

    def __init__(self, root: Path) -> None:
        self.root, self.count = root, 0

    def __call__(self, contents: list[tuple[str, bytes]]) -> list[tuple[str, Path]]:
        written = []
        for name, data in contents:
            self.count += 1
            path = self.root / str(self.count) / name
            path.parent.mkdir(parents=True)
            path.write_bytes(data)
            written.append((name, path))
        return written


def documents(rt: Runtime, dataset: str) -> dict[str, Node]:
    docs = rt.graph.find_nodes(dataset, DOCUMENT, limit=1000)
    assert len({d.name for d in docs}) == len(docs), [d.name for d in docs]
    return {doc.name: doc for doc in docs}


def outcome(rt: Runtime, dataset: str) -> dict[str, tuple[Any, ...]]:
    """Each document's content, status, pipeline and node set, read back from its blob."""
    found = {}
    for name, doc in documents(rt, dataset).items():
        with rt.blobs.open(doc.properties["blob_key"]) as blob:
            content = blob.read()
        assert doc.properties["content_hash"] == hashlib.sha256(content).hexdigest()
        assert doc.properties["size"] == len(content)
        props = doc.properties
        found[name] = (content, props[STATUS], props.get(PIPELINE), props.get(NODE_SET))
    return found


def mark_processed(rt: Runtime, dataset: str, names: dict[str, dict[str, Any]]) -> None:
    docs = documents(rt, dataset)
    rt.graph.upsert_nodes(
        [
            Node(id=docs[name].id, type=DOCUMENT, dataset=dataset, properties=props)
            for name, props in names.items()
        ]
    )


def run_adds(rt: Runtime, dataset: str, files: Files, add: Adder) -> list[AddReport]:
    reports = [AddReport() for _ in range(4)]
    add(rt, dataset, files(SETUP), reports[0], {})
    cognified = {STATUS: PROCESSED}
    mark_processed(
        rt, dataset, {"keep.txt": cognified, "rows.csv": cognified | {PIPELINE: "default"}}
    )
    add(rt, dataset, files(MIXED), reports[1], {})
    add(rt, dataset, files(NODE_SET_ADDS), reports[2], {"node_set": "rules"})
    add(rt, dataset, files(EXPLICIT_ADDS), reports[3], {"pipeline": "default"})
    return reports


def test_a_batch_adds_as_one_by_one_adds_do(runtime: Runtime, backend: Backend, tmp_path: Path):
    files = Files(tmp_path / "files")
    results = {}
    for label, add in [("one", one_by_one), ("by3", batched(3)), ("whole", batched(500))]:
        dataset = backend.dataset(f"batch-{label}")
        runtime.catalog.ensure_dataset(dataset)
        reports = run_adds(runtime, dataset, files, add)
        stored = sorted(p.name for p in (runtime.blobs.root / dataset).iterdir())  # type: ignore[attr-defined]
        ids = sorted(doc.id for doc in documents(runtime, dataset).values())
        assert stored == ids, f"{label}: blobs {stored} but documents {ids}"
        results[label] = (reports, outcome(runtime, dataset))

    reports, final = results["one"]
    mixed = reports[1]
    assert mixed.added == ["new.txt", "new_name.txt", "dup.txt", "twice.txt", "old_name.txt"]
    assert mixed.replaced == ["changed.txt", "twice.txt", "twice.txt", "scores.csv"]
    assert mixed.unchanged == ["keep.txt", "rows.csv"]
    assert [name for name, _ in mixed.rejected] == ["tool.exe", "empty.txt", "huge.txt"]
    assert reports[2].unchanged == ["keep.txt", "dup.txt"]
    assert reports[3].unchanged == ["scores.csv"]
    assert final == FINAL
    for label in ("by3", "whole"):
        assert results[label] == results["one"], label


@pytest.fixture
def transactions(runtime: Runtime) -> Iterator[list[int]]:
    """Counts the graph store's transactions: every read and write of the real store, each a
    round trip to Neo4j (a session and its transaction) or a SQLite transaction."""
    store: Any = runtime.graph
    real = store._transaction
    count = [0]

    def counted(*args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return real(*args, **kwargs)

    store._transaction = counted
    try:
        yield count
    finally:
        del store._transaction


def test_adding_costs_a_few_transactions_per_batch(
    runtime: Runtime, backend: Backend, tmp_path: Path, transactions: list[int]
) -> None:
    files = Files(tmp_path / "files")
    texts = [(f"note-{i}.txt", f"Note number {i}.".encode()) for i in range(120)]
    dataset = backend.dataset("batch-trips")
    runtime.catalog.ensure_dataset(dataset)
    for count in (20, 120):  # then 20 unchanged and 100 new
        transactions[0] = 0
        report = AddReport()
        added = files(texts[:count])
        runtime.catalog.add_files(dataset, added, report, check_supported, batch=20)
        # One read of the documents by name, one write of the records: per batch.
        assert transactions[0] <= 2 * math.ceil(count / 20), (count, transactions[0])
    assert len(report.unchanged) == 20 and len(report.added) == 100

    transactions[0] = 0
    more = [(f"more-{i}.txt", f"More text {i}.".encode()) for i in range(200)]
    added_by_service = add_service(runtime, dataset, files(more))
    # the default batch holds all 200; registering the dataset writes its node once more
    assert transactions[0] <= 2 + 1, transactions[0]
    assert len(added_by_service.report.added) == 200
    assert len(documents(runtime, dataset)) == 320


def test_files_before_an_unreadable_one_are_stored(
    runtime: Runtime, backend: Backend, tmp_path: Path
) -> None:
    files = Files(tmp_path / "files")
    dataset = backend.dataset("batch-gone")
    runtime.catalog.ensure_dataset(dataset)
    readable = files([("first.txt", b"First."), ("second.txt", b"Second.")])
    gone = [("gone.txt", tmp_path / "no-such-file.txt")]
    report = AddReport()
    with pytest.raises(FileNotFoundError):
        runtime.catalog.add_files(dataset, readable + gone, report, check_supported)
    assert report.added == ["first.txt", "second.txt"]
    assert set(outcome(runtime, dataset)) == {"first.txt", "second.txt"}
