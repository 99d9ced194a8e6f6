"""HYBRID_COMPLETION: reciprocal rank fusion of four chunk rankings, answered by the LLM.

Lanes, each a ranking of chunk ids: dense (chunk vectors), summaries (summary vectors, mapped
to the chunks they summarise), lexical (BM25) and graph (the chunks behind the best
GRAPH_COMPLETION triplets). A chunk scores sum(weight / (k + rank)) over the lanes that rank
it; the results are chunks, so `cogmill eval` measures its recall@k like CHUNKS'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from core.lexical import bm25_search
from core.models.vocabulary import CHUNK, CHUNK_COLLECTION, SUMMARY_COLLECTION
from retrieval.answer import CompletionMixin
from retrieval.base import RetrievalContext
from retrieval.chunks import chunk_source
from retrieval.graph_completion import GraphCompletionRetriever
from retrieval.lexical import LexicalRetriever, lexical_index
from retrieval.models import SearchResult


@dataclass(frozen=True)
class FusionParams:
    """How deep each lane looks and how much it counts in the fusion."""

    k: int = 60  # the usual RRF constant: damps the head of each ranking
    depth: int = 30  # candidates per lane (at least top_k)
    weights: dict[str, float] = field(
        default_factory=lambda: {"dense": 1.0, "summaries": 0.7, "lexical": 1.0, "graph": 0.8}
    )


def fuse(rankings: dict[str, list[str]], params: FusionParams) -> list[tuple[str, float]]:
    """Reciprocal rank fusion of id rankings (one per lane), best first, ties by id."""
    scores: dict[str, float] = {}
    for lane, ids in rankings.items():
        weight = params.weights.get(lane, 1.0)
        for rank, item in enumerate(dict.fromkeys(ids), start=1):
            scores[item] = scores.get(item, 0.0) + weight / (params.k + rank)
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))


class HybridRetriever(CompletionMixin):
    """The chunks the four lanes agree on, best first."""

    def __init__(self, ctx: RetrievalContext, params: FusionParams | None = None) -> None:
        self.ctx = ctx
        self.params = params or FusionParams()

    def lanes(self, query: str, datasets: Sequence[str], depth: int) -> dict[str, list[str]]:
        """Each lane's ranking of chunk ids."""
        ctx = self.ctx
        vector = ctx.embedder.embed([query])[0].tolist()
        dense = ctx.vectors.search(CHUNK_COLLECTION, vector, datasets=datasets, limit=depth)
        summary_hits = ctx.vectors.search(
            SUMMARY_COLLECTION, vector, datasets=datasets, limit=depth
        )
        summaries = {n.id: n for n in ctx.graph.get_nodes([h.id for h in summary_hits])}
        summarised = [
            s.chunk_id
            for h in summary_hits
            if h.id in summaries
            for s in summaries[h.id].support
            if s.chunk_id
        ]
        lexical = LexicalRetriever(ctx.graph, lexical_index(ctx))
        for dataset in datasets:
            lexical.backfill(dataset)
        graph = GraphCompletionRetriever(ctx.graph, ctx.vectors, ctx.embedder, view=ctx.facts)
        triplets = graph.triplets(query, datasets, depth)
        return {
            "dense": [h.id for h in dense],
            "summaries": summarised,
            "lexical": [chunk for chunk, _ in bm25_search(lexical.index, datasets, query, depth)],
            "graph": [s.chunk_id for r in triplets for s in r.sources],
        }

    def get_context(self, query: str, datasets: Sequence[str], top_k: int) -> list[SearchResult]:
        fused = fuse(self.lanes(query, datasets, max(top_k, self.params.depth)), self.params)
        pool = fused[: top_k * 2]  # a few spare ids in case some chunks were deleted
        nodes = {n.id: n for n in self.ctx.graph.get_nodes([chunk for chunk, _ in pool])}
        results = [
            SearchResult(
                text=str(nodes[chunk].properties.get("text", "")),
                score=round(score, 6),
                sources=[chunk_source(nodes[chunk])],
            )
            for chunk, score in pool
            if chunk in nodes and nodes[chunk].type == CHUNK
        ]
        return results[:top_k]
