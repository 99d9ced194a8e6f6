"""One tenant's large job does not starve another's, on two Celery worker processes on Redis.

Tenant A's job of many one-document batches fills the queues first; tenant B's one-document
job, planned while A's runs, must finish while A's is still running (without the per-tenant
cap, workers/fairness.py, B's first step waits behind every one of A's). A's job must still
process every document exactly once: its graph is compared id by id with A's documents run
again alone.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import redis

from core.models.jobs import JobStatus
from runtime import Runtime
from tests.backends import LOCAL_DIM, add_files, finished
from tests.distributed import WorkerPool, distributed_runtime, worker_env, write_corpus
from tests.llm_server import LLMTestServer
from tests.services import neo4j_uri, redis_database_url
from workers.jobs import JobTracker
from workers.orchestration import cognify

pytestmark = [pytest.mark.services, pytest.mark.slow]  # worker processes

A, B = "alpha:notes", "beta:memo"
A_DOCUMENTS = 16  # one batch each: A's job runs well over B's bound on two workers
B_BOUND_SECONDS = 10.0  # alone, B's one document takes about a second here


def snapshot(rt: Runtime, dataset: str) -> dict[str, Any]:
    """Every node id by type and every edge id of the dataset."""
    nodes = {
        t: sorted(n.id for n in rt.graph.find_nodes(dataset, t, limit=100_000))
        for t in rt.graph.count(dataset)
        if t != "edges"
    }
    everything = [i for ids in nodes.values() for i in ids]
    edges = sorted(e.id for e in rt.graph.edges_of(everything, limit=10**6))
    return {"nodes": nodes, "edges": edges}


def test_a_one_document_job_finishes_beside_another_tenants_large_job(tmp_path: Path) -> None:
    broker = redis_database_url("fairness")
    redis.Redis.from_url(broker).flushdb()  # no stale queues from an interrupted run
    a_files = write_corpus(tmp_path / "a", A_DOCUMENTS)
    b_file = write_corpus(tmp_path / "b", 1)[0]
    # Each LLM call takes a while, as an endpoint's do: A's batches keep both workers busy.
    with LLMTestServer(latency_ms=150) as llm:
        env = worker_env(
            tmp_path / "home",
            broker,
            neo4j_uri(),
            llm.base_url,
            embedding_dim=str(LOCAL_DIM),
            batch_size="1",
            tenant_batches_in_flight="1",
        )
        pool = WorkerPool(env, tmp_path)
        with distributed_runtime(env) as rt:
            jobs = JobTracker(rt.state)
            try:
                for _ in range(2):  # two workers of one thread each
                    pool.start(concurrency=1)
                add_files(rt, A, a_files)
                add_files(rt, B, [b_file])
                big = cognify(rt, A)
                deadline = time.monotonic() + 60  # the workers start, A's batches hold them
                while jobs.batches_done(big.id) < 2 and time.monotonic() < deadline:
                    time.sleep(0.1)
                started = time.monotonic()
                small = finished(rt, cognify(rt, B), 120, interval=0.1)
                took = time.monotonic() - started
                a_then, a_done = jobs.get(big.id), jobs.batches_done(big.id)
                assert small.status is JobStatus.SUCCEEDED and not small.errors, small
                # Without the cap B's first step waits behind all of A's: A ends first.
                assert not a_then.status.finished, f"A ended first; B took {took:.1f}s"
                assert a_done <= A_DOCUMENTS // 2, f"B ended after {a_done} of A's batches"
                assert took < B_BOUND_SECONDS, f"B's job took {took:.1f}s beside A's"
                big = finished(rt, big, 180, interval=0.25)
                assert big.status is JobStatus.SUCCEEDED and not big.errors, big
                assert big.counts["documents"] == A_DOCUMENTS
                contended = snapshot(rt, A)
                for path in a_files:  # A's documents again, alone: the same ids, none twice
                    rt.catalog.remove_named(A, path.name)
                add_files(rt, A, a_files)
                alone = finished(rt, cognify(rt, A), 180, interval=0.25)
                assert alone.status is JobStatus.SUCCEEDED and not alone.errors, alone
                assert snapshot(rt, A) == contended
            finally:
                pool.stop_all()
                rt.catalog.remove_dataset(A)
                rt.catalog.remove_dataset(B)
                redis.Redis.from_url(broker).flushdb()  # jobs, cache, queues
