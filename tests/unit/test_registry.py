"""The retriever registry: every search type declared once, and what its readers get from it."""

from __future__ import annotations

import pytest

from retrieval.base import Registry
from retrieval.models import SearchType
from retrieval.registry import RETRIEVERS
from retrieval.router import first_available, route, routed_type

S = SearchType


def test_every_search_type_is_declared_once_with_its_own_description() -> None:
    assert set(RETRIEVERS) == set(SearchType)
    assert all(spec.search_type is kind for kind, spec in RETRIEVERS.items())
    descriptions = [spec.description for spec in RETRIEVERS.values()]
    assert all(d.strip() for d in descriptions)
    assert len(set(descriptions)) == len(descriptions)


def test_the_delegating_types_are_never_tools() -> None:
    tools = RETRIEVERS.tools()
    assert S.FEELING_LUCKY not in tools and S.AGENTIC_COMPLETION not in tools
    assert set(tools) == set(SearchType) - {S.FEELING_LUCKY, S.AGENTIC_COMPLETION}
    assert tools == sorted(tools, key=lambda t: t.value)


def test_the_type_choosers_read_the_declared_descriptions() -> None:
    # The lines FEELING_LUCKY and AGENTIC_COMPLETION put in their prompts.
    assert RETRIEVERS.describe(["CHUNKS", "CYPHER"]) == (
        "- CHUNKS: passages nearest in meaning to the query\n"
        "- CYPHER: a Cypher graph query given verbatim"
    )


def test_needs_are_declared_where_the_router_must_skip_a_type() -> None:
    needs = {kind: spec.needs for kind, spec in RETRIEVERS.items() if spec.needs}
    assert needs == {
        S.SUMMARIES: {"summaries"},
        S.CYPHER: {"neo4j"},
        S.NATURAL_LANGUAGE: {"neo4j", "llm"},
        S.TEMPORAL: {"events"},
        S.CODING_RULES: {"node_set"},
    }


def test_a_type_missing_from_a_registry_fails_naming_the_available_ones() -> None:
    only = Registry([RETRIEVERS[S.CHUNKS], RETRIEVERS[S.GRAPH_PPR]])
    with pytest.raises(
        ValueError, match="CYPHER is not available yet; use one of CHUNKS, GRAPH_PPR"
    ):
        only.create(S.CYPHER, ctx=None)  # type: ignore[arg-type]  # refused before it is built


def test_the_router_falls_back_within_the_available_types() -> None:
    query = "How is Ada Lovelace related to Alan Turing?"
    routed = route(query)
    assert routed.search_type is S.GRAPH_COMPLETION_CONTEXT_EXTENSION
    assert first_available(routed, RETRIEVERS) is routed.search_type
    without = Registry(spec for kind, spec in RETRIEVERS.items() if kind is not routed.search_type)
    assert first_available(routed, without) is routed.runner_up
    assert routed_type(query, without) == (routed.runner_up, "the query router")
    neither = Registry([RETRIEVERS[S.CHUNKS]])
    assert first_available(routed, neither) is None
    assert routed_type(query, neither)[1] == "the default (the router's choices are not available)"
