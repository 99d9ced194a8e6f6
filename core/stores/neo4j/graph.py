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
document ids, both unioned on write. Semantics otherwise follow sqlite/graph.py.
A node with a time (`start_epoch` / `end_epoch`) also gets `_tb` and `_tp`, its time bin and
position for `find_in_time` (core/stores/timeline.py).
A node merged away by `merge_nodes` leaves `(:_Redirect {id, dataset, to})`, which edge writes
follow (core/stores/graph_merge.py). Writers lock nodes in id order, then read them again:
under read committed, a node deleted while a writer waited for its lock is matched but gone.
The Cypher text lives in queries.py, the stored form of nodes and edges in codec.py, the
transaction functions in writes.py and reads.py; the driver and its errors in connection.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, TypeVar

from neo4j.exceptions import ClientError

from core.models.graph import (
    Edge,
    Frontier,
    Merged,
    Node,
    NodeChunks,
    RelationRead,
    Removed,
    Subgraph,
    frontier_ids,
)
from core.ports import StoreError
from core.sequences import batched
from core.stores import timeline
from core.stores.neo4j import codec as codec
from core.stores.neo4j import queries as q
from core.stores.neo4j import reads as reads
from core.stores.neo4j import writes as writes
from core.stores.neo4j.connection import AWAIT_INDEX, INDEX_TIMEOUT_S, Neo4jConnection

T = TypeVar("T")


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
        self._batch_size = batch_size
        self._conn = Neo4jConnection(
            uri,
            user=user,
            password=password,
            database=database,
            max_connection_pool_size=pool_size,
            # Writers to the same hub nodes meet Neo4j's deadlock detection now and then (it
            # reports some waits that would have cleared); the driver's first retry waits 1 s,
            # 10% of a 2-core ingest in those retries. Later retries still double up to 30 s.
            initial_retry_delay=0.05,
        )
        self.uri, self._database, self._driver = self._conn.uri, database, self._conn.driver
        try:
            # Fails at once for a wrong address instead of after the 30 s of retries.
            self._call(self._driver.verify_connectivity)
            self._create_schema()
        except BaseException:
            self._conn.close()
            raise

    # -- driver plumbing ---------------------------------------------------------------------

    def _call(self, action: Callable[[], T]) -> T:
        """Run `action`; driver errors surface as StoreError naming the server."""
        with self._conn.errors():
            return action()

    def _write(self, work: Callable[..., T], **params: Any) -> T:
        """`work(tx, **params)` in a write transaction, re-run by the driver on transient errors."""
        return self._call(lambda: self._transaction(True, work, params))

    def _read(self, work: Callable[..., T], **params: Any) -> T:
        """`work(tx, **params)` in a read transaction, re-run by the driver on transient errors."""
        return self._call(lambda: self._transaction(False, work, params))

    def _value(self, query: str, **params: Any) -> Any:
        """The one value a one-statement read returns (`Neo4jConnection.read`: auto-committed,
        re-run on transient errors); reads collect their rows into it (see codec.value)."""
        return self._call(lambda: self._conn.read(query, params))[0][0]

    def _transaction(self, write: bool, work: Callable[..., T], params: dict[str, Any]) -> T:
        """One managed transaction in a short-lived session (`Neo4jConnection.transaction`)."""
        return self._conn.transaction(work, params, write=write)

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
        # Its own indexes only, and only those not online yet: one look at a warm database.
        names = {"names": list(q.SCHEMA_NAMES)}
        unready = self._call(partial(run, q.UNREADY_INDEXES, names, database_=self._database))
        for (name,) in unready.records:
            params = {"name": name, "timeout": INDEX_TIMEOUT_S}
            self._call(partial(run, AWAIT_INDEX, params, database_=self._database))
        if not had_times:  # nodes written before find_in_time existed get their time bins
            timed = f"n.{timeline.START} IS NOT NULL OR n.{timeline.END} IS NOT NULL"
            self._execute(f"MATCH (n:Node) WHERE {timed} {q.TIME_BIN}")
        if not self._value(q.SUPPORT_MOVED):
            # Nodes written before _Support existed held their support in lists. A batch per
            # transaction, and the marker only at the end: a crash here resumes at next start.
            while self._write(writes.move_support, batch=self._batch_size):
                pass
            self._execute("MERGE (:_Schema {support: 'nodes'})")

    def server_started(self) -> int:
        """When the server's JVM started (ms since the epoch): another value than before means
        a restarted server, its plans and compiled code gone. Raises StoreError."""
        return self._value(q.SERVER_STARTED)

    def close(self) -> None:
        """Close the driver and its connections; later calls raise StoreError."""
        self._conn.close()

    # -- writes ------------------------------------------------------------------------------

    def upsert_nodes(self, nodes: Sequence[Node]) -> None:
        """Insert or merge nodes by id (properties merged, support unioned). Raises StoreError."""
        # Sorted so concurrent writers lock ids in one order; stable, so repeats keep theirs.
        for batch in batched(sorted(nodes, key=lambda n: n.id), self._batch_size):
            links = codec.links((n.id, n.dataset, n.support) for n in batch)
            self._write(writes.write_nodes, rows=[codec.node_row(n) for n in batch], links=links)

    def upsert_edges(self, edges: Sequence[Edge]) -> None:
        """Insert or merge edges by (source, name, target); an end merged away by `merge_nodes`
        stands for the node it went into. Raises ValueError on an end that is not stored."""
        if not edges:
            return
        endpoints = sorted({e.source for e in edges} | {e.target for e in edges})
        writes.raise_if_missing(
            self._read(writes.unresolved, ids=endpoints)
        )  # before any batch is written
        ordered = sorted(edges, key=lambda e: (e.source, e.target))
        for batch in batched(ordered, self._batch_size):
            self._write(writes.write_edges, edges=batch)

    def delete_document(self, dataset: str, document_id: str) -> Removed:
        """Drop one document's support; remove what has no support left. Raises StoreError."""
        # Every stored pair of this document starts with this prefix, and no other pair does.
        prefix = codec.to_json([document_id])[:-1] + ","
        params = {"dataset": dataset, "doc": document_id, "prefix": prefix}
        return self._write(
            writes.delete, edge_query=q.DOC_EDGES, node_query=q.DOC_NODES, params=params
        )

    def delete_dataset(self, dataset: str) -> Removed:
        """Remove every node and edge of a dataset (and its redirects), a batch per transaction.
        Raises StoreError."""
        removed = Removed()
        params = {"dataset": dataset, "batch": self._batch_size}
        for query in (q.DATASET_SUPPORT, q.DATASET_REDIRECTS):
            while self._write(codec.value, query=query, **params):
                pass
        for queries in ({"edge_query": q.DATASET_EDGES}, {"node_query": q.DATASET_NODES}):
            while (
                step := self._write(writes.delete, params=params, derive=False, **queries)
            ) != Removed():
                removed = writes.union(removed, step)
        return removed

    def delete_nodes(self, ids: Sequence[str]) -> Removed:
        """Remove nodes by id, whatever their support, with their edges. Raises StoreError."""
        removed = Removed()
        for batch in batched(list(dict.fromkeys(ids)), self._batch_size):
            step = self._write(
                writes.delete, node_query=q.DELETE_NODES, params={"ids": list(batch)}
            )
            removed = writes.union(removed, step)
        return removed

    def merge_nodes(self, ids: Sequence[str], into: str) -> Merged:
        """Atomically move the nodes' support and edges onto `into`, remove them and redirect
        their ids to it (until the dataset is deleted). ValueError when `into` is not stored."""
        return self._write(writes.merge, ids=sorted(set(ids) - {into}), into=into)

    # -- reads -------------------------------------------------------------------------------

    def existing(self, ids: Sequence[str]) -> set[str]:
        """Which of these node ids are stored (without loading the nodes). Raises StoreError."""
        unique = list(dict.fromkeys(ids))
        return set(self._value(q.STORED, ids=unique)) if unique else set()

    def get_nodes(self, ids: Sequence[str]) -> list[Node]:
        """Nodes with these ids, in the order asked (missing ids are skipped). Raises StoreError."""
        unique = list(dict.fromkeys(ids))
        if not unique:
            return []
        found = {n.id: n for n in codec.nodes(self._value(reads.LOAD_NODES, ids=unique))}
        return [found[i] for i in unique if i in found]

    def find_nodes(
        self,
        dataset: str,
        type: str,
        *,
        name: str | None = None,
        names: Sequence[str] | None = None,
        limit: int = 1000,
        offset: int = 0,
    ) -> list[Node]:
        """Nodes of one type in a dataset by id order, optionally by exact name or any of
        `names`."""
        if limit < 0 or offset < 0:
            raise ValueError(f"limit and offset must be >= 0, got {limit} and {offset}")
        query = q.find_nodes(by_name=name is not None, by_names=names is not None)
        params = {
            "dataset": dataset,
            "type": type,
            "name": name,
            "names": list(names or ()),
            "offset": offset,
            "limit": limit,
        }
        return codec.nodes(self._value(query, **params))

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
        found = self._read(reads.in_time, datasets=datasets, types=types, **params) if limit else []
        return sorted(found, key=timeline.order_key)[:limit]

    def edges_of(
        self,
        node_ids: Sequence[str],
        *,
        names: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        limit: int = 1000,
        claims: bool = False,
    ) -> list[Edge]:
        """Edges touching `node_ids` (only `names` if given, never `exclude`), at most `limit`,
        with their claims if asked."""
        params = {
            "ids": list(dict.fromkeys(node_ids)),
            "names": None if names is None else list(names),
            "exclude": list(exclude),
            "limit": limit,
        }
        return codec.edges(self._value(q.EDGES_OF, **params), claims=claims)

    def relation_ends(
        self,
        node_ids: Sequence[str],
        *,
        exclude: Sequence[str],
        containing: Sequence[str] | None = None,
        limit: int = 1000,
    ) -> list[tuple[str, str, str]]:
        """(source, name, target) of the edges `edges_of(node_ids, exclude=exclude)` finds
        (names holding one of `containing`, if given), in its order, without properties and
        support (GRAPH_PPR's relation steps)."""
        params = {"ids": list(dict.fromkeys(node_ids)), "exclude": list(exclude), "limit": limit}
        params["containing"] = None if containing is None else list(containing)
        ends = self._value(q.RELATION_ENDS, **params)
        return [(s, n, t) for s, n, t in ends if s is not None and t is not None]

    def edge_ends(
        self, node_ids: Sequence[str], *, names: Sequence[str], limit: int = 1000
    ) -> list[tuple[str, str]]:
        """(source, target) of the edges `edges_of` finds, in its order, without their
        properties and support (GRAPH_PPR reads thousands per query)."""
        params = {"ids": list(dict.fromkeys(node_ids)), "names": list(names), "limit": limit}
        ends = self._value(q.EDGE_ENDS, **params)
        return [(s, t) for s, t in ends if s is not None and t is not None]

    def node_chunks(
        self, ids: Sequence[str], *, type: str, most: int | None = None
    ) -> dict[str, NodeChunks]:
        """Name and supporting chunk ids of each stored node of `type` among `ids`, in the
        order asked, a hub's (past `most`) count only; no properties (GRAPH_PPR's reads)."""
        unique = list(dict.fromkeys(ids))
        if not unique:
            return {}
        found = codec.node_chunks(
            self._value(q.NODE_CHUNKS, ids=unique, type=type, most=most), most
        )
        return {i: found[i] for i in unique if i in found}

    def frontier(
        self,
        chunks: Sequence[str],
        entities: Sequence[str],
        *,
        names: Sequence[str],
        type: str,
        limit: int = 1000,
        skip: Sequence[str] = (),
        relations: RelationRead | None = None,
        most: int | None = None,
    ) -> Frontier:
        """`edge_ends` of `chunks`, `relation_ends` of the `relations` asked, and `node_chunks`
        of what they reach, in one statement (a GRAPH_PPR hop: one round trip, not three)."""
        asked, entity_ids = list(dict.fromkeys(chunks)), list(dict.fromkeys(entities))
        r = relations or RelationRead([], [], None, [], 0)
        params = {
            "ids": asked,
            "entities": entity_ids,
            "names": list(names),
            "limit": limit,
            "skip": list(skip),
            "type": type,
            "relation_ids": list(dict.fromkeys(r.ids)),
            "exclude": list(r.exclude),
            "relation_limit": r.limit,
            "far": list(r.far),
            "containing": None if r.containing is None else list(r.containing),
            "most": most,
        }
        raw, rows, raw_relations = self._value(q.FRONTIER, **params)
        ends = [(s, t) for s, t in raw if s is not None and t is not None]
        found_relations = [
            (s, n, t) for s, n, t in raw_relations if s is not None and t is not None
        ]
        found = codec.node_chunks(rows, most)
        order = frontier_ids(asked, entity_ids, ends, skip, r.far_ends(found_relations))
        return Frontier(ends, {i: found[i] for i in order if i in found}, found_relations)

    def neighbourhood(
        self, node_ids: Sequence[str], *, hops: int = 1, limit: int = 500
    ) -> Subgraph:
        """Nodes within `hops` of the seeds, nearest first, at most `limit`; edges among them."""
        if hops < 0 or limit < 0:
            raise ValueError(f"hops and limit must be >= 0, got {hops} and {limit}")
        seeds = list(dict.fromkeys(node_ids))
        return self._read(reads.neighbourhood, seeds=seeds, hops=hops, limit=limit)

    def count(
        self, dataset: str, *, edge_names: bool = False, documents: Sequence[str] | None = None
    ) -> dict[str, int]:
        """Node counts per type, the edge count and per name (of what `documents` support)."""
        if documents is not None:
            found = self._read(reads.supported, dataset=dataset, documents=list(documents))
            return found if edge_names else {k: n for k, n in found.items() if ":" not in k}
        return self._read(reads.count, dataset=dataset, edge_names=edge_names)

    def total(self, datasets: Sequence[str], node_type: str, key: str) -> int:
        """The sum of the integer property `key` over the datasets' nodes of a type."""
        names = list(dict.fromkeys(datasets))
        return self._read(reads.total, datasets=names, node_type=node_type, key=key)
