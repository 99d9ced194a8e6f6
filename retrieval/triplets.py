"""TRIPLET_COMPLETION: facts as `subject relation object` lines, ranked by their own text.

Triplet vectors are computed at query time for a bounded candidate set (the graph search's
best triplets) rather than stored at ingestion: one more vector per relationship would add
an embedding per fact to every ingest, while re-embedding ~60 short lines per query costs
tens of milliseconds. The context is the fact lines alone (sources name their chunks), which
keeps prompts short compared with GRAPH_COMPLETION's passages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from retrieval.answer import CompletionMixin
from retrieval.base import RetrievalContext
from retrieval.graph_completion import GraphCompletionRetriever
from retrieval.models import SearchResult


@dataclass(frozen=True)
class TripletParams:
    """How many graph candidates to re-rank and how to mix the two scores."""

    candidates: int = 60
    text_weight: float = 0.6  # cosine(query, triplet line); the rest is the graph score


class TripletRetriever(CompletionMixin):
    """The triplets whose text is nearest the query, with the chunks they came from."""

    instructions = "Each context item is a fact `subject —relation→ object`."

    def __init__(self, ctx: RetrievalContext, params: TripletParams | None = None) -> None:
        self.ctx = ctx
        self.params = params or TripletParams()

    def get_context(self, query: str, datasets: Sequence[str], top_k: int) -> list[SearchResult]:
        ctx, p = self.ctx, self.params
        graph = GraphCompletionRetriever(ctx.graph, ctx.vectors, ctx.embedder, view=ctx.facts)
        candidates: dict[str, SearchResult] = {}
        for result in graph.triplets(query, datasets, max(top_k * 3, p.candidates)):
            line = result.text.split("\n", 1)[0]
            if line not in candidates:
                candidates[line] = result
        if not candidates:
            return []
        lines = list(candidates)
        vectors = ctx.embedder.embed([query, *lines])
        similarity = vectors[1:] @ vectors[0]
        best_graph = max(r.score for r in candidates.values()) or 1.0
        scored = sorted(
            (
                p.text_weight * float(sim)
                + (1 - p.text_weight) * candidates[line].score / best_graph,
                line,
            )
            for line, sim in zip(lines, similarity, strict=True)
        )
        scored.reverse()
        return [
            SearchResult(text=line, score=round(score, 6), sources=candidates[line].sources)
            for score, line in scored[:top_k]
        ]
