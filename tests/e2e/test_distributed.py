"""Distributed mode for real: Celery worker processes on Redis, Neo4j graph + Neo4j vectors,
the LLM behind the local OpenAI-compatible test server. Faults (killed workers, Redis and Neo4j
killed, LLM faults) are the fault harness's, tests/e2e/faults/.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from core.models.jobs import Job, JobStatus
from core.models.vocabulary import INDEX_FIELDS
from runtime import Runtime
from tests.backends import add_files, finished
from tests.distributed import (
    WorkerPool,
    distributed_runtime,
    running_workers,
    worker_env,
    write_corpus,
)
from tests.llm_server import LLMTestServer
from tests.services import neo4j_uri, redis_database_url
from workers.jobs import JobTracker
from workers.orchestration import cognify

pytestmark = [pytest.mark.services, pytest.mark.slow]  # worker processes


@pytest.fixture(scope="module")
def llm() -> Iterator[LLMTestServer]:
    with LLMTestServer(latency_ms=300) as server:
        yield server


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, llm: LLMTestServer) -> dict[str, str]:
    """Settings shared by the test process and the worker processes (through the environment)."""
    broker = redis_database_url("distributed")
    redis.Redis.from_url(broker).flushdb()  # no stale queues
    return worker_env(
        tmp_path_factory.mktemp("shared-home"),
        broker,
        neo4j_uri(),
        llm.base_url,
        llm_max_attempts="8",
        # Short, so a killed worker's task is redelivered within seconds (tasks here take < 5 s).
        task_soft_time_limit_seconds="12",
        task_time_limit_seconds="15",
        visibility_timeout_seconds="20",
    )


@pytest.fixture(scope="module")
def workers(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerPool]:
    """Two worker processes for the module's tests: each job is its own, on its own dataset."""
    with running_workers(env, tmp_path_factory.mktemp("workers")) as pool:
        yield pool


@pytest.fixture
def runtime(env: dict[str, str]) -> Iterator[Runtime]:
    with distributed_runtime(env) as rt:
        yield rt


@pytest.fixture
def dataset(runtime: Runtime) -> Iterator[str]:
    name = f"dist-{uuid.uuid4().hex[:8]}"
    yield name
    runtime.catalog.remove_dataset(name)


def add(rt: Runtime, dataset: str, paths: list[Path]) -> None:
    assert not add_files(rt, dataset, paths).rejected


def wait(rt: Runtime, job: Job, on_tick: Callable[[Job | None], None] | None = None) -> Job:
    return finished(rt, job, 240, interval=0.25, on_tick=on_tick)


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
    # The workers called the LLM (a worker's INFO log says so per task), without a log line
    # per HTTP request.
    logs = "".join(log.read_text() for log in workers.log_dir.glob("worker-*.log"))
    assert "cogmill.extract_graph" in logs and "HTTP Request" not in logs


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

    def cancel_early(current: Job | None) -> None:
        # Chains advance breadth-first (every batch's first step, then every second step...),
        # so cancel at the first look, while extraction calls are still in flight.
        tracker.cancel(job.id)

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


def test_the_global_rate_limit_holds_across_workers(env, tmp_path) -> None:  # noqa: ANN001
    # LLM faults (429, 500, timeouts, malformed replies, hangs) are the fault harness's:
    # tests/e2e/faults/test_llm_faults.py compares the final stores with an undisturbed run.
    rpm = 600  # 10 calls/s shared by both workers
    with LLMTestServer(latency_ms=50) as llm:
        limited = {
            **env,
            # Queues of their own: the module's workers do not see this job.
            "COGMILL_REDIS_PREFIX": f"test-{uuid.uuid4().hex[:10]}:",
            "COGMILL_LLM_BASE_URL": llm.base_url,
            "COGMILL_LLM_REQUESTS_PER_MINUTE": str(rpm),
        }
        dataset = f"dist-{uuid.uuid4().hex[:8]}"
        with distributed_runtime(limited) as runtime, running_workers(limited, tmp_path):
            paths = write_corpus(tmp_path / "corpus", 40)
            add(runtime, dataset, paths)
            started = time.monotonic()
            job = wait(runtime, cognify(runtime, dataset))
            elapsed = time.monotonic() - started
            runtime.catalog.remove_dataset(dataset)
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
