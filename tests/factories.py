"""Small builders of graph records for tests; ids follow the real identity rules."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from core.models.graph import Edge, Node, Support, entity_id, stable_id

Provenance = str | tuple[str, str] | Support | None


def make_support(doc: str = "d1", chunk: str = "c1") -> Support:
    """One (document, chunk) provenance pair."""
    return Support(document_id=doc, chunk_id=chunk)


def support_list(doc: str | None, chunk: str, extra: Iterable[Provenance] = ()) -> list[Support]:
    """`doc`/`chunk` as a support list (empty when doc is None) plus `extra` pairs."""
    items: list[Support] = [] if doc is None else [make_support(doc, chunk)]
    for item in extra:
        if isinstance(item, Support):
            items.append(item)
        elif isinstance(item, tuple):
            items.append(make_support(*item))
        elif item is not None:
            items.append(make_support(item, ""))
    return items


def node_id(dataset: str, name: str, type: str = "Entity") -> str:
    """The id `make_node` gives: the real entity id for entities, a stable id otherwise."""
    if type == "Entity":
        return entity_id(dataset, name)
    return stable_id(type.lower(), dataset, name)


def make_node(
    dataset: str = "ds1",
    name: str = "Alice",
    type: str = "Entity",
    *,
    doc: str | None = "d1",
    chunk: str = "c1",
    also: Iterable[Provenance] = (),
    **properties: Any,
) -> Node:
    """A node supported by (doc, chunk) and `also`; keyword arguments become properties."""
    return Node(
        id=node_id(dataset, name, type),
        type=type,
        dataset=dataset,
        name=name,
        properties=properties,
        support=support_list(doc, chunk, also),
    )


def make_edge(
    source: Node,
    target: Node,
    name: str = "RELATES_TO",
    *,
    doc: str | None = "d1",
    chunk: str = "c1",
    also: Iterable[Provenance] = (),
    **properties: Any,
) -> Edge:
    """An edge between two nodes, in the source's dataset; keyword arguments become properties."""
    return Edge(
        source=source.id,
        target=target.id,
        name=name,
        dataset=source.dataset,
        properties=properties,
        support=support_list(doc, chunk, also),
    )


def make_graph(
    dataset: str, nodes: int, edges: int, *, doc: str = "d1", type: str = "Entity"
) -> tuple[list[Node], list[Edge]]:
    """A deterministic graph: node i links to i+1, i+2, ... (mod n) until `edges` are made."""
    made = [
        make_node(dataset, f"node {i}", type, doc=doc, chunk=f"c{i}", rank=i) for i in range(nodes)
    ]
    links = [
        make_edge(made[i], made[(i + step) % nodes], doc=doc, chunk=f"c{i}")
        for step in range(1, edges // nodes + 2)
        for i in range(nodes)
    ]
    return made, links[:edges]


def ids(items: Sequence[Node | Edge]) -> set[str]:
    """The ids of nodes or edges, as a set."""
    return {item.id for item in items}


def support_pairs(item: Node | Edge) -> set[tuple[str, str]]:
    """An item's support as a set of (document_id, chunk_id) pairs."""
    return {(s.document_id, s.chunk_id) for s in item.support}
