"""The search entry point shared by the CLI and the API."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from core.catalog import check_dataset_name
from retrieval.base import RetrievalContext, Retriever
from retrieval.chunks import ChunksRetriever
from retrieval.graph_completion import GraphCompletionRetriever
from retrieval.models import SearchResponse, SearchType

NO_LLM_NOTE = "no LLM is configured (COGMILL_LLM_BASE_URL): returning the retrieved context"

# One factory per search type; a retriever that answers defines `get_completion`.
RETRIEVERS: dict[SearchType, Callable[[RetrievalContext], Retriever]] = {
    SearchType.CHUNKS: lambda ctx: ChunksRetriever(ctx.graph, ctx.vectors, ctx.embedder),
    SearchType.GRAPH_COMPLETION: lambda ctx: GraphCompletionRetriever(
        ctx.graph, ctx.vectors, ctx.embedder
    ),
}


def search(
    ctx: RetrievalContext,
    query: str,
    datasets: Sequence[str],
    search_type: SearchType = SearchType.GRAPH_COMPLETION,
    top_k: int = 10,
) -> SearchResponse:
    """Run one search type over the datasets and return its results with provenance."""
    if not query.strip():
        raise ValueError("the query is empty; pass the question to search for")
    if top_k < 1:
        raise ValueError(f"top-k must be at least 1, got {top_k}")
    for name in datasets:
        check_dataset_name(name)
    if search_type not in RETRIEVERS:
        available = ", ".join(sorted(RETRIEVERS))
        raise ValueError(f"search type {search_type} is not available yet; use one of {available}")
    retriever = RETRIEVERS[search_type](ctx)
    results = retriever.get_context(query, datasets, top_k)
    answer, note = None, None
    complete = getattr(retriever, "get_completion", None)
    if search_type is SearchType.GRAPH_COMPLETION and complete is None:
        note = NO_LLM_NOTE  # completion for this type is not built yet
    elif complete is not None:
        if ctx.llm is None:
            note = NO_LLM_NOTE
        else:
            answer = complete(query, results)
    return SearchResponse(
        query=query, search_type=search_type, results=results, answer=answer, note=note
    )
