"""The MCP server through the SDK's own client: `cogmill mcp` over stdio as an agent runs it, and
`/mcp` of a real `cogmill serve` over streamable HTTP with API keys and two tenants.

The LLM and the embeddings are the local test server (tests/llm_server.py). The scripted agent
adds the sample corpus folder, cognifies it, polls the job to its end and asks a two-hop
question (the river of the city where Alan Turing was born: alan_turing.txt says London,
london.md names the Thames), whose two gold documents must be in the routed search's results.
Errors (bad dataset, over-long query, unknown job, forbidden, another tenant's data) must come
back as tool errors with the HTTP API's messages, and the server must go on answering.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult

from api.mcp.face import LocalAccess
from api.mcp.server import build_server
from api.services.demo import SAMPLE_CORPUS
from api.services.tenants import Tenants
from core.access import Role
from core.settings import Settings
from runtime import Runtime
from tests.backends import llm_settings
from tests.e2e.serve_support import cogmill_serve
from tests.llm_server import LLMTestServer

pytestmark = pytest.mark.e2e

COGMILL = str(Path(sys.executable).with_name("cogmill"))
TOOLS = {
    "add_text", "add_files", "cognify", "job_status", "search", "recall", "remember", "improve",
    "forget", "list_datasets", "list_documents", "delete_document", "sync",
}  # fmt: skip
QUESTION = "Which river flows through the city where Alan Turing was born?"
GOLD = {"alan_turing.txt", "london.md"}
DEADLINE_S = 300  # a loaded 2-core machine runs cognify slowly; polled, never slept through
T = TypeVar("T")


def run(session: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(session())


@pytest.fixture(scope="module")
def llm() -> Iterator[LLMTestServer]:
    with LLMTestServer() as server:
        yield server


def environment(home: Path, llm: LLMTestServer) -> dict[str, str]:
    """The settings of a cogmill process as environment variables (the test LLM and embedder)."""
    values = {"home": str(home), **llm_settings(llm)}
    return {f"COGMILL_{key.upper()}": str(value) for key, value in values.items()}


async def call(client: Client, tool: str, **arguments: Any) -> CallToolResult:
    return await client.call_tool(tool, arguments)


def text(result: CallToolResult) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text(result)
    assert result.structured_content is not None, result
    return result.structured_content


def refused(result: CallToolResult, *words: str) -> str:
    """The message of a tool error that says each of `words` and shows no traceback."""
    message = text(result)
    assert result.is_error, message
    assert all(word in message for word in words), message
    assert "Traceback" not in message and 'File "' not in message, message
    return message


async def finished(client: Client, job_id: str) -> dict[str, Any]:
    """The job once its status is final, polled with job_status's own wait."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        job = ok(await client.call_tool("job_status", {"job_id": job_id, "wait_seconds": 5}))
        if job["status"] in ("succeeded", "failed", "cancelled"):
            return job
        assert time.monotonic() < deadline, f"job did not finish: {job}"


async def resource(client: Client, uri: str) -> Any:
    """A resource's JSON."""
    read = await client.read_resource(uri)
    return json.loads(getattr(read.contents[0], "text", ""))


def documents_of(response: dict[str, Any]) -> list[str]:
    """The document names of a search's results, best first, each once."""
    names = [s["document_name"] for r in response["results"] for s in r["sources"]]
    return list(dict.fromkeys(names))


# -- stdio: `cogmill mcp` as an MCP client (Claude Desktop, an IDE) starts it -----------------


@pytest.fixture(scope="module")
def stdio(tmp_path_factory: pytest.TempPathFactory, llm: LLMTestServer) -> StdioServerParameters:
    home = tmp_path_factory.mktemp("mcp-home")
    # A small file bound (the sample corpus is far under it) to see an over-long text refused.
    env = environment(home, llm) | {
        "PATH": os.environ.get("PATH", ""),
        "COGMILL_MAX_FILE_BYTES": "100000",
    }
    return StdioServerParameters(command=COGMILL, args=["mcp"], env=env, cwd=str(home))


def test_agent_ingests_a_folder_and_answers_a_two_hop_question(
    stdio: StdioServerParameters, tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLE_CORPUS, corpus)

    async def session() -> tuple[dict[str, Any], ...]:
        async with Client(stdio) as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert set(listed) == TOOLS
            assert "ASYNCHRONOUS" in (listed["cognify"].description or "")
            added = ok(await call(client, "add_files", dataset="agent", paths=[str(corpus)]))
            started = ok(await call(client, "cognify", dataset="agent"))
            job = await finished(client, started["job_id"])
            answer = ok(await call(client, "search", query=QUESTION, datasets=["agent"], top_k=5))
            docs = await resource(client, "cogmill://datasets/agent/documents")
            sets = await resource(client, "cogmill://datasets")
            return added, job, answer, {"documents": docs, "datasets": sets}

    added, job, answer, resources = run(session)
    assert sorted(added["added"]) == sorted(p.name for p in SAMPLE_CORPUS.iterdir())
    assert job["status"] == "succeeded" and job["counts"]["documents"] == len(added["added"])
    assert job["counts"]["relationships"] > 0, job
    assert answer["route"]["search_type"] == answer["search_type"]  # routed: no type was given
    assert set(documents_of(answer)) >= GOLD, documents_of(answer)
    assert resources["datasets"] == [{"name": "agent", "documents": len(added["added"])}]
    assert {d["status"] for d in resources["documents"]} == {"processed"}


def test_errors_come_back_as_tool_errors_and_the_server_goes_on(
    stdio: StdioServerParameters,
) -> None:
    async def session() -> dict[str, CallToolResult]:
        async with Client(stdio) as client:
            calls = {
                "bad_name": ("add_text", {"dataset": "a:b", "name": "n.txt", "text": "Ada."}),
                "no_dataset": ("cognify", {"dataset": "never-added"}),
                "long_query": ("search", {"query": "why " * 2000, "datasets": ["x"]}),
                "unknown_job": ("job_status", {"job_id": "0123456789abcdef"}),
                "bad_job_id": ("job_status", {"job_id": "../etc"}),
                "bad_type": ("search", {"query": "q", "datasets": ["x"], "search_type": "NOPE"}),
                "no_document": ("delete_document", {"dataset": "never-added", "document": "a"}),
                "two_targets": ("remember", {"text": "Ada.", "dataset": "d", "session": "s"}),
                "big_text": (
                    "add_text",
                    {"dataset": "d", "name": "big.txt", "text": "a" * 100_001},
                ),
                "many_sets": ("search", {"query": "q", "datasets": [f"d{i}" for i in range(101)]}),
            }
            answers = {key: await client.call_tool(*call) for key, call in calls.items()}
            answers["after"] = await client.call_tool("list_datasets", {})
            return answers

    answers = run(session)
    refused(answers["bad_name"], "invalid dataset name 'a:b'", "':' is not allowed")
    refused(answers["no_dataset"], "dataset 'never-added' does not exist", "add_text")
    refused(answers["long_query"], "8000 characters", "COGMILL_API_MAX_QUERY_CHARS")
    refused(answers["unknown_job"], "no job '0123456789abcdef'", "cognify")
    refused(answers["bad_job_id"], "no job '../etc'")
    refused(answers["bad_type"], "search_type")
    refused(answers["no_document"], "dataset 'never-added' does not exist")
    refused(answers["two_targets"], "exactly one of")
    refused(answers["big_text"], "'big.txt' is larger than the limit of 100000 bytes")
    refused(answers["many_sets"], "101 datasets named", "COGMILL_API_MAX_DATASETS")
    assert "datasets" in ok(answers["after"])


# -- streamable HTTP: /mcp of a real `cogmill serve`, keys and tenants ------------------------


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, llm: LLMTestServer
) -> Iterator[tuple[str, dict[str, str]]]:
    """`cogmill serve` on a free port with keys of two tenants: its /mcp URL and the keys."""
    home = tmp_path_factory.mktemp("mcp-serve-home")
    runtime = Runtime(Settings(home=home))  # keys first: the server then owns the home
    tenants = Tenants(runtime.state)
    for tenant in ("acme", "globex"):
        tenants.create_tenant(tenant)
    keys = {
        "acme": tenants.create_key("acme", Role.WRITER)[0],
        "acme_reader": tenants.create_key("acme", Role.READER)[0],
        "globex": tenants.create_key("globex", Role.WRITER)[0],
    }
    runtime.close()
    with cogmill_serve(home, llm_settings(llm)) as base:
        yield f"{base}/mcp", keys


def keyed(url: str, key: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=120)
    return Client(streamable_http_client(url, http_client=http))


NOTE = "The meeting with Grace Hopper moved to Thursday."
NOTES = {
    "turing.txt": "Alan Turing was born in London. Alan Turing studied at King's College.",
    "thames.txt": "The River Thames flows through London. London is the capital of England.",
}


def test_http_tools_act_for_the_key_s_tenant_only(served: tuple[str, dict[str, str]]) -> None:
    url, keys = served

    async def acme() -> dict[str, Any]:
        async with keyed(url, keys["acme"]) as client:
            for name, body in NOTES.items():
                ok(await call(client, "add_text", dataset="docs", name=name, text=body))
            started = ok(await call(client, "cognify", dataset="docs"))
            job = await finished(client, started["job_id"])
            found = ok(await call(client, "search", query=QUESTION, datasets=["docs"]))
            far = await call(client, "add_files", dataset="docs", paths=["/etc"])
            long = await call(client, "search", query="x" * 5000, datasets=["docs"])
            listed = ok(await call(client, "list_datasets"))
            ok(await call(client, "remember", text=NOTE, session="chat-1"))
            noted = ok(await call(client, "recall", query=NOTE, session="chat-1", scope="session"))
            return {"job": job, "found": found, "far": far, "long": long, "listed": listed,
                    "noted": noted}  # fmt: skip

    done = run(acme)
    assert done["job"]["status"] == "succeeded" and done["job"]["dataset"] == "docs", done["job"]
    assert set(NOTES) <= set(documents_of(done["found"])), documents_of(done["found"])
    refused(done["far"], "server's own disk", "add_text")
    refused(done["long"], "5000 characters", "COGMILL_API_MAX_QUERY_CHARS")
    assert done["listed"] == {"datasets": [{"name": "docs", "documents": 2}]}
    best = done["noted"]["results"][0]
    assert (best["source"], best["text"]) == ("session_note", NOTE), done["noted"]
    job_id = done["job"]["id"]

    async def globex() -> dict[str, Any]:
        async with keyed(url, keys["globex"]) as client:
            seen: dict[str, Any] = {
                "listed": ok(await call(client, "list_datasets")),
                "search": await call(client, "search", query=QUESTION, datasets=["docs"]),
                "job": await call(client, "job_status", job_id=job_id),
                "delete": await call(client, "delete_document", dataset="docs", document="a.txt"),
                "recall": await call(
                    client, "recall", query=NOTE, session="chat-1", scope="session"
                ),
            }
            try:
                await client.read_resource("cogmill://datasets/docs/documents")
                seen["resource"] = "read"
            except MCPError as err:
                seen["resource"] = str(err)
            return seen

    seen = run(globex)
    assert seen["listed"] == {"datasets": []}
    assert ok(seen["search"])["results"] == []  # the same query found acme's documents above
    refused(seen["job"], f"no job '{job_id}'")
    # Sessions are per tenant: globex's chat-1 is not acme's.
    assert ok(seen["recall"])["results"] == [], seen["recall"]
    refused(seen["delete"], "dataset 'docs' does not exist")
    assert "dataset 'docs' does not exist" in seen["resource"]

    async def reader() -> CallToolResult:
        async with keyed(url, keys["acme_reader"]) as client:
            return await call(client, "add_text", dataset="docs", name="x.txt", text="More.")

    refused(run(reader), "a reader key may not change data", "writer key")


def test_http_without_a_usable_key_is_a_401_and_get_a_405_in_the_error_schema(
    served: tuple[str, dict[str, str]],
) -> None:
    url, _ = served
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    for key in (None, "cm_000000000000_" + "x" * 43):
        auth = {"Authorization": f"Bearer {key}"} if key else {}
        answer = httpx2.post(url, json=request, headers=headers | auth)
        assert answer.status_code == 401, answer.text
        assert answer.headers["www-authenticate"] == "Bearer"
        assert answer.json()["error"]["code"] == "unauthorized", answer.text
    # Stateless: no stream to hold open on a GET (it would hang until the client gave up).
    stream = httpx2.get(url, headers={"Accept": "text/event-stream"}, timeout=30)
    assert stream.status_code == 405, stream.text
    assert stream.json()["error"]["code"] == "method_not_allowed", stream.text


# -- server-side failures: the HTTP API's safe messages, in-process (the SDK's client) --------


def test_unreachable_stores_are_tool_errors_naming_no_host(tmp_path: Path) -> None:
    with socket.socket() as sock:  # bound, never listening: connections are refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        settings = Settings(
            home=tmp_path,
            neo4j_uri=f"bolt://127.0.0.1:{port}",
            qdrant_url=f"http://127.0.0.1:{port}",
        )
        runtime = Runtime(settings)

        @asynccontextmanager
        async def lifespan(server: Any) -> AsyncIterator[LocalAccess]:
            yield LocalAccess(runtime)

        async def session() -> list[CallToolResult]:
            async with Client(build_server(lifespan)) as client:
                return [
                    await call(client, "search", query="q", datasets=["d"], search_type="CHUNKS"),
                    await call(client, "list_datasets"),
                ]

        try:
            answers = run(session)
        finally:
            runtime.close()
    for answer in answers:
        message = refused(answer, "(the server log has the details)")
        assert str(port) not in message and "127.0.0.1" not in message, message
        assert message.split(": ", 1)[1].startswith(
            ("a store did not answer", "a backend the server is configured to use")
        ), message
