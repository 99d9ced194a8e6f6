"""The two store backends the pipeline integration tests run on, as one parametrised fixture.

`embedded`: SQLite graph, Qdrant Edge vectors, SQLite state under a temporary home.
`neo4j`: the distributed stores (Neo4j graph + Neo4j vectors, Redis state and lexical index)
on the shared test servers (tests/services.py). Both run jobs on in-process Celery worker
threads (`memory://` broker); only the stores differ, which is what these tests compare.

The servers are shared by everyone's tests, so each test names its datasets through
`Backend.dataset` (unique names, removed afterwards) and gets a Redis key prefix of its own.
The fixtures `backend`, `redis_backend`, `models`, `embedder` and `llm_server` are
tests/conftest.py's, built from what is here.

`redis_backend` runs a Redis adapter's test once on fakeredis (no server, so the fast tier
runs it) and once on the shared test Redis (marked `services`, as CI runs it). fakeredis lives
in one process: what needs several processes on one server (a rate limit shared by worker
processes, Celery's broker) is tested on the real server only, and says so where it is.

Set-up every test shares instead of writing it again: `installed_runtime` (a runtime on some
settings, installed for tasks) and `threaded_runtime` (the same with Celery worker threads),
`add_files` / `write_files` / `ingest` (add a corpus, cognify it), `finished` / `succeeded`
(a job's end, polled with a deadline) and `http_finished` (the same through the HTTP API),
`llm_settings` (the test LLM server as LLM and embedder). Worker processes on Redis and Neo4j
are tests/distributed.py's.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fakeredis
import pytest
import redis

from core.catalog import AddReport
from core.models.jobs import Job, JobStatus
from core.ports import StoreError
from core.settings import Settings
from pipelines.classify import check_supported
from runtime import Runtime, use_runtime
from tests.llm_server import LLMTestServer
from tests.services import redis_url
from workers.celery_app import configure
from workers.embedded import EmbeddedWorker
from workers.jobs import JobTracker
from workers.orchestration import cognify

EMBEDDED, NEO4J = "embedded", "neo4j"
SQLITE, FAKEREDIS, REDIS = "sqlite", "fakeredis", "redis"
# The dimension of the local embedder, which the shared `Cogmill` vector indexes hold; other
# dimensions (the test LLM server's embeddings) get a namespace of their own per dimension,
# since a Neo4j vector index has one dimension.
LOCAL_DIM = 384


@dataclass
class Backend:
    """One test's view of a backend: settings, unique dataset names, runtimes it cleans up."""

    kind: str
    home: Path
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    neo4j: str | None = None
    redis: str | None = None
    datasets: list[str] = field(default_factory=list)

    @property
    def distributed(self) -> bool:
        return self.kind == NEO4J

    @property
    def redis_prefix(self) -> str:
        return f"cogmill-test:{self.tag}:"

    def dataset(self, name: str) -> str:
        """A dataset name of this test's own, removed from the stores after the test."""
        unique = f"{name}-{self.tag}"
        if unique not in self.datasets:
            self.datasets.append(unique)
        return unique

    def settings(self, **overrides: Any) -> Settings:
        """Settings for this backend; `overrides` are Settings fields (e.g. batch_size=1)."""
        values: dict[str, Any] = {"home": self.home / "home"}
        if self.distributed:
            values |= {
                "neo4j_uri": self.neo4j,
                "vector_store": "neo4j",
                "redis_url": self.redis,
                "redis_prefix": self.redis_prefix,
            }
        return Settings(**(values | overrides))

    @contextmanager
    def runtime(
        self, shared: dict[str, Any] | None = None, threads: int = 2, **overrides: Any
    ) -> Iterator[Runtime]:
        """A runtime on this backend with worker threads running; the test's data is removed
        from the shared servers when it ends. `shared` presets loaded models (embedder...)."""
        settings = self.settings(**overrides)
        shared = dict(shared or {})
        dim = settings.embedding_dim
        if self.distributed and dim != LOCAL_DIM:
            from core.stores.neo4j.vectors import Neo4jVectorStore

            shared["vectors"] = Neo4jVectorStore(
                str(self.neo4j), dim, namespace=f"CogmillTest{dim}"
            )
        with threaded_runtime(settings, shared, threads) as rt:
            if self.distributed:  # never a silent fallback to the embedded stores
                kinds = (
                    type(rt.graph).__name__,
                    type(rt.vectors).__name__,
                    type(rt.state).__name__,
                )
                assert kinds == ("Neo4jGraphStore", "Neo4jVectorStore", "RedisStateStore"), kinds
            try:
                yield rt
            finally:
                self.clean(rt)

    def clean(self, rt: Runtime) -> None:
        """Remove the test's datasets and Redis keys from the shared servers."""
        if not self.distributed:
            return  # everything lives under the temporary home
        for name in self.datasets:
            rt.catalog.remove_dataset(name)
        with redis.Redis.from_url(str(self.redis)) as client:
            keys = list(client.scan_iter(match=f"{self.redis_prefix}*", count=1000))
            if keys:
                client.delete(*keys)


# For a test whose subject does not depend on the stores (a source format, a retriever's
# fallback): it runs embedded only, keeping the Neo4j variants' added time small.
embedded_only = pytest.mark.parametrize("backend", [EMBEDDED], indirect=True)


@dataclass
class RedisBackend:
    """A Redis for one test: fakeredis in this process, or the shared test server.

    Adapters are built with `client=backend.adapter_client(...)`: None on the real server, so
    they connect by URL exactly as in production; a fakeredis client otherwise.
    """

    kind: str
    url: str
    server: fakeredis.FakeServer | None = None
    prefix: str = field(default_factory=lambda: f"cogmill-test:{uuid.uuid4().hex}:")

    @property
    def fake(self) -> bool:
        return self.server is not None

    def client(self, *, decode_responses: bool = False) -> redis.Redis:
        """A client of this Redis for setting up and inspecting keys (the caller closes it)."""
        if self.server is not None:
            return fakeredis.FakeRedis(server=self.server, decode_responses=decode_responses)
        return redis.Redis.from_url(self.url, decode_responses=decode_responses)

    def adapter_client(self, *, decode_responses: bool) -> redis.Redis | None:
        """What an adapter's `client` argument gets: None on the real server (connect by URL)."""
        return self.client(decode_responses=decode_responses) if self.fake else None

    def clean(self) -> None:
        """Remove every key under this test's prefix (the shared server keeps no leftovers)."""
        with self.client() as client:
            keys = list(client.scan_iter(match=f"{self.prefix}*", count=1000))
            if keys:
                client.delete(*keys)


def redis_backend_of(kind: str) -> RedisBackend:
    """A fakeredis server of its own (FAKEREDIS), or the shared test Redis (REDIS: skipped or
    failed when it does not answer); the caller cleans it."""
    if kind == REDIS:
        return RedisBackend(REDIS, redis_url())
    return RedisBackend(FAKEREDIS, "redis://fakeredis:6379/0", fakeredis.FakeServer())


FINISHED = {status.value for status in JobStatus if status.finished}


class JobStuckError(AssertionError):
    """A job did not finish in time."""


def finished(
    rt: Runtime,
    job: Job,
    timeout: float = 120,
    *,
    interval: float = 0.05,
    on_tick: Callable[[Job | None], None] | None = None,
    outages: bool = False,
) -> Job:
    """The job once it has finished, read every `interval` seconds; JobStuckError after
    `timeout` seconds. `on_tick` sees every look at the unfinished job; with `outages`, a
    state store that does not answer (a Redis being killed) is waited out (the look is None)."""
    tracker, deadline = JobTracker(rt.state), time.monotonic() + timeout
    current: Job | None = job
    while current is None or not current.status.finished:
        if time.monotonic() > deadline:
            raise JobStuckError(f"job {job.id} not finished after {timeout:.0f}s: {current}")
        time.sleep(interval)
        try:
            current = tracker.get(job.id)
        except StoreError:
            if not outages:
                raise
            current = None
        if on_tick is not None and (current is None or not current.status.finished):
            on_tick(current)
    return current


def succeeded(rt: Runtime, job: Job, timeout: float = 120) -> Job:
    """The job once it has finished, which must be a success without document errors."""
    job = finished(rt, job, timeout)
    assert job.status is JobStatus.SUCCEEDED and not job.errors, job
    return job


def llm_settings(server: LLMTestServer, embedding_dim: int = 64) -> dict[str, Any]:
    """Settings fields that make the test LLM server the LLM and the embedder (its vectors of
    `embedding_dim`, the server's default)."""
    return {
        "llm_base_url": server.base_url,
        "llm_model": "test",
        "embedding_base_url": server.base_url,
        "embedding_dim": embedding_dim,
    }


def http_finished(client: Any, job_id: str, timeout: float = 120) -> dict[str, Any]:
    """The job as `GET /api/v1/jobs/{id}` shows it once finished, read through `client` (an
    HTTP client of the API, e.g. FastAPI's TestClient) every 0.1 s; fails after `timeout` s."""
    deadline = time.monotonic() + timeout
    job = client.get(f"/api/v1/jobs/{job_id}").json()
    while job["status"] not in FINISHED:
        assert time.monotonic() < deadline, f"job did not finish: {job}"
        time.sleep(0.1)
        job = client.get(f"/api/v1/jobs/{job_id}").json()
    return job


@contextmanager
def installed_runtime(
    settings: Settings, shared: dict[str, Any] | None = None
) -> Iterator[Runtime]:
    """A runtime on `settings`, installed for tasks, no worker running; closed afterwards.
    `shared` presets loaded models or stores (embedder, state...). A message an earlier test
    left in this process's `memory://` broker (a deferred or restored step) is dropped first:
    it would run in this test's worker threads, on this test's stores."""
    if settings.embedded_broker:
        configure(settings).control.purge()
    rt = Runtime(settings)
    rt.__dict__.update(shared or {})  # cached_property slots: share the loaded models
    use_runtime(rt)
    try:
        yield rt
    finally:
        rt.close()
        use_runtime(None)


def with_models(runtime: Runtime, models: dict[str, Any]) -> Runtime:
    """`runtime` with the loaded models `models` (the session's, tests/conftest.py) preset,
    as `installed_runtime`'s `shared` does; its settings must use the local models."""
    settings = runtime.settings
    assert not settings.llm_base_url and not settings.embedding_base_url, "not the local models"
    runtime.__dict__.update(models)  # cached_property slots
    return runtime


@contextmanager
def threaded_runtime(
    settings: Settings, shared: dict[str, Any] | None = None, threads: int = 2
) -> Iterator[Runtime]:
    """`installed_runtime` with Celery worker threads in this process (`memory://` broker)."""
    with installed_runtime(settings, shared) as rt, worker_threads(rt, threads):
        yield rt


def worker_threads(rt: Runtime, threads: int = 2) -> EmbeddedWorker:
    """Celery worker threads for the runtime's settings, to run in a `with` block."""
    return EmbeddedWorker(configure(rt.settings), threads=threads)


def add_files(
    rt: Runtime,
    dataset: str,
    paths: Iterable[Path],
    *,
    node_set: str | None = None,
    pipeline: str | None = None,
) -> AddReport:
    """Add files to a dataset as `cogmill add` does (each under its own file name)."""
    rt.catalog.ensure_dataset(dataset)
    report = AddReport()
    for path in paths:
        rt.catalog.add_file(dataset, path, path.name, report, check_supported, node_set, pipeline)
    return report


def write_files(folder: Path, files: dict[str, str]) -> list[Path]:
    """Write `files` (name -> text) into `folder` (made when missing); their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return [folder / name for name in files]


def ingest(rt: Runtime, dataset: str, paths: Iterable[Path], timeout: float = 120) -> Job:
    """Add the files to a dataset (none may be rejected) and cognify it: the succeeded job."""
    report = add_files(rt, dataset, paths)
    assert not report.rejected, report.rejected
    return succeeded(rt, cognify(rt, dataset), timeout)
