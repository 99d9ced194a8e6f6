"""Job retention after real jobs: an embedded server runs a job, the job is made to have ended
40 days ago, and the next job's end deletes it with every key it left, while GET /metrics
keeps counting what it did (tests/integration/test_job_retention.py covers the stores)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient

from api.http.app import create_app
from core.models.jobs import Job
from core.settings import Settings
from runtime import Runtime
from tests.backends import http_finished
from tests.e2e.test_metrics import samples, value
from tests.llm_server import LLMTestServer


def documents(tag: str) -> list[dict[str, str]]:
    return [
        {"name": f"{tag}{i}.txt", "text": f"Ada Lovelace wrote note {tag}{i} for Babbage."}
        for i in range(3)
    ]


@pytest.mark.slow
def test_a_job_past_the_retention_goes_and_metrics_keep_counting_it(tmp_path) -> None:
    with LLMTestServer() as server:
        settings = Settings(
            home=tmp_path,
            llm_base_url=server.base_url,
            batch_size=2,
            llm_price_input_per_mtok=0.15,
            job_retention_days=30,
        )
        runtime = Runtime(settings)
        with TestClient(create_app(runtime)) as client:
            assert client.post("/api/v1/datasets/r/data", json={"documents": documents("a")})
            first = http_finished(
                client, client.post("/api/v1/datasets/r/cognify").json()["job_id"]
            )
            before = samples(client.get("/metrics").text)
            state = runtime.state
            assert len(state.keys(f"job:{first['id']}:")) > 20  # events, reports, usage, ...
            # Make it have ended 40 days ago.
            job = Job.model_validate_json(state.get(f"job:{first['id']}") or "")
            assert job.finished_at is not None
            job.finished_at -= timedelta(days=40)
            state.put(f"job:{job.id}", job.model_dump_json())

            assert client.post("/api/v1/datasets/r/data", json={"documents": documents("b")})
            second = http_finished(
                client, client.post("/api/v1/datasets/r/cognify").json()["job_id"]
            )
            deadline = time.monotonic() + 30
            while client.get(f"/api/v1/jobs/{first['id']}").status_code != 404:
                assert time.monotonic() < deadline, "the job past the retention was not deleted"
                time.sleep(0.1)
            assert state.keys(f"job:{first['id']}") == []
            assert [j["id"] for j in client.get("/api/v1/jobs").json()] == [second["id"]]

            after = samples(client.get("/metrics").text)
            for found, documents_processed in ((before, 3), (after, 6)):
                processed = value(found, "cogmill_documents_total", outcome="processed")
                assert processed == documents_processed
            for kind in ("llm", "embeddings"):
                calls = first[kind]["calls"] + second[kind]["calls"]
                assert value(after, "cogmill_model_calls_total", kind=kind) == calls > 0
            tokens = first["llm"]["prompt_tokens"] + second["llm"]["prompt_tokens"]
            assert value(after, "cogmill_model_tokens_total", kind="llm", type="prompt") == tokens
            cost = first["llm"]["cost_usd"] + second["llm"]["cost_usd"]
            assert value(after, "cogmill_model_cost_usd_total", kind="llm") == pytest.approx(
                cost, abs=2e-6
            )
            planned = first["total_batches"] + second["total_batches"]
            assert value(after, "cogmill_batches_total", outcome="planned") == planned
            assert value(after, "cogmill_jobs", state="succeeded") == 1  # a gauge: what is kept
        runtime.close()
