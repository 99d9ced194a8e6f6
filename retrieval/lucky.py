"""FEELING_LUCKY: the LLM picks the search type for the question, then that type runs.

The choice is an enum of the types available at run time (never FEELING_LUCKY or
AGENTIC_COMPLETION themselves). Without an LLM, or when it fails, the rule-based router
chooses. The response's note says which type ran and who chose it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, create_model

from retrieval.answer import CompletionMixin, ask
from retrieval.base import RetrievalContext, Retriever
from retrieval.models import SearchResult, SearchType
from retrieval.multistep import LLM_FAILURES, user_block
from retrieval.response_model import ResponseModel
from retrieval.router import DEFAULT_TYPE, route

log = logging.getLogger("cogmill.retrieval")

# Types that delegate to other types: never chosen by them (no recursion).
META_TYPES = frozenset({SearchType.FEELING_LUCKY, SearchType.AGENTIC_COMPLETION})
DESCRIPTIONS: dict[SearchType, str] = {
    SearchType.CHUNKS: "passages nearest in meaning to the query",
    SearchType.CHUNKS_LEXICAL: "passages containing the exact words or phrase (keyword search)",
    SearchType.SUMMARIES: "summaries of passages",
    SearchType.RAG_COMPLETION: "an answer from the nearest passages",
    SearchType.TRIPLET_COMPLETION: "an answer from the nearest graph triplets",
    SearchType.GRAPH_COMPLETION: "an answer from graph triplets around the query's entities",
    SearchType.GRAPH_COMPLETION_COT: "step-by-step reasoning with follow-up questions",
    SearchType.GRAPH_COMPLETION_CONTEXT_EXTENSION: "how things are related, hop by hop",
    SearchType.GRAPH_COMPLETION_DECOMPOSITION: "a compound question split into sub-questions",
    SearchType.GRAPH_SUMMARY_COMPLETION: "a summary or overview of a topic",
    SearchType.HYBRID_COMPLETION: "passages and triplets together",
    SearchType.GRAPH_PPR: "entities and facts connected to the query (personalised PageRank)",
    SearchType.TEMPORAL: "events in a time range (when, before, after, years)",
    SearchType.CYPHER: "a Cypher graph query given verbatim",
    SearchType.NATURAL_LANGUAGE: "a question translated into a graph query",
    SearchType.CODING_RULES: "the stored coding rules",
}
CHOOSE_PROMPT = "Pick the one search type that best fits the question.\nSearch types:\n{types}"


def available_types() -> list[SearchType]:
    """The search types registered now, except the meta types."""
    from retrieval.search import RETRIEVERS  # search imports this module

    return sorted((t for t in RETRIEVERS if t not in META_TYPES), key=lambda t: t.value)


def describe(types: Sequence[str]) -> str:
    """One `- NAME: what it finds` line per type."""
    return "\n".join(f"- {t}: {DESCRIPTIONS.get(SearchType(t), t)}" for t in types)


@functools.lru_cache(maxsize=32)
def choice_model(types: tuple[str, ...]) -> type[BaseModel]:
    """`SearchTypeChoice` with `search_type` limited to `types` (an enum in the JSON schema)."""
    fields: dict[str, Any] = {"search_type": (Literal[types], ...), "reason": (str, "")}
    return create_model("SearchTypeChoice", **fields)


def routed_type(query: str, allowed: Sequence[SearchType]) -> tuple[SearchType, str]:
    """The router's type if allowed, else its runner-up, else the router's default."""
    chosen = route(query)
    for candidate in (chosen.search_type, chosen.runner_up):
        if candidate in allowed:
            return candidate, "the query router"
    return DEFAULT_TYPE, "the default (the router's choices are not available)"


class FeelingLuckyRetriever(CompletionMixin):
    """Runs the search type the LLM (or the router) picks for the question."""

    def __init__(self, ctx: RetrievalContext) -> None:
        self.ctx = ctx
        self.chosen: SearchType | None = None
        self.delegate: Retriever | None = None
        self.note: str | None = None

    def get_context(self, query: str, datasets: Sequence[str], top_k: int) -> list[SearchResult]:
        from retrieval.search import RETRIEVERS

        allowed = available_types()
        self.chosen, chooser = self._choose(query, allowed)
        self.note = f"FEELING_LUCKY ran {self.chosen.value}, chosen by {chooser}"
        self.delegate = RETRIEVERS[self.chosen](self.ctx)
        results = self.delegate.get_context(query, datasets, top_k)
        inner = getattr(self.delegate, "note", None)
        if inner:
            self.note += f"; {inner}"
        return results

    def get_completion(
        self,
        query: str,
        results: list[SearchResult],
        response_model: ResponseModel | None = None,
    ) -> str | dict[str, Any]:
        """The chosen type's own completion, or a plain answer from its context."""
        complete = getattr(self.delegate, "get_completion", None)
        if complete is None:
            return super().get_completion(query, results, response_model)
        if response_model is None:
            return complete(query, results)
        return complete(query, results, response_model=response_model)

    def _choose(self, query: str, allowed: list[SearchType]) -> tuple[SearchType, str]:
        if self.ctx.llm is None or not allowed:
            return routed_type(query, allowed)
        names = tuple(t.value for t in allowed)
        messages = [
            {"role": "system", "content": CHOOSE_PROMPT.format(types=describe(names))},
            {"role": "user", "content": user_block(("Question", query.strip()))},
        ]
        try:
            reply = ask(self.ctx, messages, choice_model(names))
        except LLM_FAILURES as err:
            log.warning("feeling_lucky_llm_failed error=%s fallback=router", err)
            chosen, _ = routed_type(query, allowed)
            return chosen, "the query router (the LLM failed)"
        return SearchType(reply.search_type), "the LLM"  # type: ignore[attr-defined]
