"""The LLM extractor: one structured chat call per text, run concurrently under a limiter."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from core.llm import usage as accounting
from core.llm.aio import run_sync
from core.llm.client import LLMClient, LLMError
from core.models.extraction import KnowledgeGraph

PROMPT_PATH = Path(__file__).with_name("prompts") / "extract_graph.txt"


class ExtractionFailed(LLMError):
    """Some texts of a batch got no graph; the others' graphs are kept in `results`."""

    code = "extraction_failed"

    def __init__(self, failures: dict[int, LLMError], results: list[KnowledgeGraph | None]):
        first = failures[min(failures)]
        super().__init__(
            f"LLM extraction failed for {len(failures)} of {len(results)} texts "
            f"(first: text {min(failures)}: {first})"
        )
        self.failures = failures
        self.results = results


class LLMExtractor:
    """Extracts entities, relationships and a summary per text with a chat model."""

    def __init__(
        self,
        client: LLMClient,
        *,
        concurrency: int = 16,
        graph_model: type[KnowledgeGraph] = KnowledgeGraph,
        prompt: str | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        # The Extractor port promises KnowledgeGraphs; subclasses may add or narrow fields.
        if not (isinstance(graph_model, type) and issubclass(graph_model, KnowledgeGraph)):
            raise ValueError(f"graph_model must subclass KnowledgeGraph, got {graph_model!r}")
        self.client = client
        self.concurrency = concurrency
        self.graph_model = graph_model
        self.prompt = prompt if prompt is not None else PROMPT_PATH.read_text(encoding="utf-8")
        self.name = f"llm:{client.model}"

    def extract(self, texts: Sequence[str]) -> list[KnowledgeGraph]:
        """One graph per text, in order. Raises ExtractionFailed naming the texts that failed."""
        return run_sync(self.aextract(texts))

    async def aextract(self, texts: Sequence[str]) -> list[KnowledgeGraph]:
        """`extract` for callers that already run an event loop."""
        semaphore = asyncio.Semaphore(self.concurrency)
        outcomes = await asyncio.gather(
            *(self._one(semaphore, text) for text in texts), return_exceptions=True
        )
        return _collect(outcomes)

    def messages(self, text: str) -> list[dict[str, str]]:
        """The chat messages that ask for the graph of one text (`cognify --estimate` counts
        them too)."""
        return [{"role": "system", "content": self.prompt}, {"role": "user", "content": text}]

    async def _one(self, semaphore: asyncio.Semaphore, text: str) -> KnowledgeGraph:
        """The graph of one text (its calls counted for its document, when the meter knows)."""
        accounting.about_text(text)
        async with semaphore:
            return await self.client.structured(self.messages(text), self.graph_model)


def _collect(outcomes: list[KnowledgeGraph | BaseException]) -> list[KnowledgeGraph]:
    """The graphs in order; ExtractionFailed if any text failed, other errors as they are."""
    failures: dict[int, LLMError] = {}
    results: list[KnowledgeGraph | None] = []
    for index, outcome in enumerate(outcomes):
        if isinstance(outcome, LLMError):
            failures[index] = outcome
            results.append(None)
        elif isinstance(outcome, BaseException):
            raise outcome  # a bug or a cancellation, not an endpoint failure: surface it
        else:
            results.append(outcome)
    if failures:
        raise ExtractionFailed(failures, results)
    return [graph for graph in results if graph is not None]
