"""Budgets across `cogmill worker` processes: the job's budget is shared by every
worker through Redis counters, so two workers together stop at it; the paused job resumes on
the workers and ends with exactly the graph, vectors, postings and LLM calls of a run that
never paused (Neo4j graph + vectors, Redis state)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from api.services import jobs
from api.services.cognify import cognify as start_cognify
from core.models.documents import STATUS, DocumentStatus
from core.models.jobs import JobStatus
from tests.backends import add_files, finished
from tests.distributed import distributed_runtime, running_workers, worker_env, write_corpus
from tests.e2e.faults.stores import compare, take
from tests.llm_server import LLMTestServer
from tests.services import neo4j_uri, redis_url
from workers.usage import job_usage

pytestmark = [pytest.mark.e2e, pytest.mark.services]

BROKER_DB = 10  # this module's own Redis database (see test_usage_distributed.py)
WORKERS = 2
CONCURRENCY = 4  # LLM requests in flight per worker process
SETTINGS = {
    # A batch a document: twelve batches, four at a time on two workers of two threads, so
    # half the budget sees some batches through (and stops others part way).
    "batch_size": "1",
    "llm_concurrency": str(CONCURRENCY),
    "chunk_tokens": "24",  # three chunks a document: extractions and a summary each
    "llm_price_input_per_mtok": "0.15",
    "llm_price_output_per_mtok": "0.6",
}


@pytest.fixture
def server() -> Iterator[LLMTestServer]:
    with LLMTestServer(latency_ms=40) as server:
        yield server


def test_workers_pause_at_the_budget_and_resume_to_the_unbudgeted_graph(
    server: LLMTestServer, tmp_path: Path
) -> None:
    broker = f"{redis_url().rsplit('/', 1)[0]}/{BROKER_DB}"
    redis.Redis.from_url(broker).flushdb()  # no stale queues
    files = write_corpus(tmp_path / "docs", 12)
    dataset = f"budget-{uuid.uuid4().hex[:8]}"

    # The undisturbed run: no budget, its own key prefix (so its LLM cache is not the next
    # run's); its data is removed before the budgeted run writes the same ids.
    reference = worker_env(tmp_path / "reference", broker, neo4j_uri(), server.base_url, **SETTINGS)
    with distributed_runtime(reference) as rt, running_workers(reference, tmp_path, WORKERS):
        try:
            assert not add_files(rt, dataset, files).rejected
            job = finished(rt, start_cognify(rt, dataset), 240, interval=0.25)
            assert job.status is JobStatus.SUCCEEDED and not job.errors, job
            expected = take(neo4j_uri(), broker, reference["COGMILL_REDIS_PREFIX"], dataset, job)
            unbudgeted = jobs.show(rt, job.id)
            largest = max(  # no request used more than its whole document
                sum(
                    job_usage(rt.state, job.id, document=doc.id)["llm"][field]
                    for field in ("prompt_tokens", "completion_tokens")
                )  # fmt: skip
                for doc in rt.catalog.documents(dataset)
            )
        finally:
            rt.catalog.remove_dataset(dataset)
    reference_calls = server.calls()
    assert unbudgeted.llm.calls == reference_calls >= 36, unbudgeted.llm

    env = worker_env(tmp_path / "budgeted", broker, neo4j_uri(), server.base_url, **SETTINGS)
    with distributed_runtime(env) as rt, running_workers(env, tmp_path, WORKERS):
        try:
            assert not add_files(rt, dataset, files).rejected
            budget = unbudgeted.spent.tokens // 2
            job = start_cognify(rt, dataset, budget_tokens=budget)
            paused = finished(rt, job, 240, interval=0.25)
            assert paused.status is JobStatus.PAUSED_BUDGET and not paused.errors, paused
            report = jobs.show(rt, job.id)
            # Each request reserved its estimate before it was sent: only requests in flight
            # on the two workers when the budget ran out can take the job past it.
            bound = budget + WORKERS * CONCURRENCY * largest
            assert budget // 2 <= report.spent.tokens <= bound, (report.spent, budget, largest)
            assert report.llm.calls == server.calls() - reference_calls
            states = [str(doc.properties.get(STATUS)) for doc in rt.catalog.documents(dataset)]
            assert DocumentStatus.PROCESSED in states and DocumentStatus.ADDED in states, states
            assert DocumentStatus.FAILED not in states, states

            resumed = jobs.resume(rt, job.id, tokens=unbudgeted.spent.tokens * 3)
            done = finished(rt, resumed, 240, interval=0.25)
            assert done.status is JobStatus.SUCCEEDED and not done.errors, done
            actual = take(neo4j_uri(), broker, env["COGMILL_REDIS_PREFIX"], dataset, done)
            final = jobs.show(rt, job.id)
        finally:
            rt.catalog.remove_dataset(dataset)
    diff = compare(expected, actual)
    assert diff.clean, diff.summary()
    assert expected.items["node"] and expected.items["edge"]
    # Both runs of the budgeted job together asked the LLM what the unbudgeted run asked.
    assert server.calls() - reference_calls == reference_calls
    assert final.llm.calls == unbudgeted.llm.calls
    assert final.spent.tokens == unbudgeted.spent.tokens
