"""The errors cogmill raises on purpose: one tree under `CogmillError`.

Each error knows what it is: a stable `code` (snake_case, what clients test), the HTTP
`status` it answers with, and the CLI's `exit_code` (2: the command was wrong, 1: it failed).
The faces map them in one place (api/errors.py); anything that is not a CogmillError is a bug
there (500, exit 1, the traceback in the server log). A kind takes the built-in exception
that says the same (ValueError, LookupError, PermissionError, RuntimeError) as a second base,
so code that catches the built-in keeps catching it.

    CogmillError                 internal_error         500  1  a bug or an unforeseen failure
    ├── InvalidInput             invalid_value          422  2  the input is wrong (ValueError)
    │   ├── BadRequest           invalid_request        400  2  a malformed request or name
    │   │   ├── CatalogError                     core/catalog.py
    │   │   └── UntrustedHost, BadMultipart, UploadInterrupted   api/http/errors.py
    │   ├── NotConfigured        not_configured         422  2  the server is not set up for it
    │   ├── TooLarge             too_large              413  2  over a size or count limit
    │   │   ├── QuotaExceededError                api/services/tenants.py
    │   │   ├── BodyTooLarge, FileTooLarge, TooManyFiles    api/http/errors.py
    │   │   └── TextTooLarge, TooManyDocuments      api/http/json_documents.py
    │   ├── CypherError, InvalidCypher           core/ports/, retrieval/cypher_guard.py
    │   ├── ReadOnlyViolation (UnboundedExpression)  retrieval/cypher_guard.py
    │   ├── CypherScopeError                     retrieval/cypher_expressions.py
    │   ├── InvalidResponseModel                 retrieval/response_model.py
    │   ├── MalformedJSON                        api/http/json_documents.py
    │   ├── InvalidGraphModel                    core/models/graph_schema.py
    │   ├── InvalidOntology, UnsafeRdf           core/ontology.py, core/rdf_guard.py
    │   ├── DocumentProblem, TableProblem        pipelines/formats/base.py
    │   ├── KeyDeclarationError                  pipelines/structured/key_declarations.py
    │   ├── PlanError                            workers/orchestration.py
    │   ├── UnknownPipeline                      pipelines/definitions.py
    │   ├── InvalidBudget                        workers/budgets.py
    │   ├── WebhookError                         workers/webhooks/post.py
    │   ├── ScheduleError                        workers/schedules.py
    │   ├── SourceError                          pipelines/sources/errors.py
    │   ├── SessionError                         retrieval/sessions.py
    │   ├── TenantError                          api/services/tenants.py
    │   ├── BenchDataError                       retrieval/evaluation.py
    │   └── QueryTooLong, TooManyDatasets, NotAFile, FieldTooLong,
    │       UnsupportedMediaType                 api/http/errors.py
    ├── Unauthorized             unauthorized           401  2  no usable API key
    ├── Forbidden                forbidden              403  2  not allowed (PermissionError)
    │   ├── AccessDeniedError                    core/access.py
    │   │   └── SourceAccessError                pipelines/sources/errors.py
    │   └── ForeignOrigin                        api/http/errors.py
    ├── NotFound                 not_found              404  2  no such thing (LookupError)
    │   ├── DatasetNotFoundError, DocumentNotFoundError, NodeNotFoundError   api/services/
    │   ├── JobNotFoundError, ArtifactMissingError, WebhookNotFoundError      workers/
    │   ├── ScheduleNotFoundError                workers/schedules.py
    │   ├── SessionNotFoundError                 retrieval/sessions.py
    │   └── EntityNotFoundError                  retrieval/fact_timeline.py
    ├── Conflict                 conflict               409  1  the state does not allow it now
    │   ├── JobRunningError                      api/services/datasets.py
    │   ├── JobNotResumableError                 workers/budgets.py
    │   ├── DatasetBusyError                     workers/sync.py
    │   └── Cancelled                            core/cancellation.py
    ├── RateLimited              rate_limited           429  1  too many requests; retry later
    │   ├── TooManyStreamsError                  api/services/jobs.py
    │   └── TooManyFailuresError                 api/services/tenants.py
    ├── BudgetExceeded           budget_exceeded        402  1  core/llm/usage.py
    ├── UpstreamFailed           upstream_failed        502  1  an LLM or embeddings endpoint
    │   ├── LLMError (ExtractionFailed, EventExtractionFailed)   core/llm/errors.py
    │   └── BatchAPIError                        core/llm/batches.py
    ├── Unavailable              unavailable            503  1  a store or backend is down
    │   ├── StoreError                           core/ports/
    │   ├── NotAvailableError                    core/stores/factory.py
    │   ├── ModelNotInstalledError               core/embeddings/local.py
    │   └── OfflineModelUnavailable              core/llm/offline/
    ├── PipelineStepError        step_failed            500  1  pipelines/base.py
    ├── JobFailedError           job_failed             500  1  api/services/jobs.py
    └── EvalError                eval_failed            500  1  api/services/evaluation.py

docs/errors.md lists every code (`python -m api.errors` writes it). A 5xx error's message
may name hosts, paths or a library's text: the HTTP and MCP faces answer its `public_message`
and log the rest; the CLI, run by the operator, prints it whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar


class CogmillError(Exception):
    """A failure cogmill did not foresee (a bug); every error below says what it is."""

    code: ClassVar[str] = "internal_error"
    status: ClassVar[int] = 500
    exit_code: ClassVar[int] = 1
    public_message: ClassVar[str] = "unexpected server error (a bug); see the server log"

    def __init__(self, message: str = "", *, detail: str | None = None) -> None:
        """`detail`: what a library said about the cause, for the log and never the answer."""
        super().__init__(message or self.public_message)
        self.detail = detail


class InvalidInput(CogmillError, ValueError):
    """The input is wrong; the message says what and what to send instead."""

    code, status, exit_code = "invalid_value", 422, 2


class BadRequest(InvalidInput):
    """The request is malformed (a bad name, an unreadable body)."""

    code, status = "invalid_request", 400


class NotConfigured(InvalidInput):
    """The request needs something this server is not set up with (an LLM, Neo4j...)."""

    code = "not_configured"


class TooLarge(InvalidInput):
    """The input is over a size or count limit; the message names the setting."""

    code, status = "too_large", 413


class Unauthorized(CogmillError):
    """No usable API key came with the request."""

    code, status, exit_code = "unauthorized", 401, 2


class Forbidden(CogmillError, PermissionError):
    """The caller may not do this."""

    code, status, exit_code = "forbidden", 403, 2


class NotFound(CogmillError, LookupError):
    """The thing named does not exist (or is another tenant's)."""

    code, status, exit_code = "not_found", 404, 2


class Conflict(CogmillError):
    """The request is fine but the current state does not allow it; try again later."""

    code, status = "conflict", 409


class RateLimited(CogmillError):
    """Too many requests; `retry_after` says when to try again (seconds), when known."""

    code, status = "rate_limited", 429

    def __init__(self, message: str = "", *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class UpstreamFailed(CogmillError, RuntimeError):
    """An endpoint cogmill calls (an LLM, embeddings, the Batch API) failed."""

    code, status = "upstream_failed", 502
    public_message = "the LLM or embeddings endpoint failed; retry later"


class Unavailable(CogmillError, RuntimeError):
    """A store or backend the server needs is unreachable or not installed."""

    code, status = "unavailable", 503
    public_message = "a service the server needs is unavailable; retry later"


# What a pydantic error (ValidationError.errors()) says, in cogmill's words.
# By pydantic error type: what the value must be; `{ctx}` fields come from the error.
MUST = {
    "greater_than": "must be more than {gt}",
    "greater_than_equal": "must be at least {ge}",
    "less_than": "must be less than {lt}",
    "less_than_equal": "must be at most {le}",
    "int_parsing": "must be a whole number",
    "int_type": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "finite_number": "must be a finite number (not NaN or infinity)",
    "multiple_of": "must be a multiple of {multiple_of}",
    "string_pattern_mismatch": "must match the pattern {pattern}",
    "date_parsing": "must be a date (YYYY-MM-DD)",
    "datetime_parsing": "must be a date and time (ISO 8601, e.g. 2024-05-01T12:00:00Z)",
    "uuid_parsing": "must be a UUID",
    "bool_parsing": "must be true or false",
    "bool_type": "must be true or false",
    "string_type": "must be text",
    "string_too_short": "must have at least {min_length} characters",
    "string_too_long": "must have at most {max_length} characters",
    "too_short": "must have at least {min_length} items",
    "too_long": "must have at most {max_length} items",
    "literal_error": "must be {expected}",
    "enum": "must be {expected}",
    "missing": "is required",
    "extra_forbidden": "is not a known field; remove it",
    "json_invalid": "is not valid JSON",
    "list_type": "must be a list",
    "dict_type": "must be an object",
    "model_type": "must be an object",
}


def problem(name: str, error: Mapping[str, Any]) -> str:
    """One pydantic error as `NAME must be ..., got VALUE`."""
    template = MUST.get(str(error.get("type")))
    if template is not None:
        must = template.format(**(error.get("ctx") or {}))
    else:  # a validator's own ValueError is our message; else pydantic's, first word lowered
        must = lower_first(str(error.get("msg", "is not valid")).removeprefix("Value error, "))
    value = error.get("input")
    shown = repr(value) if isinstance(value, str | int | float | bool) else ""
    got = f", got {shown}" if shown and error.get("type") != "missing" and len(shown) <= 80 else ""
    return f"{name} {must}{got}"


def lower_first(text: str) -> str:
    """A sentence continued after a name: its first word lowered, unless it is an acronym."""
    return text if text[:2].isupper() else text[:1].lower() + text[1:]


def problems(errors: Iterable[Mapping[str, Any]], prefix: str = "") -> list[str]:
    """pydantic errors (ValidationError.errors()) in cogmill's words, each named by its
    location joined with dots after `prefix` (`body.` or `COGMILL_`)."""
    return [problem(prefix + ".".join(str(part) for part in e.get("loc", ())), e) for e in errors]
