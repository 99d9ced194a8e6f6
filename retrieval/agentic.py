"""AGENTIC_COMPLETION: a bounded tool loop where the LLM calls the other retrievers.

Each step the LLM sees the question, the calls made so far and the context gathered, and
picks a tool: one of the registry's search types that do not delegate, each with its declared
description (with the query to send it), or "answer".
Results accumulate, deduplicated. The loop ends on "answer", on a repeated call, on an LLM
failure, or after `search_max_tool_calls` tool calls. Without an LLM the router's type runs
once.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, create_model

from retrieval.answer import CompletionMixin, ask, context_block
from retrieval.base import Registry, RetrievalContext
from retrieval.models import SearchResult, SearchType
from retrieval.multistep import LLM_FAILURES, merge, user_block
from retrieval.router import routed_type

log = logging.getLogger("cogmill.retrieval")

ANSWER_TOOL = "answer"
AGENT_PROMPT = (
    "You gather evidence to answer a question by calling search tools, one call per turn. "
    "Pick `tool` and the `query` to send it (rephrase to find what is still missing). Pick "
    f'"{ANSWER_TOOL}" as soon as the context is enough to answer.\nTools:\n{{tools}}\n'
    f"- {ANSWER_TOOL}: stop searching and answer from the context"
)


@functools.lru_cache(maxsize=32)
def tool_model(tools: tuple[str, ...]) -> type[BaseModel]:
    """`ToolChoice` with `tool` limited to the tools plus "answer"."""
    fields: dict[str, Any] = {
        "tool": (Literal[(*tools, ANSWER_TOOL)], ...),
        "query": (str, ""),
        "reason": (str, ""),
    }
    return create_model("ToolChoice", **fields)


@dataclass
class ToolCall:
    """One retriever call of the loop and how many new results it brought."""

    tool: SearchType
    query: str
    added: int
    error: str = ""


class AgenticRetriever(CompletionMixin):
    """Context gathered by an LLM-driven loop over the other retrievers; the answer is drawn
    from everything the loop gathered."""

    def __init__(self, ctx: RetrievalContext, registry: Registry) -> None:
        self.ctx, self.registry = ctx, registry
        self.calls: list[ToolCall] = []
        self.note: str | None = None

    def get_context(self, query: str, datasets: Sequence[str], top_k: int) -> list[SearchResult]:
        tools = self.registry.tools()
        results: list[SearchResult] = []
        self.calls = []
        if self.ctx.llm is None:
            chosen, chooser = routed_type(query, tools)
            self._run(chosen, query, datasets, top_k, results)
            self.note = f"AGENTIC_COMPLETION without an LLM: ran {chosen.value} once ({chooser})"
            return results
        limit = self.ctx.settings.search_max_tool_calls
        names = tuple(t.value for t in tools)
        while len(self.calls) < limit:
            try:
                reply: Any = ask(self.ctx, self._messages(query, names, results), tool_model(names))
            except LLM_FAILURES as err:
                log.warning("agentic_llm_failed calls=%d error=%s", len(self.calls), err)
                if not self.calls:  # nothing gathered yet: the router's choice, once
                    self._run(routed_type(query, tools)[0], query, datasets, top_k, results)
                break
            if reply.tool == ANSWER_TOOL:
                break
            sent = reply.query.strip() or query
            tool = SearchType(reply.tool)
            if any(c.tool is tool and c.query == sent for c in self.calls):
                break  # the same call again would add nothing
            self._run(tool, sent, datasets, top_k, results)
        trace = ", ".join(f"{c.tool.value}({c.added} new)" for c in self.calls)
        self.note = f"AGENTIC_COMPLETION made {len(self.calls)} tool call(s): {trace or 'none'}"
        return results

    def _run(
        self,
        tool: SearchType,
        query: str,
        datasets: Sequence[str],
        top_k: int,
        results: list[SearchResult],
    ) -> None:
        """One retriever call; its new results join `results`. Bad tool input is recorded."""
        try:
            found = self.registry.create(tool, self.ctx).get_context(query, datasets, top_k)
        except (ValueError, LookupError) as err:  # e.g. a question sent to CYPHER
            self.calls.append(ToolCall(tool, query, 0, str(err)))
            return
        self.calls.append(ToolCall(tool, query, len(merge(results, found))))

    def _messages(
        self, query: str, tools: tuple[str, ...], results: Sequence[SearchResult]
    ) -> list[dict[str, str]]:
        made = "\n".join(
            f"[{n}] {c.tool.value}({c.query!r}) -> {c.added} new result(s)"
            + (f", error: {c.error}" if c.error else "")
            for n, c in enumerate(self.calls, start=1)
        )
        user = user_block(
            ("Question", query.strip()),
            ("Tool calls so far", str(len(self.calls))),
            ("Calls", made or "(none)"),
            ("Context", context_block(results)),
        )
        return [
            {"role": "system", "content": AGENT_PROMPT.format(tools=self.registry.describe(tools))},
            {"role": "user", "content": user},
        ]
