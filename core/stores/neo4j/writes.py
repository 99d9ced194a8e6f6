"""Write transaction functions of the Neo4j graph store (see graph.py): upserts, merges
and deletes. The driver re-runs each one whole on a transient error."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from neo4j import ManagedTransaction

from core.models.graph import Edge, Merged, Removed
from core.ports import StoreError
from core.stores import graph_merge, timeline
from core.stores.neo4j import codec as codec
from core.stores.neo4j import facts as facts
from core.stores.neo4j import queries as q
from core.stores.neo4j.connection import Rows

# Writes of a batch of nodes, while other transactions delete some of them (see write_nodes).
_NODE_WRITES = 5


def write_nodes(
    tx: ManagedTransaction, rows: Sequence[dict[str, Any]], links: Sequence[dict[str, str]]
) -> None:
    """Merge one batch of nodes (binning their times when any has one), then their support.

    A node another transaction deleted while this one waited for its lock (a purge, a merge)
    is matched by MERGE and written to nowhere, without an error (Neo4j 5.26, read
    committed): the rows whose node is not stored afterwards are merged again, which creates
    them, so the support links and the edges that follow find their nodes.
    """
    timed = any(timeline.START in r["props"] or timeline.END in r["props"] for r in rows)
    query = f"{q.UPSERT_NODES} {q.TIME_BIN}" if timed else q.UPSERT_NODES
    pending = list(rows)
    for _ in range(_NODE_WRITES):
        tx.run(query, rows=Rows(pending)).consume()
        stored = set(codec.value(tx, q.STORED, ids=[r["id"] for r in pending]))
        pending = [r for r in pending if r["id"] not in stored]
        if not pending:
            break
    else:
        raise StoreError(f"{len(pending)} node(s) deleted by other writers as fast as written")
    if links:
        tx.run(q.LINK_SUPPORT, links=Rows(links)).consume()


def write_edges(tx: ManagedTransaction, edges: Sequence[Edge]) -> None:
    """Merge one batch of edges, their ends locked first. An end merged away stands for the
    node its redirects lead to; one deleted since the check rolls the batch back."""
    ends = sorted({e.source for e in edges} | {e.target for e in edges})
    missing = set(ends).difference(_lock(tx, ends))
    if missing:
        moves = _resolve(tx, missing, lock=True)
        raise_if_missing(sorted(missing - moves.keys()))
        edges = graph_merge.repoint(edges, moves)
    now = facts.now()
    rows = sorted(
        ({**codec.edge_row(e), "claims": facts.claim_rows(e, now)} for e in edges),
        key=lambda r: (r["source"], r["target"]),
    )
    tx.run(q.UPSERT_EDGES, rows=Rows(rows)).consume()
    facts.derive(tx, facts.timed(edges))


def _lock(tx: ManagedTransaction, ids: list[str]) -> set[str]:
    """Write-lock these nodes in the order given; which of them are stored once locked.

    Read again after the locks are held: a node that another transaction deleted while this
    one waited for its lock was matched before the wait, and MATCH would now skip it silently.
    """
    codec.value(tx, q.LOCK_ENDS, ids=ids)
    return set(codec.value(tx, q.STORED, ids=ids))


def _resolve(tx: ManagedTransaction, missing: Iterable[str], *, lock: bool) -> dict[str, str]:
    """Missing node ids that redirects lead to a stored node (locked if `lock`): id -> node."""
    return graph_merge.resolve(
        missing,
        lambda ids: dict(codec.value(tx, q.REDIRECTS, ids=ids)),
        (lambda ids: _lock(tx, ids))
        if lock
        else (lambda ids: set(codec.value(tx, q.STORED, ids=ids))),
    )


def unresolved(tx: ManagedTransaction, ids: list[str]) -> list[str]:
    """The ids that are neither stored nodes nor redirected to one."""
    missing = codec.value(tx, q.MISSING, ids=ids)
    return sorted(set(missing) - _resolve(tx, missing, lock=False).keys()) if missing else []


def merge(tx: ManagedTransaction, ids: list[str], into: str) -> Merged:
    """`merge_nodes` in one transaction: lock the members and the target in id order (as
    upserts do), read the members' support and edges under those locks, link the support to
    the target, delete the members (DELETE_NODES keeps the _Support nodes, which now support
    the target too), write the re-pointed edges and record the redirects."""
    stored = _lock(tx, sorted({*ids, into}))
    if into not in stored:
        raise ValueError(f"cannot merge into {into!r}: it is not a stored node")
    members = sorted(stored - {into})
    if not members:
        return Merged()
    links = codec.value(tx, q.MEMBER_SUPPORT, ids=members)
    pairs: dict[str, list[str]] = {m: [] for m in members}
    for member, _, pair in links:
        pairs[member].append(pair)
    if links:
        tx.run(q.MOVE_SUPPORT, into=into, keys=sorted({k for _, k, _ in links})).consume()
    touching = codec.edges(codec.value(tx, q.MEMBER_EDGES, ids=members), claims=True)
    moved = graph_merge.repoint(
        sorted(touching, key=lambda e: (e.source, e.name, e.target)), dict.fromkeys(members, into)
    )
    # The moved edges' write derives their facts again.
    removed = delete(tx, node_query=q.DELETE_NODES, params={"ids": members}, derive=False)
    if moved:
        write_edges(tx, moved)
    dataset = codec.value(tx, "MATCH (n:Node {id: $id}) RETURN n.dataset", id=into)
    tx.run(q.REDIRECT, ids=members, dataset=dataset, into=into).consume()
    support = {m: codec.support({"_support": p}) for m, p in pairs.items()}
    return Merged(node_ids=removed.node_ids, edge_ids=removed.edge_ids, support=support)


def move_support(tx: ManagedTransaction, batch: int) -> int:
    """Move one batch of nodes' support from their old `_support` lists to `_Support` nodes."""
    rows = codec.value(tx, q.OLD_SUPPORT, batch=batch)
    tx.run(
        q.LINK_SUPPORT,
        links=codec.links((i, ds, codec.support({"_support": p})) for i, ds, p in rows),
    )
    ids = [i for i, _, _ in rows]
    tx.run("UNWIND $ids AS id MATCH (n:Node {id: id}) REMOVE n._support, n._docs", ids=ids)
    return len(rows)


def raise_if_missing(missing: list[str]) -> None:
    """ValueError naming a few edge endpoints that are not stored nodes."""
    if missing:
        raise ValueError(
            f"{len(missing)} edge endpoint(s) are not stored nodes, e.g. "
            f"{sorted(missing)[:3]}; upsert the nodes before their edges"
        )


def delete(
    tx: ManagedTransaction,
    params: dict[str, Any],
    edge_query: str | None = None,
    node_query: str | None = None,
    *,
    derive: bool = True,
) -> Removed:
    """Run an edge-deleting and a node-deleting query; what they removed. Then (`derive`)
    the validity of the facts whose groups they changed is derived again."""
    edges, changed = codec.value(tx, edge_query, **params) if edge_query else ([], [])
    nodes = (
        [(r["id"], r["rels"], r["timed"]) for r in tx.run(node_query, params)] if node_query else []
    )
    edge_ids = set(edges).union(*(rels for _, rels, _ in nodes))
    node_ids = sorted(i for i, _, _ in nodes)
    if derive:
        facts.derive(tx, [*changed, *(t for _, _, ts in nodes for t in ts)], gone=node_ids)
    return Removed(node_ids=node_ids, edge_ids=sorted(edge_ids))


def union(a: Removed, b: Removed) -> Removed:
    """Two removals as one, ids sorted."""
    return Removed(
        node_ids=sorted({*a.node_ids, *b.node_ids}), edge_ids=sorted({*a.edge_ids, *b.edge_ids})
    )
