"""Read transaction functions of the Neo4j graph store (see graph.py), which the driver
re-runs whole on a transient error; one-statement reads run auto-committed instead."""

from __future__ import annotations

import functools
from typing import Any

from neo4j import ManagedTransaction

from core.models.graph import Node, Subgraph
from core.stores import timeline
from core.stores.neo4j import codec as codec
from core.stores.neo4j import queries as q

LOAD_NODES = f"UNWIND $ids AS id MATCH (n:Node {{id: id}}) RETURN collect({q.NODE})"


def load_nodes(tx: ManagedTransaction, ids: list[str]) -> list[Node]:
    """Nodes with these ids, in any order."""
    return codec.nodes(codec.value(tx, LOAD_NODES, ids=ids))


def neighbourhood(tx: ManagedTransaction, seeds: list[str], hops: int, limit: int) -> Subgraph:
    """Breadth-first from the stored seeds, one query per hop, stopping at `limit` nodes."""
    stored = set(codec.value(tx, q.STORED, ids=seeds))
    reached = [i for i in seeds if i in stored][:limit]
    frontier = reached
    for _ in range(hops):
        room = limit - len(reached)
        if not frontier or room <= 0:
            break
        frontier = codec.value(tx, q.NEIGHBOURS, ids=frontier, reached=reached, room=room)
        reached = reached + frontier
    if not reached:
        return Subgraph()
    edges = codec.edges(codec.value(tx, q.AMONG, ids=reached))
    nodes = {n.id: n for n in load_nodes(tx, reached)}
    return Subgraph(nodes=[nodes[i] for i in reached if i in nodes], edges=edges)


def in_time(
    tx: ManagedTransaction,
    datasets: list[str],
    types: list[str],
    start: int | None,
    end: int | None,
    limit: int,
) -> list[Node]:
    """`find_in_time`: one index seek per (dataset, type, bin), up to `limit` rows each."""
    found: list[dict[str, Any]] = []
    for dataset in datasets:
        for type_ in types:
            for k, low, high in timeline.branches(start, end):
                closed = start is not None and k >= 0
                query = _time_branch(low is not None, high is not None, closed)
                params = {"dataset": dataset, "type": type_, "bin": k, "low": low, "high": high}
                found += codec.value(tx, query, **params, start=start, limit=limit)
    return codec.nodes(found)


@functools.cache
def _time_branch(low: bool, high: bool, closed_from_start: bool) -> str:
    """One bin's seek. Few shapes, so plans are cached (one UNION of them all took seconds)."""
    # Every index property has a predicate, or the planner scans instead of seeking.
    where = ["n.dataset = $dataset AND n.type = $type AND n._tb = $bin"]
    where += ["n._tp > $low"] if low else []
    where.append("n._tp < $high" if high else "n._tp IS NOT NULL")
    if closed_from_start:  # a closed span that began in the bin's slack may end before start
        where.append(f"n.{timeline.END} > $start")
    # In the index's own order: no sort, and the seek stops after `limit` rows.
    return f"""MATCH (n:Node) WHERE {" AND ".join(where)}
        WITH n ORDER BY n.dataset, n.type, n._tb, n._tp LIMIT $limit
        RETURN collect({q.NODE})"""


def count(tx: ManagedTransaction, dataset: str) -> dict[str, int]:
    """Node counts per type and the edge count of a dataset."""
    by_type = f"{q.IN_DATASET} RETURN n.type AS type, count(*) AS n"
    counts = {r["type"]: r["n"] for r in tx.run(by_type, dataset=dataset)}
    edges = "MATCH ()-[r:REL {dataset: $dataset}]->() RETURN count(r)"
    counts["edges"] = codec.value(tx, edges, dataset=dataset)
    return counts


def total(tx: ManagedTransaction, datasets: list[str], node_type: str, key: str) -> int:
    """The sum of the integer property `key` over the datasets' nodes of a type."""
    query = """MATCH (n:Node) WHERE n.dataset IN $datasets AND n.type = $type
        AND n.id IS NOT NULL RETURN coalesce(sum(n[$key]), 0)"""
    return codec.value(tx, query, datasets=datasets, type=node_type, key=key)
