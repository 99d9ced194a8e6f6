"""Calls of search, session memory, the graph, webhooks and the probes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from cogmill_client import models as m
from cogmill_client import requests as r
from cogmill_client.calls.base import Parts, body, model, names, operation, params_of, text

Feedback = float | Literal["up", "down"]


def kind(search_type: m.SearchType | str) -> m.SearchType:
    """A search type by name, in any case (ValueError for an unknown one)."""
    return m.SearchType(str(search_type).upper())


@operation("POST", "/api/v1/search")
def search(
    query: str,
    datasets: str | Sequence[str],
    *,
    search_type: m.SearchType | str | None = None,
    top_k: int | None = None,
    response_model: dict[str, Any] | None = None,
    as_of: str | None = None,
    known_at: str | None = None,
) -> Parts[m.SearchResponse]:
    """Search datasets; with no `search_type` the query router chooses (see `route` in the
    answer). Results carry their sources (document, chunk) and evidence. Facts are seen as
    they hold now, or `as_of` a time ("2019") and as cogmill knew them `known_at` a time."""
    request = r.SearchRequest(
        query=query,
        datasets=names(datasets),
        top_k=top_k,
        search_type=kind(search_type) if search_type is not None else None,
        response_model=response_model,
        as_of=as_of,
        known_at=known_at,
    )
    return Parts(model(m.SearchResponse), json=body(request))


@operation("GET", "/api/v1/datasets/{name}/facts")
def facts(
    dataset: str,
    entity: str,
    *,
    relation: str | None = None,
    as_of: str | None = None,
    known_at: str | None = None,
    limit: int = 100,
) -> Parts[m.FactTimeline]:
    """An entity's facts in time order: when each held, what superseded it, its sources."""
    query = params_of(entity=entity, relation=relation, as_of=as_of, known_at=known_at, limit=limit)
    return Parts(model(m.FactTimeline), {"name": dataset}, params=query)


@operation("POST", "/api/v1/route")
def route(query: str) -> Parts[m.Route]:
    """The search type the router would choose for a question, and why."""
    return Parts(model(m.Route), json=body(r.RouteRequest(query=query)))


@operation("POST", "/api/v1/remember")
def remember(
    text: str, *, session: str | None = None, dataset: str | None = None
) -> Parts[m.RememberResult]:
    """Remember a text in a session (it expires with it) or in a dataset (added, cognified)."""
    request = r.RememberRequest(text=text, session=session, dataset=dataset)
    return Parts(model(m.RememberResult), json=body(request))


@operation("POST", "/api/v1/recall")
def recall(
    query: str,
    *,
    session: str | None = None,
    datasets: str | Sequence[str] = (),
    scope: Literal["auto", "session", "graph", "both"] = "auto",
    top_k: int = 10,
    search_type: m.SearchType | str = m.SearchType.GRAPH_PPR,
    threshold: float = 0.8,
) -> Parts[m.RecallResponse]:
    """Recall from a session's memory and/or the graph of datasets."""
    request = r.RecallRequest(
        query=query,
        session=session,
        datasets=names(datasets),
        scope=scope,
        top_k=top_k,
        search_type=kind(search_type),
        threshold=threshold,
    )
    return Parts(model(m.RecallResponse), json=body(request))


@operation("POST", "/api/v1/improve")
def improve(
    session: str, qa_id: str, feedback: Feedback, *, results: list[int] | None = None
) -> Parts[m.ImproveResult]:
    """Feedback on an answer (up, down or a score in [-1, 1]) that reweighs its evidence."""
    request = r.ImproveRequest(session=session, qa_id=qa_id, feedback=feedback, results=results)
    return Parts(model(m.ImproveResult), json=body(request))


@operation("POST", "/api/v1/forget")
def forget(
    *,
    session: str | None = None,
    dataset: str | None = None,
    document: str | None = None,
    everything: bool = False,
    confirm: bool = False,
) -> Parts[m.ForgetResult]:
    """Forget one target: a session, a dataset (or one document of it), or everything."""
    request = r.ForgetRequest(
        session=session,
        dataset=dataset,
        document=document,
        everything=everything,
        confirm=confirm,
    )
    return Parts(model(m.ForgetResult), json=body(request))


@operation("GET", "/api/v1/sessions")
def list_sessions() -> Parts[list[m.SessionSummary]]:
    """The caller's live sessions."""
    return Parts(model(list[m.SessionSummary]))


@operation("GET", "/api/v1/sessions/{session}")
def session_history(session: str) -> Parts[m.SessionHistory]:
    """A session's notes and questions, oldest first."""
    return Parts(model(m.SessionHistory), {"session": session})


@operation("DELETE", "/api/v1/sessions/{session}")
def delete_session(session: str) -> Parts[m.ForgetResult]:
    """Forget a session."""
    return Parts(model(m.ForgetResult), {"session": session})


# -- graph --------------------------------------------------------------------------------------


@operation("GET", "/api/v1/datasets/{name}/graph")
def export_graph(
    dataset: str,
    *,
    format: Literal["jsonl", "graphml"] = "jsonl",
    offset: int = 0,
    limit: int | None = None,
) -> Parts[str]:
    """The dataset's graph as JSON Lines (one node or edge per line) or GraphML text."""
    params = params_of(format=format, offset=offset, limit=limit)
    return Parts(text, {"name": dataset}, params=params)


@operation("GET", "/api/v1/datasets/{name}/graph/neighbourhood")
def neighbourhood(
    dataset: str, *, node: str | None = None, entity: str | None = None, limit: int = 50
) -> Parts[m.NeighbourhoodPublic]:
    """A node (by id, or an entity by name) and its direct neighbours, bounded by `limit`."""
    params = params_of(node=node, entity=entity, limit=limit)
    return Parts(model(m.NeighbourhoodPublic), {"name": dataset}, params=params)


# -- webhooks and probes ------------------------------------------------------------------------


@operation("GET", "/api/v1/webhooks")
def list_webhooks() -> Parts[list[m.WebhookPublic]]:
    """The caller's webhook subscriptions."""
    return Parts(model(list[m.WebhookPublic]))


@operation("POST", "/api/v1/webhooks")
def add_webhook(url: str, *, events: list[str] | None = None) -> Parts[m.WebhookCreated]:
    """Subscribe a URL to job events; the answer's `secret` (shown once) signs deliveries."""
    request = r.WebhookCreate(url=url, events=events)
    return Parts(model(m.WebhookCreated), json=body(request))


@operation("DELETE", "/api/v1/webhooks/{webhook_id}")
def remove_webhook(webhook_id: str) -> Parts[m.WebhookPublic]:
    """Unsubscribe a webhook."""
    return Parts(model(m.WebhookPublic), {"webhook_id": webhook_id})


@operation("GET", "/api/v1/me")
def me() -> Parts[m.Identity]:
    """The role of the client's API key (admin when the server takes no keys)."""
    return Parts(model(m.Identity))


@operation("GET", "/health")
def health() -> Parts[m.Health]:
    """Liveness: the API answers."""
    return Parts(model(m.Health))


@operation("GET", "/ready")
def ready() -> Parts[m.Readiness]:
    """Readiness: whether each store answered (a 503 answers the same body, not an error)."""
    return Parts(model(m.Readiness), also_ok=frozenset({503}))


@operation("GET", "/metrics")
def metrics() -> Parts[str]:
    """The Prometheus text (an admin key or the metrics token)."""
    return Parts(text)
