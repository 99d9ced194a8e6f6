"""Row-level work of the embedded graph store (see graph.py), each function run inside a
transaction on its connection: JSON columns, id sets, rows back to nodes and edges with their
support, edge writes and removals."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from core.models.graph import Edge, Merged, Node, NodeChunks, Removed, Support
from core.sequences import batched
from core.stores import graph_merge
from core.stores.sqlite import facts as facts
from core.stores.sqlite import queries as q


def dumps(value: Any) -> str:
    """Compact JSON; values JSON cannot hold (dates, ...) are stored as their str()."""
    if not value:
        return "{}"  # most edges carry no properties; skips a costly json.dumps call
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def loads(text: str) -> dict[str, Any]:
    """Stored properties back as a dict."""
    return {} if text == "{}" else json.loads(text)


def id_array(ids: Iterable[str]) -> str:
    """An id collection as the JSON array that `q.SET1`/`q.SET2` read."""
    return json.dumps(list(ids))


def merge_properties(old: str, new: str) -> str:
    """Shallow merge of two JSON objects, the keys of `new` winning (an SQL function)."""
    if new == "{}":
        return old
    merged = json.loads(old)
    merged.update(json.loads(new))
    return dumps(merged)


def column(conn: sqlite3.Connection, query: str, params: Sequence[Any]) -> list[str]:
    """The first column of a query's rows."""
    return [row[0] for row in conn.execute(query, params)]


def write_edges(conn: sqlite3.Connection, edges: Sequence[Edge]) -> None:
    """Upsert edges whose ends are stored, with their support and claims (the validity of
    the facts they touch derived again)."""
    rows = [(e.id, e.source, e.name, e.target, e.dataset, dumps(e.properties)) for e in edges]
    support = [(e.id, s.document_id, s.chunk_id) for e in edges for s in e.support]
    conn.executemany(q.UPSERT_EDGE, rows)
    conn.executemany(q.ADD_SUPPORT, support)
    facts.write_claims(conn, edges)


def merge(conn: sqlite3.Connection, ids: Sequence[str], into: str) -> Merged:
    """`merge_nodes` inside the caller's write transaction."""
    rows = conn.execute(f"SELECT id, dataset FROM nodes WHERE id IN {q.SET1}", (id_array([into]),))
    [dataset] = [d for _, d in rows] or [None]
    if dataset is None:
        raise ValueError(f"cannot merge into {into!r}: it is not a stored node")
    members = sorted(set(column(conn, q.STORED_NODES, (id_array(ids),))) - {into})
    if not members:
        return Merged()
    support = support_of(conn, members)
    conn.executemany(
        q.ADD_SUPPORT, [(into, s.document_id, s.chunk_id) for m in members for s in support[m]]
    )
    touching = to_edges(
        conn, conn.execute(f"{q.EDGE_COLUMNS} WHERE {q.TOUCHING}", (id_array(members),))
    )
    moved = graph_merge.repoint(
        sorted(facts.with_claims(conn, touching), key=lambda e: (e.source, e.name, e.target)),
        dict.fromkeys(members, into),
    )
    removed = remove(conn, members, [], derive=False)  # the moved edges' write derives
    write_edges(conn, moved)
    conn.execute(q.ADD_REDIRECTS, (id_array(members), dataset, into))
    return Merged(node_ids=removed.node_ids, edge_ids=removed.edge_ids, support=support)


def resolve(conn: sqlite3.Connection, missing: Iterable[str]) -> dict[str, str]:
    """Missing node ids that redirects lead to a stored node: id -> that node."""
    return graph_merge.resolve(
        missing,
        lambda ids: dict(conn.execute(q.REDIRECTS, (id_array(ids),)).fetchall()),
        lambda ids: set(column(conn, q.STORED_NODES, (id_array(ids),))),
    )


def raise_if_missing(missing: Sequence[str]) -> None:
    """ValueError naming a few edge endpoints that are not stored nodes."""
    if missing:
        raise ValueError(
            f"{len(missing)} edge endpoint(s) are not stored nodes, e.g. "
            f"{sorted(missing)[:3]}; upsert the nodes before their edges"
        )


def load_nodes(
    conn: sqlite3.Connection, ids: Iterable[str], *, ordered: bool = False
) -> list[Node]:
    """Nodes with these ids, in storage order (or in the order of `ids`)."""
    ids = list(ids)
    nodes = to_nodes(conn, conn.execute(f"{q.NODE_COLUMNS} WHERE id IN {q.SET1}", (id_array(ids),)))
    if not ordered:
        return nodes
    by_id = {node.id: node for node in nodes}
    return [by_id[i] for i in ids if i in by_id]


def time_branch(
    conn: sqlite3.Connection,
    dataset: str,
    type_: str,
    branch: tuple[int, int | None, int | None],
    start: int | None,
    end: int | None,
    limit: int,
) -> list[tuple]:
    """One bin's overlapping nodes as `timeline.order_key`-like tuples ending with the id."""
    time_bin, low, high = branch
    query = "SELECT lo, hi, id FROM node_times WHERE dataset = ? AND type = ? AND bin = ?"
    params: list[Any] = [dataset, type_, time_bin]
    # Only the bounds that exist, so that SQLite sees a plain range on `pos`.
    for clause, value in (("pos > ?", low), ("pos < ?", high)):
        if value is not None:
            query, params = f"{query} AND {clause}", [*params, value]
    if start is not None:
        query, params = f"{query} AND (hi IS NULL OR hi > ?)", [*params, start]
    if end is not None:
        query, params = f"{query} AND (lo IS NULL OR lo < ?)", [*params, end]
    rows = conn.execute(f"{query} ORDER BY pos, hi, id LIMIT ?", [*params, limit])
    return [(lo is not None, lo or 0, hi is None, hi or 0, i) for lo, hi, i in rows]


def to_nodes(conn: sqlite3.Connection, rows: Iterable[tuple]) -> list[Node]:
    """Node records from `q.NODE_COLUMNS` rows, with their support."""
    rows = list(rows)
    support = support_of(conn, [row[0] for row in rows])
    return [
        Node(id=i, type=t, dataset=d, name=n, properties=loads(p), support=support[i])
        for i, t, d, n, p in rows
    ]


def to_edges(conn: sqlite3.Connection, rows: Iterable[tuple]) -> list[Edge]:
    """Edge records from `q.EDGE_COLUMNS` rows, with their support."""
    rows = list(rows)
    support = support_of(conn, [row[0] for row in rows])
    return [
        Edge(source=s, name=n, target=t, dataset=d, properties=loads(p), support=support[i])
        for i, s, n, t, d, p in rows
    ]


def support_of(conn: sqlite3.Connection, item_ids: list[str]) -> dict[str, list[Support]]:
    """The support of each item, read in one query."""
    support: dict[str, list[Support]] = {item_id: [] for item_id in item_ids}
    query = f"SELECT item_id, document_id, chunk_id FROM support WHERE item_id IN {q.SET1}"
    for item_id, document_id, chunk_id in conn.execute(query, (id_array(support),)):
        support[item_id].append(Support(document_id=document_id, chunk_id=chunk_id))
    return support


def remove(
    conn: sqlite3.Connection,
    node_ids: list[str],
    edge_ids: list[str],
    *,
    changed: Sequence[str] = (),
    derive: bool = True,
) -> Removed:
    """Delete nodes, edges and the edges the nodes leave dangling, with their support and
    claims; then (`derive`) the validity of the facts whose groups lost an edge, or hold one
    of the `changed` edges, is derived again."""
    nodes = id_array(node_ids)
    edge_set = set(edge_ids).union(
        column(conn, f"SELECT id FROM edges WHERE {q.TOUCHING}", (nodes,))
    )
    subjects, loose = facts.touched(conn, edge_set.union(changed)) if derive else (set(), set())
    edges = id_array(edge_set)
    conn.execute(f"DELETE FROM edges WHERE id IN {q.SET1}", (edges,))
    conn.execute(f"DELETE FROM nodes WHERE id IN {q.SET1}", (nodes,))
    conn.execute(f"DELETE FROM node_times WHERE id IN {q.SET1}", (nodes,))
    for items in (nodes, edges):
        conn.execute(f"DELETE FROM support WHERE item_id IN {q.SET1}", (items,))
    conn.execute(f"DELETE FROM claims WHERE item_id IN {q.SET1}", (edges,))
    facts.derive(conn, subjects - set(node_ids), loose - edge_set)
    return Removed(node_ids=sorted(set(node_ids)), edge_ids=sorted(edge_set))


def node_chunks(
    conn: sqlite3.Connection, ids: list[str], type: str, most: int | None
) -> dict[str, NodeChunks]:
    """`SQLiteGraphStore.node_chunks`: a node with more than `most` support records counts
    them (empty chunk ids too, as Neo4j counts its support relationships), unlisted."""
    names = dict(conn.execute(q.NAMES_OF_TYPE, (id_array(ids), type)))
    records: dict[str, list[str]] = {i: [] for i in names}
    for item_id, chunk_id in conn.execute(q.SUPPORT_CHUNKS, (id_array(names),)):
        records[item_id].append(chunk_id)
    found = {}
    for i in (i for i in ids if i in names):
        if most is not None and len(records[i]) > most:
            found[i] = NodeChunks(names[i], [], len(records[i]))
        else:
            distinct = list(dict.fromkeys(c for c in records[i] if c))
            found[i] = NodeChunks(names[i], distinct, len(distinct))
    return found


def count(
    conn: sqlite3.Connection,
    dataset: str,
    edge_names: bool = False,
    documents: Sequence[str] | None = None,
) -> dict[str, int]:
    """Node counts per type and the edge count (key "edges") of a dataset; with `edge_names`,
    also the edges per name (key "edges:NAME"); with `documents`, of what they support."""
    if documents is None:
        by_type = "SELECT type, count(*) FROM nodes WHERE dataset = ?1 GROUP BY type"
        by_name = "SELECT name, count(*) FROM edges WHERE dataset = ?1 GROUP BY name"
        args: tuple[str, ...] = (dataset,)
    else:
        by_type, by_name = q.SUPPORTED_TYPES, q.SUPPORTED_NAMES
        args = (dataset, id_array(documents))
    counts = dict(conn.execute(by_type, args).fetchall())
    named = dict(conn.execute(by_name, args).fetchall())
    counts["edges"] = sum(named.values())
    if edge_names:
        counts |= {f"edges:{name}": n for name, n in named.items()}
    return counts


def total(conn: sqlite3.Connection, datasets: Sequence[str], node_type: str, key: str) -> int:
    """The sum of the integer property `key` over the datasets' nodes of a type."""
    path, found = "$." + json.dumps(key), 0  # a quoted JSON path: any key is literal
    for part in batched(list(dict.fromkeys(datasets)), 500):
        marks = ",".join("?" * len(part))
        query = (
            "SELECT coalesce(sum(json_extract(properties, ?)), 0) FROM nodes"
            f" WHERE dataset IN ({marks}) AND type = ?"
        )
        found += int(conn.execute(query, (path, *part, node_type)).fetchone()[0])
    return found
