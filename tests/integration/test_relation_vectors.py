"""Relation-name vectors (`EdgeType_relationship_name`) live and die with the relations that use
the name, on both backends: each name is an EdgeType node supported by the chunks whose edges
use it, with the id of its vector, so deletes and re-cognify purges take the vector with it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.catalog import AddReport
from core.models.graph import edge_type_id
from core.models.jobs import Job
from core.models.vocabulary import EDGE_TYPE, EDGE_TYPE_COLLECTION
from pipelines.classify import check_supported
from retrieval.models import SearchType
from retrieval.search import search
from runtime import Runtime
from tests.backends import (
    Backend,
    succeeded,
)
from tests.llm_server import LLMTestServer
from workers.orchestration import cognify

# The test LLM server reads "A <lowercase words> B" between two names as a relation A -> B.
TEXTS = {
    "alice.txt": "Alice Smith works for Acme Corp. Alice Smith lives in Lisbon.",
    "bob.txt": "Bob Jones works for Globex Inc.",
    "carol.txt": "Carol White founded Initech Labs.",
}
# A custom graph model without places: re-extracted under it, "Lisbon" and so `lives_in` go.
NO_PLACES: dict[str, Any] = {
    "title": "People and companies",
    "$defs": {
        "Person": {"properties": {"name": {"type": "string"}}},
        "Organization": {"properties": {"name": {"type": "string"}}},
    },
}


@pytest.fixture
def runtime(backend: Backend, embedder: object, llm_server: LLMTestServer) -> Iterator[Runtime]:
    settings = {
        "llm_base_url": llm_server.base_url,
        "llm_api_key": "test",
        "embed_relation_names": True,
    }
    with backend.runtime({"embedder": embedder}, **settings) as rt:
        yield rt


@pytest.fixture
def dataset(backend: Backend) -> str:
    return backend.dataset("relations")


def add(rt: Runtime, dataset: str, folder: Path, **texts: str) -> None:
    rt.catalog.ensure_dataset(dataset)
    report = AddReport()
    for name, text in texts.items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        rt.catalog.add_file(dataset, path, name, report, check_supported)
    assert not report.rejected, report


def run(rt: Runtime, dataset: str, mode: str = "changed", **options: Any) -> Job:
    return succeeded(rt, cognify(rt, dataset, mode=mode, options=options or None))


def relation_names(rt: Runtime, dataset: str) -> set[str]:
    """The relation names of the dataset's vectors, checked against the EdgeType nodes: one
    node per vector, same id, same name (graph search reads the name from the payload)."""
    vector = rt.embedder.embed(["works for"])[0].tolist()
    hits = rt.vectors.search(EDGE_TYPE_COLLECTION, vector, datasets=[dataset], limit=100)
    names = {hit.payload["name"] for hit in hits}
    assert {hit.id for hit in hits} == {edge_type_id(dataset, name) for name in names}, hits
    assert rt.vectors.count(EDGE_TYPE_COLLECTION, dataset=dataset) == len(hits)
    nodes = rt.graph.find_nodes(dataset, EDGE_TYPE, limit=100)
    assert {(n.id, n.name) for n in nodes} == {(hit.id, hit.payload["name"]) for hit in hits}
    return names


def doc_named(rt: Runtime, dataset: str, name: str) -> str:
    [doc] = rt.graph.find_nodes(dataset, "Document", name=name, limit=2)
    return doc.id


def test_deleting_documents_removes_only_the_relation_names_nobody_uses(
    runtime: Runtime, dataset: str, tmp_path: Path
) -> None:
    add(runtime, dataset, tmp_path, **TEXTS)
    job = run(runtime, dataset)
    assert relation_names(runtime, dataset) == {"works_for", "lives_in", "founded"}
    # EdgeType nodes are no entities and no relationships in what users are shown.
    counts = runtime.graph.count(dataset)
    assert counts[EDGE_TYPE] == 3 and job.counts["relationships"] == 4, (counts, job.counts)
    assert job.counts["entities"] == counts["Entity"] == 7, (counts, job.counts)
    works_for = runtime.graph.get_nodes([edge_type_id(dataset, "works_for")])[0]
    supporters = {s.document_id for s in works_for.support}
    assert supporters == {doc_named(runtime, dataset, n) for n in ("alice.txt", "bob.txt")}
    found = search(
        runtime.retrieval(),
        "Who works for Acme Corp?",
        [dataset],
        SearchType.GRAPH_COMPLETION,
        top_k=3,
    )
    assert "Alice Smith —works for→ Acme Corp" in found.results[0].text, found.results

    runtime.catalog.remove_named(dataset, "alice.txt")  # works_for is still Bob's
    assert relation_names(runtime, dataset) == {"works_for", "founded"}
    runtime.catalog.remove_named(dataset, "bob.txt")
    assert relation_names(runtime, dataset) == {"founded"}
    runtime.catalog.remove_named(dataset, "carol.txt")
    assert relation_names(runtime, dataset) == set()
    assert runtime.graph.count(dataset) == {"Dataset": 1, "edges": 0}


@pytest.mark.slow
def test_recognify_drops_the_vectors_of_relations_that_are_gone(
    runtime: Runtime, dataset: str, tmp_path: Path
) -> None:
    add(runtime, dataset, tmp_path, **TEXTS)
    run(runtime, dataset)
    # A changed text replaces its document: the relation it no longer states goes.
    add(runtime, dataset, tmp_path, **{"alice.txt": "Alice Smith works for Acme Corp."})
    run(runtime, dataset)
    assert relation_names(runtime, dataset) == {"works_for", "founded"}
    # A forced re-cognify purges each document before writing it again: under a graph model
    # without places Lisbon is not extracted, so a re-added `lives_in` goes again.
    add(runtime, dataset, tmp_path, **{"carol.txt": "Carol White lives in Lisbon."})
    run(runtime, dataset)
    assert relation_names(runtime, dataset) == {"works_for", "lives_in"}
    job = run(runtime, dataset, mode="all", graph_model=NO_PLACES)
    assert job.counts["documents"] == 3 and job.counts["relationships"] == 2, job.counts
    assert relation_names(runtime, dataset) == {"works_for"}


def test_by_default_relation_names_are_neither_built_nor_embedded(
    backend: Backend, embedder: object, llm_server: LLMTestServer, tmp_path: Path
) -> None:
    """Off by default (no search type's recall needed them): the relations are stored and
    found by GRAPH_COMPLETION as before, without an EdgeType node or vector per name."""
    settings = {"llm_base_url": llm_server.base_url, "llm_api_key": "test"}
    dataset = backend.dataset("plain")
    with backend.runtime({"embedder": embedder}, **settings) as rt:
        add(rt, dataset, tmp_path, **TEXTS)
        job = run(rt, dataset)
        assert job.counts["relationships"] == 4
        assert EDGE_TYPE not in rt.graph.count(dataset)
        assert rt.vectors.count(EDGE_TYPE_COLLECTION, dataset=dataset) == 0
        question = "Who works for Acme Corp?"
        kind = SearchType.GRAPH_COMPLETION
        found = search(rt.retrieval(), question, [dataset], kind, top_k=3)
        assert "Alice Smith —works for→ Acme Corp" in found.results[0].text, found.results
