"""Request and response bodies of the HTTP API, and its one error schema."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from core.catalog import AddReport
from core.models.documents import PIPELINE_VERSION, STATUS, DocumentStatus
from core.models.graph import Node
from core.models.jobs import JobStatus
from retrieval.models import SearchType
from retrieval.router import DEFAULT_TYPE


class ErrorDetail(BaseModel):
    code: str = Field(description="Stable machine-readable code, e.g. dataset_not_found")
    message: str = Field(description="What went wrong and what to do about it")


class ErrorResponse(BaseModel):
    """The body of every 4xx and 5xx response."""

    error: ErrorDetail


ERROR_DESCRIPTIONS = {
    400: "Invalid request (e.g. a bad dataset name, an untrusted Host)",
    401: "No usable API key (send 'Authorization: Bearer KEY')",
    403: "The key's role may not do this, or a foreign Origin",
    429: "The key's requests per minute are used up (see Retry-After)",
    404: "Dataset or job not found",
    413: "A file, the upload or the body is over its limit (COGMILL_MAX_*_BYTES)",
    409: "A cognify job on the dataset is running",
    415: "Unsupported Content-Type",
    422: "The body failed validation or names an unknown pipeline",
    500: "A bug: the server log has the traceback",
    502: "The LLM or embeddings endpoint failed; retry later",
    503: "A store or backend is unavailable",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` documenting the given error statuses with the error schema."""
    return {
        status: {"model": ErrorResponse, "description": ERROR_DESCRIPTIONS[status]}
        for status in statuses
    }


def error_code(status: int) -> str:
    """A default error code from an HTTP status (404 -> not_found)."""
    return HTTPStatus(status).phrase.lower().replace(" ", "_").replace("-", "_")


# -- datasets and documents -------------------------------------------------------------------


class DocumentText(BaseModel):
    name: str = Field(
        min_length=1,
        max_length=255,
        description="File name; its extension gives the format (notes.txt, page.md, rows.csv)",
    )
    text: str = Field(description="The document content")


DOCUMENT_DATE_HELP = (
    "The day the documents speak of (2023-03-15, March 2023): their facts without a date of "
    "their own held then"
)


class DocumentsAdd(BaseModel):
    """Documents sent as JSON text instead of file uploads."""

    documents: list[DocumentText] = Field(min_length=1, max_length=1000)
    node_set: str | None = Field(
        default=None,
        max_length=64,
        description="Group the documents in a node set (e.g. coding_rules, which CODING_RULES "
        "searches)",
    )
    document_date: str | None = Field(
        default=None,
        max_length=64,
        description=DOCUMENT_DATE_HELP,
    )


class RejectedDocument(BaseModel):
    name: str
    reason: str


class AddResult(BaseModel):
    """What happened to each uploaded document (by name)."""

    added: list[str]
    replaced: list[str] = Field(description="Same name, new content: the old version is removed")
    unchanged: list[str] = Field(description="Same content already stored: skipped")
    rejected: list[RejectedDocument]

    @classmethod
    def from_report(cls, report: AddReport) -> AddResult:
        return cls(
            added=report.added,
            replaced=report.replaced,
            unchanged=report.unchanged,
            rejected=[RejectedDocument(name=n, reason=r) for n, r in report.rejected],
        )


class DatasetPublic(BaseModel):
    name: str
    documents: int


class DocumentPublic(BaseModel):
    """A catalog record: a document of a dataset and its processing status."""

    id: str
    name: str
    status: DocumentStatus = Field(description="added, processed or failed")
    size: int
    extension: str
    content_hash: str
    pipeline_version: str | None = None
    error: str | None = None

    @classmethod
    def from_node(cls, node: Node) -> DocumentPublic:
        props = node.properties
        return cls(
            id=node.id,
            name=node.name,
            status=props.get(STATUS, DocumentStatus.ADDED),
            size=props.get("size", 0),
            extension=props.get("extension", ""),
            content_hash=props.get("content_hash", ""),
            pipeline_version=props.get(PIPELINE_VERSION),
            error=props.get("error") or None,
        )


class DeleteResult(BaseModel):
    """What a delete removed from the graph (vectors and index entries of the same ids too)."""

    dataset: str
    document: str | None = Field(default=None, description="None when the dataset was deleted")
    nodes_removed: int
    edges_removed: int


# -- cognify, search, health --------------------------------------------------------------------


BUDGET_USD = (
    "Pause the job (status paused_budget) before its LLM calls would cost more than this "
    "many USD at the server's prices (default: its job_budget_usd); resume continues it"
)
BUDGET_TOKENS = "The same cap in LLM tokens (prompt + completion)"


class CognifyRequest(BaseModel):
    all: bool = Field(default=False, description="Reprocess every document, not only new/changed")
    pipeline: str | None = None
    graph_model: dict[str, Any] | None = Field(
        default=None,
        description="JSON Schema of node classes replacing the default extraction schema "
        "(see core/models/custom.py), e.g. a pydantic model's model_json_schema()",
    )
    ontology: str | None = Field(
        default=None, description="Text of an OWL/RDF ontology to align entities with"
    )
    ontology_format: Literal["owl", "rdf", "ttl", "nt", "n3", "jsonld"] = Field(
        default="owl", description="Syntax of `ontology`: owl/rdf (RDF/XML), ttl, nt, n3, jsonld"
    )
    estimate: bool = Field(
        default=False, description="Only count the LLM calls, tokens and cost (runs nothing)"
    )
    webhook: str | None = Field(
        default=None,
        max_length=2048,
        description="http(s) URL the job record is POSTed to when the job ends, signed with "
        "the `webhook_secret` of the reply (X-Cogmill-Signature; see docs/security.md)",
    )
    budget_usd: float | None = Field(default=None, gt=0, description=BUDGET_USD)
    budget_tokens: int | None = Field(default=None, gt=0, description=BUDGET_TOKENS)
    llm_mode: Literal["sync", "batch"] | None = Field(
        default=None,
        description="batch: the LLM steps go through the OpenAI Batch API (half price, answers "
        "within 24 h); default: the server's llm_mode",
    )


class JobResume(BaseModel):
    """A new budget for a paused job, counting what it spent already (none: no cap)."""

    budget_usd: float | None = Field(default=None, gt=0, description=BUDGET_USD)
    budget_tokens: int | None = Field(default=None, gt=0, description=BUDGET_TOKENS)


class JobAccepted(BaseModel):
    job_id: str
    status: JobStatus
    message: str = ""
    webhook_id: str | None = None
    webhook_secret: str | None = Field(
        default=None, description="Signs the job's webhook deliveries; shown only here"
    )


class SearchRequest(BaseModel):
    query: str = Field(min_length=1)
    datasets: list[str] = Field(min_length=1)
    search_type: SearchType | None = Field(
        default=None, description="Omit to let the query router choose (see `route` in the reply)"
    )
    top_k: int | None = Field(
        default=None, ge=1, le=1000, description="Omit to size it from the query analysis"
    )
    response_model: dict[str, Any] | None = Field(
        default=None,
        description="A JSON Schema (an object with properties): completion types then answer "
        "with an object following it, in `answer_json` (`answer` holds its JSON text)",
    )
    as_of: str | None = Field(
        default=None,
        max_length=64,
        description="See facts as they held at this world time (2019, March 2019, "
        "2019-03-15); default: current facts",
    )
    known_at: str | None = Field(
        default=None,
        max_length=64,
        description="See facts as cogmill had recorded them by this time (2026-12-07, "
        "2026-12-07T10:00:00Z)",
    )

    @field_validator("search_type", mode="before")
    @classmethod
    def _any_case(cls, value: object) -> object:
        # `cogmill search --type` is case-insensitive; accept the same values here.
        return value.upper() if isinstance(value, str) else value


class RouteRequest(BaseModel):
    query: str = Field(min_length=1, description="The question to route")


class Identity(BaseModel):
    """What the request's API key may do (GET /api/v1/me)."""

    role: Literal["reader", "writer", "admin", "operator"] = Field(
        description="Each may do what the ones before may; admin also runs Cypher over its "
        "tenant's datasets, operator (deployment-wide) over every tenant's"
    )


class Health(BaseModel):
    status: str = "ok"


class Readiness(BaseModel):
    """Whether each store answered; `stores` maps a store to "ok" or "unavailable" (the
    server log has why). `warm_up`: "warming" while `cogmill serve` runs its first searches
    against a Neo4j just started (answers are right, only slower), "warm" after, "off" where
    nothing is warmed (embedded stores, COGMILL_SERVE_WARM_UP=0, or the warm-up failed: the
    server log says why)."""

    ready: bool
    stores: dict[str, str]
    warm_up: Literal["off", "warming", "warm"] = "off"


# -- session memory: remember, recall, improve, forget ------------------------------------------


class RememberRequest(BaseModel):
    """Remember a text in a session (expires with it) or permanently in a dataset."""

    text: str = Field(min_length=1, description="The text to remember")
    session: str | None = Field(default=None, description="Keep it in this session")
    dataset: str | None = Field(default=None, description="Add it to this dataset and cognify")

    @model_validator(mode="after")
    def _one_target(self) -> RememberRequest:
        if (self.session is None) == (self.dataset is None):
            raise ValueError("give exactly one of `session` or `dataset`")
        return self


class RememberResult(BaseModel):
    stored_in: Literal["session", "dataset"]
    session: str | None = None
    note_id: str | None = None
    dataset: str | None = None
    document: str | None = Field(default=None, description="The document the text became")
    job_id: str | None = Field(default=None, description="The cognify job (GET /api/v1/jobs/ID)")
    job_status: JobStatus | None = None


class RecallRequest(BaseModel):
    query: str = Field(min_length=1)
    session: str | None = None
    datasets: list[str] = Field(default_factory=list)
    scope: Literal["auto", "session", "graph", "both"] = Field(
        default="auto",
        description="auto: with datasets both lanes; with only a session, a session hit above "
        "`threshold` answers without the graph, else the session's datasets are searched",
    )
    top_k: int = Field(default=10, ge=1, le=1000)
    search_type: SearchType = DEFAULT_TYPE  # the router's default (GRAPH_PPR)
    threshold: float = Field(default=0.8, ge=-1, le=1, description="Cosine of a session hit")

    @field_validator("search_type", mode="before")
    @classmethod
    def _any_case(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value


class ImproveRequest(BaseModel):
    session: str = Field(min_length=1)
    qa_id: str = Field(min_length=1, description="From search/recall with this session")
    feedback: float | Literal["up", "down"] = Field(
        description="up (+1), down (-1), or a score in [-1, 1]"
    )
    results: list[int] | None = Field(
        default=None, description="Only these result indexes (0-based); default: all"
    )


class ForgetRequest(BaseModel):
    """One target: a session, a dataset (optionally one document of it), or everything."""

    session: str | None = None
    dataset: str | None = None
    document: str | None = None
    everything: bool = False
    confirm: bool = Field(default=False, description="Required with everything")


class ForgetResult(BaseModel):
    session_keys: int
    sessions: list[str]
    datasets: list[str]
    documents: list[str]
    graph_items: int = Field(description="Nodes and edges removed from the graph")
