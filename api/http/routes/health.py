"""Liveness and readiness probes."""

from __future__ import annotations

import logging
from collections.abc import Callable

from fastapi import APIRouter, Response

from api.http.deps import RuntimeDep
from api.http.schemas import Health, Readiness
from workers.runtime import Runtime

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


@router.get("/health", response_model=Health)
def health() -> Health:
    """200 whenever the process is up."""
    return Health()


@router.get(
    "/ready",
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "A store did not answer"}},
)
def ready(runtime: RuntimeDep, response: Response) -> Readiness:
    """200 when the stores answer and the embedder loads; 503 naming what failed."""
    stores: dict[str, str] = {}
    for name, check in CHECKS.items():
        try:
            check(runtime)
            stores[name] = "ok"
        # StoreError and NotAvailableError are RuntimeErrors, a missing model is an OSError,
        # and settings that do not fit together (embedding dim) are ValueErrors.
        except (RuntimeError, OSError, ValueError) as err:
            # The error names hosts and paths: the log has it, the answer only what failed.
            log.warning("ready_check_failed store=%s", name, exc_info=err)
            stores[name] = "unavailable (the server log has the details)"
    ok = all(status == "ok" for status in stores.values())
    if not ok:
        response.status_code = 503
    return Readiness(ready=ok, stores=stores)
