"""Batch API mode across `cogmill worker` processes: while the test server's
batches are pending no worker runs a task; every worker is SIGKILLed then, a fresh one
started, and the job still ends with the graph, vectors and postings of a sync run, each
step-batch submitted once and nothing sent synchronously (Neo4j graph + vectors, Redis)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from operator import sub
from pathlib import Path

import pytest
import redis

from api.services import jobs
from api.services.cognify import cognify as start_cognify
from core.models.jobs import Job, JobStatus
from runtime import Runtime
from tests.backends import add_files, finished
from tests.distributed import distributed_runtime, running_workers, worker_env, write_corpus
from tests.e2e.faults.stores import Snapshot, compare, take
from tests.llm_server import LLMTestServer
from tests.services import neo4j_uri, redis_database_url
from workers.celery_app import app
from workers.jobs import JobTracker

pytestmark = [pytest.mark.services, pytest.mark.slow]  # worker processes

DOCUMENTS = 6  # three batches of two documents, three chunks each (extractions + summaries)
SETTINGS = {"chunk_tokens": "24", "llm_batch_poll_seconds": "0.5"}
AFTER_KILL_DELAY = 2.0  # the batches held through the kill are due, the summaries' wait 2 s


@pytest.fixture
def server() -> Iterator[LLMTestServer]:
    with LLMTestServer() as server:
        yield server


def parked(rt: Runtime, server: LLMTestServer, job: Job, timeout: float = 120) -> None:
    """Wait until every batch waits for the Batch API with the server's batches in progress,
    and no worker process runs a task (asked through Celery's remote control)."""
    tracker, deadline = JobTracker(rt.state), time.monotonic() + timeout
    replies: list[dict] = []
    while True:
        waiting = tracker.llm_waiting(job.id) == set(range(job.total_batches))
        pending = server.batches.stats()["pending"]
        if waiting and pending == job.total_batches:
            # One reply per worker process (they may share a host name).
            replies = app.control.broadcast("active", reply=True, timeout=2)
            tasks = [task for reply in replies for found in reply.values() for task in found]
            if len(replies) >= 2 and not tasks:
                return
        assert time.monotonic() < deadline, (waiting, pending, replies)
        time.sleep(0.1)


def without_embeddings(snapshot: Snapshot) -> dict[str, list[float]]:
    """Take the embeddings out of a snapshot's vectors (their payloads stay compared)."""
    embeddings = {}
    for key, value in snapshot.items.get("vector", {}).items():
        embeddings[key] = value.pop("embedding")
    return embeddings


def test_workers_killed_while_batches_pend_lose_nothing(
    server: LLMTestServer, tmp_path: Path
) -> None:
    broker = redis_database_url("batch_mode_distributed")
    redis.Redis.from_url(broker).flushdb()  # no stale queues
    files = write_corpus(tmp_path / "docs", DOCUMENTS)
    dataset = f"batch-{uuid.uuid4().hex[:8]}"

    reference = worker_env(tmp_path / "reference", broker, neo4j_uri(), server.base_url, **SETTINGS)
    with distributed_runtime(reference) as rt, running_workers(reference, tmp_path, 2):
        try:
            assert not add_files(rt, dataset, files).rejected
            job = finished(rt, start_cognify(rt, dataset), 240, interval=0.25)
            assert job.status is JobStatus.SUCCEEDED and not job.errors, job
            expected = take(neo4j_uri(), broker, reference["COGMILL_REDIS_PREFIX"], dataset, job)
            sync_llm = jobs.show(rt, job.id).llm
        finally:
            rt.catalog.remove_dataset(dataset)
    reference_calls = server.calls()
    assert sync_llm.calls == reference_calls > 0
    server.batches.configure(hold=True)  # in progress until the workers are killed

    env = worker_env(tmp_path / "batch", broker, neo4j_uri(), server.base_url, **SETTINGS)
    with distributed_runtime(env) as rt, running_workers(env, tmp_path, 2) as pool:
        try:
            assert not add_files(rt, dataset, files).rejected
            job = start_cognify(rt, dataset, llm_mode="batch")
            parked(rt, server, job)
            assert JobTracker(rt.state).get(job.id).status is JobStatus.RUNNING
            for worker in pool.live():  # every worker dies while the batches wait
                pool.kill(worker)
            server.batches.configure(hold=False, delay_seconds=AFTER_KILL_DELAY)
            pool.start()
            done = finished(rt, job, 240, interval=0.25)
            assert done.status is JobStatus.SUCCEEDED and not done.errors, done
            actual = take(neo4j_uri(), broker, env["COGMILL_REDIS_PREFIX"], dataset, done)
            final = jobs.show(rt, job.id)
            events = [e["event"] for _, e in JobTracker(rt.state).events(job.id)]
        finally:
            rt.catalog.remove_dataset(dataset)
    # Vectors are compared apart: the local embedder groups the texts of one write by length
    # across chunks, summaries and the names a batch embeds first, so a batch finishing in
    # another order than in the sync run embeds a chunk beside other texts (float noise).
    expected_vectors, actual_vectors = without_embeddings(expected), without_embeddings(actual)
    diff = compare(expected, actual)
    assert diff.clean, diff.summary()
    assert expected_vectors.keys() == actual_vectors.keys()
    for key, vector in expected_vectors.items():
        assert max(map(abs, map(sub, vector, actual_vectors[key]))) < 0.01, key
    assert expected.items["node"] and expected.items["edge"]
    stats = server.batches.stats()
    # Submitted once per step-batch (extractions, then summaries), none twice after the kill.
    assert stats["submissions"] == 2 * job.total_batches, stats
    assert events.count("llm_batch_submitted") == events.count("llm_batch_done") == 2 * 3, events
    assert server.calls() == reference_calls, "nothing went synchronously"
    assert final.llm.calls == sync_llm.calls == stats["answered"], final.llm
    assert final.llm.prompt_tokens == sync_llm.prompt_tokens
