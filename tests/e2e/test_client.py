"""The Python client (cogmill_client) against a real `cogmill serve`: uvicorn on a free port,
API keys required, the test LLM server (tests/llm_server.py) as LLM and embedder.

The sync client uploads the sample corpus folder, cognifies it and waits with a progress
callback (batches of one document: the progress moves in steps), asks a two-hop question whose
two gold documents must be among the sources (the river of the city where Alan Turing was born:
alan_turing.txt says London, london.md names the Thames), recalls, exports, reads the events
again. The async client does the same on texts. Errors come back as the right exception types
carrying the error schema: 401, 403, 404 (another tenant's dataset), 409, 413, 422, and 429 with
Retry-After when every event stream slot of a key is taken; `wait` then polls instead.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from api.services.tenants import Tenants
from cogmill_client import (
    AsyncClient,
    AuthenticationError,
    Client,
    CogmillError,
    ConflictError,
    JobEvent,
    JobStatus,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    Progress,
    RateLimitError,
    SearchType,
    UnprocessableEntityError,
)
from core.access import Role
from core.settings import Settings
from runtime import Runtime
from tests.backends import llm_settings
from tests.e2e.serve_support import cogmill_serve
from tests.llm_server import LLMTestServer

pytestmark = pytest.mark.slow  # a `cogmill serve` process

ROOT = Path(__file__).parents[2]
CORPUS = ROOT / "api" / "sample_corpus"
QUESTION = "Which river flows through the city where Alan Turing was born?"
GOLD = {"alan_turing.txt", "london.md"}
MAX_FILE_BYTES = 100_000
STREAMS_PER_KEY = 2
# Each LLM chat call takes this long (embeddings none): a job's batches then finish apart, more
# than the server's 0.5 s event poll, so its progress moves in steps a callback can see.
LLM_LATENCY_MS = 700
# A stream's lifetime: clients resume with Last-Event-ID. The async test's job outlasts it;
# the stream cap test's checks take well under it.
STREAM_SECONDS = 5


@dataclass
class Served:
    url: str
    keys: dict[str, str]
    llm: LLMTestServer

    def client(self, key: str = "writer") -> Client:
        return Client(self.url, api_key=self.keys[key], timeout=120)


def make_keys(home: Path) -> dict[str, str]:
    """Keys of two tenants, made in the home before the server opens it."""
    runtime = Runtime(Settings(home=home))
    try:
        tenants = Tenants(runtime.state)
        tenants.create_tenant("acme")
        tenants.create_tenant("globex")
        return {
            "writer": tenants.create_key("acme", Role.WRITER)[0],
            "streamer": tenants.create_key("acme", Role.WRITER)[0],
            "reader": tenants.create_key("acme", Role.READER)[0],
            "admin": tenants.create_key("acme", Role.ADMIN)[0],
            "other": tenants.create_key("globex", Role.WRITER)[0],
        }
    finally:
        runtime.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("client-home")
    with LLMTestServer(latency_ms=LLM_LATENCY_MS, embedding_latency_ms=0) as llm:
        keys = make_keys(home)
        settings = {
            **llm_settings(llm),
            "auth": "required",
            "batch_size": 1,
            "max_file_bytes": MAX_FILE_BYTES,
            "api_max_streams_per_key": STREAMS_PER_KEY,
            "api_stream_max_seconds": STREAM_SECONDS,
        }
        with cogmill_serve(home, settings) as url:
            yield Served(url, keys, llm)


def assert_moves_up(seen: list[Progress], job_id: str) -> None:
    """The callback saw the job's progress rise step by step to the end."""
    fractions = [p.fraction for p in seen]
    assert all(p.job_id == job_id for p in seen)
    assert fractions == sorted(fractions), fractions
    assert fractions[-1] == 1.0 and seen[-1].status == JobStatus.SUCCEEDED, seen[-1]
    assert len(set(fractions)) >= 3, fractions  # not only the start and the end
    assert max(p.batches_done for p in seen) == seen[-1].total_batches > 1


def test_sync_client_ingests_waits_and_answers_a_two_hop_question(served: Served) -> None:
    with served.client() as c:
        assert c.health().status == "ok" and c.ready().ready
        added = c.add_files("samples", CORPUS)
        assert sorted(added.added) == sorted(p.name for p in CORPUS.iterdir())
        assert [(d.name, d.documents) for d in c.list_datasets()] == [("samples", 8)]
        assert {d.status for d in c.list_documents("samples")} == {"added"}
        assert c.estimate("samples").calls > 0  # the text documents (rows need no LLM)
        started = c.cognify("samples")
        seen: list[Progress] = []
        job = c.wait(started.job_id, on_progress=seen.append, timeout=300)
        assert job.status == JobStatus.SUCCEEDED and job.counts["documents"] == 8, job
        assert job.llm.calls > 0 and job.spent.tokens > 0
        assert_moves_up(seen, started.job_id)

        answer = c.search(QUESTION, "samples")
        assert answer.route is not None and answer.route.search_type == answer.search_type
        assert set(answer.documents) >= GOLD, answer.documents
        typed = c.search(QUESTION, ["samples"], search_type="graph_completion", top_k=5)
        assert typed.search_type == SearchType.GRAPH_COMPLETION and typed.results
        assert c.route(QUESTION).search_type in SearchType

        events = list(c.events(started.job_id))
        assert events[0].kind == "planned" and events[-1].kind == "finished"
        assert events[-1].status == JobStatus.SUCCEEDED
        later = list(c.events(started.job_id, after=events[0].id or 0))
        assert "planned" not in {e.kind for e in later} and later[-1].kind == "finished"
        assert started.job_id in {j.id for j in c.list_jobs()}
        assert c.job_webhooks(started.job_id) == []

        kept = c.remember("The team meets Grace Hopper on Thursday.", session="s1")
        assert kept.stored_in == "session" and kept.note_id
        recalled = c.recall(QUESTION, session="s1", datasets="samples", scope="both")
        assert set(recalled.lanes) == {"session", "graph"} and recalled.results
        graph_docs = {s.document_name for r in recalled.results for s in r.sources}
        assert graph_docs & GOLD, graph_docs
        assert c.session_history("s1").notes[0].text.startswith("The team meets")
        assert [s.session for s in c.list_sessions()] == ["s1"]
        assert c.delete_session("s1").sessions == ["s1"]

        lines = [json.loads(line) for line in c.export_graph("samples").splitlines()]
        assert {line["kind"] for line in lines} == {"node", "edge"}
        assert c.export_graph("samples", format="graphml").startswith("<?xml")
        around = c.neighbourhood("samples", entity="Alan Turing", limit=10)
        assert around.nodes[0].name == "Alan Turing" and len(around.nodes) > 1
        deleted = c.delete_document("samples", "companies.csv")
        assert deleted.document == "companies.csv" and deleted.nodes_removed > 0
    with served.client("admin") as admin:
        assert "cogmill_jobs" in admin.metrics()


def test_async_client_does_the_same_on_texts(served: Served) -> None:
    texts = {
        "turing.txt": "Alan Turing was born in London. Alan Turing studied at King's College.",
        "thames.txt": "The River Thames flows through London. London is the capital of England.",
        "curie.txt": "Marie Curie was born in Warsaw. Marie Curie won the Nobel Prize.",
        **{f"note-{i}.txt": f"Ada Lovelace wrote note {i} for Charles Babbage." for i in range(3)},
    }

    resumed: list[str] = []  # the Last-Event-ID of each events request that sent one

    async def note(request: httpx.Request) -> None:
        if request.url.path.endswith("/events") and "last-event-id" in request.headers:
            resumed.append(request.headers["last-event-id"])

    async def live(c: AsyncClient, job_id: str) -> list[JobEvent]:
        return [event async for event in c.events(job_id)]

    async def session() -> None:
        headers = {"Authorization": f"Bearer {served.keys['writer']}"}
        http = httpx.AsyncClient(
            base_url=served.url, headers=headers, timeout=120, event_hooks={"request": [note]}
        )
        async with AsyncClient(served.url, http=http) as c:
            added = await c.add_texts("notes", texts)
            assert sorted(added.added) == sorted(texts)
            served.llm.configure(latency_ms=4 * LLM_LATENCY_MS)  # 3 rounds of 2 batches: > 8 s
            started = await c.cognify("notes")
            following = asyncio.create_task(live(c, started.job_id))
            seen: list[Progress] = []
            job = await c.wait(started.job_id, on_progress=seen.append, timeout=300)
            assert job.status == JobStatus.SUCCEEDED and job.counts["documents"] == len(texts)
            served.llm.configure(latency_ms=LLM_LATENCY_MS)
            assert_moves_up(seen, started.job_id)
            # Followed live across streams the server ended at their time limit: every stored
            # event once, in order, as a replay of the finished job has them.
            followed = await asyncio.wait_for(following, 60)
            assert resumed, "no stream was resumed with Last-Event-ID"
            replayed = [event async for event in c.events(started.job_id)]
            assert [e.id for e in followed if e.id] == [e.id for e in replayed if e.id]
            assert replayed[0].kind == "planned" and replayed[-1].kind == "finished"
            answer = await c.search(QUESTION, ["notes"])
            assert {"turing.txt", "thames.txt"} <= set(answer.documents), answer.documents
            recalled = await c.recall("Where was Marie Curie born?", datasets=["notes"])
            assert recalled.results and recalled.lanes == ["graph"]
            exported = await c.export_graph("notes")
            assert '"kind": "edge"' in exported or '"kind":"edge"' in exported
            forgot = await c.forget(dataset="notes")
            assert forgot.datasets == ["notes"]
            assert "notes" not in {d.name for d in await c.list_datasets()}

    asyncio.run(session())


def test_errors_are_raised_as_typed_exceptions_with_the_error_schema(served: Served) -> None:
    with served.client() as c:
        c.add_texts("private", {"note.txt": "Ada Lovelace wrote the first algorithm."})
        with served.client("other") as other, pytest.raises(NotFoundError) as missing:
            other.list_documents("private")
        assert missing.value.status == 404 and missing.value.code == "dataset_not_found"
        assert missing.value.detail["error"]["message"] == missing.value.message
        with pytest.raises(NotFoundError) as no_job:
            c.get_job("0" * 32)
        assert no_job.value.code == "job_not_found"

        stranger = Client(served.url, api_key="not-a-key")
        with stranger, pytest.raises(AuthenticationError) as unknown:
            stranger.list_datasets()
        assert unknown.value.status == 401 and "not valid" in unknown.value.message

        with served.client("reader") as reader, pytest.raises(PermissionDeniedError) as denied:
            reader.cognify("private")
        assert denied.value.status == 403 and denied.value.code == "forbidden"

        big = ("big.txt", b"word " * (MAX_FILE_BYTES // 4))
        with pytest.raises(PayloadTooLargeError) as too_big:
            c.add_files("private", [big])
        assert too_big.value.status == 413 and too_big.value.message

        with pytest.raises(UnprocessableEntityError) as invalid:
            c.remember("a note", session="s2", dataset="private")
        assert invalid.value.code == "validation_error" and "exactly one" in invalid.value.message
        with pytest.raises(UnprocessableEntityError):
            c.search("anything", "private", top_k=0)
        for error in (missing, unknown, denied, too_big, invalid):
            assert isinstance(error.value, CogmillError)


def test_stream_cap_is_a_429_a_delete_beside_a_job_a_409_and_wait_polls(served: Served) -> None:
    """With the key's stream slots taken by open streams of a slow job: another stream is a 429
    with Retry-After, deleting a document of the job's dataset a 409, and `wait` polls
    instead."""
    line = "Grace Hopper wrote compiler number {} in {}."
    texts = {f"slow-{i}.txt": line.format(i, 1950 + i) for i in range(4)}
    served.llm.configure(latency_ms=4 * LLM_LATENCY_MS)
    try:
        with served.client("streamer") as c:
            c.add_texts("slow", texts)
            started = c.cognify("slow")
            held = [c.events(started.job_id) for _ in range(STREAMS_PER_KEY)]
            for stream in held:
                assert next(stream).kind in ("planned", "progress")
            with pytest.raises(RateLimitError) as capped:
                next(c.events(started.job_id))
            assert capped.value.status == 429 and capped.value.code == "too_many_streams"
            assert capped.value.retry_after is not None and capped.value.retry_after > 0
            with pytest.raises(ConflictError) as running:
                c.delete_document("slow", "slow-0.txt")
            assert running.value.code == "job_running" and started.job_id in running.value.message
            seen: list[Progress] = []
            job = c.wait(started.job_id, on_progress=seen.append, timeout=300, poll=0.2)
            assert job.status == JobStatus.SUCCEEDED, job
            assert [p.fraction for p in seen] == sorted(p.fraction for p in seen)
            assert seen[-1].fraction == 1.0 and len(seen) >= 2
            for stream in held:
                stream.close()
    finally:
        served.llm.configure(latency_ms=LLM_LATENCY_MS)


def test_an_idle_connection_outlives_the_clients_keep_alive(served: Served) -> None:
    """`cogmill serve` keeps an idle connection open longer than httpx keeps one for reuse
    (5 s; uvicorn's own default is also 5 s): had the server closed it first, a request sent
    just as it closed would be reset (seen under load: 1 request in ~100 paused ~5 s)."""
    conn = http.client.HTTPConnection(served.url.removeprefix("http://"), timeout=10)
    try:
        conn.request("GET", "/health")
        assert conn.getresponse().read() == b'{"status":"ok"}'
        sock = conn.sock
        time.sleep(httpx.Limits().keepalive_expiry + 1)  # httpx would open a new one by now
        conn.request("GET", "/health")  # on the same socket: RemoteDisconnected had it closed
        assert conn.getresponse().read() == b'{"status":"ok"}' and conn.sock is sock
    finally:
        conn.close()
