"""GRAPH_COMPLETION_DECOMPOSITION: split a question into sub-questions, answer each, combine.

The LLM proposes the sub-questions when one is configured; otherwise (or when it fails) the
question is split by rules: at "and", ";" or commas that separate clauses with content of
their own, the shared question word carried over ("Who founded X and Y?" → "Who founded X?",
"Who founded Y?"). Each sub-question gets its own triplets; with an LLM each is answered
from them and the answers are combined into one.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from pydantic import BaseModel, Field

from retrieval.answer import CompletionMixin, answer, ask
from retrieval.base import RetrievalContext
from retrieval.models import SearchResult
from retrieval.multistep import LLM_FAILURES, graph_retriever, merge, text_of, user_block

log = logging.getLogger("cogmill.retrieval")

SPLIT_PROMPT = (
    "Split the question into the smallest set of simpler questions whose answers together "
    "answer it, at most {limit}. A question that is already simple stays one question."
)
COMBINE_INSTRUCTIONS = (
    "The question was split into sub-questions, answered one by one:\n{answers}\n"
    "Combine these answers into one answer to the question, using the context to check them."
)
_SEPARATORS = re.compile(r"\s*(?:;|,\s*and\s+|\band\b|,|以及|并且|，|；)\s*", re.IGNORECASE)
_LEAD = re.compile(
    r"^(?:who|what|which|when|where|why|how(?: \w+)?)\s+(?:\w+\s+){1,2}?", re.IGNORECASE
)
_QUESTION_START = re.compile(
    r"^(?:who|what|which|when|where|why|how|is|are|was|were|do|does|did|can)\b", re.IGNORECASE
)
# A later part this short with no question word of its own is a noun phrase that shares the
# first part's question ("Who founded X and Y?").
SHORT_PART_WORDS = 3


class SubQuestions(BaseModel):
    """The LLM's decomposition of a question."""

    questions: list[str] = Field(default_factory=list)


def split_question(query: str, limit: int) -> list[str]:
    """Rule-based sub-questions (at most `limit`); the question itself when it does not split."""
    text = query.strip().rstrip("?？").strip()
    parts = [p.strip() for p in _SEPARATORS.split(text) if p and p.strip()]
    if len(parts) < 2:
        return [query.strip()]
    cjk = bool(re.search(r"[\u4e00-\u9fff]", text))
    lead = _LEAD.match(parts[0])
    questions = [parts[0]]
    for part in parts[1:]:
        if cjk or _QUESTION_START.match(part) or len(part.split()) > SHORT_PART_WORDS:
            questions.append(part)
        elif lead is not None:
            questions.append(lead.group(0) + part)
        else:
            return [query.strip()]  # "Tom and Jerry": one name, not two questions
    mark = "？" if cjk else "?"
    return list(dict.fromkeys(q + mark for q in questions))[:limit]


class DecompositionRetriever(CompletionMixin):
    """Triplets per sub-question; answers per sub-question combined into one."""

    def __init__(self, ctx: RetrievalContext) -> None:
        self.ctx = ctx
        self.base = graph_retriever(ctx)
        self.sub_questions: list[str] = []
        self.per_question: dict[str, list[SearchResult]] = {}
        self.split_by = "rules"

    def get_context(self, query: str, datasets: Sequence[str], top_k: int) -> list[SearchResult]:
        self.sub_questions = self._decompose(query)
        results: list[SearchResult] = []
        self.per_question = {}
        per_part = (
            max(1, top_k // len(self.sub_questions)) if len(self.sub_questions) > 1 else top_k
        )
        for question in self.sub_questions:
            found = self.base.get_context(question, datasets, per_part)
            self.per_question[question] = found
            merge(results, found)
        log.info(
            "decomposition parts=%d split_by=%s results=%d",
            len(self.sub_questions),
            self.split_by,
            len(results),
        )
        return results

    def prepare_answer(self, query: str, results: list[SearchResult]) -> str | None:
        """Each sub-question answered from its own triplets; the final answer combines them."""
        if len(self.sub_questions) < 2:
            return None
        answers = [
            f"- {q} → {text_of(answer(self.ctx, q, self.per_question.get(q, [])))}"
            for q in self.sub_questions
        ]
        return COMBINE_INSTRUCTIONS.format(answers="\n".join(answers))

    def _decompose(self, query: str) -> list[str]:
        limit = self.ctx.settings.search_max_subquestions
        if self.ctx.llm is not None:
            messages = [
                {"role": "system", "content": SPLIT_PROMPT.format(limit=limit)},
                {"role": "user", "content": user_block(("Question", query.strip()))},
            ]
            try:
                proposed = ask(self.ctx, messages, SubQuestions).questions
            except LLM_FAILURES as err:
                log.warning("decomposition_llm_failed error=%s fallback=rules", err)
            else:
                cleaned = list(dict.fromkeys(q.strip() for q in proposed if q.strip()))[:limit]
                if cleaned:
                    self.split_by = "llm"
                    return cleaned
        self.split_by = "rules"
        return split_question(query, limit)
