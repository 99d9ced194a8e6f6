"""A malformed ontology in a cognify request: what a linear check finds
(malformed XML) is a 422 at once; what only an RDF parse finds (broken Turtle) is accepted,
parsed in the worker, and fails the job's documents with a generic message. The request
never parses RDF, so it answers fast whatever the ontology's parse would cost."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.http.app import create_app
from core.settings import Settings
from runtime import Runtime
from tests.backends import http_finished, llm_settings
from tests.llm_server import LLMTestServer

URL = "/api/v1/datasets/notes/cognify"
NOTES = [
    {"name": "ada.txt", "text": "Ada Lovelace worked with Charles Babbage in London."},
    {"name": "alan.txt", "text": "Alan Turing worked at Bletchley Park."},
]
# Valid until its last line: a parser reads it all before it fails.
BROKEN_TURTLE = (
    "@prefix ex: <http://example.org/o#> .\n@prefix owl: <http://www.w3.org/2002/07/owl#> .\n"
    + "".join(f"ex:C{i} a owl:Class .\n" for i in range(20_000))
    + "ex:Broken ex:dangling\n"
)


@pytest.fixture
def client(tmp_path: Path, llm_server: LLMTestServer) -> Iterator[TestClient]:
    runtime = Runtime(Settings(home=tmp_path, **llm_settings(llm_server)))
    with TestClient(create_app(runtime)) as client:
        added = client.post("/api/v1/datasets/notes/data", json={"documents": NOTES})
        assert added.status_code == 200, added.text
        yield client


def test_malformed_xml_is_refused_in_the_request(client: TestClient) -> None:
    refused = client.post(URL, json={"ontology": "<rdf:RDF><oops>", "ontology_format": "owl"})
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["message"] == (
        "ontology.owl is not valid xml RDF; check it with an RDF validator"
    )


@pytest.mark.slow
def test_broken_turtle_is_accepted_then_fails_the_job_in_the_worker(client: TestClient) -> None:
    body = {"ontology": BROKEN_TURTLE, "ontology_format": "ttl"}
    started = time.perf_counter()
    accepted = client.post(URL, json=body)
    answered = time.perf_counter() - started
    # A parse in the request would have refused it (422): 202 says it parsed nothing.
    assert accepted.status_code == 202, accepted.text
    print(f"\n{len(BROKEN_TURTLE)} bytes of Turtle accepted in {answered:.3f} s")
    job = http_finished(client, accepted.json()["job_id"], timeout=300)
    assert job["status"] == "failed", job
    errors = job["errors"]
    assert {e["document_name"] for e in errors} == {"ada.txt", "alan.txt"}, errors
    for error in errors:
        assert error["step"] == "extract_graph"
        assert error["message"].startswith("InvalidOntology: ontologies/"), error
        # The parser's reason (rdflib's BadSyntax, a line number) stays in the log.
        assert error["message"].endswith("is not valid turtle RDF; check it with an RDF validator")
