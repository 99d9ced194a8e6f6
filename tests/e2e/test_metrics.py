"""GET /metrics after a job and some searches: parsed with prometheus_client's own parser and
checked against the job record, the LLM test server's tallies and the searches made."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from api.http.app import create_app
from api.services.tenants import Tenants
from core.access import Role
from core.settings import Settings
from pipelines.definitions import get_pipeline
from runtime import Runtime
from tests.backends import http_finished
from tests.llm_server import LLMTestServer
from workers.celery_app import FINISH

DOCS = [
    {
        "name": f"note{i}.txt",
        "text": f"Ada Lovelace met Charles Babbage in London in 18{30 + i}. "
        f"Babbage designed Engine {i}.",
    }
    for i in range(3)
]
SEARCHES = {"CHUNKS": 3, "SUMMARIES": 2}
BROKEN = [("files", ("broken.pdf", b"%PDF-1.4 cut short", "application/pdf"))]


@pytest.fixture(scope="module")
def server() -> Iterator[LLMTestServer]:
    # Every chat request is first answered 429, so the client retries each call once.
    with LLMTestServer(fail_first=1, fail_kind="429", retry_after=0.01) as server:
        yield server


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory, server: LLMTestServer) -> Runtime:
    settings = Settings(
        home=tmp_path_factory.mktemp("metrics-home"),
        llm_base_url=server.base_url,
        llm_price_input_per_mtok=0.15,
        llm_price_output_per_mtok=0.6,
        batch_size=2,
    )
    return Runtime(settings)


@pytest.fixture(scope="module")
def client(runtime: Runtime) -> Iterator[TestClient]:
    with TestClient(create_app(runtime)) as client:
        yield client


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    """{(sample name, labels): value} of a Prometheus text exposition."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(found: dict[tuple[str, frozenset], float], name: str, **labels: str) -> float:
    return found[(name, frozenset(labels.items()))]


@pytest.fixture(scope="module")
def scraped(client: TestClient) -> tuple[dict[str, Any], dict[tuple[str, frozenset], float]]:
    assert client.post("/api/v1/datasets/m/data", json={"documents": DOCS}).status_code == 200
    job = http_finished(client, client.post("/api/v1/datasets/m/cognify").json()["job_id"])
    # A job whose only batch fails whole (its one document cannot be read).
    assert client.post("/api/v1/datasets/bad/data", files=BROKEN).status_code == 200
    failed = http_finished(client, client.post("/api/v1/datasets/bad/cognify").json()["job_id"])
    assert failed["status"] == "failed" and failed["total_batches"] == 1
    for search_type, times in SEARCHES.items():
        for _ in range(times):
            body = {"query": "Who met Babbage?", "datasets": ["m"], "search_type": search_type}
            assert client.post("/api/v1/search", json=body).status_code == 200
    # The last step's duration is counted as its task returns, just after the job finished.
    deadline = time.monotonic() + 30
    while True:
        answer = client.get("/metrics")
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"].startswith("text/plain")
        found = samples(answer.text)
        key = ("cogmill_step_duration_seconds_count", frozenset({("step", FINISH)}))
        if found.get(key) == job["total_batches"] + 1 or time.monotonic() > deadline:
            return job, found
        time.sleep(0.1)


def test_jobs_documents_and_batches_match_the_job_record(scraped: Any) -> None:
    job, found = scraped
    assert job["status"] == "succeeded" and job["total_batches"] == 2
    assert value(found, "cogmill_jobs", state="succeeded") == 1
    assert value(found, "cogmill_jobs", state="failed") == 1
    assert value(found, "cogmill_jobs", state="running") == 0
    assert (
        value(found, "cogmill_documents_total", outcome="processed")
        == job["counts"]["documents"]
        == 3
    )
    assert value(found, "cogmill_documents_total", outcome="failed") == 1  # broken.pdf
    done = job["counts"]["batches_done"] + 1
    assert value(found, "cogmill_batches_total", outcome="done") == done
    assert value(found, "cogmill_batches_total", outcome="planned") == job["total_batches"] + 1
    assert value(found, "cogmill_batches_total", outcome="failed") == 1


def test_llm_calls_tokens_cost_and_429s(scraped: Any, server: LLMTestServer) -> None:
    job, found = scraped
    llm = job["llm"]
    tally = server.stats()
    assert value(found, "cogmill_model_calls_total", kind="llm") == llm["calls"] > 0
    assert llm["calls"] == tally["usage"]["/v1/chat/completions"]["calls"]
    assert (
        value(found, "cogmill_model_tokens_total", kind="llm", type="prompt")
        == llm["prompt_tokens"]
    )
    assert (
        value(found, "cogmill_model_tokens_total", kind="llm", type="completion")
        == llm["completion_tokens"]
    )
    assert value(found, "cogmill_model_cost_usd_total", kind="llm") == pytest.approx(
        llm["cost_usd"]
    )
    assert value(found, "cogmill_model_cache_hits_total", kind="llm") == llm["cache_hits"]
    assert (
        value(found, "cogmill_model_calls_total", kind="embeddings") == job["embeddings"]["calls"]
    )
    # Each chat request was refused once with a 429 and retried.
    assert value(found, "cogmill_llm_rate_limited_total") == tally["faults"]["429"] == llm["calls"]
    assert value(found, "cogmill_llm_retries_total") == tally["faults"]["429"]


def test_step_and_search_durations(scraped: Any) -> None:
    job, found = scraped
    steps = [*get_pipeline(job["pipeline"]).step_names, FINISH]
    for step in steps:  # every step ran once per batch, the broken job's batch too
        count = value(found, "cogmill_step_duration_seconds_count", step=step)
        assert count == job["total_batches"] + 1, step
        assert value(found, "cogmill_step_duration_seconds_bucket", step=step, le="+Inf") == count
        assert value(found, "cogmill_step_duration_seconds_sum", step=step) > 0
    for search_type, times in SEARCHES.items():
        assert value(found, "cogmill_search_duration_seconds_count", type=search_type) == times
        buckets = sorted(
            (float(dict(labels)["le"]), v)
            for (name, labels), v in found.items()
            if name == "cogmill_search_duration_seconds_bucket" and ("type", search_type) in labels
        )
        assert [v for _, v in buckets] == sorted(v for _, v in buckets)  # cumulative
        assert buckets[-1][1] == times
    assert value(found, "cogmill_queue_depth", queue="ingest") == 0
    assert value(found, "cogmill_queue_depth", queue="llm") == 0


def test_metrics_take_an_admin_key_or_the_metrics_token(
    client: TestClient, runtime: Runtime
) -> None:
    tenants = Tenants(runtime.state)
    tenants.create_tenant("ops")
    reader, _ = tenants.create_key("ops", Role.READER)
    admin, _ = tenants.create_key("ops", Role.ADMIN)
    assert client.get("/metrics").status_code == 401
    refused = client.get("/metrics", headers={"Authorization": f"Bearer {reader}"})
    assert refused.status_code == 403 and "admin" in refused.json()["error"]["message"]
    assert client.get("/metrics", headers={"Authorization": f"Bearer {admin}"}).status_code == 200
    before = runtime.settings
    runtime.settings = before.model_copy(update={"metrics_token": "scrape-token-123"})
    try:
        ok = client.get("/metrics", headers={"Authorization": "Bearer scrape-token-123"})
        assert ok.status_code == 200 and "cogmill_jobs" in ok.text
        wrong = client.get("/metrics", headers={"Authorization": "Bearer scrape-token-124"})
        assert wrong.status_code == 401
    finally:
        runtime.settings = before
