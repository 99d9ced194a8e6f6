"""What a retriever is given (the stores, the embedder, the LLM if any), what it offers, and
how a search type declares itself (`RetrieverSpec`, collected in retrieval/registry.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from core.errors import InvalidInput
from core.ports import CypherRunner, Embedder, GraphReader, StateStore, VectorStore
from core.settings import Settings
from retrieval.fact_view import FactView
from retrieval.models import SearchResult, SearchType

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
    # The runtime's read-only Cypher runner (CYPHER, NATURAL_LANGUAGE), opened on first call;
    # raises the store factory's ValueError where the graph has no Cypher.
    cypher: Callable[[], CypherRunner] | None = None
    # Whether CYPHER and NATURAL_LANGUAGE run the query as written (read-only, over the whole
    # graph: an operator's), rather than confined to the searched datasets
    # (retrieval/cypher_confine.py). Confined unless the service layer says otherwise.
    cypher_raw: bool = False
    extras: dict[str, Any] = field(default_factory=dict)
    # The time the graph searches see facts at (retrieval/fact_view.py): now by default.
    facts: FactView = field(default_factory=FactView)


class Retriever(Protocol):
    """One search type (built by its `RetrieverSpec`). `get_completion` is optional: only
    types that answer define it (retrieval/answer.py's CompletionMixin)."""

    def get_context(
        self, query: str, datasets: Sequence[str], top_k: int
    ) -> list[SearchResult]: ...


# What a search type needs beyond the stores every type reads: an LLM, the graph in Neo4j,
# or something in the searched datasets (events, summaries, documents in the coding-rules
# node set). The query router skips a type whose needs the datasets do not meet.
Need = Literal["llm", "neo4j", "events", "summaries", "node_set"]


@dataclass(frozen=True)
class RetrieverSpec:
    """A search type's declaration: what it finds, how its retriever is built, its needs."""

    search_type: SearchType
    # One line that the LLM choosing a type reads (FEELING_LUCKY, AGENTIC_COMPLETION's tools).
    description: str
    build: Callable[[RetrievalContext], Retriever]
    needs: frozenset[Need] = frozenset()
    # Runs other search types (so it is never one of their choices: no recursion).
    delegates: bool = False


class Registry(dict[SearchType, RetrieverSpec]):
    """The search types available, each with its declaration, in declaration order."""

    def __init__(self, specs: Iterable[RetrieverSpec]) -> None:
        super().__init__((spec.search_type, spec) for spec in specs)

    def create(self, search_type: SearchType, ctx: RetrievalContext) -> Retriever:
        """The retriever of `search_type`. Raises ValueError naming the available types."""
        spec = self.get(search_type)
        if spec is None:
            available = ", ".join(sorted(self))
            raise InvalidInput(
                f"search type {search_type} is not available yet; use one of {available}"
            )
        return spec.build(ctx)

    def tools(self) -> list[SearchType]:
        """The types another type may run (all but the delegating ones), by name."""
        return sorted((t for t, spec in self.items() if not spec.delegates), key=lambda t: t.value)

    def describe(self, types: Sequence[str]) -> str:
        """One `- NAME: what it finds` line per type."""
        lines = []
        for name in types:
            spec = self.get(SearchType(name))
            lines.append(f"- {name}: {spec.description if spec else name}")
        return "\n".join(lines)
