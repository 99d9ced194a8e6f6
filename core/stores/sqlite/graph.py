"""Embedded graph store: nodes, edges and their provenance in one SQLite file (WAL mode).

Schema: `nodes`, `edges` keyed by (source, name, target), and `support` with one row per
(item id, document, chunk) for nodes and edges alike (an edge's item id is `Edge.id`).
Id lists travel as one JSON array parameter read with `json_each`, so no call ever meets
SQLite's bound-variable limit, however many ids it carries.

Semantics the port leaves to the adapter:
- properties merge per top-level key (new values replace old ones; nested values are
  replaced, not merged); `type` and `dataset` stay as first written; an empty name never
  erases a name.
- `delete_document` only considers items the document supported, so items written without
  support survive it (except edges whose endpoint it removes); `delete_dataset` removes them.
- every call is one transaction; writers take the write lock up front (`BEGIN IMMEDIATE`)
  and wait up to `busy_timeout` seconds for other threads or processes. So `merge_nodes`
  reads the members' support and edges under the same lock that moves them, and an edge
  write that names a merged-away node finds its redirect (core/stores/graph_merge.py).

The SQL lives in queries.py; the row-level work done inside a transaction (decoding rows,
support, edge writes, removals) in tx.py.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

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
from core.stores import graph_merge, timeline
from core.stores.sqlite import facts as facts
from core.stores.sqlite import queries as q
from core.stores.sqlite import tx as tx


class SQLiteGraphStore:
    """GraphStore on a SQLite file, shared by the threads of one process and other processes."""

    def __init__(self, path: Path, *, busy_timeout: float = 30.0) -> None:
        self._path = Path(path)
        self._busy_timeout = busy_timeout
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        self._path.parent.mkdir(parents=True, exist_ok=True)
        with self._transaction(write=True) as conn:
            exists = "SELECT 1 FROM sqlite_master WHERE name = 'node_times'"
            fresh = not conn.execute(exists).fetchall()
            for statement in q.SCHEMA + q.TIME_SCHEMA + facts.SCHEMA:
                conn.execute(statement)
            if fresh:  # a store written before node_times existed: index its times once
                conn.execute(q.INDEX_TIMES.format(where="1"))

    # -- connections and transactions --------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        """This thread's connection.

        One connection per thread rather than one behind a lock: under WAL, reads then run
        beside a long write instead of queueing behind it (measured during a 20k-edge write:
        reads waited up to 1.3-1.6 s behind a lock, at most 0.02-0.13 s here).
        """
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        with self._lock:
            if self._closed:
                raise StoreError(f"graph store {self._path} is closed")
            try:
                conn = self._connect()
            except sqlite3.Error as err:
                raise StoreError(f"cannot open graph store {self._path}: {err}") from err
            self._connections.append(conn)
        self._local.conn = conn
        return conn

    def _connect(self) -> sqlite3.Connection:
        """A connection in autocommit mode (transactions are explicit) with our pragmas."""
        # timeout= is SQLite's busy_timeout: how long to wait for another writer's lock.
        # check_same_thread=False only so that close() may close every thread's connection.
        conn = sqlite3.connect(
            self._path, timeout=self._busy_timeout, isolation_level=None, check_same_thread=False
        )
        conn.execute("PRAGMA journal_mode = WAL")
        # NORMAL survives application crashes in WAL mode; a power cut can drop the last
        # commits, which re-running the idempotent pipeline restores.
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA cache_size = -32768")  # 32 MiB: big batches stay off the disk
        # Checkpoint every ~40 MB of WAL, not 4 MB: random uuid keys dirty pages all over the
        # indexes, and fewer checkpoints rewrite each page fewer times (batched writes -20%).
        conn.execute("PRAGMA wal_autocheckpoint = 10000")
        conn.create_function("merge_properties", 2, tx.merge_properties, deterministic=True)
        conn.create_function("time_bin", 2, timeline.time_bin, deterministic=True)
        return conn

    @contextmanager
    def _transaction(self, *, write: bool = False) -> Iterator[sqlite3.Connection]:
        """One transaction (reads see one snapshot); sqlite errors surface as StoreError."""
        conn = self._connection()
        try:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        except sqlite3.Error as err:
            raise StoreError(f"graph store {self._path}: {err}") from err
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException as err:
            with suppress(sqlite3.Error):  # a failed rollback must not hide the first error
                conn.rollback()
            if isinstance(err, sqlite3.Error):
                raise StoreError(f"graph store {self._path}: {err}") from err
            raise

    def close(self) -> None:
        """Close every thread's connection; later calls raise StoreError."""
        with self._lock:
            self._closed = True
            connections, self._connections = self._connections, []
        for conn in connections:
            conn.close()
        self._local = threading.local()

    # -- writes ------------------------------------------------------------------------------

    def upsert_nodes(self, nodes: Sequence[Node]) -> None:
        """Insert or merge nodes by id (properties merged, support unioned). Raises StoreError."""
        if not nodes:
            return
        rows = [(n.id, n.type, n.dataset, n.name, tx.dumps(n.properties)) for n in nodes]
        support = [(n.id, s.document_id, s.chunk_id) for n in nodes for s in n.support]
        timed = [n.id for n in nodes if {timeline.START, timeline.END} & n.properties.keys()]
        with self._transaction(write=True) as conn:
            conn.executemany(q.UPSERT_NODE, rows)
            conn.executemany(q.ADD_SUPPORT, support)
            if timed:  # from the merged properties, as a later write may change a time
                conn.execute(f"DELETE FROM node_times WHERE id IN {q.SET1}", (tx.id_array(timed),))
                conn.execute(q.INDEX_TIMES.format(where=f"id IN {q.SET1}"), (tx.id_array(timed),))

    def upsert_edges(self, edges: Sequence[Edge]) -> None:
        """Insert or merge edges by (source, name, target); an end merged away by `merge_nodes`
        stands for the node it went into. Raises ValueError on an end that is not stored."""
        if not edges:
            return
        endpoints = {e.source for e in edges} | {e.target for e in edges}
        with self._transaction(write=True) as conn:
            missing = tx.column(conn, q.MISSING_NODES, (tx.id_array(endpoints),))
            if missing:
                moves = tx.resolve(conn, missing)
                tx.raise_if_missing(sorted(set(missing) - moves.keys()))
                edges = graph_merge.repoint(edges, moves)
            tx.write_edges(conn, edges)

    def delete_document(self, dataset: str, document_id: str) -> Removed:
        """Drop one document's support; remove what has no support left. Raises StoreError."""
        with self._transaction(write=True) as conn:
            nodes, edges = (
                tx.column(conn, q.SUPPORTED_BY.format(table=table), (document_id, dataset))
                for table in ("nodes", "edges")
            )
            conn.execute(
                f"DELETE FROM support WHERE document_id = ?2 AND item_id IN {q.SET1}",
                (tx.id_array(nodes + edges), document_id),
            )
            facts.drop_document(conn, document_id, edges)
            return tx.remove(
                conn,
                tx.column(conn, q.UNSUPPORTED, (tx.id_array(nodes),)),
                tx.column(conn, q.UNSUPPORTED, (tx.id_array(edges),)),
                changed=edges,
            )

    def delete_dataset(self, dataset: str) -> Removed:
        """Remove every node and edge of a dataset (and its redirects). Raises StoreError."""
        with self._transaction(write=True) as conn:
            nodes = tx.column(conn, "SELECT id FROM nodes WHERE dataset = ?", (dataset,))
            edges = tx.column(conn, "SELECT id FROM edges WHERE dataset = ?", (dataset,))
            conn.execute("DELETE FROM redirects WHERE dataset = ?", (dataset,))
            return tx.remove(conn, nodes, edges, derive=False)

    def delete_nodes(self, ids: Sequence[str]) -> Removed:
        """Remove nodes by id, whatever their support, with their edges. Raises StoreError."""
        with self._transaction(write=True) as conn:
            return tx.remove(conn, tx.column(conn, q.STORED_NODES, (tx.id_array(ids),)), [])

    def merge_nodes(self, ids: Sequence[str], into: str) -> Merged:
        """Atomically move the nodes' support and edges onto `into`, remove them and redirect
        their ids to it (until the dataset is deleted). ValueError when `into` is not stored."""
        with self._transaction(write=True) as conn:
            return tx.merge(conn, ids, into)

    # -- reads -------------------------------------------------------------------------------

    def existing(self, ids: Sequence[str]) -> set[str]:
        """Which of these node ids are stored (without loading the nodes). Raises StoreError."""
        with self._transaction() as conn:
            return set(tx.column(conn, q.STORED_NODES, (tx.id_array(ids),)))

    def get_nodes(self, ids: Sequence[str]) -> list[Node]:
        """Nodes with these ids, in the order asked (missing ids are skipped). Raises StoreError."""
        with self._transaction() as conn:
            found = {node.id: node for node in tx.load_nodes(conn, ids)}
        return [found[i] for i in dict.fromkeys(ids) if i in found]

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
        # By a list of names the planner would pick nodes_by_type and filter every node of
        # the type (86 ms for 500 names among 100,000 nodes; 2-17 ms by name).
        indexed = "" if names is None else " INDEXED BY nodes_by_name"
        query = f"{q.NODE_COLUMNS}{indexed} WHERE dataset = ? AND type = ?"
        params: list[Any] = [dataset, type]
        if name is not None:
            query += " AND name = ?"
            params.append(name)
        if names is not None:
            query += " AND name IN (SELECT value FROM json_each(?))"
            params.append(tx.id_array(names))
        with self._transaction() as conn:
            rows = conn.execute(f"{query} ORDER BY id LIMIT ? OFFSET ?", [*params, limit, offset])
            return tx.to_nodes(conn, rows)

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

        One index range scan per (dataset, type, bin), each stopping after `limit` rows.
        """
        timeline.check_range(start, end, limit)
        found: list[tuple] = []
        with self._transaction() as conn:
            for dataset in dict.fromkeys(datasets):
                for type_ in dict.fromkeys(types):
                    for branch in timeline.branches(start, end):
                        found += tx.time_branch(conn, dataset, type_, branch, start, end, limit)
            found.sort()
            return tx.load_nodes(conn, [row[-1] for row in found[:limit]], ordered=True)

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
        query = (
            f"{q.EDGE_COLUMNS} WHERE ({q.TOUCHING})"
            " AND (?3 IS NULL OR name IN (SELECT value FROM json_each(?3)))"
            " AND name NOT IN (SELECT value FROM json_each(?4)) LIMIT ?2"
        )
        wanted = None if names is None else tx.id_array(names)
        with self._transaction() as conn:
            rows = conn.execute(query, (tx.id_array(node_ids), limit, wanted, tx.id_array(exclude)))
            edges = tx.to_edges(conn, rows)
            return facts.with_claims(conn, edges) if claims else edges

    def relation_ends(
        self,
        node_ids: Sequence[str],
        *,
        exclude: Sequence[str],
        containing: Sequence[str] | None = None,
        limit: int = 1000,
    ) -> list[tuple[str, str, str]]:
        """(source, name, target) of the edges `edges_of(node_ids, exclude=exclude)` finds
        (names holding one of `containing`, if given), outgoing first, without properties and
        support (GRAPH_PPR's relation steps)."""
        parts = None if containing is None else tx.id_array(containing)
        with self._transaction() as conn:
            params = (tx.id_array(node_ids), limit, tx.id_array(exclude), parts)
            return [(s, n, t) for s, n, t in conn.execute(q.RELATION_ENDS, params)]

    def edge_ends(
        self, node_ids: Sequence[str], *, names: Sequence[str], limit: int = 1000
    ) -> list[tuple[str, str]]:
        """(source, target) of the edges `edges_of` finds, in its order, without their
        properties and support (GRAPH_PPR reads thousands per query)."""
        with self._transaction() as conn:
            params = (tx.id_array(node_ids), limit, tx.id_array(names))
            rows = conn.execute(q.EDGE_ENDS, params)
            return [(source, target) for _id, source, target in rows]

    def node_chunks(
        self, ids: Sequence[str], *, type: str, most: int | None = None
    ) -> dict[str, NodeChunks]:
        """Name and supporting chunk ids of each stored node of `type` among `ids`, in the
        order asked, a hub's (past `most`) count only; no properties (GRAPH_PPR's reads)."""
        with self._transaction() as conn:
            return tx.node_chunks(conn, list(dict.fromkeys(ids)), type, most)

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
        """`edge_ends` of `chunks`, the `relations`, and `node_chunks` of what they reach."""
        ends = self.edge_ends(chunks, names=names, limit=limit) if chunks else []
        r, found = relations, list[tuple[str, str, str]]()
        if r:
            found = self.relation_ends(
                r.ids, exclude=r.exclude, containing=r.containing, limit=r.limit
            )
        ids = frontier_ids(chunks, entities, ends, skip, r.far_ends(found) if r else [])
        return Frontier(ends, self.node_chunks(ids, type=type, most=most), found)

    def neighbourhood(
        self, node_ids: Sequence[str], *, hops: int = 1, limit: int = 500
    ) -> Subgraph:
        """Nodes within `hops` of the seeds, nearest first, at most `limit`; edges among them."""
        if hops < 0 or limit < 0:
            raise ValueError(f"hops and limit must be >= 0, got {hops} and {limit}")
        with self._transaction() as conn:
            stored = set(tx.column(conn, q.STORED_NODES, (tx.id_array(node_ids),)))
            reached = [i for i in dict.fromkeys(node_ids) if i in stored][:limit]
            frontier = reached
            for _ in range(hops):
                room = limit - len(reached)
                if not frontier or room <= 0:
                    break
                frontier = tx.column(
                    conn, q.NEIGHBOURS, (tx.id_array(frontier), tx.id_array(reached), room)
                )
                reached = reached + frontier
            edges = tx.to_edges(conn, conn.execute(q.AMONG, (tx.id_array(reached),)))
            nodes = {node.id: node for node in tx.load_nodes(conn, reached)}
        return Subgraph(nodes=[nodes[i] for i in reached if i in nodes], edges=edges)

    def count(
        self, dataset: str, *, edge_names: bool = False, documents: Sequence[str] | None = None
    ) -> dict[str, int]:
        """Node counts per type, the edge count and per name (of what `documents` support)."""
        with self._transaction() as conn:
            return tx.count(conn, dataset, edge_names, documents)

    def total(self, datasets: Sequence[str], node_type: str, key: str) -> int:
        """The sum of the integer property `key` over the datasets' nodes of a type."""
        with self._transaction() as conn:
            return tx.total(conn, datasets, node_type, key)
