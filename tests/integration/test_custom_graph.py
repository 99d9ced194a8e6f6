"""Custom graph models and ontologies through real jobs (Celery threads, the local embedder) on
both backends (embedded: SQLite + Qdrant Edge; Neo4j + Redis): offline, and with the test LLM
server answering the custom schema. The API and CLI checks run embedded only."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.catalog import AddReport
from core.models.graph import entity_id
from core.models.jobs import Job
from core.models.vocabulary import SUBCLASS_OF
from core.ontology import store_ontology_file
from core.settings import Settings
from pipelines.classify import check_supported
from retrieval.models import SearchType
from retrieval.search import search
from runtime import Runtime
from tests.backends import (
    Backend,
    http_finished,
    succeeded,
)
from tests.llm_server import LLMTestServer
from workers.jobs import JobTracker
from workers.orchestration import cognify

DATASET = "science"
CURIE = (
    "Marie Curie worked at the University of Paris. Marie Curie was born in Warsaw. "
    "Pierre Curie married Marie Curie in 1895."
)
LOVELACE = "Ada Lovelace worked with Charles Babbage. Ada Lovelace joined Analytical Labs."
SCHEMA: dict[str, Any] = {
    "title": "People and places",
    "$defs": {
        "Human": {
            "description": "A person.",
            "x-aliases": ["Person"],
            "properties": {
                "name": {"type": "string"},
                "occupation": {"type": "string", "x-index": True},
                "birth_year": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            },
        },
        "Organization": {"properties": {"name": {"type": "string"}}},
        "City": {"properties": {"name": {"type": "string"}}},
    },
}
SCIENCE_OWL = """<?xml version="1.0"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"
         xmlns:rdfs="http://www.w3.org/2000/01/rdf-schema#"
         xmlns:owl="http://www.w3.org/2002/07/owl#">
  <owl:Class rdf:about="http://example.org/sci#Person"/>
  <owl:Class rdf:about="http://example.org/sci#Scientist">
    <rdfs:subClassOf rdf:resource="http://example.org/sci#Person"/>
  </owl:Class>
  <owl:Class rdf:about="http://example.org/sci#Location"/>
  <owl:NamedIndividual rdf:about="http://example.org/sci#MarieCurie">
    <rdf:type rdf:resource="http://example.org/sci#Scientist"/>
  </owl:NamedIndividual>
</rdf:RDF>
"""


@pytest.fixture
def offline(backend: Backend, embedder: object) -> Iterator[Runtime]:
    with backend.runtime({"embedder": embedder}) as rt:
        yield rt


@pytest.fixture
def with_llm(backend: Backend, embedder: object, llm_server: LLMTestServer) -> Iterator[Runtime]:
    settings = {"llm_base_url": llm_server.base_url, "llm_api_key": "test"}
    with backend.runtime({"embedder": embedder}, **settings) as rt:
        yield rt


@pytest.fixture
def dataset(backend: Backend) -> str:
    return backend.dataset(DATASET)


def add_texts(rt: Runtime, dataset: str, tmp_path: Path, **texts: str) -> None:
    rt.catalog.ensure_dataset(dataset)
    report = AddReport()
    for name, text in texts.items():
        path = tmp_path / f"{name}.txt"
        path.write_text(text, encoding="utf-8")
        rt.catalog.add_file(dataset, path, path.name, report, check_supported)
    assert len(report.added) == len(texts)


def run(rt: Runtime, dataset: str, options: dict[str, Any], mode: str = "changed") -> Job:
    return succeeded(rt, cognify(rt, dataset, None, mode, options))


def nodes(rt: Runtime, node_type: str, dataset: str = DATASET) -> dict[str, Any]:
    return {n.name: n for n in rt.graph.find_nodes(dataset, node_type)}


@pytest.mark.slow
def test_offline_extraction_fills_the_custom_classes_and_search_finds_them(
    offline: Runtime, tmp_path: Path, dataset: str
) -> None:
    add_texts(offline, dataset, tmp_path, curie=CURIE)
    run(offline, dataset, {"graph_model": SCHEMA})
    humans, orgs, cities = (nodes(offline, t, dataset) for t in ("Human", "Organization", "City"))
    assert set(humans) == {"Marie Curie", "Pierre Curie"}
    assert set(orgs) == {"University of Paris"}
    assert set(cities) == {"Warsaw"}  # Location -> City by alias; the date 1895 is dropped
    assert nodes(offline, "Entity", dataset) == {}  # the custom model replaced the default types
    counts = offline.graph.count(dataset)
    assert counts["Human"] == 2 and offline.vectors.count("Human_name", dataset=dataset) == 2
    assert offline.vectors.count("Human_occupation", dataset=dataset) == 0  # values need an LLM
    hits = offline.vectors.search(
        "Human_name",
        offline.embedder.embed(["Marie Curie"])[0].tolist(),
        datasets=[dataset],
        limit=1,
    )
    assert hits[0].id == entity_id(dataset, "Marie Curie")
    found = search(
        offline.retrieval(),
        "Where did Marie Curie work?",
        [dataset],
        SearchType.GRAPH_COMPLETION,
        5,
    )
    assert any("Marie Curie —worked at→ University of Paris" in r.text for r in found.results)


def test_the_llm_answers_in_the_custom_schema_with_field_values(
    with_llm: Runtime, tmp_path: Path, llm_server: LLMTestServer, dataset: str
) -> None:
    schema = {**SCHEMA, "$defs": {k: v for k, v in SCHEMA["$defs"].items() if k != "Human"}}
    schema["$defs"]["Person"] = SCHEMA["$defs"]["Human"]  # the test server's type names
    calls = llm_server.calls()
    add_texts(with_llm, dataset, tmp_path, lovelace=LOVELACE)
    run(with_llm, dataset, {"graph_model": schema})
    assert llm_server.calls() > calls
    people = nodes(with_llm, "Person", dataset)
    assert set(people) == {"Ada Lovelace", "Charles Babbage"}
    ada = people["Ada Lovelace"].properties
    assert ada["occupation"] == "occupation of Ada Lovelace" and ada["birth_year"] == 12
    assert set(nodes(with_llm, "Organization", dataset)) == {"Analytical Labs"}
    assert with_llm.vectors.count("Person_occupation", dataset=dataset) == 2
    found = search(
        with_llm.retrieval(),
        "Who did Ada Lovelace work with?",
        [dataset],
        SearchType.GRAPH_COMPLETION,
        3,
    )
    assert "Ada Lovelace —worked with→ Charles Babbage" in found.results[0].text
    # Deleting the document removes the custom nodes with everything else it supported.
    with_llm.catalog.remove_named(dataset, "lovelace.txt")
    assert nodes(with_llm, "Person", dataset) == {}
    assert with_llm.vectors.count("Person_occupation", dataset=dataset) == 0


@pytest.mark.slow
def test_ontology_matches_carry_uris_and_the_class_hierarchy_is_written(
    offline: Runtime, tmp_path: Path, dataset: str
) -> None:
    owl = tmp_path / "science.owl"
    owl.write_text(SCIENCE_OWL, encoding="utf-8")
    add_texts(offline, dataset, tmp_path, curie=CURIE, lovelace=LOVELACE)
    run(offline, dataset, {"ontology": store_ontology_file(offline.blobs, owl)})
    entities = nodes(offline, "Entity", dataset)
    assert entities["Marie Curie"].properties["ontology_uri"] == "http://example.org/sci#MarieCurie"
    assert "ontology_uri" not in entities["Pierre Curie"].properties
    types = nodes(offline, "EntityType", dataset)
    assert types["Person"].properties["ontology_uri"] == "http://example.org/sci#Person"
    assert types["Location"].properties["ontology_uri"] == "http://example.org/sci#Location"
    scientist = types["Scientist"]
    [edge] = offline.graph.edges_of([scientist.id], names=[SUBCLASS_OF])
    assert (edge.source, edge.target) == (scientist.id, types["Person"].id)
    is_a = offline.graph.edges_of([entities["Marie Curie"].id], names=["IS_A"])
    assert {e.target for e in is_a} == {scientist.id, types["Person"].id}
    # The hierarchy belongs to the documents that matched it: gone with them.
    offline.catalog.remove_named(dataset, "curie.txt")
    assert "Scientist" not in nodes(offline, "EntityType", dataset)
    assert offline.graph.edges_of([scientist.id], names=[SUBCLASS_OF]) == []
    assert "Person" in nodes(offline, "EntityType", dataset)  # still the type of Ada Lovelace


@pytest.mark.slow
def test_the_api_validates_and_applies_graph_models_and_ontologies(
    tmp_path: Path, embedder: object
) -> None:
    from fastapi.testclient import TestClient

    from api.http.app import create_app

    rt = Runtime(Settings(home=tmp_path / "api"))
    rt.__dict__["embedder"] = embedder
    url = f"/api/v1/datasets/{DATASET}/cognify"
    with TestClient(create_app(rt)) as client:
        note = {"name": "curie.txt", "text": CURIE}
        added = client.post(f"/api/v1/datasets/{DATASET}/data", json={"documents": [note]})
        assert added.status_code == 200, added.text
        bad_model = client.post(
            url,
            json={
                "graph_model": {"$defs": {"Entity": {"properties": {"name": {"type": "string"}}}}}
            },
        )
        assert bad_model.status_code == 422 and "cogmill's types" in bad_model.text
        bad_ontology = client.post(url, json={"ontology": "<rdf:RDF><oops>"})
        assert bad_ontology.status_code == 422 and "not valid xml RDF" in bad_ontology.text
        body = {"graph_model": SCHEMA, "ontology": SCIENCE_OWL, "ontology_format": "owl"}
        accepted = client.post(url, json=body)
        assert accepted.status_code == 202, accepted.text
        job = http_finished(client, accepted.json()["job_id"])
        assert job["status"] == "succeeded", job
        curie = nodes(rt, "Human")["Marie Curie"]
        assert curie.properties["ontology_uri"] == "http://example.org/sci#MarieCurie"


def test_the_cli_refuses_bad_graph_models_and_ontologies_with_exit_code_2(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from api.cli import app

    bad_model = tmp_path / "model.json"
    bad_model.write_text(
        '{"$defs": {"P": {"properties": {"name": {"type": "string"}, "home": {"type": "object"}}}}}'
    )
    env = {"COGMILL_HOME": str(tmp_path / "home")}
    result = CliRunner().invoke(app, ["cognify", DATASET, "--graph-model", str(bad_model)], env=env)
    assert result.exit_code == 2 and "P.home has type object" in result.output
    notes = tmp_path / "notes.pdf"
    notes.write_text("x")
    result = CliRunner().invoke(app, ["cognify", DATASET, "--ontology", str(notes)], env=env)
    assert result.exit_code == 2 and "unknown extension .pdf" in result.output


@pytest.mark.slow
def test_a_jobs_entity_count_counts_the_custom_classes(
    offline: Runtime, tmp_path: Path, dataset: str
) -> None:
    add_texts(offline, dataset, tmp_path, curie=CURIE)
    job = run(offline, dataset, {"graph_model": SCHEMA})
    counts = offline.graph.count(dataset)
    custom = sum(counts.get(t, 0) for t in SCHEMA["$defs"])
    assert custom == 4 and "Entity" not in counts
    # What `cogmill jobs show` prints and GET /jobs/{id} returns: the stored job's counts.
    shown = json.loads(JobTracker(offline.state).get(job.id).model_dump_json())
    assert shown["counts"]["entities"] == custom == job.counts["entities"]
