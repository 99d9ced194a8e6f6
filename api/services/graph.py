"""A node's bounded neighbourhood in a dataset: the graph explorer's (and any face's) one read.

The seed is a node id or an entity's name; the answer is the seed, the nodes one hop from it
(at most `limit` nodes in all, nearest first, as the graph port's `neighbourhood` reads them)
and the edges among them. Never the whole graph: the explorer expands node by node.
"""

from __future__ import annotations

from dataclasses import dataclass

from api.services import shown
from api.services.datasets import existing
from core.access import LOCAL, Caller
from core.errors import InvalidInput, NotFound
from core.models.graph import Edge, Node, entity_id
from core.models.vocabulary import ENTITY
from runtime import Runtime

MAX_NODES = 200
# A chunk mentions a few dozen entities at most, but the edges among 200 nodes could be many.
MAX_EDGES = 2000


class NodeNotFoundError(NotFound):
    """No node (or entity of that name) in the dataset: unknown, deleted, or another dataset's."""

    code = "node_not_found"

    def __init__(self, dataset: str, what: str) -> None:
        super().__init__(f"no node {what} in dataset {dataset!r}")
        self.dataset = dataset


@dataclass(frozen=True)
class Neighbourhood:
    """The seed node, its neighbours and the edges among them; `truncated` when the cap cut
    neighbours off."""

    dataset: str
    seed: str
    nodes: list[Node]
    edges: list[Edge]
    truncated: bool


def _seed(rt: Runtime, stored: str, shown: str, node: str | None, entity: str | None) -> Node:
    if (node is None) == (entity is None):
        raise InvalidInput("name the seed with exactly one of `node` (an id) or `entity` (a name)")
    if node is not None:
        found = rt.graph.get_nodes([node])
        what = repr(node)
    else:
        assert entity is not None
        found = rt.graph.get_nodes([entity_id(stored, entity)])
        if not found:  # an entity stored under another spelling's key keeps its shown name
            found = rt.graph.find_nodes(stored, ENTITY, name=entity, limit=1)
        what = f"for the entity {entity!r}"
    # Ids are global: a node of another dataset (another tenant's) is as unknown as none.
    if not found or found[0].dataset != stored:
        raise NodeNotFoundError(shown, what)
    return found[0]


def neighbourhood(
    rt: Runtime,
    dataset: str,
    *,
    node: str | None = None,
    entity: str | None = None,
    limit: int = 50,
    caller: Caller = LOCAL,
) -> Neighbourhood:
    """The node `node` (or the entity named `entity`) of the caller's dataset and at most
    `limit` - 1 of its direct neighbours, with the edges among them. Raises
    DatasetNotFoundError, NodeNotFoundError, InvalidInput for a bad seed or limit."""
    if not 1 <= limit <= MAX_NODES:
        raise InvalidInput(f"limit must be between 1 and {MAX_NODES}, got {limit}")
    stored = existing(rt, dataset, caller)
    seed = _seed(rt, stored, dataset, node, entity)
    # One more than asked tells whether the cap cut anything off.
    read = rt.graph.neighbourhood([seed.id], hops=1, limit=limit + 1)
    nodes = [n for n in read.nodes if n.dataset == stored]
    truncated = len(nodes) > limit
    nodes = nodes[:limit]
    kept = {n.id for n in nodes}
    edges = [e for e in read.edges if e.source in kept and e.target in kept]
    truncated = truncated or len(edges) > MAX_EDGES
    listed = [shown.graph_item(caller, n) for n in nodes]
    listed_edges = [shown.graph_item(caller, e) for e in edges[:MAX_EDGES]]
    return Neighbourhood(dataset, seed.id, listed, listed_edges, truncated)
