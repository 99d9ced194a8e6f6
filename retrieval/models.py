"""What every retriever returns: results with their provenance (the shape of `search --json`)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field


class SearchType(StrEnum):
    CHUNKS = "CHUNKS"
    CHUNKS_LEXICAL = "CHUNKS_LEXICAL"
    SUMMARIES = "SUMMARIES"
    RAG_COMPLETION = "RAG_COMPLETION"
    TRIPLET_COMPLETION = "TRIPLET_COMPLETION"
    GRAPH_COMPLETION = "GRAPH_COMPLETION"
    GRAPH_COMPLETION_COT = "GRAPH_COMPLETION_COT"
    GRAPH_COMPLETION_CONTEXT_EXTENSION = "GRAPH_COMPLETION_CONTEXT_EXTENSION"
    GRAPH_COMPLETION_DECOMPOSITION = "GRAPH_COMPLETION_DECOMPOSITION"
    GRAPH_SUMMARY_COMPLETION = "GRAPH_SUMMARY_COMPLETION"
    HYBRID_COMPLETION = "HYBRID_COMPLETION"
    GRAPH_PPR = "GRAPH_PPR"
    TEMPORAL = "TEMPORAL"
    CYPHER = "CYPHER"
    NATURAL_LANGUAGE = "NATURAL_LANGUAGE"
    CODING_RULES = "CODING_RULES"
    FEELING_LUCKY = "FEELING_LUCKY"
    AGENTIC_COMPLETION = "AGENTIC_COMPLETION"


class Source(BaseModel):
    """A chunk a result came from and the document (by its added file name) it belongs to."""

    document_id: str
    document_name: str
    chunk_id: str


class SearchResult(BaseModel):
    text: str
    score: float
    sources: list[Source] = Field(default_factory=list)
    # What led to this passage, also leading its text (TEMPORAL: its events in the question's
    # time, "date: text (involves: ...)").
    evidence: list[str] = Field(default_factory=list)


class Route(BaseModel):
    """The query router's choice (`cogmill route --json`): a type, how sure, the second choice."""

    search_type: SearchType
    confidence: float
    runner_up: SearchType
    runner_up_score: float
    # Why this type: the cue that won, or the default; types the datasets cannot serve.
    reason: str = ""
    # A question about a fact at a time ("who was the CEO in 2019"): the time it asks about,
    # which the search sees facts at (retrieval/fact_view.py).
    as_of: str | None = None


class SearchResponse(BaseModel):
    query: str
    search_type: SearchType
    results: list[SearchResult] = Field(default_factory=list)
    answer: str | None = None
    # With a response_model: the structured answer (`answer` then holds its JSON text).
    answer_json: dict[str, Any] | None = None
    note: str | None = None
    # Set when no search type was given and the router chose one.
    route: Route | None = None
