"""Token accounting across `cogmill worker` processes: each process counts its own calls and
adds them to the job's Redis counters; the job's totals are what the LLM server answered."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from api.services import jobs
from core.models.jobs import JobStatus
from tests.backends import add_files, finished
from tests.distributed import distributed_runtime, running_workers, worker_env, write_corpus
from tests.llm_server import LLMTestServer
from tests.services import neo4j_uri, redis_database_url
from workers.orchestration import cognify

pytestmark = [pytest.mark.services, pytest.mark.slow]  # worker processes


@pytest.fixture
def server() -> Iterator[LLMTestServer]:
    with LLMTestServer(latency_ms=20) as server:
        yield server


def test_worker_processes_lose_no_tokens(server: LLMTestServer, tmp_path: Path) -> None:
    broker = redis_database_url("usage_distributed")
    redis.Redis.from_url(broker).flushdb()  # no stale queues
    env = worker_env(
        tmp_path / "home",
        broker,
        neo4j_uri(),
        server.base_url,
        llm_price_input_per_mtok="0.15",
        llm_price_output_per_mtok="0.6",
    )
    dataset = f"usage-{uuid.uuid4().hex[:8]}"
    with distributed_runtime(env) as rt, running_workers(env, tmp_path, count=2):
        try:
            assert not add_files(rt, dataset, write_corpus(tmp_path / "docs", 10)).rejected
            job = finished(rt, cognify(rt, dataset), 240, interval=0.25)
            assert job.status is JobStatus.SUCCEEDED and not job.errors, job
            report = jobs.show(rt, job.id)
        finally:
            rt.catalog.remove_dataset(dataset)
    tally = server.stats()["usage"]
    chat = tally["/v1/chat/completions"]
    assert report.llm.calls == chat["calls"] >= 10
    assert report.llm.prompt_tokens == chat["prompt_tokens"]
    assert report.llm.completion_tokens == chat["completion_tokens"]
    # The local embedder (the shared Neo4j's vector indexes are 384-d): counted, sent nowhere.
    assert report.embeddings.calls > 0 and "/v1/embeddings" not in tally
    cost = (chat["prompt_tokens"] * 0.15 + chat["completion_tokens"] * 0.6) / 1e6
    assert report.llm.cost_usd == pytest.approx(cost, abs=1e-6)
