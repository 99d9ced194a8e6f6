"""Error bodies in cogmill's words: inputs whose 4xx answers relayed a library's text (the
resolver's errno, urllib's URL parser, Celery's crontab, Starlette's, pydantic's and the MCP
SDK's own sentences) now say what is wrong and what to do, the library's words in the server log."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from mcp.client import Client

from api.http.app import create_app
from api.mcp.server import build_server, stdio_lifespan
from api.services.sync import sync
from core.models.jobs import JobStatus
from core.settings import Settings
from pipelines.sources.spec import parse_source
from runtime import Runtime
from tests.backends import finished, threaded_runtime

pytestmark = pytest.mark.e2e

# What the answers carried before.
LIBRARY_WORDS = (
    "Errno",
    "Name or service not known",
    "Invalid IPv6 URL",
    "Port out of range",
    "idna",
    "codec",
    "Invalid end range",
    "slice step",
    "empty part",
    "Invalid weekday",
    "Invalid crontab",
    "There was an error",
    "Not Found",
    "Method Not Allowed",
    "Input should",
    "Could not parse",
)


def library_words(text: str) -> list[str]:
    return [word for word in LIBRARY_WORDS if word in text]


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with TestClient(create_app(Runtime(Settings(home=tmp_path_factory.mktemp("words"))))) as c:
        notes = [{"name": "ada.txt", "text": "Ada Lovelace worked with Charles Babbage."}]
        assert c.post("/api/v1/datasets/notes/data", json={"documents": notes}).status_code == 200
        yield c


def refused(
    answer: Any, status: int, code: str, says: str, caplog: pytest.LogCaptureFixture, cause: str
) -> None:
    """The answer is a `status` with `code` saying `says`, no library's words, and the
    library's `cause` is in the log."""
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert error["code"] == code, error
    assert says in error["message"] and not library_words(error["message"]), error["message"]
    assert cause in caplog.text, caplog.text


@pytest.mark.parametrize(
    ("url", "says", "cause"),
    [
        ("http://[::1", "cannot be read", "Invalid IPv6 URL"),
        ("http://example.com:99999/", "port that is not a number from 1 to 65535", "Port out"),
        ("http://nonexistent.invalid/", "does not resolve", "gaierror"),
        ("http://" + "a" * 70 + ".com/", "does not resolve", "label empty or too long"),
    ],
)
def test_a_webhook_url_refused_in_cogmills_words(
    client: TestClient, url: str, says: str, cause: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "cogmill.errors")
    answer = client.post("/api/v1/webhooks", json={"url": url})
    refused(answer, 422, "invalid_webhook", says, caplog, cause)


@pytest.mark.parametrize(
    ("cron", "says", "cause"),
    [
        ("61 * * * *", "its minute field '61' is not valid; a field takes numbers 0-59", "61 > 59"),
        ("* * * * 8", "its day-of-week field '8' is not valid", "8 > 6"),
        ("a b c d e", "its minute field 'a' is not valid", "literal 'a'"),
        ("*/0 * * * *", "steps (*/15, at least 1)", "step cannot be zero"),
        ("1,,2 * * * *", "lists of them (1,15,30)", "empty part"),
        ("* * 31 2 *", "name no day that exists", "never occurs"),
    ],
)
def test_a_cron_expression_refused_in_cogmills_words(
    client: TestClient, cron: str, says: str, cause: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "cogmill.errors")
    body = {"dataset": "notes", "cron": cron, "cognify": True}
    refused(
        client.post("/api/v1/schedules", json=body), 422, "invalid_schedule", says, caplog, cause
    )


@pytest.mark.parametrize(
    ("source", "kind", "says", "cause"),
    [
        ("postgresql://me@nonexistent.invalid/shop", "sql", "does not resolve", "gaierror"),
        ("https://nonexistent.invalid/repo.git", "git", "does not resolve", "gaierror"),
    ],
)
def test_a_source_refused_in_cogmills_words(
    client: TestClient,
    source: str,
    kind: str,
    says: str,
    cause: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "cogmill.errors")
    answer = client.post("/api/v1/datasets/notes/sync", json={"source": source, "kind": kind})
    refused(answer, 422, "invalid_source", says, caplog, cause)


def test_starlettes_own_answers_are_in_cogmills_words(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "cogmill.api")
    nowhere = client.get("/api/v1/nowhere")
    refused(nowhere, 404, "not_found", "no route GET /api/v1/nowhere", caplog, "Not Found")
    wrong = client.delete("/api/v1/search")
    refused(wrong, 405, "method_not_allowed", "DELETE is not allowed on /api/v1/search", caplog, "")
    assert "POST" in wrong.json()["error"]["message"]
    for body in (b"[" * 5000 + b"]" * 5000, b'{"query": "\xff"}'):
        unread = client.post(
            "/api/v1/search", content=body, headers={"content-type": "application/json"}
        )
        refused(unread, 400, "bad_request", "send JSON in UTF-8", caplog, "error parsing")


def test_a_field_pydantic_refuses_is_named_in_cogmills_words(client: TestClient) -> None:
    body = b'{"query": "Ada", "datasets": ["notes"], "top_k": NaN}'
    answer = client.post(
        "/api/v1/search", content=body, headers={"content-type": "application/json"}
    )
    assert answer.status_code == 422, answer.text
    message = answer.json()["error"]["message"]
    assert "body.top_k must be a finite number" in message and not library_words(message)


def test_mcp_arguments_refused_in_cogmills_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK answered pydantic's text ("Input should be a valid integer ... For further
    information visit https://errors.pydantic.dev/...") and "Unknown tool: nope"."""
    monkeypatch.setenv("COGMILL_HOME", str(tmp_path))
    calls = {
        "search": {"query": "q", "datasets": ["x"], "top_k": "x"},
        "job_status": {"job_id": "abc", "wait_seconds": -1},
        "add_text": {"dataset": "d", "name": "n.txt"},
        "nope": {},
    }

    async def session() -> dict[str, str]:
        async with Client(build_server(stdio_lifespan)) as client:
            answers = {}
            for tool, arguments in calls.items():
                result = await client.call_tool(tool, arguments)
                assert result.is_error
                answers[tool] = " ".join(getattr(c, "text", "") for c in result.content)
            return answers

    said = asyncio.run(session())
    assert said["search"].startswith("search: top_k must be a whole number, got 'x'")
    assert said["job_status"].startswith("job_status: wait_seconds must be at least 0, got -1")
    assert said["add_text"].startswith("add_text: text is required")
    assert said["nope"] == "no tool 'nope'; tools/list lists cogmill's tools"
    for text in said.values():
        assert not library_words(text) and "pydantic" not in text, text


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"not a database " * 100, "the file or server is not a database of that kind"),
        (None, "it cannot be reached or opened"),  # a folder where the file should be
    ],
)
def test_a_database_source_that_fails_says_so_in_cogmills_words(
    tmp_path: Path,
    embedder: object,
    content: bytes | None,
    why: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The job's message was SQLAlchemy's "(sqlite3.DatabaseError) file is not a database
    [SQL: ...] (Background on this error at: https://sqlalche.me/...)"."""
    caplog.set_level(logging.INFO, "cogmill.sync")
    shop = tmp_path / "shop.db"
    if content is None:
        shop.mkdir()
    else:
        shop.write_bytes(content)
    settings = Settings(home=tmp_path / "home", _env_file=None)  # type: ignore[call-arg]
    with threaded_runtime(settings, {"embedder": embedder}) as rt:  # type: ignore[arg-type]
        job = finished(rt, sync(rt, "shop", parse_source(f"sqlite:///{shop}", "sql")))
    assert job.status is JobStatus.FAILED, job
    assert f"reading the database sqlite:///{shop} failed: {why}" in job.message, job.message
    assert "sqlalche.me" not in job.message and "[SQL:" not in job.message, job.message
    assert "sqlalche.me" in caplog.text  # the driver's words, for the operator
