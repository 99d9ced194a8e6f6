"""Exceptions of the use cases as MCP tool errors: the HTTP API's messages, hints naming tools.

A tool error comes back to the model as a result with `isError` set and one line of text saying
what to do. Server-side failures (a store down, a missing model) say only what failed, as the
HTTP API's 5xx bodies do; anything unforeseen is logged with its traceback and reported as a
bug, never as a stack trace in the answer.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar, cast

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError
from starlette.exceptions import HTTPException

from api.http.schemas import SAFE_MESSAGES
from api.services.datasets import DatasetNotFoundError, JobRunningError
from api.services.delete import DocumentNotFoundError
from core.access import AccessDeniedError
from core.embeddings.local import ModelNotInstalledError
from core.ports import StoreError
from core.stores.factory import NotAvailableError
from workers.jobs import JobNotFoundError

log = logging.getLogger("cogmill.mcp")

P = ParamSpec("P")
T = TypeVar("T")

# Failures of the server, not of the request: a safe message, the details in the server log.
SERVER_ERRORS: list[tuple[type[Exception], str]] = [
    (ModelNotInstalledError, "model_not_installed"),  # an OSError: before anything broader
    (NotAvailableError, "backend_not_available"),
    (StoreError, "store_unavailable"),
]
# Errors of the request whose own message says what is wrong (ValueError covers CatalogError,
# PlanError, QuotaExceededError, TenantError, SessionError; LookupError unknown sessions).
REQUEST_ERRORS = (AccessDeniedError, ValueError, LookupError)
BUG = "unexpected server error (a bug); see the server log"


def job_not_found(job_id: str) -> ToolError:
    """The answer for an unknown job, or another tenant's (its existence does not leak)."""
    return ToolError(f"no job {job_id!r}; cognify and remember return the ids of their jobs")


def tool_error(tool: str, exc: Exception) -> ToolError:
    """The tool error a use case's exception becomes."""
    if isinstance(exc, HTTPException):  # the HTTP face's own checks (bounds, roles)
        return ToolError(str(exc.detail))
    if isinstance(exc, DatasetNotFoundError):
        return ToolError(f"{exc}; add documents to it with add_text (or add_files) first")
    if isinstance(exc, DocumentNotFoundError):
        uri = f"cogmill://datasets/{exc.dataset}/documents"
        return ToolError(f"{exc}; the resource {uri} lists the dataset's documents")
    if isinstance(exc, JobRunningError):
        return ToolError(f"{exc} (job_status polls it)")
    if isinstance(exc, JobNotFoundError):
        return ToolError("no such job; cognify and remember return the ids of their jobs")
    for kind, code in SERVER_ERRORS:
        if isinstance(exc, kind):
            log.warning("mcp_error code=%s tool=%s", code, tool, exc_info=exc)
            return ToolError(f"{SAFE_MESSAGES[code]} (the server log has the details)")
    # A pydantic ValidationError raised inside a use case is bad stored data, no bad request.
    if isinstance(exc, REQUEST_ERRORS) and not isinstance(exc, ValidationError):
        return ToolError(str(exc))
    log.error("mcp_unhandled_error tool=%s", tool, exc_info=exc)
    return ToolError(BUG)


def guarded(fn: Callable[P, T]) -> Callable[P, T]:
    """A tool whose exceptions come back as tool errors with safe messages (a coroutine
    function stays one, so the server awaits it on the event loop)."""
    if inspect.iscoroutinefunction(fn):
        return cast(Callable[P, T], _guarded_async(fn))

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return fn(*args, **kwargs)
        except ToolError:
            raise
        except Exception as exc:
            raise tool_error(fn.__name__, exc) from None

    return run


def _guarded_async(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    @functools.wraps(fn)
    async def run(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await fn(*args, **kwargs)
        except ToolError:
            raise
        except Exception as exc:
            raise tool_error(fn.__name__, exc) from None

    return run
