"""CHUNKS_LEXICAL: BM25 over document chunks, from the persistent index kept at write time.

Chunks written before the index existed are indexed on the first search of their dataset.
Every hit is checked against the graph before it is returned, so a posting left behind by an
interrupted delete can never surface deleted text (and is dropped when found).
"""

from __future__ import annotations

from collections.abc import Sequence

from core.lexical import bm25_search
from core.models.lexical import LexicalDoc
from core.models.vocabulary import CHUNK
from core.ports import GraphReader, LexicalIndex
from core.stores import factory
from retrieval.base import RetrievalContext
from retrieval.chunks import chunk_source
from retrieval.models import SearchResult

_PAGE = 1000


def lexical_index(ctx: RetrievalContext) -> LexicalIndex:
    """The runtime's lexical index, or one opened from the settings (kept in `ctx.extras`)."""
    index = ctx.extras.get("lexical")
    if index is None:
        index = ctx.extras["lexical"] = factory.lexical_index(ctx.settings)
    return index


class LexicalRetriever:
    """The chunks whose words best match the query (BM25), best first."""

    def __init__(self, graph: GraphReader, index: LexicalIndex) -> None:
        self.graph, self.index = graph, index

    def get_context(self, query: str, datasets: Sequence[str], top_k: int) -> list[SearchResult]:
        for dataset in datasets:
            self.backfill(dataset)
        results: list[SearchResult] = []
        for _attempt in range(2):  # a second pass only when stale postings were dropped
            hits = bm25_search(self.index, datasets, query, top_k + 5)
            nodes = {n.id: n for n in self.graph.get_nodes([chunk for chunk, _ in hits])}
            stale = [chunk for chunk, _ in hits if chunk not in nodes]
            results = [
                SearchResult(
                    text=str(nodes[chunk].properties.get("text", "")),
                    score=round(score, 6),
                    sources=[chunk_source(nodes[chunk])],
                )
                for chunk, score in hits
                if chunk in nodes
            ][:top_k]
            if not stale:
                break
            for dataset in datasets:
                self.index.remove(dataset, stale)
        return results

    def backfill(self, dataset: str) -> int:
        """Index a dataset's chunks when the index has none of them; returns how many."""
        if self.index.count(dataset):
            return 0
        added, offset = 0, 0
        while True:
            page = self.graph.find_nodes(dataset, CHUNK, limit=_PAGE, offset=offset)
            docs = [
                LexicalDoc(n.id, str(n.properties.get("document_id", "")), str(text))
                for n in page
                if (text := n.properties.get("text"))
            ]
            if docs:
                self.index.add(dataset, docs)
                added += len(docs)
            if len(page) < _PAGE:
                return added
            offset += _PAGE
