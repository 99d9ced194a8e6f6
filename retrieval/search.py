"""The search entry point shared by the CLI and the API."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from core.catalog import check_dataset_name
from core.errors import InvalidInput
from core.facts.functional import groups_named
from core.models.vocabulary import DOCUMENT, EVENT, NODE_SET, TEXT_SUMMARY
from retrieval.as_of import without_time
from retrieval.base import Need, RetrievalContext
from retrieval.coding_rules import MAX_DOCUMENTS
from retrieval.fact_view import FactView
from retrieval.models import Route, SearchResponse, SearchType
from retrieval.multistep import ANALYSIS_KEY
from retrieval.registry import RETRIEVERS
from retrieval.response_model import ResponseModel, structured_model
from retrieval.router import DEFAULT_TYPE, analyse, first_available, route
from retrieval.sessions import SessionStore, check_session_id, trace_elements

QA_ID_KEY = "session_qa_id"
NO_LLM_NOTE = "no LLM is configured (COGMILL_LLM_BASE_URL): returning the retrieved context"


def search(
    ctx: RetrievalContext,
    query: str,
    datasets: Sequence[str],
    search_type: SearchType | None = None,
    top_k: int | None = 10,
    response_model: ResponseModel | None = None,
    session: str | None = None,
    sessions: SessionStore | None = None,
    as_of: str | None = None,
    known_at: str | None = None,
) -> SearchResponse:
    """Run one search type over the datasets and return its results with provenance.

    With `response_model` (a pydantic model class or a JSON Schema dict) the answer is
    structured: `answer_json` holds the object and `answer` its JSON text.
    With `search_type=None` the query router picks the type for the query and what the
    datasets hold (the response's `route`, with its reason); with
    `top_k=None` the query analysis sets it. The analysis' depth always bounds the rounds of
    the multi-step types (within `search_max_rounds`).
    With `session` the question, answer and trace are recorded in that session (its qa id is
    left in `ctx.extras[QA_ID_KEY]`), kept in `sessions` (default: the local default tenant's
    session store).
    `as_of` (a world time: "2019", "March 2019") and `known_at` (a system time: what cogmill
    had recorded by then) set the time the graph searches see facts at (retrieval/fact_view.py;
    default: current facts); a routed question about a fact at a time ("who was ... in
    2019") sets `as_of` itself.
    """
    if not query.strip():
        raise InvalidInput("the query is empty; pass the question to search for")
    if as_of is not None or known_at is not None:
        ctx.facts = FactView.parse(as_of, known_at)
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
        if routed.as_of and as_of is None:
            ctx.facts = FactView.parse(routed.as_of, known_at)
    if top_k < 1:
        raise InvalidInput(f"top-k must be at least 1, got {top_k}")
    for name in datasets:
        check_dataset_name(name)
    if response_model is not None:
        structured_model(response_model, ctx.settings)  # a bad schema fails before any work
    asked = without_time(query, ctx.facts.asked["as_of"]) if "as_of" in ctx.facts.asked else query
    ctx.facts = replace(ctx.facts, focus=groups_named(asked))  # the facts it asks about
    retriever = RETRIEVERS.create(search_type, ctx)  # an unavailable type fails here
    results = retriever.get_context(asked, datasets, top_k)
    answer, answer_json, note = None, None, None
    # Multi-step types extend `results` in place while completing (their later rounds'
    # evidence); their `note` says what they did (the type chosen, the tool calls made).
    complete = getattr(retriever, "get_completion", None)
    if complete is None and response_model is not None:
        raise InvalidInput(
            f"search type {search_type} returns context only, so response_model does not apply; "
            "use a completion type such as RAG_COMPLETION or GRAPH_COMPLETION"
        )
    if complete is not None:
        if ctx.llm is None:
            note = NO_LLM_NOTE
        else:
            answer, answer_json = _complete(complete, query, results, response_model)
    notes += [getattr(retriever, "note", None), note, _time_note(ctx.facts)]
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
        store = sessions or SessionStore(ctx.state, ctx.settings.session_ttl_seconds)
        elements = trace_elements(retriever, response)
        ctx.extras[QA_ID_KEY] = store.record(session, response, datasets, elements)
    return response


def _time_note(view: FactView) -> str | None:
    """What the response says about the time facts were seen at, when not now."""
    asked = ", ".join(f"{k} {v}" for k, v in view.asked.items())
    return f"facts as seen {asked}" if asked else None


def routed_or_available(routed: Route) -> tuple[SearchType, str]:
    """The routed type if it is available, else the runner-up or the default; and why."""
    chosen = f"routed to {routed.search_type.value} (confidence {routed.confidence:.2f})"
    why = f": {routed.reason}" if routed.reason else ""
    available = first_available(routed, RETRIEVERS)
    if available is routed.search_type:
        return routed.search_type, chosen + why
    fallback = available or DEFAULT_TYPE
    return fallback, f"{chosen}, which is not available: ran {fallback.value} instead{why}"


class DatasetLimits:
    """What the searched datasets cannot serve (the registry's declared needs), read from
    the stores only when asked."""

    def __init__(self, ctx: RetrievalContext, datasets: Sequence[str]) -> None:
        self.ctx, self.datasets = ctx, list(datasets)

    def missing(self, search_type: SearchType) -> str | None:
        """Why the datasets cannot serve `search_type`, or None when they can."""
        spec = RETRIEVERS.get(search_type)
        for need in sorted(spec.needs) if spec is not None else ():
            why = self.unmet(need)
            if why is not None:
                return why
        return None

    def unmet(self, need: Need) -> str | None:
        """Why `need` is not met by the settings and the datasets, or None when it is."""
        names = ", ".join(self.datasets)
        settings = self.ctx.settings
        if need == "llm" and self.ctx.llm is None:
            return "no LLM is configured"
        if need == "neo4j" and not settings.neo4j_uri:
            return "the graph is not in Neo4j"
        if need == "node_set":
            node_set = settings.coding_rules_node_set
            if not any(self._in_node_set(d, node_set) for d in self.datasets):
                return f"no documents in node set {node_set!r} of {names}"
        if need == "events" and not self._has(EVENT):
            return f"no events in {names} (cognify with the temporal pipeline)"
        if need == "summaries" and not self._has(TEXT_SUMMARY):
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
