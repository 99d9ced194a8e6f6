"""CHUNKS: dense vector search over document chunks."""

from __future__ import annotations

from collections.abc import Sequence

from core.models.graph import Node
from core.models.vocabulary import CHUNK_COLLECTION, ROW_COLLECTION
from core.ports import Embedder, GraphReader, VectorStore
from retrieval.models import SearchResult, Source


def chunk_source(chunk: Node) -> Source:
    """Provenance of a chunk node: itself and the document it is part of."""
    props = chunk.properties
    return Source(
        document_id=props.get("document_id", ""),
        document_name=props.get("document_name", ""),
        chunk_id=chunk.id,
    )


class ChunksRetriever:
    """The chunks (and table rows) nearest to the query, best first."""

    def __init__(self, graph: GraphReader, vectors: VectorStore, embedder: Embedder) -> None:
        self.graph, self.vectors, self.embedder = graph, vectors, embedder

    def get_context(self, query: str, datasets: Sequence[str], top_k: int) -> list[SearchResult]:
        vector = self.embedder.embed([query])[0]
        hits = [
            hit
            for collection in (CHUNK_COLLECTION, ROW_COLLECTION)
            for hit in self.vectors.search(
                collection, vector.tolist(), datasets=datasets, limit=top_k
            )
        ]
        hits = sorted(hits, key=lambda hit: -hit.score)[:top_k]
        nodes = {node.id: node for node in self.graph.get_nodes([hit.id for hit in hits])}
        return [
            SearchResult(
                text=str(nodes[hit.id].properties.get("text", "")),
                score=hit.score,
                sources=[chunk_source(nodes[hit.id])],
            )
            for hit in hits
            if hit.id in nodes
        ]
