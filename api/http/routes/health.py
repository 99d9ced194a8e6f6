"""Liveness and readiness probes."""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio
from fastapi import APIRouter, Request, Response

from api.http.schemas import Health, Readiness
from runtime import Runtime

router = APIRouter(tags=["health"])
log = logging.getLogger("cogmill.api")

# One cheap call per store; opening a store (or loading the model) on first use is part of
# being ready, so a missing model or a bad setting shows here rather than on the first search.
CHECKS: dict[str, Callable[[Runtime], object]] = {
    "graph": lambda rt: rt.graph.get_nodes([]),
    "vectors": lambda rt: rt.vectors.count("ready_check"),
    "state": lambda rt: rt.state.get("api:ready"),
    "embedder": lambda rt: rt.embedder.dim,
}
# The probes answer on the event loop and run their store checks on threads of their own (two
# per app), so busy request threads (sync routes, event stream polls) never hold them up.
PROBE_THREADS = 2


@router.get("/health", response_model=Health)
async def health() -> Health:
    """200 whenever the process is up."""
    return Health()


@router.get(
    "/ready",
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "A store did not answer"}},
)
async def ready(request: Request, response: Response) -> Readiness:
    """200 when the stores answer and the embedder loads; 503 naming what failed."""
    # Not RuntimeDep: FastAPI runs a sync dependency on the shared request threads.
    runtime: Runtime = request.app.state.runtime
    state = request.app.state
    if getattr(state, "probe_threads", None) is None:  # made on the app's event loop
        state.probe_threads = anyio.CapacityLimiter(PROBE_THREADS)
    stores = await anyio.to_thread.run_sync(_check_stores, runtime, limiter=state.probe_threads)
    ok = all(status == "ok" for status in stores.values())
    if not ok:
        response.status_code = 503
    warmer = getattr(state, "warmer", None)
    return Readiness(ready=ok, stores=stores, warm_up=warmer.state if warmer else "off")


def _check_stores(runtime: Runtime) -> dict[str, str]:
    """Each store's status: "ok" or why not (without hosts or paths: those go to the log)."""
    stores: dict[str, str] = {}
    for name, check in CHECKS.items():
        try:
            check(runtime)
            stores[name] = "ok"
        # A store down, a backend or model missing, settings that do not fit together (the
        # embedding dim) are Unavailable (RuntimeErrors); a driver's own may be any of these.
        except (RuntimeError, OSError, ValueError) as err:
            # The error names hosts and paths: the log has it, the answer only what failed.
            log.warning("ready_check_failed store=%s", name, exc_info=err)
            stores[name] = "unavailable (the server log has the details)"
    return stores
