"""The FastAPI application: lifespan (runtime + embedded worker), routers and error mapping."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException

from api.http.deps import reader
from api.http.guards import RequestGuard
from api.http.routes import cognify, datasets, export, facts, health, jobs, memory, route, search
from api.http.routes import metrics as metrics_routes
from api.http.routes import webhooks as webhook_routes
from api.http.routes.graph import router as graph_router
from api.http.routes.ui import router as ui_router
from api.http.schemas import (
    SAFE_MESSAGES,
    DocumentsAdd,
    ErrorDetail,
    ErrorResponse,
    error_code,
    error_responses,
)
from api.mcp.http import mcp_router
from api.services.datasets import DatasetNotFoundError, JobRunningError
from api.services.delete import DocumentNotFoundError
from api.services.tenants import QuotaExceededError
from core.access import AccessDeniedError
from core.catalog import CatalogError
from core.embeddings.local import ModelNotInstalledError
from core.ports import StoreError
from core.settings import Settings
from core.stores.factory import NotAvailableError
from retrieval.fact_timeline import EntityNotFoundError
from runtime import Runtime
from workers.jobs import JobNotFoundError
from workers.orchestration import PlanError

log = logging.getLogger("cogmill.api")

# Order does not matter: Starlette picks the handler of the nearest class in the MRO.
DOMAIN_ERRORS: list[tuple[type[Exception], int, str]] = [
    (CatalogError, 400, "invalid_request"),
    (PlanError, 422, "cannot_plan"),
    (ValueError, 422, "invalid_value"),
    (JobNotFoundError, 404, "job_not_found"),
    (EntityNotFoundError, 404, "entity_not_found"),
    (AccessDeniedError, 403, "forbidden"),
    (QuotaExceededError, 413, "quota_exceeded"),
    (NotAvailableError, 503, "backend_not_available"),
    (StoreError, 503, "store_unavailable"),
    (ModelNotInstalledError, 503, "model_not_installed"),
]
TAGS = [
    {"name": "datasets", "description": "Datasets and their documents"},
    {"name": "cognify", "description": "Turn documents into graph and vectors (async jobs)"},
    {"name": "jobs", "description": "Status and cancellation of cognify jobs"},
    {"name": "search", "description": "Synchronous retrieval with provenance"},
    {"name": "memory", "description": "Session memory: remember, recall, improve, forget"},
    {"name": "health", "description": "Liveness and readiness probes"},
]


def error(status: int, code: str, message: str) -> JSONResponse:
    body = ErrorResponse(error=ErrorDetail(code=code, message=message))
    return JSONResponse(body.model_dump(), status_code=status)


def _domain_handler(status: int, code: str) -> Callable[[Request, Exception], Any]:
    def handle(request: Request, exc: Exception) -> JSONResponse:
        if status < 500:
            return error(status, code, str(exc))
        log.warning(
            "api_error code=%s method=%s path=%s", code, request.method, request.url.path,
            exc_info=exc,
        )  # fmt: skip
        return error(status, code, f"{SAFE_MESSAGES[code]} (the server log has the details)")

    return handle


def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    code = getattr(exc, "code", None) or error_code(exc.status_code)
    answer = error(exc.status_code, code, str(exc.detail))
    answer.headers.update(exc.headers or {})  # WWW-Authenticate with a 401
    return answer


def _dataset_not_found(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, DatasetNotFoundError)
    hint = f"add documents with POST /api/v1/datasets/{exc.dataset}/data first"
    return error(404, "dataset_not_found", f"{exc}; {hint}")


def _document_not_found(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, DocumentNotFoundError)
    hint = f"GET /api/v1/datasets/{exc.dataset}/data lists its documents"
    return error(404, "document_not_found", f"{exc}; {hint}")


def _job_running(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, JobRunningError)
    job = f"/api/v1/jobs/{exc.job_ids[0]}"
    hint = f"GET {job}/events follows it, POST {job}/cancel cancels it"
    return error(409, "job_running", f"{exc} ({hint})")


# Errors whose answer adds a hint naming this face's routes.
HINTED_ERRORS: list[tuple[type[Exception], Callable[[Request, Exception], JSONResponse]]] = [
    (DatasetNotFoundError, _dataset_not_found),
    (DocumentNotFoundError, _document_not_found),
    (JobRunningError, _job_running),
]


def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = [f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()]
    return error(422, "validation_error", "invalid request: " + "; ".join(problems))


def _bug(request: Request, exc: Exception) -> JSONResponse:
    # Also catches pydantic ValidationErrors raised inside the app: bad stored data is no 422.
    # Handlers run outside the `except` block, so pass the exception for its traceback.
    log.error(
        "api_unhandled_error method=%s path=%s", request.method, request.url.path, exc_info=exc
    )
    return error(500, "internal_error", "unexpected server error (a bug); see the server log")


@asynccontextmanager
async def _lifespan(app: FastAPI, runtime: Runtime | None, warm_up: bool) -> AsyncIterator[None]:
    from api.services.warmup import Warmer
    from runtime import share_cores_between_threads, use_runtime
    from workers.celery_app import configure
    from workers.embedded import EmbeddedWorker

    rt = runtime or Runtime(Settings())
    use_runtime(rt)  # Celery tasks in this process find the stores through it
    # Searches run on many request threads at once; a query's embedding split over BLAS
    # threads cost ~20x the CPU (idle threads spin) on a loaded 2-core machine.
    share_cores_between_threads(2)
    worker = None
    try:
        if rt.settings.embedded_broker:
            # memory:// is visible only in this process, so jobs must run here.
            worker = EmbeddedWorker(
                configure(rt.settings),
                threads=rt.settings.worker_threads,
                nice=rt.settings.serve_ingest_nice,  # searches first
            )
            await run_in_threadpool(worker.start)
        else:
            configure(rt.settings)
        app.state.runtime = rt
        if warm_up and rt.settings.neo4j_uri and rt.settings.serve_warm_up:
            app.state.warmer = Warmer(rt, rt.settings.serve_warm_up)
            app.state.warmer.start()
        yield
    finally:
        if getattr(app.state, "warmer", None) is not None:
            await run_in_threadpool(app.state.warmer.stop)
        if worker is not None:
            await run_in_threadpool(worker.stop)
        rt.close()
        use_runtime(None)


FASTAPI_422 = {"HTTPValidationError", "ValidationError"}


def _error_schema_422(spec: dict[str, Any]) -> None:
    """FastAPI documents its own 422 body (HTTPValidationError) on routes with parameters, but
    _validation_error answers in the one error schema: document that instead."""
    ours = {
        "description": error_responses(422)[422]["description"],
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}},
    }
    for operations in spec.get("paths", {}).values():
        for operation in operations.values():
            answer = operation.get("responses", {}).get("422")
            if answer and "#/components/schemas/HTTPValidationError" in str(answer):
                operation["responses"]["422"] = ours
    components = spec.get("components", {}).get("schemas", {})
    for name in FASTAPI_422:
        components.pop(name, None)


def _openapi(app: FastAPI) -> Callable[[], dict[str, Any]]:
    def schema() -> dict[str, Any]:
        if app.openapi_schema is None:
            spec = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
                tags=TAGS,
            )
            # The upload route reads its body itself (multipart or JSON), so FastAPI does not
            # see DocumentsAdd; add it to the components its requestBody refers to.
            extra = DocumentsAdd.model_json_schema(ref_template="#/components/schemas/{model}")
            components = spec.setdefault("components", {}).setdefault("schemas", {})
            components.update(extra.pop("$defs", {}))
            components["DocumentsAdd"] = extra
            _error_schema_422(spec)
            app.openapi_schema = spec
        return app.openapi_schema

    return schema


def _version() -> str:
    try:
        return version("cogmill")
    except PackageNotFoundError:  # running from a checkout that is not installed
        return "0.0.0"


def create_app(runtime: Runtime | None = None, *, warm_up: bool = False) -> FastAPI:
    """The API app; with no runtime, one is built from Settings() at startup. `warm_up`: a
    Neo4j graph server is warmed at startup and after each of its restarts (`cogmill serve`;
    api/services/warmup.py)."""
    app = FastAPI(
        title="cogmill",
        version=_version(),
        description="Knowledge-graph memory for LLM applications: add documents, cognify "
        "them into a graph and vectors (async jobs), and search with provenance.",
        lifespan=lambda app: _lifespan(app, runtime, warm_up),
        # The request guards (api/http/guards.py) may answer any route with these.
        responses=error_responses(400, 403, 413, 415, 500),
    )
    # Every route but the probes takes a key once auth is on (a reader's at least; writes
    # check more).
    keyed: dict[str, Any] = {
        "dependencies": [Depends(reader)],
        "responses": error_responses(401, 403, 429),
    }
    for router in (datasets.router, cognify.router, jobs.router, search.router, facts.router):
        app.include_router(router, **keyed)
    app.include_router(health.router)
    app.include_router(route.router, **keyed)
    app.include_router(memory.router, **keyed)
    app.include_router(export.router, **keyed)
    app.include_router(webhook_routes.router, **keyed)
    app.include_router(mcp_router())  # MCP at /mcp; it checks keys itself (api/mcp/http.py)
    app.include_router(metrics_routes.router)  # its own access check: admin or metrics token
    app.include_router(graph_router, **keyed)
    app.include_router(ui_router)  # static files; the page sends a key with its API calls
    for exc_type, status, code in DOMAIN_ERRORS:
        app.add_exception_handler(exc_type, _domain_handler(status, code))
    for exc_type, handler in HINTED_ERRORS:
        app.add_exception_handler(exc_type, handler)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(ValidationError, _bug)
    app.add_exception_handler(Exception, _bug)
    app.openapi = _openapi(app)  # type: ignore[method-assign]
    app.add_middleware(RequestGuard, settings=lambda: app.state.runtime.settings)
    return app
