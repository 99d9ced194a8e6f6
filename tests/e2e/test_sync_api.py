"""Syncs and schedules through the HTTP API, the typed client and the MCP tool, with two
tenants (embedded stores, real worker threads): a tenant syncs only folders under its own
root of COGMILL_SYNC_ROOTS, sees and changes only its own schedules and jobs, and meets the
bounds (the minimum interval, its number of schedules, a reader's role, a busy dataset)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from mcp import Client as McpClient

from api.http.app import create_app
from api.mcp.face import LocalAccess
from api.mcp.server import build_server
from api.services.tenants import Tenants
from cogmill_client import Client
from core.access import Role
from core.settings import Settings
from pipelines.sources.spec import parse_source
from runtime import Runtime
from tests.backends import finished, http_finished
from tests.sync_support import write
from workers.jobs import JobTracker
from workers.sync import SourceRecord, queue_sync, save_source

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("roots")
    write(root / "acme" / "handbook", {"a.txt": "Ada Lovelace visited London.", "x/b.md": "# B"})
    write(root / "beta" / "private", {"secret.txt": "Beta's own notes."})
    return root


@pytest.fixture(scope="module")
def api(roots: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    home = tmp_path_factory.mktemp("sync-api")
    rt = Runtime(Settings(home=home, sync_roots=[roots], schedules_per_tenant=2))
    with TestClient(create_app(rt)) as anonymous:
        tenants = Tenants(rt.state)
        clients: dict[str, Any] = {"runtime": rt, "anonymous": anonymous}
        for name, role in (("acme", Role.WRITER), ("beta", Role.WRITER)):
            tenants.create_tenant(name)
            key, _ = tenants.create_key(name, role)
            clients[name] = TestClient(create_app(rt), headers={"Authorization": f"Bearer {key}"})
            clients[name].__enter__()
        key, _ = tenants.create_key("acme", Role.READER)
        clients["reader"] = TestClient(create_app(rt), headers={"Authorization": f"Bearer {key}"})
        clients["reader"].__enter__()
        yield clients
        for name in ("acme", "beta", "reader"):
            clients[name].__exit__(None, None, None)


def error(response: Any, status: int, *words: str) -> None:
    assert response.status_code == status, response.text
    message = response.json()["error"]["message"]
    assert all(word in message for word in words), message


def test_a_tenant_syncs_its_own_folders_only(api: dict[str, Any], roots: Path) -> None:
    acme, beta = api["acme"], api["beta"]
    url = "/api/v1/datasets/handbook/sync"
    accepted = acme.post(url, json={"source": str(roots / "acme" / "handbook")})
    assert accepted.status_code == 202 and accepted.headers["Location"].startswith("/api/v1/jobs")
    job = http_finished(acme, accepted.json()["job_id"])
    assert job["status"] == "succeeded" and job["options"]["sync"]["report"]["added"] == 2, job
    names = {d["name"] for d in acme.get("/api/v1/datasets/handbook/data").json()}
    assert names == {"a.txt", "x/b.md"}
    assert beta.get(f"/api/v1/jobs/{job['id']}").status_code == 404
    error(acme.post(url, json={"source": str(roots / "beta" / "private")}), 403, "SYNC_ROOTS")
    error(acme.post(url, json={"source": "/etc"}), 403, "COGMILL_SYNC_ROOTS")
    error(acme.post(url, json={"source": "https://127.0.0.1/r.git"}), 403, "private")
    error(acme.post(url, json={"source": str(roots), "include": ["x" * 300]}), 422, "GLOB_CHARS")
    error(api["reader"].post(url, json={"source": str(roots / "acme")}), 403, "writer")


def test_a_sync_is_refused_while_a_job_runs_on_its_dataset(
    api: dict[str, Any], roots: Path
) -> None:
    rt = api["runtime"]

    spec = parse_source(str(roots / "acme" / "handbook"))
    stored = "acme:busy"
    save_source(rt.state, "src-busy", SourceRecord(spec=spec, dataset=stored, tenant="acme"))
    rt.catalog.ensure_dataset(stored)
    running = queue_sync(rt, stored, "src-busy", publish=False)  # reads its source: unfinished
    answer = api["acme"].post("/api/v1/datasets/busy/sync", json={"source": spec.location})
    error(answer, 409, running.id)


def test_schedules_are_a_tenant_s_own_and_bounded(api: dict[str, Any], roots: Path) -> None:
    acme, beta = api["acme"], api["beta"]
    source = {"source": str(roots / "acme" / "handbook")}
    made = acme.post("/api/v1/schedules", json={"dataset": "h2", "sync": source, "every": "15m"})
    assert made.status_code == 201, made.text
    schedule = made.json()
    assert schedule["every_seconds"] == 900 and schedule["dataset"] == "h2"
    assert schedule["source"] == source["source"] and schedule["runs"]["fired"] == 0
    too_often = {"dataset": "h2", "sync": source, "every": "30s"}
    error(acme.post("/api/v1/schedules", json=too_often), 422, "COGMILL_SCHEDULE_MIN_SECONDS")
    error(acme.post("/api/v1/schedules", json={"dataset": "h2", "cognify": True}), 422, "every")
    nightly = {"dataset": "handbook", "cognify": True, "all": True, "cron": "0 3 * * *"}
    assert acme.post("/api/v1/schedules", json=nightly).status_code == 201
    third = {"dataset": "handbook", "cognify": True, "every": "1h"}
    error(acme.post("/api/v1/schedules", json=third), 422, "COGMILL_SCHEDULES_PER_TENANT")
    assert beta.get("/api/v1/schedules").json() == []
    error(beta.post(f"/api/v1/schedules/{schedule['id']}/pause"), 404, "no schedule")
    error(beta.delete(f"/api/v1/schedules/{schedule['id']}"), 404, "no schedule")
    paused = acme.post(f"/api/v1/schedules/{schedule['id']}/pause").json()
    assert paused["paused"] and paused["next_run"] is None
    assert not acme.post(f"/api/v1/schedules/{schedule['id']}/resume").json()["paused"]
    assert acme.delete(f"/api/v1/schedules/{schedule['id']}").status_code == 200
    assert [s["dataset"] for s in acme.get("/api/v1/schedules").json()] == ["handbook"]


def test_the_client_and_the_mcp_tool_sync_too(api: dict[str, Any], roots: Path) -> None:
    client = Client("http://testserver", http=api["acme"])
    accepted = client.sync("viaclient", str(roots / "acme" / "handbook"), include=["*.txt"])
    job = client.wait(accepted.job_id, timeout=120)
    assert job.status.value == "succeeded", job
    assert [d.name for d in client.list_documents("viaclient")] == ["a.txt"]
    made = client.add_schedule("viaclient", cognify=True, every="2h")
    assert [s.id for s in client.list_schedules()][-1] == made.id
    client.remove_schedule(made.id)

    @asynccontextmanager
    async def lifespan(server: Any) -> AsyncIterator[LocalAccess]:
        yield LocalAccess(api["runtime"])

    async def session() -> Any:
        async with McpClient(build_server(lifespan)) as mcp:
            source = str(roots / "beta" / "private")  # stdio acts for the local user: any path
            return await mcp.call_tool("sync", {"dataset": "viamcp", "source": source})

    result = asyncio.run(session())
    assert not result.is_error, result
    rt = api["runtime"]
    job = finished(rt, JobTracker(rt.state).get(result.structured_content["job_id"]))
    assert job.status.value == "succeeded" and job.dataset == "viamcp", job
