"""AddDataPoints embeds a batch's chunks, summaries and names in one embedder call, each distinct
text once, and every collection still gets a searchable vector per point."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from core.embeddings.local import LocalEmbedder
from core.llm.usage import Meter, metering
from core.models.extraction import ExtractedEntity, ExtractedRelationship, KnowledgeGraph
from core.models.graph import chunk_id, document_id
from core.models.vocabulary import (
    CHUNK_COLLECTION,
    EDGE_TYPE_COLLECTION,
    ENTITY_COLLECTION,
    SUMMARY_COLLECTION,
)
from core.stores.qdrant.edge import QdrantEdgeVectorStore
from core.stores.sqlite.graph import SQLiteGraphStore
from pipelines.add_data_points import AddDataPoints
from pipelines.models import Chunk, DocumentRef, ExtractedBatch

TEXTS = [
    "Ada Lovelace was born in London. She worked with Charles Babbage.",
    "Charles Babbage designed the Analytical Engine in London.",
]


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    return LocalEmbedder()


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[SQLiteGraphStore, QdrantEdgeVectorStore]]:
    graph = SQLiteGraphStore(tmp_path / "graph.db")
    vectors = QdrantEdgeVectorStore(tmp_path / "vectors", 384)
    yield graph, vectors
    vectors.close()
    graph.close()


def batch() -> ExtractedBatch:
    """One document of two chunks; "London" and "born in" recur, a summary equals its chunk."""
    doc = document_id("d", "a")
    chunks = [
        Chunk(
            id=chunk_id(doc, i),
            document_id=doc,
            document_name="a.txt",
            index=i,
            text=text,
            token_count=len(text.split()),
        )
        for i, text in enumerate(TEXTS)
    ]
    people = [("Ada Lovelace", "Person"), ("London", "City"), ("Charles Babbage", "Person")]
    graphs = [
        KnowledgeGraph(
            entities=[ExtractedEntity(name=n, type=t, description=n) for n, t in people],
            relationships=[
                ExtractedRelationship(source="Ada Lovelace", target="London", name="born in"),
                ExtractedRelationship(
                    source="Ada Lovelace", target="Charles Babbage", name="worked with"
                ),
            ],
            summary="Ada Lovelace was born in London.",
        ),
        KnowledgeGraph(
            entities=[ExtractedEntity(name=n, type=t, description=n) for n, t in people[1:]],
            relationships=[
                ExtractedRelationship(source="Charles Babbage", target="London", name="born in")
            ],
            summary=TEXTS[1],  # the same text as the chunk: embedded once for both
        ),
    ]
    ref = DocumentRef(id=doc, dataset="d", name="a.txt", blob_key="", derived=False)
    return ExtractedBatch(dataset="d", documents=[ref], chunks=chunks, graphs=graphs)


def test_one_embedder_call_per_batch_each_text_once(
    embedder: LocalEmbedder, stores: tuple[SQLiteGraphStore, QdrantEdgeVectorStore]
) -> None:
    graph, vectors = stores
    step = AddDataPoints(graph, vectors, embedder, embed_batch_size=1)
    with metering(Meter()) as meter:
        report = step.run(batch())
    used = meter.totals()["embeddings"]
    assert used["calls"] == 1, used
    distinct = [*TEXTS, "Ada Lovelace was born in London."]
    distinct += ["Ada Lovelace", "London", "Charles Babbage", "born in", "worked with"]
    with metering(Meter()) as alone:
        embedder.embed(distinct)
    assert used["prompt_tokens"] == alone.totals()["embeddings"]["prompt_tokens"]
    counts = {c: vectors.count(c, dataset="d") for c in (CHUNK_COLLECTION, SUMMARY_COLLECTION)}
    counts[ENTITY_COLLECTION] = vectors.count(ENTITY_COLLECTION, dataset="d")
    counts[EDGE_TYPE_COLLECTION] = vectors.count(EDGE_TYPE_COLLECTION, dataset="d")
    assert counts == {
        CHUNK_COLLECTION: 2,
        SUMMARY_COLLECTION: 2,
        ENTITY_COLLECTION: 3,
        EDGE_TYPE_COLLECTION: 2,
    }
    assert report.vectors == sum(counts.values())
    # The summary equal to its chunk has the chunk's vector: each is its own best match.
    query = embedder.embed([TEXTS[1]])[0].tolist()
    for collection in (CHUNK_COLLECTION, SUMMARY_COLLECTION):
        best = vectors.search(collection, query, datasets=["d"], limit=1)[0]
        assert best.score == pytest.approx(1.0, abs=1e-5)
