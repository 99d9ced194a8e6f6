"""GRAPH_COMPLETION_COT: answer, check the answer against the context, ask a follow-up, repeat.

Each round answers from the triplets gathered so far; a validator call says whether the
answer is supported and, if not, which follow-up question would find the missing facts; that
question's triplets join the context. At most `search_max_rounds` answers are made. Without
an LLM the context is plain GRAPH_COMPLETION (there is nothing to validate).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from retrieval.answer import CompletionMixin, answer, ask, context_block
from retrieval.base import RetrievalContext
from retrieval.models import SearchResult
from retrieval.multistep import fresh, graph_retriever, max_rounds, merge, text_of, user_block
from retrieval.response_model import ResponseModel

log = logging.getLogger("cogmill.retrieval")

VALIDATE_PROMPT = (
    "You check an answer to a question against the numbered context it was drawn from. Set "
    "`sufficient` to true only if the context fully supports a complete answer. Otherwise say "
    "in `missing` what is missing and write in `follow_up` one short question that would "
    "retrieve the missing facts from a knowledge graph."
)
STEP_INSTRUCTIONS = "Think step by step over the triplets before answering."


class AnswerValidation(BaseModel):
    """The validator's verdict on one round's answer."""

    sufficient: bool
    missing: str = ""
    follow_up: str = Field(default="", description="A question for the missing facts")


class CotRetriever(CompletionMixin):
    """Rounds of answer → validate → follow-up question → more triplets."""

    def __init__(self, ctx: RetrievalContext) -> None:
        self.ctx = ctx
        self.base = graph_retriever(ctx)
        self.rounds = 0  # answers made by the last get_completion (for logs and tests)
        self.follow_ups: list[str] = []

    def get_context(self, query: str, datasets: Sequence[str], top_k: int) -> list[SearchResult]:
        self.datasets, self.top_k = list(datasets), top_k
        return self.base.get_context(query, datasets, top_k)

    def get_completion(
        self,
        query: str,
        results: list[SearchResult],
        response_model: ResponseModel | None = None,
    ) -> str | dict[str, Any]:
        """The last round's answer; `results` is extended with the follow-ups' triplets.

        Differs from the mixin's: the rounds' own answer is the reply (no final call)."""
        limit = max_rounds(self.ctx)
        self.rounds, self.follow_ups = 0, []
        reply = ""
        while True:
            reply = text_of(answer(self.ctx, query, results, instructions=STEP_INSTRUCTIONS))
            self.rounds += 1
            if self.rounds >= limit:
                break
            verdict = self._validate(query, reply, results)
            question = verdict.follow_up.strip()
            if verdict.sufficient or not question or question in self.follow_ups:
                break
            self.follow_ups.append(question)
            found = fresh(self.base, question, self.datasets, self.top_k, results)
            added = merge(results, found)
            log.info("cot_round round=%d follow_up=%r added=%d", self.rounds, question, len(added))
        if response_model is None:
            return reply
        # The rounds reason in text; the structured reply is one more call over all evidence.
        return super().get_completion(query, results, response_model)

    def _validate(
        self, query: str, reply: str, results: Sequence[SearchResult]
    ) -> AnswerValidation:
        user = user_block(
            ("Question", query.strip()),
            ("Answer", " ".join(reply.split())),
            ("Context", context_block(results)),
        )
        messages = [
            {"role": "system", "content": VALIDATE_PROMPT},
            {"role": "user", "content": user},
        ]
        return ask(self.ctx, messages, AnswerValidation)
