"""Answers from retrieved context with the configured LLM, for every completion search type.

Retrievers are synchronous (the CLI, API worker threads and Celery threads call them), while
`LLMClient.structured` is async: `ask` runs it on the calling thread's event loop
(core/llm/aio.py), as the LLM extractor does, so its HTTP connections are reused.

Stable API (other retrievers build on it):
- `ask(ctx, messages, schema)` -> a validated instance of `schema`;
- `answer(ctx, query, results, instructions=..., response_model=...)` -> the answer text, or a
  dict that follows `response_model` (a pydantic model class or a JSON Schema dict);
- `CompletionMixin`: the one `get_completion` of every search type that answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pydantic import BaseModel, Field

from core.errors import NotConfigured
from core.llm.aio import run_sync
from retrieval.models import SearchResult
from retrieval.response_model import ResponseModel, structured_model

if TYPE_CHECKING:
    from retrieval.base import RetrievalContext

Model = TypeVar("Model", bound=BaseModel)

NO_LLM = "no LLM is configured: set COGMILL_LLM_BASE_URL (and COGMILL_LLM_MODEL) to get answers"
# Context beyond this many characters per result is cut: a few long chunks must not crowd
# out the rest of the evidence, nor overflow small local models' windows.
MAX_RESULT_CHARS = 2000

SYSTEM_PROMPT = (
    "You answer questions from a knowledge-graph memory. Use only the numbered context below "
    "the question; if it does not contain the answer, say so briefly. Be concise: a short "
    "phrase or one or two sentences. In `used`, list the numbers of the context items the "
    "answer relies on."
)
STRUCTURED_PROMPT = (
    "You answer questions from a knowledge-graph memory. Use only the numbered context below "
    "the question. Reply with one JSON object that follows the given schema; leave a field "
    "empty when the context does not support it."
)


class Answer(BaseModel):
    """The reply of a completion: the answer and which context items it used (1-based)."""

    answer: str
    used: list[int] = Field(default_factory=list)


def ask(ctx: RetrievalContext, messages: Sequence[dict[str, Any]], schema: type[Model]) -> Model:
    """The LLM's reply to `messages` validated as `schema`.

    Raises NotConfigured when no LLM is configured and core.llm.client.LLMError when the
    endpoint fails for good.
    """
    client = ctx.llm
    if client is None:
        raise NotConfigured(NO_LLM)
    return run_sync(client.structured(messages, schema))


def context_block(results: Sequence[SearchResult]) -> str:
    """The results as numbered context lines, `[1] text`, with their document names."""
    lines = []
    for number, result in enumerate(results, start=1):
        text = " ".join(result.text.split())
        if len(text) > MAX_RESULT_CHARS:
            text = text[: MAX_RESULT_CHARS - 3] + "..."
        names = sorted({s.document_name for s in result.sources if s.document_name})
        origin = f" (from {', '.join(names)})" if names else ""
        lines.append(f"[{number}] {text}{origin}")
    return "\n".join(lines) if lines else "(no context was found)"


def answer_messages(
    query: str, results: Sequence[SearchResult], *, instructions: str | None, structured: bool
) -> list[dict[str, str]]:
    """The chat messages of a completion: system prompt (+ instructions), then the question
    and its numbered context in one user message."""
    system = STRUCTURED_PROMPT if structured else SYSTEM_PROMPT
    if instructions:
        system = f"{system}\n\n{instructions.strip()}"
    user = f"Question: {query.strip()}\n\nContext:\n{context_block(results)}"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def answer(
    ctx: RetrievalContext,
    query: str,
    results: Sequence[SearchResult],
    *,
    instructions: str | None = None,
    response_model: ResponseModel | None = None,
) -> str | dict[str, Any]:
    """Answer `query` from `results` with the LLM: text, or a dict following `response_model`.

    `instructions` are appended to the system prompt (e.g. "think step by step"). Raises
    ValueError without an LLM or with an unusable response_model, LLMError when the endpoint
    fails for good.
    """
    structured = response_model is not None
    messages = answer_messages(query, results, instructions=instructions, structured=structured)
    if response_model is None:
        return ask(ctx, messages, Answer).answer.strip()
    reply = ask(ctx, messages, structured_model(response_model, ctx.settings))
    return reply.model_dump(mode="json")


class Answering(Protocol):
    """What `CompletionMixin` needs of the retriever it is mixed into."""

    @property
    def ctx(self) -> RetrievalContext | None: ...

    def prepare_answer(self, query: str, results: list[SearchResult]) -> str | None: ...


class CompletionMixin:
    """`get_completion` for every retriever that answers: one `answer` over its results.

    The retriever keeps its RetrievalContext in `self.ctx` (None: it cannot answer). Its
    `instructions` (a class attribute) are added to the system prompt; a type that does more
    before the answer (more rounds of evidence, sub-answers, a summary) overrides
    `prepare_answer`, which returns the final answer's instructions.
    """

    instructions: str | None = None

    def get_completion(
        self: Answering,
        query: str,
        results: list[SearchResult],
        response_model: ResponseModel | None = None,
    ) -> str | dict[str, Any]:
        """The LLM's answer from the results (structured when `response_model` is given)."""
        ctx = self.ctx
        if ctx is None:
            raise ValueError(f"{type(self).__name__} needs ctx= to answer")
        instructions = self.prepare_answer(query, results)
        return answer(ctx, query, results, instructions=instructions, response_model=response_model)

    def prepare_answer(self, query: str, results: list[SearchResult]) -> str | None:
        """The final answer's instructions, after any work first (may extend `results`)."""
        return self.instructions
