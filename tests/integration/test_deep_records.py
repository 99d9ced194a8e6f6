"""A deeply nested JSON records file gets its own error; the good files beside it are processed
(it once failed the whole batch, and the CSV beside it got a RecursionError).

Both pipelines that read records are run through real jobs: `structured` (rows) and
`default` (records as text elements).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from core.models.jobs import Job
from core.settings import Settings
from pipelines.classify import check_supported
from runtime import Runtime
from tests.backends import (  # noqa: F401 - fixture used by name
    add_files,
    finished,
    models_fixture,
    threaded_runtime,
)
from workers.orchestration import cognify

pytestmark = pytest.mark.integration

DEPTH = 100_000  # far past Python's recursion limit
GOOD_CSV = b"name,city\nAnn,Oslo\nBob,Rome\n"


@pytest.fixture
def runtime(tmp_path: Path, models: dict[str, object]) -> Iterator[Runtime]:
    with threaded_runtime(Settings(home=tmp_path / "home", batch_size=8), models) as rt:
        yield rt


def _files(folder: Path, deep: dict[str, bytes]) -> list[Path]:
    folder.mkdir()
    paths = []
    for name, data in {"people.csv": GOOD_CSV, **deep}.items():
        (folder / name).write_bytes(data)
        paths.append(folder / name)
    return paths


def _run(rt: Runtime, dataset: str, pipeline: str) -> Job:
    return finished(rt, cognify(rt, dataset, pipeline), 300)


DEEP = {
    "deep.json": b'[{"a": ' + b"[" * DEPTH + b"]" * DEPTH + b"}]",
    "deep.jsonl": b'{"a": 1}\n{"b": ' + b"[" * DEPTH + b"]" * DEPTH + b"}\n",
    "nested.json": b"[" + b'{"a": ' * 300 + b"1" + b"}" * 300 + b"]",  # parses; too deep to flatten
}


@pytest.mark.parametrize("pipeline", ["structured", "default"])
def test_a_deeply_nested_records_file_fails_alone(
    runtime: Runtime, tmp_path: Path, pipeline: str
) -> None:
    dataset = f"deep-{pipeline}"
    add_files(runtime, dataset, _files(tmp_path / "files", DEEP), pipeline=pipeline)
    job = _run(runtime, dataset, pipeline)
    assert job.status.value == "succeeded", job
    errors = {e.document_name: e.message for e in job.errors}
    assert set(errors) == set(DEEP), errors
    for name, message in errors.items():
        assert "nested" in message and "RecursionError" not in message, (name, message)
    assert job.counts["documents"] == 1  # people.csv
    names = {n.name for n in runtime.graph.find_nodes(dataset, "Document")}
    assert "people.csv" in names
    assert check_supported("people.csv", GOOD_CSV) is None
