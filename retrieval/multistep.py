"""Pieces shared by the multi-step search types: the base graph search, merging, bounds.

The multi-step types (COT, context extension, decomposition, graph summary, agentic) all
gather GRAPH_COMPLETION triplets over several rounds; the context they return is the union,
deduplicated by text, with each result's provenance kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from core.llm.client import LLMError
from retrieval.base import RetrievalContext
from retrieval.graph_completion import GraphCompletionRetriever
from retrieval.models import SearchResult

# Extras key under which `search()` leaves the query analysis for the retrievers.
ANALYSIS_KEY = "analysis"
# The fewest rounds a multi-step type runs when its loop is not stopped early: one round is
# plain GRAPH_COMPLETION.
MIN_ROUNDS = 2
# Caught where an LLM call may fail and an offline fallback exists: the endpoint failing for
# good (LLMError) or no LLM configured (ValueError from retrieval.answer.ask).
LLM_FAILURES = (LLMError, ValueError)


def graph_retriever(ctx: RetrievalContext) -> GraphCompletionRetriever:
    """The GRAPH_COMPLETION retriever every multi-step type gathers triplets with."""
    return GraphCompletionRetriever(ctx.graph, ctx.vectors, ctx.embedder, view=ctx.facts)


def max_rounds(ctx: RetrievalContext) -> int:
    """Rounds a loop may run: the setting, narrowed by the query analysis' depth if any."""
    cap = ctx.settings.search_max_rounds
    analysis = ctx.extras.get(ANALYSIS_KEY)
    if analysis is None:
        return cap
    return min(cap, max(MIN_ROUNDS, analysis.depth))


def result_key(result: SearchResult) -> str:
    """Results showing the same passage(s) are one result; without sources, the same text."""
    if result.sources:
        return " ".join(s.chunk_id for s in result.sources)
    return " ".join(result.text.split())


def merge(into: list[SearchResult], more: Iterable[SearchResult]) -> list[SearchResult]:
    """Append the results of `more` not already in `into` (in place); returns those added.

    A repeat keeps the higher score and the union of the sources, and lists the triplets it
    did not list yet (in `evidence` and, before the passage, in its text).
    """
    index = {result_key(r): r for r in into}
    added: list[SearchResult] = []
    for result in more:
        key = result_key(result)
        seen = index.get(key)
        if seen is None:
            copy = result.model_copy(deep=True)
            into.append(copy)
            index[key] = copy
            added.append(copy)
            continue
        seen.score = max(seen.score, result.score)
        lines = [line for line in result.evidence if line not in seen.evidence]
        if lines:
            at = len(seen.evidence)
            seen.text = "\n".join(
                [*seen.text.split("\n")[:at], *lines, *seen.text.split("\n")[at:]]
            )
            seen.evidence.extend(lines)
        known = {(s.document_id, s.chunk_id) for s in seen.sources}
        seen.sources.extend(s for s in result.sources if (s.document_id, s.chunk_id) not in known)
    return added


def fresh(
    base: GraphCompletionRetriever,
    query: str,
    datasets: Sequence[str],
    top_k: int,
    known: Sequence[SearchResult],
) -> list[SearchResult]:
    """Up to `top_k` results for `query` not among `known`.

    Asks for `top_k` more than are known, so a follow-up query whose best triplets are
    already in the context still brings the next ones: "nothing new" then means nothing new
    near the query, not that its top-k was taken.
    """
    seen = {result_key(r) for r in known}
    found = base.get_context(query, datasets, top_k + len(known))
    return [r for r in found if result_key(r) not in seen][:top_k]


def triplet_ends(result: SearchResult) -> list[str]:
    """The entity names of a triplet line "A —rel→ B" as [B, A]; [line] for other results."""
    line = first_line(result)
    head, arrow, tail = line.partition(" —")
    if not arrow or "→" not in tail:
        return [line] if line else []
    return [tail.split("→", 1)[1].strip(), head.strip()]


def first_line(result: SearchResult) -> str:
    """The triplet line of a graph result ("A —rel→ B"), or the text's first line."""
    return result.text.split("\n", 1)[0].strip()


def text_of(reply: str | dict[str, Any]) -> str:
    """An answer as text (structured answers are not requested by these types)."""
    return reply if isinstance(reply, str) else str(reply)


def user_block(*parts: tuple[str, str]) -> str:
    """`Label: value` paragraphs of a user message, in order (the test LLM server reads them)."""
    return "\n\n".join(
        f"{label}:\n{value}" if "\n" in value else f"{label}: {value}" for label, value in parts
    )


def numbered(lines: Sequence[str]) -> str:
    """`[1] line` per line."""
    return "\n".join(f"[{i}] {line}" for i, line in enumerate(lines, start=1))
