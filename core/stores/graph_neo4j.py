"""Distributed graph store on a Neo4j 5 server (Community is enough).

Model: every node is `(:Node {id, type, dataset, name})` plus a label named after its type
when that is a plain identifier (`:Entity`, `:DocumentChunk`), so Cypher users can write
`MATCH (e:Entity)`. Every edge is `[:REL {id, name, dataset}]`: one relationship type keeps
MERGE on `(a)-[:REL {name}]->(b)` an index-free Expand(Into) that locks both ends before it
creates, so concurrent writers never duplicate an edge. (5.26 accepts dynamic types in
MERGE, `[:$(row.name)]`, but plans them as a scan of every relationship in the database.)

Properties: values Neo4j can store exactly (str, bool, int64, float, and lists of one of
those) are real properties; anything else (maps, None, mixed lists, dates) is stored as JSON
under `_j_<key>`, as are keys that clash with ours. A write sets one form of a key and nulls
the other, so `SET x += $props` merges per top-level key atomically, with no read first.
Support of a node: one `(:_Support {key, dataset, doc, pair})` per (dataset, document, chunk),
linked `-[:SUPPORTS]->` to every node that chunk supports, so adding support costs the same
on a node that 10,000 chunks support as on one that two do (a list property is rewritten
whole on every write: 33 ms per 32 entries on a node holding 8,000), and deleting a document
starts from its own `_Support` nodes instead of scanning the dataset. Support of an edge:
`_support` holds one JSON `["document","chunk"]` string per pair and `_docs` the distinct
document ids, both unioned on write. Semantics otherwise follow graph_sqlite.
A node with a time (`start_epoch` / `end_epoch`) also gets `_tb` and `_tp`, its time bin and
position for `find_in_time` (core/stores/timeline.py).
A node merged away by `merge_nodes` leaves `(:_Redirect {id, dataset, to})`, which edge writes
follow (core/stores/graph_merge.py). Writers lock nodes in id order, then read them again:
under read committed, a node deleted while a writer waited for its lock is matched but gone.
The Cypher text lives in graph_neo4j_queries.py.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from neo4j import GraphDatabase, ManagedTransaction
from neo4j.exceptions import ClientError, DriverError, Neo4jError

from core.models.graph import Edge, Merged, Node, Removed, Subgraph, Support
from core.ports import StoreError, batched
from core.stores import graph_merge, timeline
from core.stores import graph_neo4j_queries as q

T = TypeVar("T")

# Writes of a batch of nodes, while other transactions delete some of them (see _write_nodes).
_NODE_WRITES = 5
_RESERVED = frozenset({"id", "type", "dataset", "name"})
_LABEL = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_INT64 = range(-(2**63), 2**63)


def _json(value: Any) -> str:
    """Compact JSON; values JSON cannot hold (dates, ...) become their str(), as in graph_sqlite."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def _storable(value: Any) -> bool:
    """Whether Neo4j stores `value` as a property and gives back exactly the same value."""
    kinds = (str, bool, int, float)
    if isinstance(value, list) and value:
        first = type(value[0])
        return first in kinds and all(type(v) is first for v in value) and _storable(value[0])
    return type(value) in kinds and (type(value) is not int or value in _INT64)


def _encode(properties: dict[str, Any]) -> dict[str, Any]:
    """Properties as a `SET +=` map: one form of each key set, the other nulled."""
    encoded: dict[str, Any] = {}
    for key, value in properties.items():
        plain_key = key not in _RESERVED and not key.startswith("_")
        if plain_key and _storable(value):
            encoded[key], encoded[f"_j_{key}"] = value, None
        else:
            encoded[f"_j_{key}"] = _json(value)
            if plain_key:
                encoded[key] = None
    return encoded


def _decode(stored: dict[str, Any]) -> dict[str, Any]:
    """User properties back from a stored property map."""
    properties: dict[str, Any] = {}
    for key, value in stored.items():
        if key.startswith("_j_"):
            properties[key[3:]] = json.loads(value)
        elif not key.startswith("_") and key not in _RESERVED:
            properties[key] = value
    return properties


def _pair(support: Support) -> str:
    """A support pair as stored: JSON, so that no id can make a pair ambiguous."""
    return _json([support.document_id, support.chunk_id])


def _links(nodes: Iterable[tuple[str, str, Iterable[Support]]]) -> list[dict[str, str]]:
    """`q.LINK_SUPPORT` rows for (id, dataset, support) triples, in lock order."""
    links = [
        {
            "key": _json([dataset, s.document_id, s.chunk_id]),
            "dataset": dataset,
            "doc": s.document_id,
            "pair": _pair(s),
            "node": node_id,
        }
        for node_id, dataset, support in nodes
        for s in support
    ]
    return sorted(links, key=lambda link: (link["key"], link["node"]))


def _support(stored: dict[str, Any]) -> list[Support]:
    """Support records from a stored (or `q.NODE`-projected) `_support` list."""
    pairs = (json.loads(item) for item in stored.get("_support", ()))
    return [Support(document_id=doc, chunk_id=chunk) for doc, chunk in pairs]


def _nodes(maps: Iterable[dict[str, Any]]) -> list[Node]:
    """Nodes from `q.NODE` maps. One that another transaction deleted while this read ran
    (read committed) comes back without its properties: it is gone, so it is left out."""
    return [_node(p) for p in maps if "id" in p]


def _edges(records: Iterable[dict[str, Any]]) -> list[Edge]:
    """Edges from `q.EDGE` maps, without the ones deleted while the read ran (see _nodes)."""
    return [_edge(r) for r in records if "name" in r["p"] and None not in (r["s"], r["t"])]


def _node(p: dict[str, Any]) -> Node:
    """A Node from a `q.NODE` map."""
    return Node(
        id=p["id"], type=p["type"], dataset=p["dataset"], name=p.get("name", ""),
        properties=_decode(p), support=_support(p),
    )  # fmt: skip


def _edge(record: dict[str, Any]) -> Edge:
    """An Edge from an `q.EDGE` map."""
    p = record["p"]
    return Edge(
        source=record["s"], target=record["t"], name=p["name"], dataset=p["dataset"],
        properties=_decode(p), support=_support(p),
    )  # fmt: skip


def _node_row(node: Node) -> dict[str, Any]:
    """A write row for `q.UPSERT_NODES`."""
    labels = [node.type] if _LABEL.fullmatch(node.type) and node.type != "Node" else []
    return {
        "id": node.id, "type": node.type, "dataset": node.dataset, "name": node.name,
        "labels": labels, "props": _encode(node.properties),
    }  # fmt: skip


def _edge_row(edge: Edge) -> dict[str, Any]:
    """A write row for `q.UPSERT_EDGES`."""
    return {
        "id": edge.id, "source": edge.source, "target": edge.target, "name": edge.name,
        "dataset": edge.dataset, "props": _encode(edge.properties),
        "support": list(dict.fromkeys(_pair(s) for s in edge.support)),
        "docs": list(dict.fromkeys(s.document_id for s in edge.support)),
    }  # fmt: skip


def _value(tx: ManagedTransaction, query: str, **params: Any) -> Any:
    """The one value a query returns.

    Reads collect their rows into one list: the driver decodes each record as a message of
    its own, and a record per item made a 200-node read 1.4x (4x with neo4j-rust-ext) slower.
    """
    return tx.run(query, params).single(strict=True)[0]


def _redact(uri: str) -> str:
    """The URI without credentials, for messages."""
    parts = urlsplit(uri)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2], query=""))


class Neo4jGraphStore:
    """GraphStore on a Neo4j server, shared by any number of threads and processes."""

    def __init__(
        self,
        uri: str,
        *,
        user: str = "neo4j",
        password: str = "",
        database: str = "neo4j",
        pool_size: int = 50,
        batch_size: int = 2000,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.uri = _redact(uri)
        self._database = database
        self._batch_size = batch_size
        auth = (user, password) if password else None
        self._driver = GraphDatabase.driver(
            uri,
            auth=auth,
            max_connection_pool_size=pool_size,
            # Writers to the same hub nodes meet Neo4j's deadlock detection now and then (it
            # reports some waits that would have cleared); the driver's first retry waits 1 s,
            # 10% of a 2-core ingest in those retries. Later retries still double up to 30 s.
            initial_retry_delay=0.05,
            # No "label does not exist" warning per read before the first write of a label.
            notifications_min_severity="OFF",
        )
        try:
            # Fails at once for a wrong address instead of after the 30 s of retries.
            self._call(self._driver.verify_connectivity)
            self._create_schema()
        except BaseException:
            self._driver.close()
            raise

    # -- driver plumbing ---------------------------------------------------------------------

    def _call(self, action: Callable[[], T]) -> T:
        """Run `action`; driver errors surface as StoreError naming the server."""
        try:
            return action()
        except (Neo4jError, DriverError) as err:
            raise StoreError(f"Neo4j at {self.uri} (database {self._database}): {err}") from err

    def _write(self, work: Callable[..., T], **params: Any) -> T:
        """`work(tx, **params)` in a write transaction, re-run by the driver on transient errors."""
        return self._call(lambda: self._transaction(True, work, params))

    def _read(self, work: Callable[..., T], **params: Any) -> T:
        """`work(tx, **params)` in a read transaction, re-run by the driver on transient errors."""
        return self._call(lambda: self._transaction(False, work, params))

    def _transaction(self, write: bool, work: Callable[..., T], params: dict[str, Any]) -> T:
        """One managed transaction in a short-lived session."""
        # Shared bookmarks: each call sees this store's earlier writes, even on a cluster.
        bookmarks = self._driver.execute_query_bookmark_manager
        with self._driver.session(database=self._database, bookmark_manager=bookmarks) as session:
            return (session.execute_write if write else session.execute_read)(work, **params)

    def _execute(self, statement: str) -> None:
        """One auto-committed statement (schema changes)."""
        self._call(lambda: self._driver.execute_query(statement, database_=self._database))

    def _create_schema(self) -> None:
        """Constraint and indexes, idempotent and safe when several processes start at once."""
        show = "SHOW INDEXES YIELD name WHERE name = 'cogmill_node_time' RETURN count(*)"
        run = self._driver.execute_query
        had_times = self._call(lambda: run(show, database_=self._database)).records[0][0]
        for statement in q.SCHEMA:
            try:
                self._execute(statement)
            except StoreError as err:
                # IF NOT EXISTS can still lose a race with another process creating the rule.
                code = getattr(err.__cause__, "code", None) or ""
                if not (isinstance(err.__cause__, ClientError) and "AlreadyExists" in code):
                    raise
        self._execute("CALL db.awaitIndexes()")
        if not had_times:  # nodes written before find_in_time existed get their time bins
            timed = f"n.{timeline.START} IS NOT NULL OR n.{timeline.END} IS NOT NULL"
            self._execute(f"MATCH (n:Node) WHERE {timed} {q.TIME_BIN}")
        if not self._read(_value, query=q.SUPPORT_MOVED):
            # Nodes written before _Support existed held their support in lists. A batch per
            # transaction, and the marker only at the end: a crash here resumes at next start.
            while self._write(_move_support, batch=self._batch_size):
                pass
            self._execute("MERGE (:_Schema {support: 'nodes'})")

    def close(self) -> None:
        """Close the driver and its connections; later calls raise StoreError."""
        self._driver.close()

    # -- writes ------------------------------------------------------------------------------

    def upsert_nodes(self, nodes: Sequence[Node]) -> None:
        """Insert or merge nodes by id (properties merged, support unioned). Raises StoreError."""
        # Sorted so concurrent writers lock ids in one order; stable, so repeats keep theirs.
        for batch in batched(sorted(nodes, key=lambda n: n.id), self._batch_size):
            links = _links((n.id, n.dataset, n.support) for n in batch)
            self._write(_write_nodes, rows=[_node_row(n) for n in batch], links=links)

    def upsert_edges(self, edges: Sequence[Edge]) -> None:
        """Insert or merge edges by (source, name, target); an end merged away by `merge_nodes`
        stands for the node it went into. Raises ValueError on an end that is not stored."""
        if not edges:
            return
        endpoints = sorted({e.source for e in edges} | {e.target for e in edges})
        _raise_if_missing(self._read(_unresolved, ids=endpoints))  # before any batch is written
        ordered = sorted(edges, key=lambda e: (e.source, e.target))
        for batch in batched(ordered, self._batch_size):
            self._write(_write_edges, edges=batch)

    def delete_document(self, dataset: str, document_id: str) -> Removed:
        """Drop one document's support; remove what has no support left. Raises StoreError."""
        # Every stored pair of this document starts with this prefix, and no other pair does.
        prefix = _json([document_id])[:-1] + ","
        params = {"dataset": dataset, "doc": document_id, "prefix": prefix}
        return self._write(_delete, edge_query=q.DOC_EDGES, node_query=q.DOC_NODES, params=params)

    def delete_dataset(self, dataset: str) -> Removed:
        """Remove every node and edge of a dataset (and its redirects), a batch per transaction.
        Raises StoreError."""
        removed = Removed()
        params = {"dataset": dataset, "batch": self._batch_size}
        for query in (q.DATASET_SUPPORT, q.DATASET_REDIRECTS):
            while self._write(_value, query=query, **params):
                pass
        for queries in ({"edge_query": q.DATASET_EDGES}, {"node_query": q.DATASET_NODES}):
            while (step := self._write(_delete, params=params, **queries)) != Removed():
                removed = _union(removed, step)
        return removed

    def delete_nodes(self, ids: Sequence[str]) -> Removed:
        """Remove nodes by id, whatever their support, with their edges. Raises StoreError."""
        removed = Removed()
        for batch in batched(list(dict.fromkeys(ids)), self._batch_size):
            step = self._write(_delete, node_query=q.DELETE_NODES, params={"ids": list(batch)})
            removed = _union(removed, step)
        return removed

    def merge_nodes(self, ids: Sequence[str], into: str) -> Merged:
        """Atomically move the nodes' support and edges onto `into`, remove them and redirect
        their ids to it (until the dataset is deleted). ValueError when `into` is not stored."""
        return self._write(_merge, ids=sorted(set(ids) - {into}), into=into)

    # -- reads -------------------------------------------------------------------------------

    def existing(self, ids: Sequence[str]) -> set[str]:
        """Which of these node ids are stored (without loading the nodes). Raises StoreError."""
        unique = list(dict.fromkeys(ids))
        return set(self._read(_value, query=q.STORED, ids=unique)) if unique else set()

    def get_nodes(self, ids: Sequence[str]) -> list[Node]:
        """Nodes with these ids, in the order asked (missing ids are skipped). Raises StoreError."""
        unique = list(dict.fromkeys(ids))
        if not unique:
            return []
        found = {node.id: node for node in self._read(_load_nodes, ids=unique)}
        return [found[i] for i in unique if i in found]

    def find_nodes(
        self,
        dataset: str,
        type: str,
        *,
        name: str | None = None,
        limit: int = 1000,
        offset: int = 0,
    ) -> list[Node]:
        """Nodes of one type in a dataset by id order, optionally by exact name."""
        if limit < 0 or offset < 0:
            raise ValueError(f"limit and offset must be >= 0, got {limit} and {offset}")
        named = "" if name is None else "AND n.name = $name"
        # Ordered like the (dataset, type, id) index, so pages come from it without a sort.
        query = f"""MATCH (n:Node {{dataset: $dataset, type: $type}}) WHERE n.id IS NOT NULL {named}
            WITH n ORDER BY n.dataset, n.type, n.id SKIP $offset LIMIT $limit
            RETURN collect({q.NODE})"""
        params = {"dataset": dataset, "type": type, "name": name, "offset": offset, "limit": limit}
        return _nodes(self._read(_value, query=query, **params))

    def find_in_time(
        self,
        datasets: Sequence[str],
        types: Sequence[str],
        *,
        start: int | None = None,
        end: int | None = None,
        limit: int = 1000,
    ) -> list[Node]:
        """Nodes whose [start_epoch, end_epoch) overlaps [start, end), earliest first.

        One read transaction: an index seek per (dataset, type, bin), each stopping at `limit`.
        """
        timeline.check_range(start, end, limit)
        datasets, types = list(dict.fromkeys(datasets)), list(dict.fromkeys(types))
        params = {"start": start, "end": end, "limit": limit}
        found = self._read(_in_time, datasets=datasets, types=types, **params) if limit else []
        return sorted(found, key=timeline.order_key)[:limit]

    def edges_of(
        self,
        node_ids: Sequence[str],
        *,
        names: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        limit: int = 1000,
    ) -> list[Edge]:
        """Edges touching `node_ids` (only `names` if given, never `exclude`), at most `limit`."""
        params = {
            "ids": list(dict.fromkeys(node_ids)),
            "names": None if names is None else list(names),
            "exclude": list(exclude),
            "limit": limit,
        }
        return _edges(self._read(_value, query=q.EDGES_OF, **params))

    def neighbourhood(
        self, node_ids: Sequence[str], *, hops: int = 1, limit: int = 500
    ) -> Subgraph:
        """Nodes within `hops` of the seeds, nearest first, at most `limit`; edges among them."""
        if hops < 0 or limit < 0:
            raise ValueError(f"hops and limit must be >= 0, got {hops} and {limit}")
        seeds = list(dict.fromkeys(node_ids))
        return self._read(_neighbourhood, seeds=seeds, hops=hops, limit=limit)

    def count(self, dataset: str) -> dict[str, int]:
        """Node counts per type and the edge count (key "edges") of a dataset."""
        return self._read(_count, dataset=dataset)


# -- transaction functions: the driver re-runs them whole on a transient error ----------------


def _write_nodes(
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
        tx.run(query, rows=pending).consume()
        stored = set(_value(tx, q.STORED, ids=[r["id"] for r in pending]))
        pending = [r for r in pending if r["id"] not in stored]
        if not pending:
            break
    else:
        raise StoreError(f"{len(pending)} node(s) deleted by other writers as fast as written")
    if links:
        tx.run(q.LINK_SUPPORT, links=links).consume()


def _write_edges(tx: ManagedTransaction, edges: Sequence[Edge]) -> None:
    """Merge one batch of edges, their ends locked first. An end merged away stands for the
    node its redirects lead to; one deleted since the check rolls the batch back."""
    ends = sorted({e.source for e in edges} | {e.target for e in edges})
    missing = set(ends).difference(_lock(tx, ends))
    if missing:
        moves = _resolve(tx, missing, lock=True)
        _raise_if_missing(sorted(missing - moves.keys()))
        edges = graph_merge.repoint(edges, moves)
    rows = sorted((_edge_row(e) for e in edges), key=lambda r: (r["source"], r["target"]))
    tx.run(q.UPSERT_EDGES, rows=rows).consume()


def _lock(tx: ManagedTransaction, ids: list[str]) -> set[str]:
    """Write-lock these nodes in the order given; which of them are stored once locked.

    Read again after the locks are held: a node that another transaction deleted while this
    one waited for its lock was matched before the wait, and MATCH would now skip it silently.
    """
    _value(tx, q.LOCK_ENDS, ids=ids)
    return set(_value(tx, q.STORED, ids=ids))


def _resolve(tx: ManagedTransaction, missing: Iterable[str], *, lock: bool) -> dict[str, str]:
    """Missing node ids that redirects lead to a stored node (locked if `lock`): id -> node."""
    return graph_merge.resolve(
        missing,
        lambda ids: dict(_value(tx, q.REDIRECTS, ids=ids)),
        (lambda ids: _lock(tx, ids)) if lock else (lambda ids: set(_value(tx, q.STORED, ids=ids))),
    )


def _unresolved(tx: ManagedTransaction, ids: list[str]) -> list[str]:
    """The ids that are neither stored nodes nor redirected to one."""
    missing = _value(tx, q.MISSING, ids=ids)
    return sorted(set(missing) - _resolve(tx, missing, lock=False).keys()) if missing else []


def _merge(tx: ManagedTransaction, ids: list[str], into: str) -> Merged:
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
    links = _value(tx, q.MEMBER_SUPPORT, ids=members)
    pairs: dict[str, list[str]] = {m: [] for m in members}
    for member, _, pair in links:
        pairs[member].append(pair)
    if links:
        tx.run(q.MOVE_SUPPORT, into=into, keys=sorted({k for _, k, _ in links})).consume()
    touching = _edges(_value(tx, q.MEMBER_EDGES, ids=members))
    moved = graph_merge.repoint(
        sorted(touching, key=lambda e: (e.source, e.name, e.target)), dict.fromkeys(members, into)
    )
    removed = _delete(tx, node_query=q.DELETE_NODES, params={"ids": members})
    if moved:
        _write_edges(tx, moved)
    dataset = _value(tx, "MATCH (n:Node {id: $id}) RETURN n.dataset", id=into)
    tx.run(q.REDIRECT, ids=members, dataset=dataset, into=into).consume()
    support = {m: _support({"_support": p}) for m, p in pairs.items()}
    return Merged(node_ids=removed.node_ids, edge_ids=removed.edge_ids, support=support)


def _move_support(tx: ManagedTransaction, batch: int) -> int:
    """Move one batch of nodes' support from their old `_support` lists to `_Support` nodes."""
    rows = _value(tx, q.OLD_SUPPORT, batch=batch)
    tx.run(q.LINK_SUPPORT, links=_links((i, ds, _support({"_support": p})) for i, ds, p in rows))
    ids = [i for i, _, _ in rows]
    tx.run("UNWIND $ids AS id MATCH (n:Node {id: id}) REMOVE n._support, n._docs", ids=ids)
    return len(rows)


def _raise_if_missing(missing: list[str]) -> None:
    """ValueError naming a few edge endpoints that are not stored nodes."""
    if missing:
        raise ValueError(
            f"{len(missing)} edge endpoint(s) are not stored nodes, e.g. "
            f"{sorted(missing)[:3]}; upsert the nodes before their edges"
        )


def _delete(
    tx: ManagedTransaction,
    params: dict[str, Any],
    edge_query: str | None = None,
    node_query: str | None = None,
) -> Removed:
    """Run an edge-deleting and a node-deleting query; what they removed."""
    edges = _value(tx, edge_query, **params) if edge_query else []
    nodes = [(r["id"], r["rels"]) for r in tx.run(node_query, params)] if node_query else []
    edge_ids = set(edges).union(*(rels for _, rels in nodes))
    return Removed(node_ids=sorted(i for i, _ in nodes), edge_ids=sorted(edge_ids))


def _union(a: Removed, b: Removed) -> Removed:
    """Two removals as one, ids sorted."""
    return Removed(
        node_ids=sorted({*a.node_ids, *b.node_ids}), edge_ids=sorted({*a.edge_ids, *b.edge_ids})
    )


def _load_nodes(tx: ManagedTransaction, ids: list[str]) -> list[Node]:
    """Nodes with these ids, in any order."""
    query = f"UNWIND $ids AS id MATCH (n:Node {{id: id}}) RETURN collect({q.NODE})"
    return _nodes(_value(tx, query, ids=ids))


def _neighbourhood(tx: ManagedTransaction, seeds: list[str], hops: int, limit: int) -> Subgraph:
    """Breadth-first from the stored seeds, one query per hop, stopping at `limit` nodes."""
    stored = set(_value(tx, q.STORED, ids=seeds))
    reached = [i for i in seeds if i in stored][:limit]
    frontier = reached
    for _ in range(hops):
        room = limit - len(reached)
        if not frontier or room <= 0:
            break
        frontier = _value(tx, q.NEIGHBOURS, ids=frontier, reached=reached, room=room)
        reached = reached + frontier
    if not reached:
        return Subgraph()
    edges = _edges(_value(tx, q.AMONG, ids=reached))
    nodes = {n.id: n for n in _load_nodes(tx, reached)}
    return Subgraph(nodes=[nodes[i] for i in reached if i in nodes], edges=edges)


def _in_time(
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
                found += _value(tx, query, **params, start=start, limit=limit)
    return _nodes(found)


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


def _count(tx: ManagedTransaction, dataset: str) -> dict[str, int]:
    """Node counts per type and the edge count of a dataset."""
    by_type = f"{q.IN_DATASET} RETURN n.type AS type, count(*) AS n"
    counts = {r["type"]: r["n"] for r in tx.run(by_type, dataset=dataset)}
    edges = "MATCH ()-[r:REL {dataset: $dataset}]->() RETURN count(r)"
    counts["edges"] = _value(tx, edges, dataset=dataset)
    return counts
