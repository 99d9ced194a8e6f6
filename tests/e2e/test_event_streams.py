"""Job event streams under load: when each stream held a request thread, 45 streams open on a
running job made `/health` take 27 s. Streams are async and capped per API key and in total,
and the probes never wait for request threads.

`cogmill serve` (uvicorn, embedded runtime) in a process of its own on a free port, so the
clients here take no CPU from it, with the test LLM server answering slowly so the job runs
while the streams are open."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.services.tenants import Tenants
from core.access import Role
from core.settings import Settings
from runtime import Runtime
from tests.e2e.serve_support import cogmill_serve
from tests.llm_server import LLMTestServer

pytestmark = pytest.mark.e2e

STREAMS = 100
HEALTH_BOUND_S = 1.0  # /health under 1 s with 100 streams open (docs/security.md)
HEALTH_SAMPLES = 8
OPEN_DEADLINE_S = 180.0
FINISH_DEADLINE_S = 600.0
UNFINISHED = ("queued", "running")


@dataclass
class Served:
    """Where the app answers and the writer keys of its one tenant."""

    base_url: str
    keys: list[str]

    def client(self, key: str) -> httpx.Client:
        auth = {"Authorization": f"Bearer {key}"}
        return httpx.Client(base_url=self.base_url, headers=auth, timeout=120)


def _keys(home: Path, count: int) -> list[str]:
    """`count` writer keys of tenant `streams`, in the state store the server will open."""
    runtime = Runtime(Settings(home=home))
    try:
        tenants = Tenants(runtime.state)
        tenants.create_tenant("streams")
        return [tenants.create_key("streams", Role.WRITER)[0] for _ in range(count)]
    finally:
        runtime.close()


@contextmanager
def serving(home: Path, llm: LLMTestServer, keys: int, **settings: Any) -> Iterator[Served]:
    """`cogmill serve` on an embedded runtime in `home` (batches of one document, the test LLM
    server as LLM and embedder, `settings` as COGMILL_* variables), with `keys` keys."""
    made = _keys(home, keys)
    variables = {"batch_size": 1, "llm_base_url": llm.base_url, "llm_model": "test",
                 "embedding_base_url": llm.base_url, "embedding_dim": 64, **settings}  # fmt: skip
    with cogmill_serve(home, variables) as base_url:
        yield Served(base_url, made)


def start_job(client: httpx.Client, documents: int) -> str:
    """Add `documents` short notes to dataset `notes` and cognify it; the job's id."""
    text = "Ada Lovelace met Charles Babbage in London in {}."
    docs = [{"name": f"note-{i}.txt", "text": text.format(1830 + i)} for i in range(documents)]
    added = client.post("/api/v1/datasets/notes/data", json={"documents": docs})
    assert added.status_code == 200, added.text
    started = client.post("/api/v1/datasets/notes/cognify", json={})
    assert started.status_code == 202, started.text
    return str(started.json()["job_id"])


def status(client: httpx.Client, job_id: str) -> str:
    return str(client.get(f"/api/v1/jobs/{job_id}").json()["status"])


def parse_sse(text: str) -> list[dict[str, Any]]:
    """[{id, event, data}] of a stream's text."""
    events = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            seq = int(fields["id"]) if "id" in fields else None
            events.append({"id": seq, "event": fields["event"], "data": json.loads(fields["data"])})
    return events


class StreamReaders(threading.Thread):
    """`count` event streams of one job, read at once by asyncio clients on this thread:
    `all_open` is set once every stream has had its first event; `results` holds each stream's
    events once all ended (or the exception that ended it)."""

    def __init__(self, base_url: str, key: str, job_id: str, count: int) -> None:
        super().__init__(daemon=True)
        self.base_url, self.key, self.count = base_url, key, count
        self.url = f"/api/v1/jobs/{job_id}/events"
        self.opened = 0
        self.all_open = threading.Event()
        self.results: list[list[dict[str, Any]] | BaseException] = []

    def run(self) -> None:
        asyncio.run(self._read_all())

    async def _read_all(self) -> None:
        limits = httpx.Limits(max_connections=self.count + 5)
        auth = {"Authorization": f"Bearer {self.key}"}
        timeout = httpx.Timeout(FINISH_DEADLINE_S, connect=OPEN_DEADLINE_S)
        async with httpx.AsyncClient(
            base_url=self.base_url, headers=auth, timeout=timeout, limits=limits
        ) as client:
            reads = [self._read(client) for _ in range(self.count)]
            self.results = list(await asyncio.gather(*reads, return_exceptions=True))
        self.all_open.set()  # unblock a waiter whatever happened; it checks `opened`

    async def _read(self, client: httpx.AsyncClient) -> list[dict[str, Any]]:
        async with client.stream("GET", self.url) as response:
            assert response.status_code == 200, await response.aread()
            text, first = "", True
            async for chunk in response.aiter_text():
                text += chunk
                if first and "event: " in text:
                    first = False
                    self.opened += 1  # one event loop: no lock needed
                    if self.opened == self.count:
                        self.all_open.set()
        return parse_sse(text)


def probe(url: str) -> tuple[float, int]:
    """Seconds to an answer on a new connection, and its status."""
    started = time.perf_counter()
    answer = httpx.get(url, timeout=60)
    return time.perf_counter() - started, answer.status_code


def test_a_hundred_streams_on_a_running_job_leave_the_probes_responsive(tmp_path: Path) -> None:
    # Each LLM call takes seconds: the job runs with long quiet spells between its events,
    # when a stream that held a thread while idle held it the whole time.
    documents = 6
    with (
        LLMTestServer(latency_ms=6000, embedding_latency_ms=0) as llm,
        serving(tmp_path, llm, keys=1, api_max_streams=128, api_max_streams_per_key=128) as app,
        app.client(app.keys[0]) as client,
    ):
        job_id = start_job(client, documents)
        readers = StreamReaders(app.base_url, app.keys[0], job_id, STREAMS)
        readers.start()
        assert readers.all_open.wait(OPEN_DEADLINE_S) and readers.opened == STREAMS, (
            f"{readers.opened} of {STREAMS} streams had their first event; {readers.results[:3]}"
        )
        health, ready = [], []
        for _ in range(HEALTH_SAMPLES):
            seconds, code = probe(f"{app.base_url}/health")
            assert code == 200
            health.append(seconds)
            seconds, code = probe(f"{app.base_url}/ready")
            assert code == 200
            ready.append(seconds)
            time.sleep(0.25)
        print(
            f"\n{STREAMS} streams open: /health max {max(health):.3f} s, "
            f"mean {sum(health) / len(health):.3f} s; /ready max {max(ready):.3f} s"
        )
        assert max(health) < HEALTH_BOUND_S, health
        # The probes were measured while the job ran and every stream was open.
        still = status(client, job_id)
        assert still in UNFINISHED, f"the job ended ({still}) before the probes were measured"
        readers.join(FINISH_DEADLINE_S)
        assert not readers.is_alive(), "the streams did not end within the deadline"
        assert status(client, job_id) == "succeeded"
    for events in readers.results:
        assert not isinstance(events, BaseException), events
        kinds = [e["event"] for e in events]
        assert kinds[0] == "planned" and kinds[-1] == "finished", kinds
        assert kinds.count("batch_done") == documents, kinds
        assert events[-1]["data"]["status"] == "succeeded"


def assert_refused(response: httpx.Response, setting: str) -> None:
    """A 429 in the one error schema, with Retry-After and the setting to raise named."""
    response.read()
    assert response.status_code == 429, response.text
    assert int(response.headers["Retry-After"]) > 0
    error = response.json()["error"]
    assert error["code"] == "too_many_streams" and f"({setting})" in error["message"], error


def test_streams_are_capped_per_key_and_in_total_and_a_closed_one_frees_its_slot(
    tmp_path: Path,
) -> None:
    settings = {"api_max_streams_per_key": 2, "api_max_streams": 3,
                "api_stream_heartbeat_seconds": 0.5}  # fmt: skip
    with (
        LLMTestServer(latency_ms=3000, embedding_latency_ms=0) as llm,
        serving(tmp_path, llm, keys=2, **settings) as app,
        app.client(app.keys[0]) as first,
        app.client(app.keys[1]) as second,
        ExitStack() as streams,
    ):
        job_id = start_job(first, documents=6)
        url = f"/api/v1/jobs/{job_id}/events"

        def stream(client: httpx.Client) -> httpx.Response:
            return streams.enter_context(client.stream("GET", url))

        a1, a2 = stream(first), stream(first)
        assert a1.status_code == a2.status_code == 200
        with first.stream("GET", url) as a3:  # a third stream of the same key
            assert_refused(a3, "COGMILL_API_MAX_STREAMS_PER_KEY")
        b1 = stream(second)
        assert b1.status_code == 200
        with second.stream("GET", url) as b2:  # the other key is under its cap, not the total
            assert_refused(b2, "COGMILL_API_MAX_STREAMS")
        # An idle stream gets a comment line every heartbeat.
        lines = a1.iter_lines()
        deadline = time.monotonic() + 60
        while next(lines) != ": keep-alive":
            assert time.monotonic() < deadline, "no keep-alive comment in 60 s"
        a1.close()  # the client leaves: its slot is freed
        deadline = time.monotonic() + 60
        while True:
            a3 = stream(first)
            if a3.status_code == 200:
                break
            assert_refused(a3, "COGMILL_API_MAX_STREAMS")
            assert time.monotonic() < deadline, "the closed stream's slot was not freed in 60 s"
            time.sleep(0.2)
        assert status(first, job_id) in UNFINISHED, "the job ended before the caps were checked"
        cancelled = first.post(f"/api/v1/jobs/{job_id}/cancel")
        assert cancelled.status_code == 202, cancelled.text
        events = parse_sse(b1.read().decode())  # the stream ends with the job
        assert events[-1]["event"] == "finished" and events[-1]["data"]["status"] == "cancelled"
