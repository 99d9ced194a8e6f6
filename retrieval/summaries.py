"""SUMMARIES: dense vector search over chunk summaries and document summaries."""

from __future__ import annotations

from collections.abc import Sequence

from core.models.graph import Node
from core.models.vocabulary import DOCUMENT, SUMMARY_COLLECTION
from core.ports import Embedder, GraphReader, VectorStore
from retrieval.chunks import chunk_source
from retrieval.models import SearchResult, Source


class SummariesRetriever:
    """The summaries nearest to the query, each with the chunk or document it summarises."""

    def __init__(self, graph: GraphReader, vectors: VectorStore, embedder: Embedder) -> None:
        self.graph, self.vectors, self.embedder = graph, vectors, embedder

    def get_context(self, query: str, datasets: Sequence[str], top_k: int) -> list[SearchResult]:
        vector = self.embedder.embed([query])[0].tolist()
        hits = self.vectors.search(SUMMARY_COLLECTION, vector, datasets=datasets, limit=top_k)
        summaries = {n.id: n for n in self.graph.get_nodes([hit.id for hit in hits])}
        # A chunk summary stands on its chunk; a document summary on its document.
        wanted = {s.chunk_id or s.document_id for n in summaries.values() for s in n.support}
        origins = {n.id: n for n in self.graph.get_nodes(sorted(wanted))}
        results = []
        for hit in hits:
            node = summaries.get(hit.id)
            if node is None:
                continue  # a vector whose node was deleted: never surface it
            sources = [
                _source(origins[key])
                for key in dict.fromkeys(s.chunk_id or s.document_id for s in node.support)
                if key in origins
            ]
            text = str(node.properties.get("text", ""))
            results.append(SearchResult(text=text, score=hit.score, sources=sources))
        return results


def _source(node: Node) -> Source:
    """Provenance of a summary's origin: a chunk, or a whole document (no chunk id)."""
    if node.type == DOCUMENT:
        return Source(document_id=node.id, document_name=node.name, chunk_id="")
    return chunk_source(node)
