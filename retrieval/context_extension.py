"""GRAPH_COMPLETION_CONTEXT_EXTENSION: grow the context until a new query finds nothing new.

With an LLM, each round's answer becomes the next query (an answer names the entities the
question leads to, so its neighbourhood is the next hop). Without one, the next query is the
entity at an end of the best triplet that no query has named yet. Either way the loop stops
when a round adds no new triplets, or after `search_max_rounds` rounds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from retrieval.answer import CompletionMixin, answer
from retrieval.base import RetrievalContext
from retrieval.models import SearchResult
from retrieval.multistep import fresh, graph_retriever, max_rounds, merge, text_of, triplet_ends

log = logging.getLogger("cogmill.retrieval")

FINAL_INSTRUCTIONS = (
    "The context was extended hop by hop from the question; connect the triplets into a chain "
    "when the question asks how things are related."
)


class ContextExtensionRetriever(CompletionMixin):
    """Triplets of the question, then of each round's answer (or best triplet) in turn."""

    def __init__(self, ctx: RetrievalContext) -> None:
        self.ctx = ctx
        self.base = graph_retriever(ctx)
        self.rounds = 0  # retrieval rounds of the last call, the first included
        self.queries: list[str] = []

    def get_context(self, query: str, datasets: Sequence[str], top_k: int) -> list[SearchResult]:
        self.datasets, self.top_k = list(datasets), top_k
        results = self.base.get_context(query, datasets, top_k)
        self.rounds, self.queries = 1, [query]
        if self.ctx.llm is None:
            self._extend(results, self._best_unused_triplet)
        return results

    def prepare_answer(self, query: str, results: list[SearchResult]) -> str | None:
        """Answer, search with the answer, repeat; the final answer reads the whole context."""

        def next_query(current: list[SearchResult]) -> str | None:
            return text_of(answer(self.ctx, query, current))

        self._extend(results, next_query)
        return FINAL_INSTRUCTIONS

    def _extend(
        self, results: list[SearchResult], next_query: Callable[[list[SearchResult]], str | None]
    ) -> None:
        """Rounds until one adds nothing, a next query repeats, or the bound is reached."""
        limit = max_rounds(self.ctx)
        while self.rounds < limit:
            query = next_query(results)
            if not query or not query.strip() or query in self.queries:
                return
            self.queries.append(query)
            found = fresh(self.base, query, self.datasets, self.top_k, results)
            added = merge(results, found)
            self.rounds += 1
            log.info("context_extension round=%d added=%d", self.rounds, len(added))
            if not added:
                return

    def _best_unused_triplet(self, results: list[SearchResult]) -> str | None:
        """The offline next query: an end of the best triplet that no query has named yet
        (the far end first, so the search walks outwards from the question)."""
        asked = " ".join(self.queries).casefold()
        for result in sorted(results, key=lambda r: -r.score):
            for name in triplet_ends(result):
                if name and name.casefold() not in asked:
                    return name
        return None
