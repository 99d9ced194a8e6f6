"""Distributed mode for real: Celery worker processes on Redis, Neo4j graph + Neo4j vectors,
the LLM behind the local OpenAI-compatible test server. Faults (killed workers, Redis and Neo4j
killed, LLM faults) are the fault harness's, tests/e2e/faults/.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from core.catalog import AddReport
from core.models.jobs import Job, JobStatus
from core.models.vocabulary import INDEX_FIELDS
from core.settings import Settings
from pipelines.classify import check_supported
from tests.llm_server import LLMTestServer
from tests.services import neo4j_uri, redis_url
from workers.celery_app import configure
from workers.jobs import JobTracker
from workers.orchestration import cognify
from workers.runtime import Runtime, use_runtime

pytestmark = [pytest.mark.e2e, pytest.mark.services]

ROOT = Path(__file__).resolve().parents[2]
TOPICS = ["Ada Lovelace", "Charles Babbage", "Grace Hopper", "Alan Turing", "John von Neumann"]


def write_corpus(folder: Path, count: int) -> list[Path]:
    """Small documents whose facts link through shared names, new text for every call (so the
    LLM cache, shared by the tests through Redis, does not answer them)."""
    tag = uuid.uuid4().hex[:6]
    paths = []
    for i in range(count):
        a, b = TOPICS[i % len(TOPICS)], TOPICS[(i + 1) % len(TOPICS)]
        path = folder / f"note_{i:03d}.txt"
        path.write_text(
            f"Note {i}-{tag}. {a} met {b} in London in {1840 + i}.\n\n"
            f"{a} wrote Report {i} about Engine {i % 7}. {b} reviewed Report {i}.",
            encoding="utf-8",
        )
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def llm() -> Iterator[LLMTestServer]:
    with LLMTestServer(latency_ms=300) as server:
        yield server


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, llm: LLMTestServer) -> dict[str, str]:
    """Settings shared by the test process and the worker processes (through the environment)."""
    base = redis_url().rsplit("/", 1)[0]
    broker = f"{base}/5"
    redis.Redis.from_url(broker).flushdb()  # this module's own Redis database: no stale queues
    return worker_env(
        tmp_path_factory.mktemp("shared-home"),
        broker,
        llm,
        llm_max_attempts="8",
        # Short, so a killed worker's task is redelivered within seconds (tasks here take < 5 s).
        task_soft_time_limit_seconds="12",
        task_time_limit_seconds="15",
        visibility_timeout_seconds="20",
    )


def worker_env(home: Path, broker: str, llm: LLMTestServer, **settings: str) -> dict[str, str]:
    """Settings the test process and its worker processes share through the environment:
    Redis for the broker, results and state, Neo4j for the graph and the vectors, the test LLM
    server, batches of two; `settings` adds COGMILL_* variables (lower case, no prefix)."""
    return {
        "COGMILL_HOME": str(home),
        "COGMILL_BROKER_URL": broker,
        "COGMILL_RESULT_BACKEND": broker,
        "COGMILL_REDIS_URL": broker,
        "COGMILL_REDIS_PREFIX": f"test-{uuid.uuid4().hex[:8]}:",
        "COGMILL_NEO4J_URI": neo4j_uri(),
        "COGMILL_VECTOR_STORE": "neo4j",
        "COGMILL_LLM_BASE_URL": llm.base_url,
        "COGMILL_BATCH_SIZE": "2",
        **{f"COGMILL_{name.upper()}": value for name, value in settings.items()},
    }


def open_runtime(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Runtime:
    """This process's runtime on `env`, installed for tasks, with Celery on its broker."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = Settings()
    configure(settings)
    runtime = Runtime(settings)
    use_runtime(runtime)
    return runtime


def close_runtime(runtime: Runtime) -> None:
    """Undo `open_runtime`: close the stores, back to the in-memory broker."""
    runtime.close()
    use_runtime(None)
    configure(Settings(broker_url="memory://", result_backend="cache+memory://"))


class Workers:
    """Worker processes started with `cogmill worker`, killed and restarted at will."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env = {**os.environ, **env, "PYTHONPATH": str(ROOT), "COGMILL_LOG_LEVEL": "INFO"}
        self.log_dir = log_dir
        self.procs: list[subprocess.Popen] = []

    def start(self) -> subprocess.Popen:
        log = (self.log_dir / f"worker-{len(self.procs)}.log").open("w")
        cmd = [sys.executable, "-m", "api.cli", "worker", "--concurrency", "2", "--pool", "threads"]
        proc = subprocess.Popen(cmd, env=self.env, cwd=ROOT, stdout=log, stderr=log)
        self.procs.append(proc)
        return proc

    def kill(self, proc: subprocess.Popen) -> None:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def live(self) -> list[subprocess.Popen]:
        return [p for p in self.procs if p.poll() is None]

    def replace_exited(self, wanted: int) -> int:
        """Start workers until `wanted` run, as a supervisor (compose `restart:`) would."""
        started = 0
        while len(self.live()) < wanted:
            self.start()
            started += 1
        return started

    def stop_all(self) -> None:
        for proc in self.live():
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture
def workers(env: dict[str, str], tmp_path: Path) -> Iterator[Workers]:
    pool = Workers(env, tmp_path)
    pool.start()
    pool.start()
    yield pool
    pool.stop_all()


@pytest.fixture
def runtime(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    rt = open_runtime(env, monkeypatch)
    yield rt
    close_runtime(rt)


@pytest.fixture
def dataset(runtime: Runtime) -> Iterator[str]:
    name = f"dist-{uuid.uuid4().hex[:8]}"
    yield name
    runtime.catalog.remove_dataset(name)


def add(rt: Runtime, dataset: str, paths: list[Path]) -> None:
    rt.catalog.ensure_dataset(dataset)
    report = AddReport()
    for path in paths:
        rt.catalog.add_file(dataset, path, path.name, report, check_supported)
    assert not report.rejected


def wait(rt: Runtime, job: Job, timeout: float = 240, on_tick=None) -> Job:  # noqa: ANN001
    tracker = JobTracker(rt.state)
    deadline = time.monotonic() + timeout
    while not job.status.finished:
        assert time.monotonic() < deadline, f"job still {job.status} after {timeout}s: {job}"
        time.sleep(0.25)
        job = tracker.get(job.id)
        if on_tick:
            on_tick(job)
    return job


def snapshot(rt: Runtime, dataset: str) -> dict[str, object]:
    """Every node id by type, every edge key, and vector counts per collection."""
    nodes: dict[str, list[str]] = {}
    for node_type in ("Document", "DocumentChunk", "Entity", "EntityType", "TextSummary"):
        found = rt.graph.find_nodes(dataset, node_type, limit=100_000)
        nodes[node_type] = sorted(n.id for n in found)
    all_ids = [i for ids in nodes.values() for i in ids]
    edges = sorted(e.id for e in rt.graph.edges_of(all_ids, limit=1_000_000))
    vectors = {
        f"{t}_{f}": rt.vectors.count(f"{t}_{f}", dataset=dataset)
        for t, fields in INDEX_FIELDS.items()
        for f in fields
    }
    return {"nodes": nodes, "edges": edges, "vectors": vectors, "counts": rt.graph.count(dataset)}


def test_two_workers_ingest_a_corpus_into_neo4j(runtime, workers, dataset, tmp_path, llm) -> None:  # noqa: ANN001
    paths = write_corpus(tmp_path, 12)
    add(runtime, dataset, paths)
    job = wait(runtime, cognify(runtime, dataset))
    assert job.status is JobStatus.SUCCEEDED, job
    assert job.counts["documents"] == 12 and not job.errors
    # The graph holds what the extraction returned: every entity the LLM named is a node.
    extracted = runtime.extractor.extract([p.read_text() for p in paths])
    names = {e.name for graph in extracted for e in graph.entities}
    stored = {n.name for n in runtime.graph.find_nodes(dataset, "Entity", limit=10_000)}
    assert names and names <= stored
    assert runtime.vectors.count("DocumentChunk_text", dataset=dataset) == job.counts["chunks"]


def test_only_changed_documents_are_processed_again(
    runtime, workers, dataset, tmp_path, llm
) -> None:  # noqa: ANN001
    paths = write_corpus(tmp_path, 8)
    add(runtime, dataset, paths)
    assert wait(runtime, cognify(runtime, dataset)).status is JobStatus.SUCCEEDED
    calls = llm.calls()
    paths[0].write_text("Note zero. Grace Hopper wrote the first compiler in Philadelphia.")
    paths[1].write_text("Note one. Charles Babbage designed the Analytical Engine in London.")
    add(runtime, dataset, paths)
    job = wait(runtime, cognify(runtime, dataset))
    assert job.status is JobStatus.SUCCEEDED and job.total_documents == 2
    assert llm.calls() - calls == job.counts["chunks"] == 2  # one extraction call per new chunk
    again = wait(runtime, cognify(runtime, dataset))
    assert again.total_documents == 0 and llm.calls() - calls == 2


def test_cancel_stops_queued_and_running_work(runtime, workers, dataset, tmp_path) -> None:  # noqa: ANN001
    paths = write_corpus(tmp_path, 30)
    add(runtime, dataset, paths)
    tracker = JobTracker(runtime.state)
    job = cognify(runtime, dataset)

    def cancel_early(current: Job) -> None:
        # Chains advance breadth-first (every batch's first step, then every second step...),
        # so cancel at the first look, while extraction calls are still in flight.
        tracker.cancel(current.id)

    job = wait(runtime, job, on_tick=cancel_early)
    assert job.status is JobStatus.CANCELLED
    assert job.counts["documents"] < 30
    docs = runtime.graph.find_nodes(dataset, "Document", limit=100)
    done = {d.id for d in docs if d.properties.get("status") == "processed"}
    chunk_docs = {
        c.properties["document_id"]
        for c in runtime.graph.find_nodes(dataset, "DocumentChunk", limit=1000)
    }
    assert chunk_docs <= done  # no half-written documents
    resumed = wait(runtime, cognify(runtime, dataset))
    assert resumed.status is JobStatus.SUCCEEDED
    assert resumed.total_documents == 30 - len(done)


def test_the_global_rate_limit_holds_across_workers(env, runtime, dataset, tmp_path) -> None:  # noqa: ANN001
    # LLM faults (429, 500, timeouts, malformed replies, hangs) are the fault harness's:
    # tests/e2e/faults/test_llm_faults.py compares the final stores with an undisturbed run.
    rpm = 600  # 10 calls/s shared by both workers
    with LLMTestServer(latency_ms=50) as llm:
        pool = Workers(
            {
                **env,
                "COGMILL_LLM_BASE_URL": llm.base_url,
                "COGMILL_LLM_REQUESTS_PER_MINUTE": str(rpm),
            },
            tmp_path,
        )
        pool.start()
        pool.start()
        try:
            paths = write_corpus(tmp_path, 40)
            add(runtime, dataset, paths)
            started = time.monotonic()
            job = wait(runtime, cognify(runtime, dataset))
            elapsed = time.monotonic() - started
        finally:
            pool.stop_all()
        requests = llm.calls()
    assert job.status is JobStatus.SUCCEEDED and not job.errors, job
    assert job.counts["documents"] == 40 and requests >= 40
    # A token bucket with one second of burst: N requests need at least (N - 10) / 10 s.
    assert elapsed >= (requests - rpm / 60) / (rpm / 60) * 0.9, (elapsed, requests)


def test_one_datasets_data_is_invisible_to_anothers_search(
    runtime, workers, dataset, tmp_path
) -> None:  # noqa: ANN001
    other = f"{dataset}-other"
    secret = tmp_path / "secret.txt"
    secret.write_text("Project Bluebird is hidden in Reykjavik by Ingrid Olafsdottir.")
    plain = tmp_path / "plain"
    plain.mkdir()
    add(runtime, dataset, write_corpus(plain, 3))
    add(runtime, other, [secret])
    for name in (dataset, other):
        assert wait(runtime, cognify(runtime, name)).status is JobStatus.SUCCEEDED
    try:
        from retrieval.models import SearchType
        from retrieval.search import search

        for kind in (SearchType.CHUNKS, SearchType.GRAPH_COMPLETION):
            response = search(
                runtime.retrieval(),
                "Where is Project Bluebird hidden?",
                [dataset],
                kind,
                10,
            )
            names = {s.document_name for r in response.results for s in r.sources}
            assert "secret.txt" not in names
            mine = search(
                runtime.retrieval(),
                "Where is Project Bluebird hidden?",
                [other],
                kind,
                10,
            )
            assert mine.results and mine.results[0].sources[0].document_name == "secret.txt"
    finally:
        runtime.catalog.remove_dataset(other)
