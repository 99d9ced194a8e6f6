"""search and route: the use cases behind `cogmill search|route` and POST /search|/route.

Dataset names pass through `datasets.checked`, which scopes them by the caller's tenant; a
session is the caller's tenant's, and the response names datasets as the caller does."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from api.services import shown
from api.services.datasets import existing_all
from api.services.memory import sessions
from api.services.retrieval import retrieval_for
from core.access import LOCAL, AccessDeniedError, Caller, Role
from retrieval.models import Route, SearchResponse, SearchType
from retrieval.response_model import ResponseModel
from retrieval.router import route as route_query
from retrieval.search import QA_ID_KEY
from retrieval.search import search as run_search
from runtime import Runtime
from workers.metrics import observe_search


@dataclass(frozen=True)
class Searched:
    """A search's response and, when it was recorded in a session, its qa id (for improve)."""

    response: SearchResponse
    qa_id: str | None = None


def search(
    rt: Runtime,
    query: str,
    datasets: Sequence[str],
    search_type: SearchType | None = None,
    top_k: int | None = None,
    response_model: ResponseModel | None = None,
    session: str | None = None,
    caller: Caller = LOCAL,
    as_of: str | None = None,
    known_at: str | None = None,
) -> Searched:
    """Search the datasets with one type (None: the query router's) and top-k (None: from the
    query), seeing facts as of a world time and as known at a system time (None: current).
    Raises InvalidInput (CatalogError for a bad dataset name) for a bad request,
    DatasetNotFoundError naming the datasets that do not exist, AccessDeniedError for a query
    type the caller's role may not run."""
    check_type_allowed(caller, search_type if search_type is not None else route(query).search_type)
    ctx, names = retrieval_for(rt, caller), existing_all(rt, datasets, caller)
    started = time.perf_counter()
    store = sessions(rt, caller) if session is not None else None
    with rt.priority.urgent():  # a job running in this process waits (core/priority.py)
        response = run_search(
            ctx, query, names, search_type, top_k, response_model, session, store, as_of, known_at
        )
    observe_search(rt, response.search_type.value, time.perf_counter() - started)
    qa_id = ctx.extras.get(QA_ID_KEY) if session is not None else None
    return Searched(shown.search(caller, response), qa_id)


# Queries written in Cypher (or translated into it) take an admin key. A tenant's admin runs
# them confined to the searched datasets (retrieval/cypher_confine.py); only an operator's run
# as written, over every tenant.
ADMIN_TYPES = frozenset({SearchType.CYPHER, SearchType.NATURAL_LANGUAGE})


def check_type_allowed(caller: Caller, search_type: SearchType) -> None:
    """Raise AccessDeniedError when the caller may not run this search type."""
    if search_type in ADMIN_TYPES and not caller.role.allows(Role.ADMIN):
        raise AccessDeniedError(
            f"{search_type.value} queries take an admin key (confined to the tenant's "
            "datasets); use another search type, or an admin key"
        )


def route(query: str) -> Route:
    """The search type the rule-based router picks for a query (no LLM, no stores)."""
    return route_query(query)
