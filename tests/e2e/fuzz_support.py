"""The world the API fuzz run (test_api_fuzz.py) works in: the real app on an embedded runtime in
a temporary home, served by uvicorn on a free local port, with a tenant, an admin and a reader
key, a cognified dataset and its finished job, a session with a note and an answer, a spare
dataset the destructive routes may delete, a schedule, and a folder the tenant may sync. The
test LLM server (tests/llm_server.py) is the LLM and the embedder, so jobs and completions run
in seconds without model loads."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import uvicorn
from fastapi import FastAPI

from api.http.app import create_app
from api.services.tenants import Tenants
from core.access import Role
from core.settings import Settings
from runtime import Runtime
from tests.backends import llm_settings
from tests.llm_server import LLMTestServer

TENANT = "fuzz"
SEEDED = "fuzzdocs"  # cognified; read by every non-destructive route
SPARE = "fuzzspare"  # deleted, forgotten and emptied by the destructive routes
SESSION = "fuzz-chat"  # a session with a note in it
DOCUMENTS = [
    {"name": "ada.txt", "text": "Ada Lovelace wrote the first algorithm for Charles Babbage."},
    {"name": "turing.md", "text": "# Turing\n\nAlan Turing worked at Bletchley Park in 1940."},
]


@dataclass
class FuzzWorld:
    """Where the app answers, the keys to call it with, and real objects to name in paths."""

    base_url: str
    admin: str
    reader: str
    job_id: str
    runtime: Runtime
    known: dict[str, str] = field(default_factory=dict)

    def headers(self, key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}


@contextmanager
def served(app: FastAPI) -> Iterator[str]:
    """The app served by uvicorn in a thread on a free loopback port; its base URL."""
    # proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on such sockets' connections, and
    # without it every response waited ~40 ms for the client's delayed ACK (Nagle).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120  # the lifespan starts worker threads: slow when loaded
    while not server.started:
        assert thread.is_alive(), "uvicorn stopped while starting (see the log above)"
        assert time.monotonic() < deadline, "uvicorn did not start in 120 s"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=60)
        sock.close()


def _finished_job(client: httpx.Client, dataset: str) -> str:
    """Add the documents to a dataset and cognify it; the id of the job once it succeeded."""
    added = client.post(f"/api/v1/datasets/{dataset}/data", json={"documents": DOCUMENTS})
    assert added.status_code == 200, added.text
    started = client.post(f"/api/v1/datasets/{dataset}/cognify", json={})
    assert started.status_code == 202, started.text
    job_id = str(started.json()["job_id"])
    deadline = time.monotonic() + 120
    while (job := client.get(f"/api/v1/jobs/{job_id}").json())["status"] != "succeeded":
        assert job["status"] in ("queued", "running"), job
        assert time.monotonic() < deadline, f"seed job did not finish in 120 s: {job}"
        time.sleep(0.1)
    return job_id


@contextmanager
def fuzz_world(home: Path, llm: LLMTestServer) -> Iterator[FuzzWorld]:
    """The served app with its keys and seeded datasets (see the module docstring)."""
    roots = home / "roots"
    (roots / TENANT / "handbook").mkdir(parents=True)
    (roots / TENANT / "handbook" / "note.txt").write_text("Grace Hopper wrote a compiler.")
    runtime = Runtime(Settings(home=home, sync_roots=[roots], **llm_settings(llm)))
    tenants = Tenants(runtime.state)
    tenants.create_tenant(TENANT)
    admin, _ = tenants.create_key(TENANT, Role.ADMIN)
    reader, _ = tenants.create_key(TENANT, Role.READER)
    with served(create_app(runtime)) as base_url:
        auth = {"Authorization": f"Bearer {admin}"}
        with httpx.Client(base_url=base_url, headers=auth, timeout=60) as client:
            job_id = _finished_job(client, SEEDED)
            _finished_job(client, SPARE)
            note = {"text": "The fuzz run keeps this note.", "session": SESSION}
            remembered = client.post("/api/v1/remember", json=note)
            assert remembered.status_code == 200, remembered.text
            question = {
                "query": "Who wrote the first algorithm?",
                "session": SESSION,
                "datasets": [SEEDED],
            }
            recalled = client.post("/api/v1/recall", json=question)
            assert recalled.status_code == 200 and recalled.json()["qa_id"], recalled.text
            nightly = {"dataset": SEEDED, "cognify": True, "cron": "0 3 * * *"}
            scheduled = client.post("/api/v1/schedules", json=nightly)
            assert scheduled.status_code == 201, scheduled.text
        known = {
            "name": SEEDED,
            "job_id": job_id,
            "document_name": DOCUMENTS[0]["name"],
            "session": SESSION,
            "qa_id": recalled.json()["qa_id"],
            "schedule_id": scheduled.json()["id"],
            "sync_source": str(roots / TENANT / "handbook"),
            "entity": "Ada Lovelace",  # an entity of ada.txt, whose facts exist
        }
        yield FuzzWorld(base_url, admin, reader, job_id, runtime, known)
