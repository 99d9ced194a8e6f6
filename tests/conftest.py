"""What every test shares: its tier markers, the shared fixtures, the models loaded once.

Tiers (registered in pyproject.toml; `--strict-markers`):
- `unit`, `integration`, `e2e`: set here from the folder a test lives in (tests/unit/, ...).
  tests/e2e/faults/ is also `services` and `slow`: every scenario starts worker processes.
- `services`: needs the Redis and Neo4j test servers (tests/services.py). Marked in the test
  module, on the test, or on the parameter (`backend`'s `neo4j`); a test that reaches for a
  server without it fails, so the fast tier never depends on one by accident.
- `slow`: starts a server or worker process (`cogmill serve`, `cogmill worker`, a second
  Redis or Neo4j), a browser or a fuzz run, or takes more than a second (waiting for a job,
  a timeout, a TTL; a big computation). Marked in the test. A fast-tier run lists the tests
  it ran that took longer (`pytest_terminal_summary` below).
- `exclusive`: changes what every test on the servers shares (the Neo4j schema). Under
  `pytest -n` it runs while no other `services` test does (a lock file of the run: `services`
  tests hold it shared, set-up and teardown included, an `exclusive` one alone).

`make check` runs what is neither `slow` nor `services`, in parallel; `make test` runs all.

Fixtures used by tests in several folders live here (no test module imports a fixture):
`models` / `embedder` (the local embedder and the offline spaCy extractor, loaded once per
test process), `llm_server` (a test LLM server per module), `backend` (embedded, then Neo4j
+ Redis), `redis_backend` (fakeredis, then the test Redis), `tracker` (job bookkeeping on
every state store) and `runtime` (a runtime on `backend` with worker threads, the session's
models and the module's `runtime_settings`). Helpers are in tests/backends.py.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.ports import StateStore
from core.settings import Settings
from runtime import Runtime
from tests import services
from tests.backends import (
    EMBEDDED,
    FAKEREDIS,
    NEO4J,
    REDIS,
    SQLITE,
    Backend,
    RedisBackend,
    redis_backend_of,
)
from tests.llm_server import LLMTestServer
from workers.jobs import JobTracker

TESTS = Path(__file__).resolve().parent
TIERS = {"unit", "integration", "e2e"}
# Folders whose every test is also of these tiers.
FOLDER_MARKERS = {("e2e", "faults"): ("services", "slow")}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its folder's tier (tests/<tier>/...) and the folder's extras."""
    for item in items:
        parts = item.path.resolve().relative_to(TESTS).parts[:-1]
        if parts and parts[0] in TIERS:
            item.add_marker(parts[0])
        for prefix, names in FOLDER_MARKERS.items():
            if parts[: len(prefix)] == prefix:
                for name in names:
                    item.add_marker(name)
        # Under `pytest -n` (`--dist loadgroup`), a module's tests run on one worker, so its
        # module-scoped fixtures (an ingested corpus, a server) are set up once; the fault
        # harness's modules share its session fixtures (the undisturbed run) as one group.
        if item.get_closest_marker("xdist_group") is None:
            faults = parts[:2] == ("e2e", "faults")
            group = "/".join(parts[:2] if faults else (*parts, item.path.stem))
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """Under `--dist loadgroup`, a worker's test ids must end with their groups (pytest-xdist's
    way of telling its scheduler): if a pytest release changes how ids are kept, the groups
    are dropped silently and a module's tests scattered over the workers. Stop the run."""
    if node.config.getvalue("dist") == "loadgroup" and not any("@" in id_ for id_ in ids):
        pytest.exit(
            "pytest-xdist did not tag the tests with their groups: this pytest and "
            "pytest-xdist cannot run `--dist loadgroup` (install from uv.lock)",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )


SLOW_CALL_S = 1.0  # a test's call over this belongs in `slow`
_slow_in_fast_tier: list[tuple[float, str]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" and report.duration > SLOW_CALL_S and "slow" not in report.keywords:
        _slow_in_fast_tier.append((report.duration, report.nodeid))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Under `make check` (slow tests deselected): the tests that took over SLOW_CALL_S and
    are not marked `slow`, so the loop every change runs stays about two minutes."""
    markexpr = terminalreporter.config.getoption("markexpr") or ""
    if "not slow" not in markexpr or not _slow_in_fast_tier:
        return
    terminalreporter.section(f"fast-tier tests over {SLOW_CALL_S:.0f} s: mark them slow")
    for duration, nodeid in sorted(_slow_in_fast_tier, reverse=True):
        terminalreporter.write_line(f"{duration:6.2f}s {nodeid}")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    services.expect_services(item.get_closest_marker("services") is not None, item.nodeid)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Under pytest -n, hold the run's services lock around a `services` test (set-up, call and
    teardown: module fixtures write to the servers too): shared, or alone if `exclusive`."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run is None or item.get_closest_marker("services") is None:
        return (yield)
    alone = item.get_closest_marker("exclusive") is not None
    path = Path(tempfile.gettempdir()) / f"cogmill-tests-{run}.lock"
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        try:
            return (yield)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The local embedder and the offline (spaCy) extractor, loaded once per test process:
    `shared` for a runtime whose settings use them (no LLM, no embeddings endpoint)."""
    rt = Runtime(Settings(home=tmp_path_factory.mktemp("models"), llm_base_url=None))
    return {"embedder": rt.embedder, "extractor": rt.extractor}


@pytest.fixture(scope="session")
def embedder(models: dict[str, object]) -> object:
    """The local embedder (all-MiniLM-L6-v2 in numpy), loaded once per test process."""
    return models["embedder"]


@pytest.fixture(scope="module")
def llm_server() -> Iterator[LLMTestServer]:
    """A test LLM server for the module (its request counts are the module's own)."""
    with LLMTestServer() as server:
        yield server


@pytest.fixture(params=[EMBEDDED, pytest.param(NEO4J, marks=pytest.mark.services)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """The test once on the embedded stores and once on Neo4j + Redis (skipped when those
    servers do not answer, a failure under COGMILL_REQUIRE_SERVICES=1)."""
    if request.param == NEO4J:
        return Backend(NEO4J, tmp_path, neo4j=services.neo4j_uri(), redis=services.redis_url())
    return Backend(EMBEDDED, tmp_path)


@pytest.fixture
def runtime_settings() -> dict[str, Any]:
    """Settings fields of the module's `runtime` (a module overrides this fixture)."""
    return {}


@pytest.fixture
def runtime(
    backend: Backend, models: dict[str, object], runtime_settings: dict[str, Any]
) -> Iterator[Runtime]:
    """A runtime on the test's backend with two worker threads and the session's models; its
    data is removed from the shared servers afterwards. A module whose runtime is another
    (a corpus ingested once, an LLM server) defines its own `runtime`."""
    with backend.runtime(models, **runtime_settings) as rt:
        yield rt


@pytest.fixture(
    name="redis_backend", params=[FAKEREDIS, pytest.param(REDIS, marks=pytest.mark.services)]
)
def redis_backend(request: pytest.FixtureRequest) -> Iterator[RedisBackend]:
    """The test once on fakeredis and once on the shared test Redis (skipped when it does not
    answer, a failure under COGMILL_REQUIRE_SERVICES=1); its keys are removed afterwards."""
    backend = redis_backend_of(request.param)
    yield backend
    backend.clean()


@pytest.fixture(params=[SQLITE, FAKEREDIS, pytest.param(REDIS, marks=pytest.mark.services)])
def tracker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JobTracker]:
    """Job bookkeeping on each state store: SQLite, fakeredis, the test Redis."""
    state: StateStore
    if request.param == SQLITE:
        from core.stores.sqlite.state import SQLiteStateStore

        state = SQLiteStateStore(tmp_path / "state.db")
        yield JobTracker(state)
        state.close()
        return
    from core.stores.redis.state import RedisStateStore

    backend = redis_backend_of(request.param)
    client = backend.adapter_client(decode_responses=True)
    state = RedisStateStore(backend.url, prefix=backend.prefix, client=client)
    yield JobTracker(state)
    state.close()
    backend.clean()
