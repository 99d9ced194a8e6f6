"""The search entry point shared by the CLI and the API."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from core.catalog import check_dataset_name
from core.models.vocabulary import DOCUMENT, EVENT, NODE_SET, TEXT_SUMMARY
from retrieval.agentic import AgenticRetriever
from retrieval.base import RetrievalContext, Retriever
from retrieval.chunks import ChunksRetriever
from retrieval.coding_rules import MAX_DOCUMENTS, CodingRulesRetriever
from retrieval.context_extension import ContextExtensionRetriever
from retrieval.cot import CotRetriever
from retrieval.cypher import CypherRetriever, NaturalLanguageRetriever
from retrieval.decomposition import DecompositionRetriever
from retrieval.graph_completion import GraphCompletionRetriever
from retrieval.graph_summary import GraphSummaryRetriever
from retrieval.hybrid import HybridRetriever
from retrieval.lexical import LexicalRetriever, lexical_index
from retrieval.lucky import FeelingLuckyRetriever
from retrieval.models import Route, SearchResponse, SearchType
from retrieval.multistep import ANALYSIS_KEY
from retrieval.ppr import PPRParams, PPRRetriever
from retrieval.rag import RagRetriever
from retrieval.response_model import ResponseModel, structured_model
from retrieval.router import DEFAULT_TYPE, analyse, route
from retrieval.sessions import SessionStore, check_session_id, trace_elements
from retrieval.summaries import SummariesRetriever
from retrieval.temporal import TemporalRetriever
from retrieval.triplets import TripletRetriever

QA_ID_KEY = "session_qa_id"
NO_LLM_NOTE = "no LLM is configured (COGMILL_LLM_BASE_URL): returning the retrieved context"

# One factory per search type; a retriever that answers defines `get_completion`.
RETRIEVERS: dict[SearchType, Callable[[RetrievalContext], Retriever]] = {
    SearchType.CHUNKS: lambda ctx: ChunksRetriever(ctx.graph, ctx.vectors, ctx.embedder),
    SearchType.GRAPH_COMPLETION: lambda ctx: GraphCompletionRetriever(
        ctx.graph, ctx.vectors, ctx.embedder, ctx=ctx
    ),
    SearchType.CHUNKS_LEXICAL: lambda ctx: LexicalRetriever(ctx.graph, lexical_index(ctx)),
    SearchType.SUMMARIES: lambda ctx: SummariesRetriever(ctx.graph, ctx.vectors, ctx.embedder),
    SearchType.RAG_COMPLETION: RagRetriever,
    SearchType.TRIPLET_COMPLETION: TripletRetriever,
    SearchType.HYBRID_COMPLETION: HybridRetriever,
    SearchType.CYPHER: CypherRetriever,
    SearchType.NATURAL_LANGUAGE: NaturalLanguageRetriever,
    SearchType.TEMPORAL: TemporalRetriever,
    SearchType.GRAPH_PPR: lambda ctx: PPRRetriever(
        ctx.graph, ctx.vectors, ctx.embedder, PPRParams.from_settings(ctx.settings), ctx=ctx
    ),
    SearchType.GRAPH_COMPLETION_COT: CotRetriever,
    SearchType.GRAPH_COMPLETION_CONTEXT_EXTENSION: ContextExtensionRetriever,
    SearchType.GRAPH_COMPLETION_DECOMPOSITION: DecompositionRetriever,
    SearchType.GRAPH_SUMMARY_COMPLETION: GraphSummaryRetriever,
    SearchType.CODING_RULES: CodingRulesRetriever,
    SearchType.FEELING_LUCKY: FeelingLuckyRetriever,
    SearchType.AGENTIC_COMPLETION: AgenticRetriever,
}


def search(
    ctx: RetrievalContext,
    query: str,
    datasets: Sequence[str],
    search_type: SearchType | None = None,
    top_k: int | None = 10,
    response_model: ResponseModel | None = None,
    session: str | None = None,
) -> SearchResponse:
    """Run one search type over the datasets and return its results with provenance.

    With `response_model` (a pydantic model class or a JSON Schema dict) the answer is
    structured: `answer_json` holds the object and `answer` its JSON text.
    With `search_type=None` the query router picks the type for the query and what the
    datasets hold (the response's `route`, with its reason); with
    `top_k=None` the query analysis sets it. The analysis' depth always bounds the rounds of
    the multi-step types (within `search_max_rounds`).
    With `session` the question, answer and trace are recorded in that session (its qa id is
    left in `ctx.extras[QA_ID_KEY]`).
    """
    if not query.strip():
        raise ValueError("the query is empty; pass the question to search for")
    if session is not None:
        check_session_id(session)
    analysis = analyse(query, ctx.settings.search_top_k, ctx.settings.search_max_rounds)
    ctx.extras[ANALYSIS_KEY] = analysis
    top_k = analysis.top_k if top_k is None else top_k
    routed: Route | None = None
    notes: list[str | None] = []
    if search_type is None:
        routed = route(query, DatasetLimits(ctx, datasets).missing)
        search_type, why = routed_or_available(routed)
        notes.append(why)
    if top_k < 1:
        raise ValueError(f"top-k must be at least 1, got {top_k}")
    for name in datasets:
        check_dataset_name(name)
    if response_model is not None:
        structured_model(response_model)  # a bad schema fails before any retrieval work
    if search_type not in RETRIEVERS:
        available = ", ".join(sorted(RETRIEVERS))
        raise ValueError(f"search type {search_type} is not available yet; use one of {available}")
    retriever = RETRIEVERS[search_type](ctx)
    results = retriever.get_context(query, datasets, top_k)
    answer, answer_json, note = None, None, None
    # Multi-step types extend `results` in place while completing (their later rounds'
    # evidence); their `note` says what they did (the type chosen, the tool calls made).
    complete = getattr(retriever, "get_completion", None)
    if complete is None and response_model is not None:
        raise ValueError(
            f"search type {search_type} returns context only, so response_model does not apply; "
            "use a completion type such as RAG_COMPLETION or GRAPH_COMPLETION"
        )
    if complete is not None:
        if ctx.llm is None:
            note = NO_LLM_NOTE
        else:
            answer, answer_json = _complete(complete, query, results, response_model)
    notes += [getattr(retriever, "note", None), note]
    response = SearchResponse(
        query=query,
        search_type=search_type,
        results=results,
        answer=answer,
        answer_json=answer_json,
        note="; ".join(n for n in notes if n) or None,
        route=routed,
    )
    if session is not None:
        store = SessionStore(ctx.state, ctx.settings.session_ttl_seconds)
        elements = trace_elements(retriever, response)
        ctx.extras[QA_ID_KEY] = store.record(session, response, datasets, elements)
    return response


def routed_or_available(routed: Route) -> tuple[SearchType, str]:
    """The routed type if it is available, else the runner-up or the default; and why."""
    chosen = f"routed to {routed.search_type.value} (confidence {routed.confidence:.2f})"
    why = f": {routed.reason}" if routed.reason else ""
    if routed.search_type in RETRIEVERS:
        return routed.search_type, chosen + why
    fallback = routed.runner_up if routed.runner_up in RETRIEVERS else DEFAULT_TYPE
    return fallback, f"{chosen}, which is not available: ran {fallback.value} instead{why}"


class DatasetLimits:
    """What the searched datasets cannot serve, read from the stores only when asked."""

    def __init__(self, ctx: RetrievalContext, datasets: Sequence[str]) -> None:
        self.ctx, self.datasets = ctx, list(datasets)

    def missing(self, search_type: SearchType) -> str | None:
        """Why the datasets cannot serve `search_type`, or None when they can."""
        names = ", ".join(self.datasets)
        if search_type in (SearchType.CYPHER, SearchType.NATURAL_LANGUAGE):
            return None if self.ctx.settings.neo4j_uri else "the graph is not in Neo4j"
        if search_type is SearchType.CODING_RULES:
            node_set = self.ctx.settings.coding_rules_node_set
            if not any(self._in_node_set(d, node_set) for d in self.datasets):
                return f"no documents in node set {node_set!r} of {names}"
        if search_type is SearchType.TEMPORAL and not self._has(EVENT):
            return f"no events in {names} (cognify with the temporal pipeline)"
        if search_type is SearchType.SUMMARIES and not self._has(TEXT_SUMMARY):
            return f"no summaries in {names}"
        return None

    def _has(self, node_type: str) -> bool:
        return any(self.ctx.graph.find_nodes(d, node_type, limit=1) for d in self.datasets)

    def _in_node_set(self, dataset: str, node_set: str, page: int = 500) -> bool:
        """Whether one of the dataset's documents (the first MAX_DOCUMENTS) is in the set."""
        for offset in range(0, MAX_DOCUMENTS, page):
            batch = self.ctx.graph.find_nodes(dataset, DOCUMENT, limit=page, offset=offset)
            if any(d.properties.get(NODE_SET) == node_set for d in batch):
                return True
            if len(batch) < page:
                break
        return False


def _complete(
    complete: Callable[..., Any], query: str, results: list, response_model: ResponseModel | None
) -> tuple[str, dict[str, Any] | None]:
    """(answer text, structured answer or None) from a retriever's `get_completion`."""
    if response_model is None:
        reply = complete(query, results)
    else:
        reply = complete(query, results, response_model=response_model)
    if isinstance(reply, dict):
        return json.dumps(reply, ensure_ascii=False), reply
    return str(reply), None
