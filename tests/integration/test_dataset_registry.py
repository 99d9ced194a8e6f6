"""The dataset list (`GET /datasets`, MCP's list_datasets) reads a set of names, on both stores:
no key scan, which on Redis walks every key of the store, once the older registrations (a key
each) are moved into it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from api.services import datasets
from runtime import Runtime
from tests.backends import Backend, installed_runtime


@pytest.fixture
def runtime(backend: Backend) -> Iterator[Runtime]:
    with installed_runtime(backend.settings()) as rt:
        try:
            yield rt
        finally:
            backend.clean(rt)


def test_datasets_are_listed_from_a_set_and_older_registrations_move_into_it(
    runtime: Runtime, backend: Backend
) -> None:
    older, newer = backend.dataset("older"), backend.dataset("newer")
    runtime.catalog.ensure_dataset(older)
    runtime.state.put(datasets.REGISTRY + older, older)  # as registered before the set
    datasets.register(runtime, newer)

    assert datasets.names(runtime, None) == [newer, older]
    assert runtime.state.keys(datasets.REGISTRY) == []  # moved, and never scanned for again
    scans = _scans(runtime)
    assert datasets.names(runtime, None) == [newer, older]
    assert _scans(runtime) == scans

    datasets.unregister(runtime, older)
    assert datasets.names(runtime, None) == [newer]


def _scans(rt: Runtime) -> int | None:
    """SCAN commands Redis has run (None on SQLite, which reads a key range from its index)."""
    client = getattr(rt.state, "_redis", None)
    return None if client is None else int(client.info("commandstats")["cmdstat_scan"]["calls"])
