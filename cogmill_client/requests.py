"""Request bodies of the cogmill HTTP API (the OpenAPI document's request schemas).

Only their shape is checked here; the server owns the limits (lengths, ranges) and answers a
breach with a 422 that the client raises as UnprocessableEntityError.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from cogmill_client.models import ApiModel, SearchType


class DocumentText(ApiModel):
    name: str  # its extension gives the format (notes.txt, page.md, rows.csv)
    text: str


class DocumentsAdd(ApiModel):
    documents: list[DocumentText]
    node_set: str | None = None
    document_date: str | None = None


class CognifyRequest(ApiModel):
    all: bool = False
    pipeline: str | None = None
    graph_model: dict[str, Any] | None = None
    ontology: str | None = None
    ontology_format: Literal["owl", "rdf", "ttl", "nt", "n3", "jsonld"] = "owl"
    estimate: bool = False
    webhook: str | None = None
    budget_usd: float | None = None
    budget_tokens: int | None = None
    llm_mode: Literal["sync", "batch"] | None = None


class JobResume(ApiModel):
    budget_usd: float | None = None
    budget_tokens: int | None = None


class SearchRequest(ApiModel):
    query: str
    datasets: list[str]
    search_type: SearchType | None = None
    top_k: int | None = None
    response_model: dict[str, Any] | None = None
    as_of: str | None = None
    known_at: str | None = None


class RouteRequest(ApiModel):
    query: str


class RememberRequest(ApiModel):
    text: str
    session: str | None = None
    dataset: str | None = None


class RecallRequest(ApiModel):
    query: str
    session: str | None = None
    datasets: list[str] = Field(default_factory=list)
    scope: Literal["auto", "session", "graph", "both"] = "auto"
    top_k: int = 10
    search_type: SearchType = SearchType.GRAPH_PPR
    threshold: float = 0.8


class ImproveRequest(ApiModel):
    session: str
    qa_id: str
    feedback: float | Literal["up", "down"]
    results: list[int] | None = None


class ForgetRequest(ApiModel):
    session: str | None = None
    dataset: str | None = None
    document: str | None = None
    everything: bool = False
    confirm: bool = False


class WebhookCreate(ApiModel):
    url: str
    events: list[str] | None = None
