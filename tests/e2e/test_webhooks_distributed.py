"""Webhooks from `cogmill worker` processes on Redis: the job ends in a worker, whose
delivery task POSTs to a real receiver, retried through Celery with backoff."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from api.services import jobs, webhooks
from api.services.cognify import cognify
from core.models.jobs import JobStatus
from tests.backends import add_files, finished
from tests.distributed import distributed_runtime, running_workers, worker_env, write_corpus
from tests.llm_server import LLMTestServer
from tests.services import neo4j_uri, redis_url
from tests.webhook_receiver import WebhookReceiver, readme_verify
from workers.webhooks.deliveries import delivery_log

pytestmark = [pytest.mark.e2e, pytest.mark.services]

BROKER_DB = 9  # this module's own Redis database (see test_usage_distributed.py)


@pytest.fixture
def server() -> Iterator[LLMTestServer]:
    with LLMTestServer(latency_ms=5) as server:
        yield server


def test_worker_processes_deliver_signed_webhooks_with_retries(
    server: LLMTestServer, tmp_path: Path
) -> None:
    broker = f"{redis_url().rsplit('/', 1)[0]}/{BROKER_DB}"
    redis.Redis.from_url(broker).flushdb()  # no stale queues
    env = worker_env(
        tmp_path / "home", broker, neo4j_uri(), server.base_url,
        webhook_allow_private="true", webhook_backoff_seconds="0.5",
    )  # fmt: skip
    dataset = f"hooks-{uuid.uuid4().hex[:8]}"
    verify = readme_verify()
    with (
        distributed_runtime(env) as rt,
        running_workers(env, tmp_path, count=2),
        WebhookReceiver(statuses=[500, 503]) as flaky,
        WebhookReceiver() as steady,
    ):
        sub = webhooks.add(rt, flaky.url)
        try:
            assert not add_files(rt, dataset, write_corpus(tmp_path / "docs", 4)).rejected
            own = webhooks.for_job(rt, steady.url)
            job = finished(rt, cognify(rt, dataset, webhook=own.id), 240, interval=0.25)
            assert job.status is JobStatus.SUCCEEDED and not job.errors, job
            retried = flaky.wait_for(3, timeout=60)
            (post,) = steady.wait_for(1, timeout=60)
            time.sleep(2.0)  # two workers and a redelivered finish must not add a POST
            assert len(steady.received) == 1 and len(flaky.received) == 3
            record = json.loads(jobs.show(rt, job.id).model_dump_json())
            log = delivery_log(rt.state, job.id)
        finally:
            webhooks.remove(rt, sub.id)
            rt.catalog.remove_dataset(dataset)
    assert json.loads(post.body) == record
    assert verify(own.secret, post.headers["X-Cogmill-Signature"], post.body)
    assert all(verify(sub.secret, p.headers["X-Cogmill-Signature"], p.body) for p in retried)
    assert not verify(sub.secret, post.headers["X-Cogmill-Signature"], post.body)
    mine = [e for e in log if e["subscription"] == sub.id]
    assert [(e["attempt"], e["status"], e["outcome"]) for e in mine] == [
        (1, 500, "retrying"), (2, 503, "retrying"), (3, 200, "delivered"),
    ]  # fmt: skip
    assert [(e["attempt"], e["outcome"]) for e in log if e["subscription"] == own.id] == [
        (1, "delivered")
    ]
    gaps = [b.at - a.at for a, b in zip(retried, retried[1:], strict=False)]
    assert gaps[0] >= 0.5 and gaps[1] >= 1.0, gaps  # 0.5 s, then twice that
