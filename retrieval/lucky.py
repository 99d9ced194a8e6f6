"""FEELING_LUCKY: the LLM picks the search type for the question, then that type runs.

The choice is an enum of the registry's types that do not delegate (never FEELING_LUCKY or
AGENTIC_COMPLETION themselves), each with its declared description. Without an LLM, or when
it fails, the rule-based router chooses. The response's note says which type ran and who
chose it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, create_model

from retrieval.answer import CompletionMixin, ask
from retrieval.base import Registry, RetrievalContext, Retriever
from retrieval.models import SearchResult, SearchType
from retrieval.multistep import LLM_FAILURES, user_block
from retrieval.response_model import ResponseModel
from retrieval.router import routed_type

log = logging.getLogger("cogmill.retrieval")

CHOOSE_PROMPT = "Pick the one search type that best fits the question.\nSearch types:\n{types}"


@functools.lru_cache(maxsize=32)
def choice_model(types: tuple[str, ...]) -> type[BaseModel]:
    """`SearchTypeChoice` with `search_type` limited to `types` (an enum in the JSON schema)."""
    fields: dict[str, Any] = {"search_type": (Literal[types], ...), "reason": (str, "")}
    return create_model("SearchTypeChoice", **fields)


class FeelingLuckyRetriever(CompletionMixin):
    """Runs the search type the LLM (or the router) picks among the registry's types."""

    def __init__(self, ctx: RetrievalContext, registry: Registry) -> None:
        self.ctx, self.registry = ctx, registry
        self.chosen: SearchType | None = None
        self.delegate: Retriever | None = None
        self.note: str | None = None

    def get_context(self, query: str, datasets: Sequence[str], top_k: int) -> list[SearchResult]:
        allowed = self.registry.tools()
        self.chosen, chooser = self._choose(query, allowed)
        self.note = f"FEELING_LUCKY ran {self.chosen.value}, chosen by {chooser}"
        self.delegate = self.registry.create(self.chosen, self.ctx)
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
            {
                "role": "system",
                "content": CHOOSE_PROMPT.format(types=self.registry.describe(names)),
            },
            {"role": "user", "content": user_block(("Question", query.strip()))},
        ]
        try:
            reply = ask(self.ctx, messages, choice_model(names))
        except LLM_FAILURES as err:
            log.warning("feeling_lucky_llm_failed error=%s fallback=router", err)
            chosen, _ = routed_type(query, allowed)
            return chosen, "the query router (the LLM failed)"
        return SearchType(reply.search_type), "the LLM"  # type: ignore[attr-defined]
