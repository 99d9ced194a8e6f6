"""Facts over time through every face: documents dated on upload (HTTP multipart and JSON,
the client, `cogmill add --document-date`), current facts first in search, `as_of` and
`known_at` searches, the routed as-of question, and an entity's timeline (`cogmill facts`,
GET .../facts, the client's `facts`), with their bounds. Offline: spaCy and the local
embedder, embedded stores, real Celery worker threads."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from mcp import Client as McpClient
from typer.testing import CliRunner

from api.cli import app as cli_app
from api.http.app import create_app
from api.mcp.face import LocalAccess
from api.mcp.server import build_server
from cogmill_client import Client, NotFoundError, UnprocessableEntityError
from core.settings import Settings
from runtime import Runtime
from tests.backends import http_finished

pytestmark = pytest.mark.e2e

DATA = "/api/v1/datasets/hist/data"
FACTS = "/api/v1/datasets/hist/facts"
MARA = "Mara Quist became CEO of Holbeck Foods in 2019."
TEO = "Teo Varga succeeded Mara Quist as CEO of Holbeck Foods in March 2023."
PLANT = "Holbeck Foods opened a plant in Hull."  # no date of its own: the document's
NOW = "Who is the CEO of Holbeck Foods?"


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Runtime:
    return Runtime(Settings(home=tmp_path_factory.mktemp("facts-home"), batch_size=2))


@pytest.fixture(scope="module")
def client(runtime: Runtime) -> Iterator[TestClient]:
    with TestClient(create_app(runtime)) as client:
        yield client


@pytest.fixture(scope="module")
def cognified(client: TestClient) -> dict[str, Any]:
    files = [("files", ("teo.txt", TEO.encode(), "text/plain"))]
    sent = client.post(DATA, files=files, data={"document_date": "2023-04-02"})
    assert sent.status_code == 200, sent.text
    for name, text, day in (("mara.txt", MARA, "June 2019"), ("plant.txt", PLANT, "2021")):
        body = {"documents": [{"name": name, "text": text}], "document_date": day}
        assert client.post(DATA, json=body).status_code == 200
    job = client.post("/api/v1/datasets/hist/cognify", json={}).json()["job_id"]
    return http_finished(client, job)


def search(client: TestClient, query: str, **body: Any) -> dict[str, Any]:
    answer = client.post("/api/v1/search", json={"query": query, "datasets": ["hist"], **body})
    assert answer.status_code == 200, answer.text
    return answer.json()


def top_fact(answer: dict[str, Any]) -> str:
    return answer["results"][0]["evidence"][0]


def test_search_shows_current_facts_first_and_past_ones_as_of_a_time(client, cognified):
    assert cognified["status"] == "succeeded", cognified
    now = top_fact(search(client, NOW, search_type="GRAPH_COMPLETION"))
    assert "Teo Varga" in now and "[since 2023-03-01]" in now
    then = top_fact(search(client, NOW, search_type="GRAPH_COMPLETION", as_of="2020"))
    assert "Mara Quist" in then and "superseded" in then
    routed = search(client, "Who was the CEO of Holbeck Foods in 2020?")
    assert routed["route"]["as_of"] == "2020" and "Mara Quist" in top_fact(routed)
    assert "as_of 2020" in routed["note"]


def test_known_at_a_time_before_anything_was_recorded_finds_no_fact(client, cognified):
    answer = search(client, NOW, search_type="GRAPH_COMPLETION", known_at="2001-01-01")
    assert not any("Holbeck" in line for r in answer["results"] for line in r["evidence"])


def test_an_entitys_timeline_with_sources(client, cognified):
    timeline = client.get(FACTS, params={"entity": "holbeck foods", "relation": "ceo"})
    assert timeline.status_code == 200, timeline.text
    body = timeline.json()
    assert body["entity"] == "Holbeck Foods" and not body["truncated"]
    mara, teo = body["facts"]
    assert (mara["source"], mara["valid_from"], mara["valid_to"]) == (
        "Mara Quist",
        "2019-01-01",
        "2023-03-01",
    )
    assert mara["superseded_by"] == "Teo Varga —ceo_of→ Holbeck Foods" and not mara["holds"]
    assert teo["holds"] and teo["recorded_at"] and teo["retired_at"] is None
    [source] = mara["sources"]
    assert (source["document_name"], source["said_from"]) == ("mara.txt", "2019-01-01")
    plant = client.get(FACTS, params={"entity": "Holbeck Foods", "relation": "opened"}).json()
    assert plant["facts"][0]["valid_from"] == "2021-01-01"  # the document's date


def test_bounds_and_bad_input_get_the_error_schema(client, cognified):
    too_long = "2019 " * 13
    for body in ({"as_of": too_long}, {"known_at": too_long}):
        answer = client.post("/api/v1/search", json={"query": NOW, "datasets": ["hist"], **body})
        assert answer.status_code == 422, answer.text
    bad = client.post("/api/v1/search", json={"query": NOW, "datasets": ["hist"], "as_of": "x"})
    assert bad.status_code == 422 and "as_of 'x' is not a date" in bad.text
    over = client.get(FACTS, params={"entity": "Holbeck Foods", "limit": 1001})
    assert over.status_code == 422
    long_entity = client.get(FACTS, params={"entity": "x" * 201})
    assert long_entity.status_code == 422
    missing = client.get(FACTS, params={"entity": "Nobody Here"})
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "entity_not_found"
    dated = client.post(
        DATA, files=[("files", ("x.txt", b"x", "text/plain"))], data={"document_date": "d" * 65}
    )
    assert dated.status_code == 422


def test_the_client_searches_as_of_and_reads_timelines(client, cognified):
    with Client("http://testserver", http=client) as api:
        then = api.search(NOW, "hist", search_type="GRAPH_COMPLETION", as_of="2020")
        assert "Mara Quist" in then.results[0].evidence[0]
        timeline = api.facts("hist", "Holbeck Foods", relation="ceo")
        assert [f.source for f in timeline.facts] == ["Mara Quist", "Teo Varga"]
        with pytest.raises(NotFoundError):
            api.facts("hist", "Nobody Here")
        with pytest.raises(UnprocessableEntityError):
            api.facts("hist", "Holbeck Foods", limit=0)


def test_the_mcp_search_tool_searches_as_of_a_time(runtime, cognified):
    @asynccontextmanager
    async def lifespan(server: Any) -> AsyncIterator[LocalAccess]:
        yield LocalAccess(runtime)

    async def session() -> list[Any]:
        async with McpClient(build_server(lifespan)) as mcp:
            asked = {"query": NOW, "datasets": ["hist"], "search_type": "GRAPH_COMPLETION"}
            return [
                await mcp.call_tool("search", {**asked, "as_of": "2020"}),
                await mcp.call_tool("search", {**asked, "known_at": "x" * 65}),
            ]

    then, too_long = asyncio.run(session())
    assert (
        not then.is_error and "Mara Quist" in then.structured_content["results"][0]["evidence"][0]
    )
    assert too_long.is_error


@pytest.mark.slow
def test_the_cli_dates_documents_and_prints_timelines(tmp_path: Path):
    runner = CliRunner()
    env = {"COGMILL_HOME": str(tmp_path / "home")}

    def cli(*args: str) -> tuple[int, str]:
        result = runner.invoke(cli_app, list(args), env=env)
        return result.exit_code, result.output

    for name, text, day in (("mara.txt", MARA, "2019-06-01"), ("teo.txt", TEO, "2023-04-02")):
        (tmp_path / name).write_text(text, encoding="utf-8")
        code, out = cli("add", str(tmp_path / name), "-d", "hist", "--document-date", day)
        assert code == 0, out
    assert cli("cognify", "hist")[0] == 0
    code, out = cli("facts", "Holbeck Foods", "-d", "hist", "--relation", "ceo")
    assert code == 0, out
    assert "Mara Quist —ceo_of→ Holbeck Foods  [2019-01-01 – 2023-03-01] does not hold" in out
    assert "superseded by Teo Varga —ceo_of→ Holbeck Foods" in out and "mara.txt" in out
    code, out = cli(
        "search", NOW, "-d", "hist", "-t", "GRAPH_COMPLETION", "--as-of", "2020", "--json"
    )
    assert code == 0, out
    assert "Mara Quist" in json.loads(out)["results"][0]["evidence"][0]
    code, out = cli("search", NOW, "-d", "hist", "--known-at", "2019 " * 14)
    assert code == 2 and "above the limit of 64" in out
    code, out = cli("add", str(tmp_path / "mara.txt"), "-d", "hist", "--document-date", "soon")
    assert code == 2 and "not a date" in out
