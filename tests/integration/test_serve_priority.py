"""`cogmill serve` on the embedded broker runs its jobs in worker threads of its own process; they
take a lower priority than the request threads (`serve_ingest_nice`), so searches get the cores
first while a cognify runs (bench/search_latency.py; docs/benchmarks.md)."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from celery.signals import task_prerun
from fastapi.testclient import TestClient

from api.http.app import create_app
from core.settings import Settings
from runtime import Runtime
from tests.backends import http_finished, llm_settings
from tests.llm_server import LLMTestServer

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="niceness is per thread on Linux only"
)

DOCUMENTS = [
    {"name": f"d{i}.txt", "text": f"Person{i} Smith founded Company{i} Labs in City{i} in 19{i}0."}
    for i in range(6)
]


def _priority() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@pytest.mark.slow
@pytest.mark.parametrize("nice", [7, 0])
def test_serve_runs_its_jobs_below_its_searches(nice: int, tmp_path: Path) -> None:
    seen: dict[int, int] = {}  # thread that ran a task -> its niceness while it ran

    def record(**_: Any) -> None:
        seen[threading.get_native_id()] = _priority()

    with LLMTestServer() as server:
        settings = {**llm_settings(server), "batch_size": 2, "serve_ingest_nice": nice}
        rt = Runtime(Settings(home=tmp_path / "home", **settings))
        with TestClient(create_app(rt)) as client:
            # After the app started its worker: the worker's own handler runs first.
            task_prerun.connect(record, weak=False)
            try:
                added = client.post("/api/v1/datasets/d/data", json={"documents": DOCUMENTS})
                assert added.status_code == 200, added.text
                accepted = client.post("/api/v1/datasets/d/cognify").json()
                job = http_finished(client, accepted["job_id"])
                body = {"query": "Who founded Company3 Labs?", "datasets": ["d"]}
                searched = client.post("/api/v1/search", json=body)
            finally:
                task_prerun.disconnect(record)
    assert job["status"] == "succeeded", job
    assert searched.status_code == 200 and searched.json()["results"], searched.text
    assert seen and set(seen.values()) == {nice}, seen  # every task thread, from its first task
    assert threading.get_native_id() not in seen and _priority() == 0  # nothing else lowered


@pytest.mark.slow
def test_serve_jobs_wait_at_safe_points_while_searches_run(tmp_path: Path) -> None:
    """The local models (spaCy extraction, the embedder) ask `Priority.wait_turn` before each
    batch; every search is urgent while it runs (core/priority.py). With searches running back to
    back during a job, the job's threads waited, and the job still finished."""
    rt = Runtime(Settings(home=tmp_path / "home", batch_size=2))  # no LLM: the local models
    documents = [
        {
            "name": f"e{i}.txt",
            "text": f"Person{i} Jones moved Firm{i} Group to Town{i} in 18{i % 10}5.",
        }
        for i in range(24)
    ]
    with TestClient(create_app(rt)) as client:
        for dataset, docs in (("warm", DOCUMENTS), ("d", documents)):
            added = client.post(f"/api/v1/datasets/{dataset}/data", json={"documents": docs})
            assert added.status_code == 200, added.text
        warm = client.post("/api/v1/datasets/warm/cognify").json()["job_id"]
        assert http_finished(client, warm)["status"] == "succeeded"
        before = rt.priority.waits
        job_id = client.post("/api/v1/datasets/d/cognify").json()["job_id"]
        body = {"query": "Who founded Company3 Labs?", "datasets": ["warm"]}
        searched = 0
        while client.get(f"/api/v1/jobs/{job_id}").json()["status"] in ("queued", "running"):
            answer = client.post("/api/v1/search", json=body)
            assert answer.status_code == 200 and answer.json()["results"], answer.text
            searched += 1
        job = http_finished(client, job_id)
    assert job["status"] == "succeeded" and job["counts"]["documents"] == len(documents), job
    assert searched >= 3 and rt.priority.waits > before, (searched, rt.priority.waits)
