"""remember / recall / improve / forget through the HTTP API and the CLI, end to end: real app
and commands, embedded stores in tmp, Celery worker threads; the LLM is the test server."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from api.cli import app as cli_app
from api.http.app import create_app
from core.settings import Settings
from runtime import Runtime
from tests.backends import http_finished, llm_settings
from tests.llm_server import LLMTestServer

FACT = "Grace Hopper wrote the first compiler. Grace Hopper worked on the UNIVAC in Philadelphia."
QUESTION = "Who wrote the first compiler?"


@pytest.fixture(scope="module")
def llm() -> Iterator[LLMTestServer]:
    with LLMTestServer() as server:
        yield server


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, llm: LLMTestServer) -> Iterator[TestClient]:
    home = tmp_path_factory.mktemp("memory-api")
    runtime = Runtime(Settings(home=home, **llm_settings(llm)))
    with TestClient(create_app(runtime)) as client:
        yield client


def assert_error(response: Any, status: int, code: str, *words: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    assert all(word in body["error"]["message"] for word in words), body


@pytest.fixture(scope="module")
def remembered(client: TestClient) -> dict[str, Any]:
    response = client.post("/api/v1/remember", json={"text": FACT, "dataset": "api"})
    assert response.status_code == 202, response.text
    body = response.json()
    assert http_finished(client, body["job_id"])["status"] == "succeeded"
    return body


def test_remember_into_a_dataset_starts_a_job(client: TestClient, remembered: Any) -> None:
    assert remembered["stored_in"] == "dataset" and remembered["document"].startswith("memory-")
    docs = client.get("/api/v1/datasets/api/data").json()
    assert [d["name"] for d in docs] == [remembered["document"]]
    assert docs[0]["status"] == "processed"


def test_recall_improve_and_forget_over_http(client: TestClient, remembered: Any) -> None:
    note = client.post("/api/v1/remember", json={"text": "I prefer short answers", "session": "a1"})
    assert note.status_code == 200 and note.json()["note_id"], note.text
    both = client.post(
        "/api/v1/recall",
        # GRAPH_COMPLETION (not the default GRAPH_PPR) reads triplets, whose edges improve weighs.
        json={
            "query": QUESTION,
            "session": "a1",
            "datasets": ["api"],
            "search_type": "GRAPH_COMPLETION",
        },
    ).json()
    assert both["lanes"] == ["session", "graph"] and both["qa_id"]
    sources = {r["source"] for r in both["results"]}
    assert "graph" in sources and "session_note" in sources
    graph_hit = next(r for r in both["results"] if r["source"] == "graph")
    assert graph_hit["sources"][0]["document_name"] == remembered["document"]
    only = client.post("/api/v1/recall", json={"query": "I prefer short answers", "session": "a1"})
    assert only.json()["lanes"] == ["session"]
    assert only.json()["results"][0]["source"] == "session_note"

    improved = client.post(
        "/api/v1/improve", json={"session": "a1", "qa_id": both["qa_id"], "feedback": "down"}
    )
    assert improved.status_code == 200 and improved.json()["edges"] >= 1, improved.text
    missing = {"session": "a1", "qa_id": "0" * 20 + "abcdef", "feedback": "up"}
    assert_error(
        client.post("/api/v1/improve", json=missing), 404, "session_not_found", "no answer"
    )
    sideways = {"session": "a1", "qa_id": both["qa_id"], "feedback": "sideways"}
    assert_error(client.post("/api/v1/improve", json=sideways), 422, "validation_error")

    forgot = client.post("/api/v1/forget", json={"session": "a1"})
    assert forgot.status_code == 200 and forgot.json()["sessions"] == ["a1"], forgot.text
    assert_error(client.post("/api/v1/forget", json={"session": "a1"}), 404, "session_not_found")


def test_memory_requests_are_validated(client: TestClient) -> None:
    assert_error(
        client.post("/api/v1/remember", json={"text": "x"}), 422, "validation_error", "exactly one"
    )
    bad_session = {"text": "x", "session": "has spaces"}
    assert_error(
        client.post("/api/v1/remember", json=bad_session),
        422,
        "invalid_session_request",
        "session id",
    )
    assert_error(client.post("/api/v1/recall", json={"query": "x"}), 422, "invalid_value")
    assert_error(
        client.post("/api/v1/recall", json={"query": "x", "datasets": ["a b"]}),
        400,
        "invalid_request",
    )
    assert_error(client.post("/api/v1/forget", json={}), 422, "invalid_value", "exactly one")
    everything = {"everything": True}
    assert_error(client.post("/api/v1/forget", json=everything), 422, "invalid_value", "confirm")
    nope = {"dataset": "never", "document": "x.txt"}
    assert_error(
        client.post("/api/v1/forget", json=nope), 404, "dataset_not_found", "does not exist"
    )


def test_forget_everything_over_http(client: TestClient, remembered: Any) -> None:
    client.post("/api/v1/remember", json={"text": "a note", "session": "z9"})
    done = client.post("/api/v1/forget", json={"everything": True, "confirm": True})
    assert done.status_code == 200, done.text
    assert "api" in done.json()["datasets"] and "z9" in done.json()["sessions"]
    assert client.get("/api/v1/datasets").json() == []


# -- the same through the CLI ------------------------------------------------------------------


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory, llm: LLMTestServer) -> Callable[..., Any]:
    home: Path = tmp_path_factory.mktemp("memory-cli")
    env = {"COGMILL_HOME": str(home)}
    env |= {f"COGMILL_{k.upper()}": str(v) for k, v in llm_settings(llm).items()}
    runner = CliRunner()

    def run(*args: str) -> tuple[int, str]:
        result = runner.invoke(cli_app, list(args), env=env)
        return result.exit_code, result.output

    return run


@pytest.mark.slow
def test_cli_remember_search_recall_improve_forget(cli: Callable[..., Any]) -> None:
    code, out = cli("remember", FACT, "--dataset", "mem")
    assert code == 0 and "remembered in dataset mem as memory-" in out, out
    document = re.search(r"(memory-[0-9a-f]+\.txt)", out).group(1)  # type: ignore[union-attr]
    code, out = cli("search", QUESTION, "-d", "mem", "-t", "GRAPH_COMPLETION", "-s", "c1")
    assert code == 0 and "in session c1" in out, out
    qa_id = re.search(r"qa id (\w+) in session c1", out).group(1)  # type: ignore[union-attr]
    code, out = cli("recall", QUESTION, "--session", "c1", "--json")
    body = json.loads(out)
    assert code == 0 and body["lanes"] == ["session"], out
    assert body["results"][0]["source"] == "session_qa" and body["answer_source"] == "session_qa"
    code, out = cli("improve", "--session", "c1", "--qa", qa_id, "--feedback", "down")
    assert code == 0 and "edge weight(s) changed" in out, out
    code, out = cli("improve", "--session", "c1", "--qa", qa_id, "--feedback", "sideways")
    assert code == 2 and "up, down or a number" in out, out
    code, out = cli("remember", "no target")
    assert code == 2 and "exactly one of --session or --dataset" in out, out
    code, out = cli("forget", "--all")
    assert code == 2 and "--yes" in out, out
    code, out = cli("forget", "--session", "c1")
    assert code == 0 and "forgot 1 session(s)" in out, out
    code, out = cli("forget", "--session", "c1")
    assert code == 2 and "no session 'c1'" in out, out
    code, out = cli("forget", "--dataset", "mem", "--document", document)
    assert code == 0 and "1 document(s)" in out, out
    code, out = cli("forget", "--all", "--yes")
    assert code == 0 and "1 dataset(s)" in out, out
