"""Errors in cogmill's words: inputs whose 4xx bodies once relayed a library's text (Python's
islice, Neo4j's Java exceptions, an XML or JSON parser's) now say what is wrong and what to do,
the library's words in the server log; and the CLI's usage errors are one line of its own."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from api.cli import app
from api.http.app import create_app
from core.settings import Settings
from runtime import Runtime
from tests import services

pytestmark = pytest.mark.e2e

NOTES = [{"name": "ada.txt", "text": "Ada Lovelace worked with Charles Babbage in London."}]
# What the answers carried before: Python's, Neo4j's (Java) and the parsers' own words.
LIBRARY_WORDS = (
    "islice",
    "sys.maxsize",
    "java",
    "Caused by",
    "Exception",
    "Neo.",
    "Neo4j refused",
    "Invalid input",
    "XMLSyntaxError",
    "ExpatError",
    "<string>",
    "mismatched tag",
    "not well-formed",
    "Expecting",
    "char 0",
)


def library_words(text: str) -> list[str]:
    return [word for word in LIBRARY_WORDS if word in text]


def serving(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(Runtime(settings))) as client:
        added = client.post("/api/v1/datasets/notes/data", json={"documents": NOTES})
        assert added.status_code == 200, added.text
        yield client


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    yield from serving(Settings(home=tmp_path_factory.mktemp("embedded")))


@pytest.fixture(scope="module")
def on_neo4j(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    home = tmp_path_factory.mktemp("neo4j")
    yield from serving(Settings(home=home, neo4j_uri=services.neo4j_uri()))


@pytest.mark.parametrize("offset", [2**63 - 1, 10**20])
def test_a_page_past_the_last_document_is_empty(embedded: TestClient, offset: int) -> None:
    """An offset past sys.maxsize made islice fail, and its words came back in a 422."""
    page = embedded.get(f"/api/v1/datasets/notes/data?offset={offset}")
    assert page.status_code == 200 and page.json() == [], page.text


@pytest.mark.parametrize(
    ("query", "neo4j_said"),
    [
        ("CALL db.index.vector.queryNodes('nope', 5, [1.0])", "IllegalArgumentException"),
        ("MATCH (n RETURN n", "Invalid input"),
        ("RETURN substring('abc', -1)", "negative start index"),  # was a 503 "store down"
        ("RETURN range(1, 10, 0)", "cannot be zero"),
    ],
)
def test_a_query_neo4j_refuses_is_answered_in_cogmills_words(
    on_neo4j: TestClient, query: str, neo4j_said: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "cogmill.cypher")
    body = {"query": query, "search_type": "CYPHER", "datasets": ["notes"]}
    answer = on_neo4j.post("/api/v1/search", json=body)
    assert answer.status_code == 422 and answer.json()["error"]["code"] == "cypher_refused"
    message = answer.json()["error"]["message"]
    assert not library_words(message) and "check" in message, message
    assert neo4j_said in caplog.text  # the cause, for the operator


@pytest.mark.parametrize(
    ("ontology_format", "text"),
    [
        ("owl", "<rdf:RDF><oops>"),
        ("rdf", "not XML at all <"),
        ("owl", "<?xml version='1.0'?><rdf:RDF xmlns:rdf='urn:x'>&undefined;</rdf:RDF>"),
        ("owl", "<!DOCTYPE x [<!ENTITY a 'b'>]><x>&a;</x>"),
        ("jsonld", '{"@context": '),
    ],
)
def test_a_malformed_ontology_is_refused_in_cogmills_words(
    embedded: TestClient, ontology_format: str, text: str
) -> None:
    body = {"ontology": text, "ontology_format": ontology_format}
    refused = embedded.post("/api/v1/datasets/notes/cognify", json=body)
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["code"] == "invalid_ontology"
    assert error["message"].startswith(f"ontology.{ontology_format} ")
    assert not library_words(error["message"]), error["message"]


# -- the CLI ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    runner, home = CliRunner(), tmp_path_factory.mktemp("cli")

    def run(*args: str) -> tuple[int, str]:
        result = runner.invoke(app, list(args), env={"COGMILL_HOME": str(home)})
        return result.exit_code, result.output

    return run


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["jobs", "resume", "0123456789abcdef", "--budget-tokens", "0"],
            "error: a token budget must be more than 0, got 0",
        ),
        (
            ["jobs", "resume", "0123456789abcdef", "--budget-usd", "-1"],
            "error: a USD budget must be more than 0, got -1.0",
        ),
        (
            ["jobs", "resume", "0123456789abcdef", "--budget-tokens", "x"],
            "error: --budget-tokens must be a whole number, got 'x'; "
            "`cogmill jobs resume --help` shows the usage",
        ),
        (
            ["jobs", "watch", "0123456789abcdef", "--after", "-1"],
            "error: --after must be at least 0, got '-1'; "
            "`cogmill jobs watch --help` shows the usage",
        ),
        (["jobs", "resume"], "error: JOB_ID is missing; `cogmill jobs resume --help` shows"),
        (["search", "q", "--nope"], "error: cogmill search has no option --nope"),
        (["search", "q", "--type", "NOPE"], "error: --type must be one of chunks, "),
        (["jobs", "nope"], "error: no such command 'nope'; `cogmill jobs --help` shows"),
    ],
)
def test_cli_usage_errors_are_one_line_in_cogmills_words(cli, args: list[str], said: str) -> None:  # noqa: ANN001
    """`jobs resume ID --budget-tokens 0` printed pydantic's "Input should be greater than 0
    ... https://errors.pydantic.dev/..."; every usage error is now a line of ours, exit 2."""
    code, output = cli(*args)
    assert code == 2 and output.startswith(said) and output.count("\n") == 1, output
    assert "pydantic" not in output and "Input should" not in output and "│" not in output
