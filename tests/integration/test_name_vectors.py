"""AddDataPoints does not embed names stored with a vector already, and a concurrent purge (a
re-cognify's batch) cannot leave a stored name without its vector: both interleavings of a
purge with another batch's write of the same name, on a real Neo4j graph and vector store."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence

import neo4j
import pytest

from core.models.extraction import ExtractedEntity, ExtractedRelationship, KnowledgeGraph
from core.models.graph import Node, chunk_id, document_id, entity_id
from core.models.vocabulary import ENTITY, ENTITY_COLLECTION
from core.purge import purge_document
from core.stores.graph_neo4j import Neo4jGraphStore
from core.stores.vector_neo4j import Neo4jVectorStore
from pipelines.add_data_points import AddDataPoints
from pipelines.models import Chunk, DocumentRef, ExtractedBatch
from tests.backends import embedder_fixture  # noqa: F401  (the `embedder` fixture)
from tests.services import neo4j_uri

pytestmark = [pytest.mark.integration, pytest.mark.services]

SHARED = "Ada Lovelace"


class PausingGraph(Neo4jGraphStore):
    """The real store; `before_entities` runs once just before the first write of entities."""

    before_entities: Callable[[], None] | None = None

    def upsert_nodes(self, nodes: Sequence[Node]) -> None:
        hook, self.before_entities = self.before_entities, None
        if hook is not None and any(n.type == ENTITY for n in nodes):
            hook()
        elif hook is not None:
            self.before_entities = hook
        super().upsert_nodes(nodes)


class PausingVectors(Neo4jVectorStore):
    """The real store; `before_delete` runs once just before the next delete."""

    before_delete: Callable[[], None] | None = None

    def delete(self, ids: Sequence[str]) -> None:
        hook, self.before_delete = self.before_delete, None
        if hook is not None:
            hook()
        super().delete(ids)


@pytest.fixture
def stores() -> Iterator[tuple[str, PausingGraph, PausingVectors]]:
    """A dataset of its own on the shared graph, vectors in a namespace of their own."""
    dataset, namespace = f"names-{uuid.uuid4().hex[:8]}", f"T{uuid.uuid4().hex[:12]}"
    graph = PausingGraph(neo4j_uri())
    vectors = PausingVectors(neo4j_uri(), 384, namespace=namespace)
    yield dataset, graph, vectors
    graph.delete_dataset(dataset)
    vectors.close()
    graph.close()
    with neo4j.GraphDatabase.driver(neo4j_uri(), auth=None) as driver:
        driver.execute_query(f"MATCH (n:`{namespace}Vector`) DETACH DELETE n")
        for kind, kinds in (("CONSTRAINT", "CONSTRAINTS"), ("INDEX", "INDEXES")):
            rows, _, _ = driver.execute_query(
                f"SHOW {kinds} YIELD name WHERE name STARTS WITH $prefix", prefix=f"{namespace}_"
            )
            for row in rows:
                driver.execute_query(f"DROP {kind} `{row['name']}` IF EXISTS")


def batch(dataset: str, name: str, people: list[str], *, derived: bool) -> ExtractedBatch:
    """One document of one chunk naming `people` (the first one related to the others)."""
    doc = document_id(dataset, name)
    text = " and ".join(people) + " met in London."
    chunk = Chunk(id=chunk_id(doc, 0), document_id=doc, document_name=name, index=0, text=text,
                  token_count=len(text.split()))  # fmt: skip
    graph = KnowledgeGraph(
        entities=[ExtractedEntity(name=p, type="Person", description=p) for p in people],
        relationships=[
            ExtractedRelationship(source=people[0], target=p, name="met") for p in people[1:]
        ],
        summary=text,
    )
    ref = DocumentRef(id=doc, dataset=dataset, name=name, blob_key="", derived=derived)
    return ExtractedBatch(dataset=dataset, documents=[ref], chunks=[chunk], graphs=[graph])


def name_vector_stored(vectors: Neo4jVectorStore, dataset: str, name: str) -> bool:
    point = entity_id(dataset, name)
    return point in vectors.existing({ENTITY_COLLECTION: [point]})[ENTITY_COLLECTION]


def test_names_stored_with_a_vector_are_not_embedded_again(
    stores: tuple[str, PausingGraph, PausingVectors], embedder: object
) -> None:
    dataset, graph, vectors = stores
    step = AddDataPoints(graph, vectors, embedder)  # type: ignore[arg-type]
    first = step.run(batch(dataset, "a.txt", [SHARED, "Charles Babbage"], derived=False))
    second = step.run(batch(dataset, "b.txt", [SHARED, "Charles Babbage"], derived=False))
    # chunk, summary, two entities, one relation name; then only the chunk and its summary.
    assert (first.vectors, second.vectors) == (5, 2)
    assert vectors.count(ENTITY_COLLECTION, dataset=dataset) == 2


def test_a_purge_between_the_lookup_and_the_write_is_repaired_by_the_writer(
    stores: tuple[str, PausingGraph, PausingVectors], embedder: object
) -> None:
    """Batch A finds the name's vector stored, then batch B's purge removes the name (only B's
    document supported it) with its vector, then A's graph write creates the name again."""
    dataset, graph, vectors = stores
    step = AddDataPoints(graph, vectors, embedder)  # type: ignore[arg-type]
    b = batch(dataset, "b.txt", [SHARED, "Grace Hopper"], derived=False)
    step.run(b)

    def purge_b() -> None:
        purge_document(graph, vectors, None, dataset, b.documents[0].id)
        assert not name_vector_stored(vectors, dataset, SHARED)

    graph.before_entities = purge_b
    step.run(batch(dataset, "a.txt", [SHARED, "Charles Babbage"], derived=False))
    assert graph.before_entities is None  # the purge ran inside A's write
    assert graph.existing([entity_id(dataset, SHARED)])
    assert name_vector_stored(vectors, dataset, SHARED)


def test_a_write_between_the_purges_graph_and_vector_deletes_is_repaired_by_the_purge(
    stores: tuple[str, PausingGraph, PausingVectors], embedder: object
) -> None:
    """Batch B re-writes its document, which no longer names the shared name: its purge takes
    the name off the graph; batch A then writes the name whole (finding its vector still
    there), and only then does B's purge delete the name's vector."""
    dataset, graph, vectors = stores
    step = AddDataPoints(graph, vectors, embedder)  # type: ignore[arg-type]
    step.run(batch(dataset, "b.txt", [SHARED, "Grace Hopper"], derived=False))
    writer = AddDataPoints(Neo4jGraphStore(neo4j_uri()), vectors, embedder)  # type: ignore[arg-type]

    def write_a() -> None:
        assert not graph.existing([entity_id(dataset, SHARED)])
        writer.run(batch(dataset, "a.txt", [SHARED, "Charles Babbage"], derived=False))
        assert name_vector_stored(vectors, dataset, SHARED)

    vectors.before_delete = write_a
    try:
        step.run(batch(dataset, "b.txt", ["Grace Hopper", "Alan Turing"], derived=True))
    finally:
        writer.graph.close()
    assert vectors.before_delete is None
    assert graph.existing([entity_id(dataset, SHARED)])
    assert name_vector_stored(vectors, dataset, SHARED)
