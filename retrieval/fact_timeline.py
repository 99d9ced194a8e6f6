"""An entity's facts over time with their sources (`cogmill facts`, GET .../facts): every
relationship of the entity, when it held (world time), when cogmill learnt it and learnt that
it ended (system time), what superseded it, and which passages said what, in time order.

Bounded: at most `limit` facts (`truncated` says when more were left out), the entity's name
and the relation filter capped in length; `as_of` and `known_at` mark which facts held then
(retrieval/fact_view.py) and leave out what was not recorded by `known_at`.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from core.errors import InvalidInput, NotFound
from core.models.facts import (
    FACT_GROUP,
    RECORDED_AT,
    RETIRED_AT,
    SUPERSEDED_BY,
    VALID_FROM,
    VALID_SPANS,
    VALID_TO,
)
from core.models.graph import Edge, FactClaim, alias_id, entity_id
from core.models.vocabulary import ALIAS_OF, STRUCTURAL_EDGES, relation_label
from core.ports import GraphReader
from core.temporal import iso_day
from retrieval.fact_view import FactView, system_time

MAX_LIMIT = 1000
MAX_NAME = 200


class EntityNotFoundError(NotFound):
    """No entity of that name in the dataset (nor an alias of one)."""

    code = "entity_not_found"


class FactSource(BaseModel):
    """One passage that stated the fact: its document, chunk, and the time it gave."""

    document_id: str
    document_name: str
    chunk_id: str
    said_from: str | None = None
    said_until: str | None = None
    recorded_at: str | None = None


class Fact(BaseModel):
    """One relationship of the entity and its two clocks."""

    source: str
    relation: str
    target: str
    group: str | None = None
    valid_from: str | None = None
    valid_to: str | None = None
    spans: list[list[str | None]] = Field(default_factory=list)
    holds: bool = True  # in the view asked (now, or as_of / known_at)
    superseded_by: str | None = None  # the superseding fact, "source —relation→ target"
    recorded_at: str | None = None
    retired_at: str | None = None
    sources: list[FactSource] = Field(default_factory=list)


class FactTimeline(BaseModel):
    entity: str
    dataset: str
    facts: list[Fact] = Field(default_factory=list)
    truncated: bool = False


def timeline(
    graph: GraphReader,
    dataset: str,
    entity: str,
    *,
    relation: str | None = None,
    view: FactView | None = None,
    limit: int = 100,
) -> FactTimeline:
    """The entity's facts in time order. InvalidInput for a bad bound, EntityNotFoundError."""
    view = view or FactView()
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    if not entity.strip() or len(entity) > MAX_NAME or len(relation or "") > MAX_NAME:
        raise InvalidInput(f"give an entity name (and relation) of 1 to {MAX_NAME} characters")
    node = _entity(graph, dataset, entity)
    wanted = set(relation.lower().replace("_", " ").split()) if relation else set()
    edges = [
        e
        for e in graph.edges_of(
            [node], exclude=sorted(STRUCTURAL_EDGES), claims=True, limit=MAX_LIMIT * 2
        )
        if not wanted
        or wanted <= set(relation_label(e.name).lower().split())
        or e.properties.get(FACT_GROUP) in wanted
    ]
    edges = [e for e in edges if view.weight(e.properties) > 0]  # recorded by known_at
    edges.sort(key=_order)
    truncated, edges = len(edges) > limit, edges[:limit]
    names = {
        n.id: n.name
        for n in graph.get_nodes(sorted({i for e in edges for i in (e.source, e.target)}))
    }
    docs = {
        d.id: d.name
        for d in graph.get_nodes(sorted({c.document_id for e in edges for c in e.claims}))
    }
    lines = {
        e.id: f"{names.get(e.source, '?')} —{e.name}→ {names.get(e.target, '?')}" for e in edges
    }
    facts = [_fact(e, names, docs, lines, view) for e in edges]
    return FactTimeline(
        entity=names.get(node, entity), dataset=dataset, facts=facts, truncated=truncated
    )


def _entity(graph: GraphReader, dataset: str, name: str) -> str:
    """The id of the entity called `name` (or named by that alias)."""
    eid, aid = entity_id(dataset, name), alias_id(dataset, name)
    found = graph.existing([eid, aid])
    if eid in found:
        return eid
    if aid in found:
        for edge in graph.edges_of([aid], names=[ALIAS_OF], limit=1):
            return edge.target
    raise EntityNotFoundError(
        f"dataset {dataset!r} has no entity named {name!r}; search for it to find its name"
    )


def _order(edge: Edge) -> tuple:
    props = edge.properties
    first = (props.get(VALID_SPANS) or [[None]])[0][0]
    return (props.get(FACT_GROUP) or edge.name, first is not None, first or 0, edge.id)


def _fact(
    edge: Edge, names: dict[str, str], docs: dict[str, str], lines: dict[str, str], view: FactView
) -> Fact:
    p = edge.properties
    ender = p.get(SUPERSEDED_BY)
    return Fact(
        source=names.get(edge.source, edge.source),
        relation=edge.name,
        target=names.get(edge.target, edge.target),
        group=p.get(FACT_GROUP),
        valid_from=p.get(VALID_FROM),
        valid_to=p.get(VALID_TO),
        spans=[[_day(s), _day(e)] for s, e in p.get(VALID_SPANS) or ()],
        holds=view.weight(p) >= 1.0,
        superseded_by=lines.get(ender, ender) if ender else None,
        recorded_at=system_time(p.get(RECORDED_AT)),
        retired_at=system_time(p.get(RETIRED_AT)),
        sources=[_source(c, docs) for c in sorted(edge.claims, key=_claim_order)],
    )


def _source(claim: FactClaim, docs: dict[str, str]) -> FactSource:
    return FactSource(
        document_id=claim.document_id,
        document_name=docs.get(claim.document_id, ""),
        chunk_id=claim.chunk_id,
        said_from=_day(claim.start),
        said_until=_day(claim.end),
        recorded_at=system_time(claim.recorded_at),
    )


def _claim_order(claim: FactClaim) -> tuple:
    day = claim.start if claim.start is not None else claim.end
    return (day is not None, day or 0, claim.document_id, claim.chunk_id)


def _day(day: int | None) -> str | None:
    return None if day is None else iso_day(day)
