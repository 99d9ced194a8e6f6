"""The search entry point shared by the CLI and the API."""

from __future__ import annotations

from collections.abc import Sequence

from core.catalog import check_dataset_name
from core.ports import Embedder, GraphReader, VectorStore
from retrieval.chunks import ChunksRetriever
from retrieval.graph_completion import GraphCompletionRetriever
from retrieval.models import SearchResponse, SearchType

NO_LLM_NOTE = "no LLM is configured (COGMILL_LLM_BASE_URL): returning the retrieved context"


def search(
    graph: GraphReader,
    vectors: VectorStore,
    embedder: Embedder,
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
    retrievers = {
        SearchType.CHUNKS: ChunksRetriever,
        SearchType.GRAPH_COMPLETION: GraphCompletionRetriever,
    }
    retriever = retrievers[search_type](graph, vectors, embedder)
    results = retriever.get_context(query, datasets, top_k)
    note = NO_LLM_NOTE if search_type is SearchType.GRAPH_COMPLETION else None
    return SearchResponse(query=query, search_type=search_type, results=results, note=note)
