"""The API process embeds queries on one BLAS thread (issue 17): its requests run on many
threads at once, and a query's small matrices split over spinning BLAS threads cost ~20x
the CPU on a loaded machine."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy  # noqa: F401 - BLAS must be loaded for threadpoolctl to find it
import pytest
from fastapi.testclient import TestClient
from threadpoolctl import threadpool_info, threadpool_limits

from api.http.app import create_app
from core.settings import Settings
from workers.runtime import Runtime


def blas_threads() -> set[int]:
    return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}


@pytest.fixture
def two_blas_threads() -> Iterator[None]:
    """BLAS on two threads (the library's default on 2 cores) for the test, then one again.
    Set from a thread other than the main one, as the API's lifespan does under TestClient:
    OpenBLAS then ignores a limit set later from another thread."""
    setter = threading.Thread(target=threadpool_limits, kwargs={"limits": 2, "user_api": "blas"})
    setter.start()
    setter.join()
    try:
        yield
    finally:
        threadpool_limits(limits=1, user_api="blas")  # what every other API test runs with


@pytest.mark.usefixtures("two_blas_threads")
def test_serving_the_api_uses_one_blas_thread(tmp_path: Path) -> None:
    assert blas_threads() == {2}, "the test needs BLAS on two threads to start from"
    # One worker thread: the embedded worker leaves BLAS alone, so only the API limits it.
    runtime = Runtime(Settings(home=tmp_path / "home", worker_threads=1))
    with TestClient(create_app(runtime)) as client:
        assert client.get("/health").status_code == 200
        assert blas_threads() == {1}
