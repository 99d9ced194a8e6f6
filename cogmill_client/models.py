"""What the cogmill HTTP API answers, as typed models (the OpenAPI document's response schemas).

tests/unit/test_client_schema.py checks every model here (and cogmill_client/fact_models.py)
against the server's live OpenAPI document: a changed route fails it until the client follows.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import Field

# Re-exported: every model the client answers with is importable from here.
from cogmill_client.api_model import ApiModel as ApiModel
from cogmill_client.fact_models import Fact as Fact
from cogmill_client.fact_models import FactSource as FactSource
from cogmill_client.fact_models import FactTimeline as FactTimeline

# -- vocabulary ---------------------------------------------------------------------------------


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


class JobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    PAUSED_BUDGET = "paused_budget"

    @property
    def finished(self) -> bool:
        """Whether no work of the job runs (a job paused by its budget may be resumed)."""
        return self not in (JobStatus.QUEUED, JobStatus.RUNNING)


class DocumentStatus(StrEnum):
    ADDED = "added"
    PROCESSED = "processed"
    FAILED = "failed"


# -- errors -------------------------------------------------------------------------------------


class ErrorDetail(ApiModel):
    code: str
    message: str


class ErrorResponse(ApiModel):
    """The body of every 4xx and 5xx answer."""

    error: ErrorDetail


# -- datasets and documents ---------------------------------------------------------------------


class RejectedDocument(ApiModel):
    name: str
    reason: str


class AddResult(ApiModel):
    """What happened to each uploaded document (by name)."""

    added: list[str]
    replaced: list[str]
    unchanged: list[str]
    rejected: list[RejectedDocument]


class DatasetPublic(ApiModel):
    name: str
    documents: int


class DocumentPublic(ApiModel):
    """A document of a dataset and its processing status."""

    id: str
    name: str
    status: DocumentStatus
    size: int
    extension: str
    content_hash: str
    pipeline_version: str | None = None
    error: str | None = None


class DeleteResult(ApiModel):
    """What a delete removed from the graph."""

    dataset: str
    document: str | None = None
    nodes_removed: int
    edges_removed: int


# -- cognify and jobs ---------------------------------------------------------------------------


class CognifyEstimate(ApiModel):
    """What a cognify would ask of the LLM (nothing was run)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


class JobAccepted(ApiModel):
    job_id: str
    status: JobStatus
    message: str = ""
    webhook_id: str | None = None
    webhook_secret: str | None = None


class Budget(ApiModel):
    usd: float | None = None
    tokens: int | None = None


class DocumentError(ApiModel):
    """Why one document could not be processed."""

    document_id: str
    document_name: str
    step: str
    message: str


class Job(ApiModel):
    """A cognify job: which dataset, how far it got, and what went wrong per document."""

    id: str
    dataset: str
    pipeline: str
    pipeline_version: str
    mode: str = "changed"
    options: dict[str, Any] = Field(default_factory=dict)
    budget: Budget | None = None
    status: JobStatus = JobStatus.QUEUED
    total_documents: int = 0
    total_batches: int = 0
    counts: dict[str, int] = Field(default_factory=dict)
    errors: list[DocumentError] = Field(default_factory=list)
    created_at: datetime | None = None
    finished_at: datetime | None = None
    message: str = ""


class UsageTotals(ApiModel):
    """Token usage of one kind of call, priced."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    cache_hits: int = 0


class Spent(ApiModel):
    """What a job's LLM calls spent in all its runs: what its budget counts."""

    usd: float
    tokens: int


class JobReport(Job):
    """A job with the tokens its LLM and embeddings calls used, and their cost."""

    llm: UsageTotals
    embeddings: UsageTotals
    spent: Spent


class Attempt(ApiModel):
    """One delivery attempt of a job's webhook."""

    subscription: str
    url: str | None
    event: str
    attempt: int
    at: float
    outcome: str
    status: int | None = None
    error: str = ""
    ms: float | None = None
    retry_in: float | None = None


# -- search -------------------------------------------------------------------------------------


class Source(ApiModel):
    """A chunk a result came from and the document (by its added file name) it belongs to."""

    document_id: str
    document_name: str
    chunk_id: str


class SearchResult(ApiModel):
    text: str
    score: float
    sources: list[Source] = Field(default_factory=list)
    evidence: list[str] = Field(default_factory=list)  # what led here (triplets, events)


class Route(ApiModel):
    """The query router's choice: a type, how sure, the second choice."""

    search_type: SearchType
    confidence: float
    runner_up: SearchType
    runner_up_score: float
    reason: str = ""
    as_of: str | None = None  # a question about a fact at a time: searched as of it


class SearchResponse(ApiModel):
    query: str
    search_type: SearchType
    results: list[SearchResult] = Field(default_factory=list)
    answer: str | None = None
    answer_json: dict[str, Any] | None = None
    note: str | None = None
    route: Route | None = None

    @property
    def documents(self) -> list[str]:
        """The names of the documents behind the results, best first, each once."""
        names = (source.document_name for r in self.results for source in r.sources)
        return list(dict.fromkeys(names))


# -- session memory -----------------------------------------------------------------------------


class RememberResult(ApiModel):
    stored_in: Literal["session", "dataset"]
    session: str | None = None
    note_id: str | None = None
    dataset: str | None = None
    document: str | None = None
    job_id: str | None = None
    job_status: JobStatus | None = None


class RecallResult(ApiModel):
    text: str
    score: float
    source: Literal["session_qa", "session_trace", "session_note", "graph"]
    sources: list[Source] = Field(default_factory=list)
    qa_id: str | None = None


class RecallResponse(ApiModel):
    query: str
    session: str | None = None
    lanes: list[Literal["session", "graph"]]
    results: list[RecallResult] = Field(default_factory=list)
    answer: str | None = None
    answer_source: Literal["session_qa", "llm"] | None = None
    qa_id: str | None = None
    note: str | None = None


class ImproveResult(ApiModel):
    qa_id: str
    feedback: float
    results: list[int]
    edges: int
    missing: int
    note: str | None = None


class ForgetResult(ApiModel):
    session_keys: int
    sessions: list[str]
    datasets: list[str]
    documents: list[str]
    graph_items: int


class SessionSummary(ApiModel):
    session: str
    notes: int
    questions: int


class Note(ApiModel):
    id: str
    text: str
    created: float


class SessionQuestion(ApiModel):
    id: str
    question: str
    answer: str | None = None
    search_type: str
    datasets: list[str]
    created: float


class SessionHistory(ApiModel):
    session: str
    notes: list[Note]
    questions: list[SessionQuestion]


# -- graph, webhooks, probes --------------------------------------------------------------------


class Support(ApiModel):
    """One piece of provenance: the document (and chunk, if any) an item came from."""

    document_id: str
    chunk_id: str = ""


class GraphNodePublic(ApiModel):
    id: str
    type: str
    name: str
    properties: dict[str, Any] = Field(default_factory=dict)
    support: list[Support] = Field(default_factory=list)
    support_total: int


class GraphEdgePublic(ApiModel):
    source: str
    target: str
    name: str
    properties: dict[str, Any] = Field(default_factory=dict)


class NeighbourhoodPublic(ApiModel):
    """The seed node, its direct neighbours (nearest first) and the edges among them."""

    dataset: str
    node: str
    nodes: list[GraphNodePublic]
    edges: list[GraphEdgePublic]
    truncated: bool


class WebhookPublic(ApiModel):
    id: str
    url: str
    events: list[str]
    created: float


class WebhookCreated(WebhookPublic):
    secret: str  # signs the deliveries; shown only in this answer


class Identity(ApiModel):
    role: Literal["reader", "writer", "admin", "operator"]  # what the client's API key may do


class Health(ApiModel):
    status: str = "ok"


class Readiness(ApiModel):
    """Whether each store answered ("ok" or "unavailable"), and the server's warm-up ("off",
    "warming" while its first searches against a Neo4j just started run, "warm")."""

    ready: bool
    stores: dict[str, str]
    warm_up: Literal["off", "warming", "warm"] = "off"
