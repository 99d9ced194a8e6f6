"""RAG_COMPLETION: the nearest chunks as context, answered by the LLM."""

from __future__ import annotations

from retrieval.answer import CompletionMixin
from retrieval.base import RetrievalContext
from retrieval.chunks import ChunksRetriever


class RagRetriever(CompletionMixin, ChunksRetriever):
    """CHUNKS context; `get_completion` answers from it."""

    def __init__(self, ctx: RetrievalContext) -> None:
        super().__init__(ctx.graph, ctx.vectors, ctx.embedder)
        self.ctx = ctx
