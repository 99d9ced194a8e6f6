"""Metrics across `cogmill worker` processes: what two workers did (steps, LLM calls, 429s)
is what a scrape in another process (this one) reads from Redis."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from api.services import jobs
from api.services.metrics import scrape
from core.models.jobs import JobStatus
from pipelines.definitions import get_pipeline
from tests.backends import add_files, finished
from tests.distributed import distributed_runtime, running_workers, worker_env, write_corpus
from tests.llm_server import LLMTestServer
from tests.services import neo4j_uri, redis_database_url
from workers.celery_app import FINISH, app
from workers.orchestration import cognify

pytestmark = [pytest.mark.services, pytest.mark.slow]  # worker processes


@pytest.fixture
def server() -> Iterator[LLMTestServer]:
    with LLMTestServer(latency_ms=5, fail_first=1, fail_kind="429", retry_after=0.01) as server:
        yield server


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_a_scrape_counts_what_every_worker_process_did(
    server: LLMTestServer, tmp_path: Path
) -> None:
    broker = redis_database_url("metrics_distributed")
    redis.Redis.from_url(broker).flushdb()  # no stale queues
    env = worker_env(tmp_path / "home", broker, neo4j_uri(), server.base_url)
    dataset = f"metrics-{uuid.uuid4().hex[:8]}"
    with distributed_runtime(env) as rt, running_workers(env, tmp_path, count=2):
        try:
            assert not add_files(rt, dataset, write_corpus(tmp_path / "docs", 6)).rejected
            job = finished(rt, cognify(rt, dataset), 240, interval=0.25)
            assert job.status is JobStatus.SUCCEEDED and not job.errors, job
            report = jobs.show(rt, job.id)
            finish = ("cogmill_step_duration_seconds_count", frozenset({("step", FINISH)}))
            deadline = time.monotonic() + 30  # the last finish task's postrun follows the job
            found = samples(scrape(rt, app).decode())
            while found.get(finish) != job.total_batches and time.monotonic() < deadline:
                time.sleep(0.2)
                found = samples(scrape(rt, app).decode())
        finally:
            rt.catalog.remove_dataset(dataset)
    assert job.total_batches == 3  # COGMILL_BATCH_SIZE=2: work for both workers
    for step in [*get_pipeline(job.pipeline).step_names, FINISH]:
        count = found[("cogmill_step_duration_seconds_count", frozenset({("step", step)}))]
        assert count == job.total_batches, step
    llm = frozenset({("kind", "llm")})
    assert found[("cogmill_model_calls_total", llm)] == report.llm.calls > 0
    tally = server.stats()
    assert report.llm.calls == tally["usage"]["/v1/chat/completions"]["calls"]
    # Each chat request was refused once: the retries of both processes, none lost.
    assert found[("cogmill_llm_rate_limited_total", frozenset())] == tally["faults"]["429"]
    assert tally["faults"]["429"] == report.llm.calls
    assert found[("cogmill_jobs", frozenset({("state", "succeeded")}))] == 1
    for queue in ("ingest", "llm"):  # the Redis lists, read through the broker
        assert found[("cogmill_queue_depth", frozenset({("queue", queue)}))] == 0
