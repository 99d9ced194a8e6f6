"""Graph export of a dataset as JSON Lines or GraphML, written page by page.

The stores are read page by page and text is yielded as it goes, so a dataset's whole graph
is never held in memory. The graph port has no paged edge read per dataset, so edges are
exported with the nodes: for each page of nodes (types in name order, nodes in id order), the
edges whose *source* is on that page, read with `edges_of`. Every node lands on exactly one
page, so every edge is written exactly once without remembering what was written. A window
(`offset`/`limit` over that node order) therefore holds the edges leaving its nodes, whose
targets may lie outside the window.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from api.services import shown
from api.services.datasets import existing
from core.access import LOCAL, Caller
from core.errors import InvalidInput
from core.models.graph import Edge, Node
from core.ports import GraphReader
from runtime import Runtime

NODE_PAGE = 500
EDGE_LIMIT = 10_000


@dataclass
class GraphPage:
    """One page of a dataset's nodes and the edges leaving them."""

    nodes: list[Node]
    edges: list[Edge]


def _edges_leaving(
    graph: GraphReader, dataset: str, ids: Sequence[str], limit: int
) -> Iterator[Edge]:
    """Edges of `dataset` whose source is in `ids`, each once, never cut short by `limit`.

    `edges_of` stops at `limit` in no stated order, so a full answer may be truncated: split
    the ids and ask again; one node with more edges than that gets a larger limit.
    """
    edges = graph.edges_of(ids, limit=limit)
    if len(edges) >= limit:
        if len(ids) > 1:
            half = len(ids) // 2
            yield from _edges_leaving(graph, dataset, ids[:half], limit)
            yield from _edges_leaving(graph, dataset, ids[half:], limit)
            return
        yield from _edges_leaving(graph, dataset, ids, limit * 2)
        return
    sources = set(ids)
    unique = {e.id: e for e in edges if e.source in sources and e.dataset == dataset}
    yield from unique.values()


def graph_pages(
    graph: GraphReader,
    dataset: str,
    *,
    offset: int = 0,
    limit: int | None = None,
    page: int = NODE_PAGE,
    edge_limit: int = EDGE_LIMIT,
) -> Iterator[GraphPage]:
    """A dataset's nodes from `offset` (at most `limit`), page by page, with their edges."""
    if offset < 0 or (limit is not None and limit < 0) or page < 1 or edge_limit < 1:
        raise InvalidInput(
            f"offset and limit must be >= 0 and page sizes >= 1, got offset={offset}, "
            f"limit={limit}, page={page}, edge_limit={edge_limit}"
        )
    remaining = limit
    counts = graph.count(dataset)
    for node_type in sorted(t for t in counts if t != "edges"):
        if offset >= counts[node_type]:  # skip whole types without reading them
            offset -= counts[node_type]
            continue
        while remaining is None or remaining > 0:
            size = page if remaining is None else min(page, remaining)
            nodes = graph.find_nodes(dataset, node_type, limit=size, offset=offset)
            if not nodes:
                break
            ids = [node.id for node in nodes]
            yield GraphPage(nodes, list(_edges_leaving(graph, dataset, ids, edge_limit)))
            offset += len(nodes)
            if remaining is not None:
                remaining -= len(nodes)
            if len(nodes) < size:
                break
        offset = 0
        if remaining == 0:
            return


# -- JSON Lines ---------------------------------------------------------------------------------


def node_record(node: Node) -> dict[str, Any]:
    return {"kind": "node", **node.model_dump(mode="json")}


def edge_record(edge: Edge) -> dict[str, Any]:
    return {"kind": "edge", "id": edge.id, **edge.model_dump(mode="json")}


def jsonl_lines(pages: Iterator[GraphPage]) -> Iterator[str]:
    """One JSON object per line: `{"kind": "node", ...}` or `{"kind": "edge", ...}`."""
    for chunk in pages:
        lines = [json.dumps(node_record(n), ensure_ascii=False) for n in chunk.nodes]
        lines += [json.dumps(edge_record(e), ensure_ascii=False) for e in chunk.edges]
        yield "".join(line + "\n" for line in lines)


# -- GraphML ------------------------------------------------------------------------------------

# Characters XML 1.0 cannot carry at all, even escaped.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
# (id, for, attr.name): complex values (properties, support) are JSON text.
GRAPHML_KEYS = [
    ("n_type", "node", "type"),
    ("n_name", "node", "name"),
    ("n_dataset", "node", "dataset"),
    ("n_properties", "node", "properties"),
    ("n_support", "node", "support"),
    ("e_name", "edge", "name"),
    ("e_dataset", "edge", "dataset"),
    ("e_properties", "edge", "properties"),
    ("e_support", "edge", "support"),
]


def _text(value: str) -> str:
    return escape(_NOT_XML.sub("", value))


def _attr(value: str) -> str:
    return quoteattr(_NOT_XML.sub("", value))


def _data(key: str, value: str) -> str:
    return f'<data key="{key}">{_text(value)}</data>'


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _graphml_node(node: Node) -> str:
    support = [s.model_dump() for s in node.support]
    data = [
        _data("n_type", node.type),
        _data("n_name", node.name),
        _data("n_dataset", node.dataset),
        _data("n_properties", _json(node.properties)),
        _data("n_support", _json(support)),
    ]
    return f"<node id={_attr(node.id)}>{''.join(data)}</node>\n"


def _graphml_edge(edge: Edge) -> str:
    support = [s.model_dump() for s in edge.support]
    data = [
        _data("e_name", edge.name),
        _data("e_dataset", edge.dataset),
        _data("e_properties", _json(edge.properties)),
        _data("e_support", _json(support)),
    ]
    ends = f"source={_attr(edge.source)} target={_attr(edge.target)}"
    return f"<edge id={_attr(edge.id)} {ends}>{''.join(data)}</edge>\n"


def graphml_lines(pages: Iterator[GraphPage], dataset: str) -> Iterator[str]:
    """A GraphML document (directed graph), written page by page."""
    keys = "".join(
        f'<key id="{key}" for="{kind}" attr.name="{name}" attr.type="string"/>\n'
        for key, kind, name in GRAPHML_KEYS
    )
    yield (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">\n'
        f'{keys}<graph id={_attr(dataset)} edgedefault="directed">\n'
    )
    for chunk in pages:
        yield "".join(map(_graphml_node, chunk.nodes)) + "".join(map(_graphml_edge, chunk.edges))
    yield "</graph>\n</graphml>\n"


EXPORT_FORMATS: dict[str, tuple[str, str]] = {
    # format -> (media type, file extension)
    "jsonl": ("application/x-ndjson", "jsonl"),
    "graphml": ("application/graphml+xml", "graphml"),
}


def _as_shown(pages: Iterator[GraphPage], caller: Caller) -> Iterator[GraphPage]:
    for page in pages:
        nodes = [shown.graph_item(caller, node) for node in page.nodes]
        yield GraphPage(nodes, [shown.graph_item(caller, edge) for edge in page.edges])


def export_lines(
    graph: GraphReader, dataset: str, fmt: str, *, caller: Caller = LOCAL, **window: Any
) -> Iterator[str]:
    """The stored dataset's graph as text chunks of `fmt` (jsonl or graphml), its names as the
    caller knows them (a tenant's dataset, blob keys... without the tenant). InvalidInput for an
    unknown format."""
    if fmt not in EXPORT_FORMATS:
        raise InvalidInput(f"unknown export format {fmt!r}; use one of {', '.join(EXPORT_FORMATS)}")
    pages = _as_shown(graph_pages(graph, dataset, **window), caller)
    if fmt == "jsonl":
        return jsonl_lines(pages)
    return graphml_lines(pages, shown.name(caller, dataset))


def export_graph(
    rt: Runtime,
    dataset: str,
    fmt: str,
    *,
    offset: int = 0,
    limit: int | None = None,
    caller: Caller = LOCAL,
) -> Iterator[str]:
    """The dataset's nodes from `offset` (at most `limit`) and the edges leaving them, as text
    chunks of `fmt`. Raises DatasetNotFoundError, InvalidInput for an unknown format or window,
    before the first chunk is asked for."""
    stored = existing(rt, dataset, caller)
    if fmt not in EXPORT_FORMATS:
        raise InvalidInput(f"unknown export format {fmt!r}; use one of {', '.join(EXPORT_FORMATS)}")
    return export_lines(rt.graph, stored, fmt, caller=caller, offset=offset, limit=limit)
