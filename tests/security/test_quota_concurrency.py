"""A tenant's storage quota holds under parallel uploads, on both backends.

With a 100 KB quota, nine uploads of 40 KB sent at once all answered 200 and 360 KB were
stored: each checked the bytes stored before any of them had written its documents. An add
now reserves its bytes atomically in the state store (SQLite: a write transaction; Redis: a
Lua script) before it is accepted, and gives them back when it ends, stored or failed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from httpx import Response

from api.http.app import create_app
from api.services.add import add_files
from api.services.datasets import stored_bytes
from api.services.quota import reservation_key
from api.services.tenants import QuotaExceededError, Tenants
from core.access import Caller, Role
from runtime import Runtime
from tests.backends import Backend, installed_runtime

pytestmark = pytest.mark.integration

QUOTA = 100_000
UPLOADS = 9
SIZE = 40_000


@pytest.fixture
def runtime(backend: Backend) -> Iterator[Runtime]:
    settings = backend.settings(tenant_storage_bytes=QUOTA)
    try:
        with installed_runtime(settings) as rt:
            yield rt
    finally:  # on a runtime of its own: the app closes its runtime when it stops
        with installed_runtime(settings) as rt:
            backend.clean(rt)


def tenant_of(backend: Backend, rt: Runtime, datasets: list[str]) -> tuple[Caller, str]:
    """A tenant of this test's own and a writer key; its stored datasets are cleaned up."""
    name = f"q{backend.tag}"
    tenants = Tenants(rt.state)
    tenants.create_tenant(name)
    key, _ = tenants.create_key(name, Role.WRITER)
    backend.datasets.extend(f"{name}:{dataset}" for dataset in datasets)
    return Caller(name, Role.WRITER), key


def test_parallel_uploads_end_at_or_under_the_quota(backend: Backend, runtime: Runtime) -> None:
    datasets = [f"d{i % 3}" for i in range(UPLOADS)]  # the quota spans a tenant's datasets
    caller, key = tenant_of(backend, runtime, sorted(set(datasets)))
    start = threading.Barrier(UPLOADS)
    with TestClient(create_app(runtime), headers={"Authorization": f"Bearer {key}"}) as client:

        def upload(i: int) -> Response:
            text = f"upload {i} ".ljust(SIZE, "x")
            body = {"documents": [{"name": f"u{i}.txt", "text": text}]}
            start.wait()
            return client.post(f"/api/v1/datasets/{datasets[i]}/data", json=body)

        with ThreadPoolExecutor(UPLOADS) as pool:
            answers = list(pool.map(upload, range(UPLOADS)))
    codes = sorted(answer.status_code for answer in answers)
    refused = [a.json()["error"] for a in answers if a.status_code == 413]
    assert set(codes) <= {200, 413}, [a.text for a in answers]
    assert all(e["code"] == "quota_exceeded" for e in refused), refused
    stored = stored_bytes(runtime, caller)
    print(f"\n{codes.count(200)} of {UPLOADS} uploads stored, {stored} bytes (quota {QUOTA})")
    assert stored <= QUOTA
    assert stored == codes.count(200) * SIZE  # what was answered 200 is what is stored
    assert codes.count(200) >= 1  # a quota is no wall: what fits is stored
    assert runtime.state.get(reservation_key(caller.tenant or "")) is None  # all released


def test_a_failed_add_gives_its_reservation_back(
    backend: Backend, runtime: Runtime, tmp_path: Path
) -> None:
    caller, _ = tenant_of(backend, runtime, ["docs"])
    unreadable = tmp_path / "a-folder.txt"  # stat() works, reading fails in the catalog
    unreadable.mkdir()
    with pytest.raises(IsADirectoryError):
        add_files(runtime, "docs", [("a.txt", unreadable)], caller=caller)
    assert runtime.state.get(reservation_key(caller.tenant or "")) is None
    whole = tmp_path / "whole.txt"
    whole.write_text("y" * QUOTA)  # the whole quota is free again
    assert add_files(runtime, "docs", [("whole.txt", whole)], caller=caller).report.added
    one_more = tmp_path / "one.txt"
    one_more.write_text("z")
    with pytest.raises(QuotaExceededError, match="COGMILL_TENANT_STORAGE_BYTES"):
        add_files(runtime, "docs", [("one.txt", one_more)], caller=caller)
