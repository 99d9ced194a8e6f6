"""GRAPH_SUMMARY_COMPLETION: the triplets are summarised first, then the question is answered.

A summary lets a small model answer "overview" questions from many triplets without reading
each. With an LLM the summary is written by it; without one, an extractive summary groups the
triplet lines by the entity they start from. The summary leads the returned context, with the
union of the triplets' provenance.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from retrieval.answer import CompletionMixin, ask, context_block
from retrieval.base import RetrievalContext
from retrieval.models import SearchResult, Source
from retrieval.multistep import first_line, graph_retriever, user_block

SUMMARY_PROMPT = (
    "Summarise the numbered knowledge-graph triplets below into a short paragraph that keeps "
    "every fact relevant to the question: names, relations, numbers and dates."
)
SUMMARY_PREFIX = "Summary: "
ANSWER_INSTRUCTIONS = "The first context item summarises the others; answer from it first."
MAX_GROUPS = 12


class GraphSummary(BaseModel):
    """The LLM's summary of a set of triplets."""

    summary: str


def extractive_summary(results: Sequence[SearchResult]) -> str:
    """Triplet lines grouped by their source entity: "A: rel B; rel C. D: ..."."""
    groups: dict[str, list[str]] = {}
    for result in results:
        line = first_line(result)
        head, arrow, tail = line.partition(" —")
        if not arrow:
            groups.setdefault(line, [])
            continue
        relation, _, target = tail.partition("→ ")
        groups.setdefault(head, []).append(f"{relation.strip()} {target.strip()}".strip())
    parts = [
        f"{head}: {'; '.join(dict.fromkeys(facts))}" if facts else head
        for head, facts in list(groups.items())[:MAX_GROUPS]
    ]
    return ". ".join(parts)


def summary_result(text: str, results: Sequence[SearchResult]) -> SearchResult:
    """One result for the summary, carrying every source of the triplets it summarises."""
    sources: dict[tuple[str, str], Source] = {}
    for result in results:
        for source in result.sources:
            sources.setdefault((source.document_id, source.chunk_id), source)
    score = max((r.score for r in results), default=0.0)
    return SearchResult(text=SUMMARY_PREFIX + text, score=score, sources=list(sources.values()))


class GraphSummaryRetriever(CompletionMixin):
    """Triplets, a summary of them first, then the answer from summary and triplets."""

    def __init__(self, ctx: RetrievalContext) -> None:
        self.ctx = ctx
        self.base = graph_retriever(ctx)

    def get_context(self, query: str, datasets: Sequence[str], top_k: int) -> list[SearchResult]:
        triplets = self.base.get_context(query, datasets, top_k)
        if self.ctx.llm is not None or not triplets:
            return triplets  # the LLM writes the summary in get_completion
        return [summary_result(extractive_summary(triplets), triplets), *triplets]

    def prepare_answer(self, query: str, results: list[SearchResult]) -> str | None:
        """Summarise the triplets (the summary is put first in `results`) for the answer."""
        if results:
            user = user_block(("Question", query.strip()), ("Context", context_block(results)))
            messages = [
                {"role": "system", "content": SUMMARY_PROMPT},
                {"role": "user", "content": user},
            ]
            summary = ask(self.ctx, messages, GraphSummary).summary.strip()
            if summary:
                results.insert(0, summary_result(summary, results))
        return ANSWER_INSTRUCTIONS
