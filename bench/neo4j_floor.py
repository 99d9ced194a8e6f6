"""The floor of a distributed ingest, measured on the same run's output.

The graph a job wrote (its dataset's :Node nodes and :REL edges, every property as stored) is
written again with the neo4j driver alone, as plain UNWIND MERGE statements as large as the
pipeline's, under labels of its own (:FloorNode, :FLOOR_REL, removed afterwards); then the
embedder the workers use embeds the run's passages, 32 per call. Neither includes
the vector writes, the chunk, summary or entity-name embeddings, the LLM calls or any
bookkeeping: it is what writing that graph and embedding that text cost at the least.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from neo4j import Driver, GraphDatabase

from bench.processes import Snapshot

READ_NODES = """MATCH (n:Node {dataset: $dataset}) WHERE n.id IS NOT NULL
RETURN n.id AS id, properties(n) AS props"""
READ_EDGES = """MATCH (a:Node)-[r:REL {dataset: $dataset}]->(b:Node)
RETURN a.id AS s, b.id AS t, r.name AS name, properties(r) AS props"""
WRITE_NODES = "UNWIND $rows AS row MERGE (n:FloorNode {id: row.id}) SET n += row.props"
WRITE_EDGES = """UNWIND $rows AS row
MATCH (a:FloorNode {id: row.s}) MATCH (b:FloorNode {id: row.t})
MERGE (a)-[r:FLOOR_REL {name: row.name}]->(b) SET r += row.props"""
CLEAN = "MATCH (n:FloorNode) WITH n LIMIT 5000 DETACH DELETE n RETURN count(*)"


def _driver(uri: str) -> Driver:
    # Quiet: counting a label before the first run created it is not worth a warning.
    return GraphDatabase.driver(uri, notifications_min_severity="OFF")


def graph_counts(uri: str) -> dict[str, int]:
    """Nodes and relationships in the whole database, and those of cogmill's graph."""
    queries = {
        "nodes": "MATCH (n) RETURN count(n)",
        "relationships": "MATCH ()-[r]->() RETURN count(r)",
        "graph_nodes": "MATCH (n:Node) RETURN count(n)",
        "graph_edges": "MATCH ()-[r:REL]->() RETURN count(r)",
    }
    with _driver(uri) as driver, driver.session() as session:
        return {name: int(session.run(q).single()[0]) for name, q in queries.items()}


def vector_nodes(uri: str, namespace: str = "Cogmill") -> dict[str, int]:
    """Vector nodes per collection in the whole database (the count store: no scan)."""
    with _driver(uri) as driver, driver.session() as session:
        labels = [r[0] for r in session.run("CALL db.labels()")]
        prefix = f"{namespace}Vec_"
        return {
            label.removeprefix(prefix): int(
                session.run(f"MATCH (n:`{label}`) RETURN count(n)").single()[0]
            )
            for label in labels
            if label.startswith(prefix)
        }


def _batches(rows: list[dict[str, Any]], size: int) -> list[list[dict[str, Any]]]:
    return [rows[i : i + size] for i in range(0, len(rows), size)]


def graph_floor(
    uri: str, dataset: str, batches: int, cap: int, mark: Callable[[], Snapshot]
) -> dict[str, Any]:
    """Rewrite `dataset`'s graph with the driver alone, timed and metered; then remove it.

    In `batches` UNWIND writes of nodes and as many of edges (the pipeline's batches of
    documents each write their nodes, then their edges, in one statement each up to `cap`
    rows, the graph store's write batch size)."""
    with _driver(uri) as driver, driver.session() as session:
        nodes = [dict(r) for r in session.run(READ_NODES, dataset=dataset)]
        edges = [dict(r) for r in session.run(READ_EDGES, dataset=dataset)]
        session.run(
            "CREATE CONSTRAINT floor_id IF NOT EXISTS FOR (n:FloorNode) REQUIRE n.id IS UNIQUE"
        ).consume()
        node_rows = min(cap, max(1, -(-len(nodes) // batches)))
        edge_rows = min(cap, max(1, -(-len(edges) // batches)))
        start = mark()
        for rows in _batches(nodes, node_rows):
            session.execute_write(lambda tx, rows=rows: tx.run(WRITE_NODES, rows=rows).consume())
        for rows in _batches(edges, edge_rows):
            session.execute_write(lambda tx, rows=rows: tx.run(WRITE_EDGES, rows=rows).consume())
        window = mark().since(start)
        while session.run(CLEAN).single()[0]:
            pass
        session.run("DROP CONSTRAINT floor_id IF EXISTS").consume()
    return {
        "nodes": len(nodes),
        "edges": len(edges),
        "rows_per_write": [node_rows, edge_rows],
        "window": window,
    }


def embed_floor(
    embed: Callable[[list[str]], Any], texts: list[str], batch: int, mark: Callable[[], Snapshot]
) -> dict[str, Any]:
    """The workers' embedder over `texts` in batches of `batch`, timed and metered."""
    start = mark()
    for i in range(0, len(texts), batch):
        embed(texts[i : i + batch])
    return {"texts": len(texts), "window": mark().since(start)}
