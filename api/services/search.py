"""search and route: the use cases behind `cogmill search|route` and POST /search|/route.

Dataset names pass through `datasets.checked`, where a caller's tenant will scope them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from api.services.datasets import checked
from retrieval.models import Route, SearchResponse, SearchType
from retrieval.response_model import ResponseModel
from retrieval.router import route as route_query
from retrieval.search import QA_ID_KEY
from retrieval.search import search as run_search
from workers.runtime import Runtime


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
) -> Searched:
    """Search the datasets with one type (None: the query router's) and top-k (None: from the
    query). Raises ValueError (CatalogError for a bad dataset name) for a bad request."""
    ctx, names = rt.retrieval(), [checked(name) for name in datasets]
    response = run_search(ctx, query, names, search_type, top_k, response_model, session)
    return Searched(response, ctx.extras.get(QA_ID_KEY) if session is not None else None)


def route(query: str) -> Route:
    """The search type the rule-based router picks for a query (no LLM, no stores)."""
    return route_query(query)
