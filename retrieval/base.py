"""What a retriever is given (the stores, the embedder, the LLM if any) and what it offers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from core.ports import Embedder, GraphReader, StateStore, VectorStore
from core.settings import Settings
from retrieval.models import SearchResult

if TYPE_CHECKING:
    from core.llm.client import LLMClient


@dataclass
class RetrievalContext:
    """Everything a retriever may read. `llm` is None when no LLM is configured."""

    graph: GraphReader
    vectors: VectorStore
    embedder: Embedder
    settings: Settings = field(default_factory=Settings)
    state: StateStore | None = None
    llm: LLMClient | None = None
    extras: dict[str, Any] = field(default_factory=dict)


class Retriever(Protocol):
    """One search type. `get_completion` is optional: only types that answer define it."""

    def __init__(self, ctx: RetrievalContext) -> None: ...

    def get_context(
        self, query: str, datasets: Sequence[str], top_k: int
    ) -> list[SearchResult]: ...
