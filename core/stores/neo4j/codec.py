"""The stored form of graph nodes and edges on Neo4j (see graph.py): property encoding,
support pairs and links, write rows, and domain models back from `q.NODE` / `q.EDGE` maps."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from neo4j import ManagedTransaction

from core.models.graph import Edge, FactClaim, Node, NodeChunks, Support

_RESERVED = frozenset({"id", "type", "dataset", "name"})
_LABEL = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_INT64 = range(-(2**63), 2**63)


# One encoder for every value: json.dumps builds a new one per call when given options, and
# writes encode a support pair per edge and link (the largest project line in a worker profile).
_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str)


def to_json(value: Any) -> str:
    """Compact JSON; values JSON cannot hold (dates, ...) become their str(), as in sqlite/graph."""
    return _JSON.encode(value)


def _storable(value: Any) -> bool:
    """Whether Neo4j stores `value` as a property and gives back exactly the same value."""
    kinds = (str, bool, int, float)
    if isinstance(value, list) and value:
        first = type(value[0])
        return first in kinds and all(type(v) is first for v in value) and _storable(value[0])
    return type(value) in kinds and (type(value) is not int or value in _INT64)


def encode(properties: dict[str, Any]) -> dict[str, Any]:
    """Properties as a `SET +=` map: one form of each key set, the other nulled."""
    encoded: dict[str, Any] = {}
    for key, value in properties.items():
        plain_key = key not in _RESERVED and not key.startswith("_")
        if plain_key and _storable(value):
            encoded[key], encoded[f"_j_{key}"] = value, None
        else:
            encoded[f"_j_{key}"] = to_json(value)
            if plain_key:
                encoded[key] = None
    return encoded


def decode(stored: dict[str, Any]) -> dict[str, Any]:
    """User properties back from a stored property map."""
    properties: dict[str, Any] = {}
    for key, value in stored.items():
        if key.startswith("_j_"):
            properties[key[3:]] = json.loads(value)
        elif not key.startswith("_") and key not in _RESERVED:
            properties[key] = value
    return properties


def strings(*values: str) -> str:
    """`to_json` of a list of strings; joined as they are when JSON would not escape any
    character of them (no quote, backslash or control character), the encoder otherwise."""
    joined = '","'.join(values)  # holds 2 quotes per separator, and no others if plain
    if joined.count('"') == 2 * len(values) - 2 and "\\" not in joined and joined.isprintable():
        return f'["{joined}"]'
    return to_json(list(values))


def pair(support: Support) -> str:
    """A support pair as stored: JSON, so that no id can make a pair ambiguous."""
    return strings(support.document_id, support.chunk_id)


def links(nodes: Iterable[tuple[str, str, Iterable[Support]]]) -> list[dict[str, str]]:
    """`q.LINK_SUPPORT` rows for (id, dataset, support) triples, in lock order."""
    links = [
        {
            "key": strings(dataset, s.document_id, s.chunk_id),
            "dataset": dataset,
            "doc": s.document_id,
            "pair": pair(s),
            "node": node_id,
        }
        for node_id, dataset, support in nodes
        for s in support
    ]
    return sorted(links, key=lambda link: (link["key"], link["node"]))


def support(stored: dict[str, Any]) -> list[Support]:
    """Support records from a stored (or `q.NODE`-projected) `_support` list."""
    pairs = (json.loads(item) for item in stored.get("_support", ()))
    return [Support(document_id=doc, chunk_id=chunk) for doc, chunk in pairs]


def node_chunks(rows: Iterable[list[Any]], most: int | None) -> dict[str, NodeChunks]:
    """`q.NODE_CHUNKS` rows `[id, name, supports, items]` by id; past `most` a hub: the
    count of its support records, its chunks unread."""
    found = {}
    for node_id, name, supports, items in rows:
        if node_id is None:  # deleted while the read ran
            continue
        if most is not None and supports > most:
            found[node_id] = NodeChunks(name or "", [], supports)
        else:
            ids = chunk_ids(items)
            found[node_id] = NodeChunks(name or "", ids, len(ids))
    return found


def chunk_ids(items: Iterable[str | list[str]]) -> list[str]:
    """The distinct non-empty chunk ids of support pairs the query split at their quotes (a
    chunk id each; `[pair]`, JSON-decoded here, when an id holds a quote or an escape)."""
    found = (item if isinstance(item, str) else str(json.loads(item[0])[1]) for item in items)
    return list(dict.fromkeys(chunk for chunk in found if chunk))


def nodes(maps: Iterable[dict[str, Any]]) -> list[Node]:
    """Nodes from `q.NODE` maps. One that another transaction deleted while this read ran
    (read committed) comes back without its properties: it is gone, so it is left out."""
    return [_node(p) for p in maps if "id" in p]


def edges(records: Iterable[dict[str, Any]], *, claims: bool = False) -> list[Edge]:
    """Edges from `q.EDGE` maps, without the ones deleted while the read ran (see nodes);
    with their claims (facts.py) when asked."""
    found = [(r, _edge(r)) for r in records if "name" in r["p"] and None not in (r["s"], r["t"])]
    if claims:
        for record, edge in found:
            edge.claims = claims_of(record["p"].get("_claims"))
    return [edge for _, edge in found]


def claims_of(stored: Iterable[str] | None) -> list[FactClaim]:
    """Claims back from a stored `_claims` list (core/stores/neo4j/facts.py)."""
    found = []
    for item in stored or ():
        doc, chunk, start, end, recorded, *weak = json.loads(item)
        found.append(
            FactClaim(
                document_id=doc,
                chunk_id=chunk,
                start=start,
                end=end,
                from_document=bool(weak and weak[0]),
                recorded_at=recorded,
            )
        )
    return found


def _node(p: dict[str, Any]) -> Node:
    """A Node from a `q.NODE` map."""
    return Node(
        id=p["id"],
        type=p["type"],
        dataset=p["dataset"],
        name=p.get("name", ""),
        properties=decode(p),
        support=support(p),
    )


def _edge(record: dict[str, Any]) -> Edge:
    """An Edge from an `q.EDGE` map."""
    p = record["p"]
    return Edge(
        source=record["s"],
        target=record["t"],
        name=p["name"],
        dataset=p["dataset"],
        properties=decode(p),
        support=support(p),
    )


def node_row(node: Node) -> dict[str, Any]:
    """A write row for `q.UPSERT_NODES`."""
    labels = [node.type] if _LABEL.fullmatch(node.type) and node.type != "Node" else []
    return {
        "id": node.id,
        "type": node.type,
        "dataset": node.dataset,
        "name": node.name,
        "labels": labels,
        "props": encode(node.properties),
    }


def edge_row(edge: Edge) -> dict[str, Any]:
    """A write row for `q.UPSERT_EDGES`."""
    return {
        "id": edge.id,
        "source": edge.source,
        "target": edge.target,
        "name": edge.name,
        "dataset": edge.dataset,
        "props": encode(edge.properties),
        "support": list(dict.fromkeys(pair(s) for s in edge.support)),
        "docs": list(dict.fromkeys(s.document_id for s in edge.support)),
    }


def value(tx: ManagedTransaction, query: str, **params: Any) -> Any:
    """The one value a query returns.

    Reads collect their rows into one list: the driver decodes each record as a message of
    its own, and a record per item made a 200-node read 1.4x (4x with neo4j-rust-ext) slower.
    """
    return tx.run(query, params).single(strict=True)[0]
