"""A node's bounded neighbourhood in a dataset (api/services/graph.py), for the graph explorer."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from api.http.deps import DatasetName, Reader, RuntimeDep
from api.http.schemas import error_responses
from api.services import graph as service
from core.models.graph import Edge, Node, Support

router = APIRouter(prefix="/api/v1/datasets", tags=["datasets"])

# A hub entity is supported by every chunk that mentions it: the answer lists the first few.
SUPPORT_SHOWN = 20


class GraphNodePublic(BaseModel):
    """A node of the neighbourhood: what it is, its properties and where it came from."""

    id: str
    type: str
    name: str
    properties: dict[str, Any] = Field(default_factory=dict)
    support: list[Support] = Field(
        default_factory=list, description=f"The first {SUPPORT_SHOWN} (document, chunk) pairs"
    )
    support_total: int = Field(description="How many (document, chunk) pairs support the node")

    @classmethod
    def from_node(cls, node: Node) -> GraphNodePublic:
        return cls(
            id=node.id,
            type=node.type,
            name=node.name,
            properties=node.properties,
            support=node.support[:SUPPORT_SHOWN],
            support_total=len(node.support),
        )


class GraphEdgePublic(BaseModel):
    """A directed, named edge between two nodes of the neighbourhood."""

    source: str
    target: str
    name: str
    properties: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def from_edge(cls, edge: Edge) -> GraphEdgePublic:
        return cls(
            source=edge.source, target=edge.target, name=edge.name, properties=edge.properties
        )


class NeighbourhoodPublic(BaseModel):
    """The seed node, its direct neighbours (nearest first) and the edges among them."""

    dataset: str
    node: str = Field(description="The seed node's id")
    nodes: list[GraphNodePublic]
    edges: list[GraphEdgePublic]
    truncated: bool = Field(description="The node cap (`limit`) cut neighbours off")


@router.get(
    "/{name}/graph/neighbourhood",
    response_model=NeighbourhoodPublic,
    responses=error_responses(400, 404, 422, 503),
)
def get_neighbourhood(
    name: DatasetName,
    runtime: RuntimeDep,
    caller: Reader,
    node: Annotated[
        str | None, Query(min_length=1, max_length=200, description="The seed node's id")
    ] = None,
    entity: Annotated[
        str | None, Query(min_length=1, max_length=500, description="Or an entity's name")
    ] = None,
    limit: Annotated[
        int, Query(ge=1, le=service.MAX_NODES, description="At most this many nodes, seed included")
    ] = 50,
) -> NeighbourhoodPublic:
    """A node and its direct neighbours (depth 1, at most `limit` nodes), with the edges among
    them; expand by asking again for a neighbour. Name the node by `node` (an id from a search
    result's sources or an earlier answer) or `entity` (an entity's name)."""
    found = service.neighbourhood(
        runtime, name, node=node, entity=entity, limit=limit, caller=caller
    )
    return NeighbourhoodPublic(
        dataset=found.dataset,
        node=found.seed,
        nodes=[GraphNodePublic.from_node(n) for n in found.nodes],
        edges=[GraphEdgePublic.from_edge(e) for e in found.edges],
        truncated=found.truncated,
    )
