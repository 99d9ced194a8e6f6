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
from api.http.errors import error_response
from api.http.guards import RequestGuard
from api.http.routes import (
    cognify,
    datasets,
    export,
    facts,
    health,
    jobs,
    me,
    memory,
    route,
    search,
)
from api.http.routes import metrics as metrics_routes
from api.http.routes import sync as sync_routes
from api.http.routes import webhooks as webhook_routes
from api.http.routes.graph import router as graph_router
from api.http.routes.ui import router as ui_router
from api.http.schemas import (
    DocumentsAdd,
    ErrorDetail,
    ErrorResponse,
    error_code,
    error_responses,
)
from api.mcp.http import mcp_router
from core.errors import CogmillError, problems
from core.settings import Settings
from runtime import Runtime

log = logging.getLogger("cogmill.api")

TAGS = [
    {"name": "datasets", "description": "Datasets and their documents"},
    {"name": "cognify", "description": "Turn documents into graph and vectors (async jobs)"},
    {"name": "jobs", "description": "Status and cancellation of cognify jobs"},
    {"name": "sync", "description": "Datasets that follow a source, now or on a schedule"},
    {"name": "search", "description": "Synchronous retrieval with provenance"},
    {"name": "memory", "description": "Session memory: remember, recall, improve, forget"},
    {"name": "health", "description": "Liveness and readiness probes"},
]


def error(status: int, code: str, message: str) -> JSONResponse:
    body = ErrorResponse(error=ErrorDetail(code=code, message=message))
    return JSONResponse(body.model_dump(), status_code=status)


def _answer(request: Request, exc: Exception) -> JSONResponse:
    """Any exception in the one error schema (api/errors.py): a CogmillError as it says, a
    pydantic ValidationError raised inside the app (bad stored data, no bad request) and
    anything else as a 500 whose traceback goes to the log."""
    return error_response(exc, f"{request.method} {request.url.path}")


def _http_error(request: Request, exc: Exception) -> JSONResponse:
    """Starlette's and FastAPI's own answers (an unknown route, a method not allowed, a body
    that is not JSON), in cogmill's words; the cause goes to the log."""
    assert isinstance(exc, HTTPException)
    if isinstance(exc.__cause__, CogmillError):  # FastAPI wraps what reading the body raised
        return _answer(request, exc.__cause__)
    where = f"{request.method} {request.url.path[:200]}"
    allowed = (exc.headers or {}).get("Allow", "")
    said = {
        400: "the request body cannot be read: send JSON in UTF-8 (Content-Type: application/json)",
        404: f"no route {where}; GET /openapi.json lists the API's routes",
        405: f"{request.method} is not allowed on {request.url.path[:200]}; it takes {allowed}",
    }.get(exc.status_code)
    if said is None or (exc.status_code == 405 and not allowed):
        said = f"the request cannot be answered ({exc.status_code}); check the method and path"
    cause = exc.__cause__ or exc.__context__
    log.info(
        "http_refused status=%s where=%s detail=%r cause=%r",
        exc.status_code,
        where,
        exc.detail,
        cause,
    )
    answer = error(exc.status_code, error_code(exc.status_code), said)
    answer.headers.update(exc.headers or {})
    return answer


def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    said = problems(exc.errors()) or ["the body is not valid"]
    return error(422, "validation_error", "invalid request: " + "; ".join(said))


@asynccontextmanager
async def _lifespan(
    app: FastAPI, runtime: Runtime | None, warm_up: bool, schedules_here: bool
) -> AsyncIterator[None]:
    from api.services.warmup import Warmer
    from runtime import share_cores_between_threads, use_runtime
    from workers.beat import embedded_beat
    from workers.celery_app import configure
    from workers.embedded import EmbeddedWorker

    rt = runtime or Runtime(Settings())
    use_runtime(rt)  # Celery tasks in this process find the stores through it
    # Searches run on many request threads at once; a query's embedding split over BLAS
    # threads cost ~20x the CPU (idle threads spin) on a loaded 2-core machine.
    share_cores_between_threads(2)
    worker = clock = None
    try:
        if rt.settings.embedded_broker:
            # memory:// is visible only in this process, so jobs must run here.
            worker = EmbeddedWorker(
                configure(rt.settings),
                threads=rt.settings.worker_threads,
                nice=rt.settings.serve_ingest_nice,  # searches first
            )
            await run_in_threadpool(worker.start)
            if schedules_here:  # and so must schedules fire here (workers/beat.py)
                clock = embedded_beat()
                clock.start()
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
        if clock is not None:
            await run_in_threadpool(clock.stop)
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


def create_app(
    runtime: Runtime | None = None, *, warm_up: bool = False, schedules: bool = False
) -> FastAPI:
    """The API app; with no runtime, one is built from Settings() at startup. `warm_up`: a
    Neo4j graph server is warmed at startup and after each of its restarts (`cogmill serve`;
    api/services/warmup.py). `schedules`: on the embedded broker, the schedules fire from a
    thread of this process (`cogmill serve`)."""
    app = FastAPI(
        title="cogmill",
        version=_version(),
        description="Knowledge-graph memory for LLM applications: add documents, cognify "
        "them into a graph and vectors (async jobs), and search with provenance.",
        lifespan=lambda app: _lifespan(app, runtime, warm_up, schedules),
        # The request guards (api/http/guards.py) may answer any route with these.
        responses=error_responses(400, 403, 413, 415, 500, 502),
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
    app.include_router(me.router, **keyed)
    app.include_router(memory.router, **keyed)
    app.include_router(export.router, **keyed)
    app.include_router(webhook_routes.router, **keyed)
    app.include_router(sync_routes.router, **keyed)
    app.include_router(mcp_router())  # MCP at /mcp; it checks keys itself (api/mcp/http.py)
    app.include_router(metrics_routes.router)  # its own access check: admin or metrics token
    app.include_router(graph_router, **keyed)
    app.include_router(ui_router)  # static files; the page sends a key with its API calls
    app.add_exception_handler(CogmillError, _answer)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(ValidationError, _answer)
    app.add_exception_handler(Exception, _answer)
    app.openapi = _openapi(app)  # type: ignore[method-assign]
    app.add_middleware(RequestGuard, settings=lambda: app.state.runtime.settings)
    return app
