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
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from core.models.graph import Edge, Merged, Node, Removed, Subgraph, Support
from core.ports import StoreError
from core.stores import graph_merge, timeline

# nodes and edges are rowid tables on purpose: rows are appended in write order and only
# their thin key indexes take random uuid keys; as WITHOUT ROWID tables (wide rows on
# random pages) batched writes took 1.5-2x as long. `support` rows are all key, so there
# WITHOUT ROWID saves a copy of each row and keeps reads index-only.
_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS nodes (
        id TEXT NOT NULL PRIMARY KEY, type TEXT NOT NULL, dataset TEXT NOT NULL,
        name TEXT NOT NULL DEFAULT '', properties TEXT NOT NULL DEFAULT '{}'
    )""",
    "CREATE INDEX IF NOT EXISTS nodes_by_type ON nodes (dataset, type, id)",
    "CREATE INDEX IF NOT EXISTS nodes_by_name ON nodes (dataset, name, type, id)",
    """CREATE TABLE IF NOT EXISTS edges (
        source TEXT NOT NULL, name TEXT NOT NULL, target TEXT NOT NULL, id TEXT NOT NULL,
        dataset TEXT NOT NULL, properties TEXT NOT NULL DEFAULT '{}',
        PRIMARY KEY (source, name, target)
    )""",
    "CREATE UNIQUE INDEX IF NOT EXISTS edges_by_id ON edges (id)",
    # (target, source) makes the incoming half of a neighbourhood step index-only.
    "CREATE INDEX IF NOT EXISTS edges_by_target ON edges (target, source)",
    "CREATE INDEX IF NOT EXISTS edges_by_dataset ON edges (dataset)",
    """CREATE TABLE IF NOT EXISTS support (
        item_id TEXT NOT NULL, document_id TEXT NOT NULL, chunk_id TEXT NOT NULL,
        PRIMARY KEY (item_id, document_id, chunk_id)
    ) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS support_by_document ON support (document_id)",
    # merge_nodes: each merged-away node id -> the node it went into (core/stores/graph_merge).
    """CREATE TABLE IF NOT EXISTS redirects (
        id TEXT NOT NULL PRIMARY KEY, dataset TEXT NOT NULL, target TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS redirects_by_dataset ON redirects (dataset)",
)
# The time of each timed node, binned for `find_in_time` (core/stores/timeline.py): a side
# table kept by upsert_nodes and _remove, as properties are JSON text that no index can order.
_TIME_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS node_times (
        id TEXT NOT NULL PRIMARY KEY, dataset TEXT NOT NULL, type TEXT NOT NULL,
        bin INTEGER NOT NULL, pos NUMERIC NOT NULL, lo NUMERIC, hi NUMERIC
    )""",
    "CREATE INDEX IF NOT EXISTS node_times_by_bin ON node_times (dataset, type, bin, pos, hi, id)",
)
_NUMBER = (
    "CASE WHEN json_type(properties, '$.{0}') IN ('integer', 'real')"
    " THEN json_extract(properties, '$.{0}') END"
)
_INDEX_TIMES = f"""INSERT OR REPLACE INTO node_times (id, dataset, type, bin, pos, lo, hi)
SELECT id, dataset, type, time_bin(lo, hi), coalesce(lo, hi), lo, hi FROM (
    SELECT id, dataset, type, {_NUMBER.format(timeline.START)} AS lo,
        {_NUMBER.format(timeline.END)} AS hi FROM nodes WHERE {{where}}
) WHERE lo IS NOT NULL OR hi IS NOT NULL"""

# The id sets of parameters 1 and 2, each bound as one JSON array.
_SET1 = "(SELECT value FROM json_each(?1))"
_SET2 = "(SELECT value FROM json_each(?2))"
_NODE_COLUMNS = "SELECT id, type, dataset, name, properties FROM nodes"
_EDGE_COLUMNS = "SELECT id, source, name, target, dataset, properties FROM edges"

_UPSERT_NODE = """INSERT INTO nodes (id, type, dataset, name, properties) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET
    name = CASE WHEN excluded.name <> '' THEN excluded.name ELSE nodes.name END,
    properties = merge_properties(nodes.properties, excluded.properties)"""
_UPSERT_EDGE = """INSERT INTO edges (id, source, name, target, dataset, properties)
VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (source, name, target) DO UPDATE SET
    properties = merge_properties(edges.properties, excluded.properties)"""
_ADD_SUPPORT = "INSERT OR IGNORE INTO support (item_id, document_id, chunk_id) VALUES (?, ?, ?)"
_MISSING_NODES = "SELECT value FROM json_each(?1) WHERE value NOT IN (SELECT id FROM nodes)"
_STORED_NODES = "SELECT value FROM json_each(?1) WHERE value IN (SELECT id FROM nodes)"
_TOUCHING = f"source IN {_SET1} OR target IN {_SET1}"
_REDIRECTS = f"SELECT id, target FROM redirects WHERE id IN {_SET1}"
_ADD_REDIRECTS = """INSERT OR REPLACE INTO redirects (id, dataset, target)
SELECT value, ?2, ?3 FROM json_each(?1)"""
# CROSS JOIN pins the join order: start from the document's support rows, not the dataset.
_SUPPORTED_BY = """SELECT DISTINCT s.item_id FROM support AS s CROSS JOIN {table} AS t
ON t.id = s.item_id WHERE s.document_id = ?1 AND t.dataset = ?2"""
_UNSUPPORTED = """SELECT value FROM json_each(?1)
WHERE NOT EXISTS (SELECT 1 FROM support WHERE item_id = value)"""
# `+target` keeps SQLite from probing every (target, source) pair of the set (n² seeks);
# walking each node's outgoing edges instead costs its out-degree.
_AMONG = f"{_EDGE_COLUMNS} WHERE source IN {_SET1} AND +target IN {_SET1}"
# Stops after ?3 new ids rather than reading every edge of a hub.
_NEIGHBOURS = f"""SELECT DISTINCT nb FROM (
    SELECT target AS nb FROM edges WHERE source IN {_SET1}
    UNION ALL SELECT source FROM edges WHERE target IN {_SET1}
) WHERE nb NOT IN {_SET2} LIMIT ?3"""


def _dumps(value: Any) -> str:
    """Compact JSON; values JSON cannot hold (dates, ...) are stored as their str()."""
    if not value:
        return "{}"  # most edges carry no properties; skips a costly json.dumps call
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def _loads(text: str) -> dict[str, Any]:
    """Stored properties back as a dict."""
    return {} if text == "{}" else json.loads(text)


def _ids(ids: Iterable[str]) -> str:
    """An id collection as the JSON array that `_SET1`/`_SET2` read."""
    return json.dumps(list(ids))


def _merge_properties(old: str, new: str) -> str:
    """Shallow merge of two JSON objects, the keys of `new` winning (an SQL function)."""
    if new == "{}":
        return old
    merged = json.loads(old)
    merged.update(json.loads(new))
    return _dumps(merged)


def _column(conn: sqlite3.Connection, query: str, params: Sequence[Any]) -> list[str]:
    """The first column of a query's rows."""
    return [row[0] for row in conn.execute(query, params)]


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
            for statement in _SCHEMA + _TIME_SCHEMA:
                conn.execute(statement)
            if fresh:  # a store written before node_times existed: index its times once
                conn.execute(_INDEX_TIMES.format(where="1"))

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
        conn.create_function("merge_properties", 2, _merge_properties, deterministic=True)
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
        rows = [(n.id, n.type, n.dataset, n.name, _dumps(n.properties)) for n in nodes]
        support = [(n.id, s.document_id, s.chunk_id) for n in nodes for s in n.support]
        timed = [n.id for n in nodes if {timeline.START, timeline.END} & n.properties.keys()]
        with self._transaction(write=True) as conn:
            conn.executemany(_UPSERT_NODE, rows)
            conn.executemany(_ADD_SUPPORT, support)
            if timed:  # from the merged properties, as a later write may change a time
                conn.execute(f"DELETE FROM node_times WHERE id IN {_SET1}", (_ids(timed),))
                conn.execute(_INDEX_TIMES.format(where=f"id IN {_SET1}"), (_ids(timed),))

    def upsert_edges(self, edges: Sequence[Edge]) -> None:
        """Insert or merge edges by (source, name, target); an end merged away by `merge_nodes`
        stands for the node it went into. Raises ValueError on an end that is not stored."""
        if not edges:
            return
        endpoints = {e.source for e in edges} | {e.target for e in edges}
        with self._transaction(write=True) as conn:
            missing = _column(conn, _MISSING_NODES, (_ids(endpoints),))
            if missing:
                moves = _resolve(conn, missing)
                _raise_if_missing(sorted(set(missing) - moves.keys()))
                edges = graph_merge.repoint(edges, moves)
            _write_edges(conn, edges)

    def delete_document(self, dataset: str, document_id: str) -> Removed:
        """Drop one document's support; remove what has no support left. Raises StoreError."""
        with self._transaction(write=True) as conn:
            nodes, edges = (
                _column(conn, _SUPPORTED_BY.format(table=table), (document_id, dataset))
                for table in ("nodes", "edges")
            )
            conn.execute(
                f"DELETE FROM support WHERE document_id = ?2 AND item_id IN {_SET1}",
                (_ids(nodes + edges), document_id),
            )
            return self._remove(
                conn,
                _column(conn, _UNSUPPORTED, (_ids(nodes),)),
                _column(conn, _UNSUPPORTED, (_ids(edges),)),
            )

    def delete_dataset(self, dataset: str) -> Removed:
        """Remove every node and edge of a dataset (and its redirects). Raises StoreError."""
        with self._transaction(write=True) as conn:
            nodes = _column(conn, "SELECT id FROM nodes WHERE dataset = ?", (dataset,))
            edges = _column(conn, "SELECT id FROM edges WHERE dataset = ?", (dataset,))
            conn.execute("DELETE FROM redirects WHERE dataset = ?", (dataset,))
            return self._remove(conn, nodes, edges)

    def delete_nodes(self, ids: Sequence[str]) -> Removed:
        """Remove nodes by id, whatever their support, with their edges. Raises StoreError."""
        with self._transaction(write=True) as conn:
            return self._remove(conn, _column(conn, _STORED_NODES, (_ids(ids),)), [])

    def merge_nodes(self, ids: Sequence[str], into: str) -> Merged:
        """Atomically move the nodes' support and edges onto `into`, remove them and redirect
        their ids to it (until the dataset is deleted). ValueError when `into` is not stored."""
        with self._transaction(write=True) as conn:
            rows = conn.execute(
                f"SELECT id, dataset FROM nodes WHERE id IN {_SET1}", (_ids([into]),)
            )
            [dataset] = [d for _, d in rows] or [None]
            if dataset is None:
                raise ValueError(f"cannot merge into {into!r}: it is not a stored node")
            members = sorted(set(_column(conn, _STORED_NODES, (_ids(ids),))) - {into})
            if not members:
                return Merged()
            support = _support_of(conn, members)
            conn.executemany(
                _ADD_SUPPORT,
                [(into, s.document_id, s.chunk_id) for m in members for s in support[m]],
            )
            touching = _edges(
                conn, conn.execute(f"{_EDGE_COLUMNS} WHERE {_TOUCHING}", (_ids(members),))
            )
            moved = graph_merge.repoint(
                sorted(touching, key=lambda e: (e.source, e.name, e.target)),
                dict.fromkeys(members, into),
            )
            removed = self._remove(conn, members, [])
            _write_edges(conn, moved)
            conn.execute(_ADD_REDIRECTS, (_ids(members), dataset, into))
            return Merged(node_ids=removed.node_ids, edge_ids=removed.edge_ids, support=support)

    @staticmethod
    def _remove(conn: sqlite3.Connection, node_ids: list[str], edge_ids: list[str]) -> Removed:
        """Delete nodes, edges and the edges the nodes leave dangling, with their support."""
        nodes = _ids(node_ids)
        edge_set = set(edge_ids).union(
            _column(conn, f"SELECT id FROM edges WHERE {_TOUCHING}", (nodes,))
        )
        edges = _ids(edge_set)
        conn.execute(f"DELETE FROM edges WHERE id IN {_SET1}", (edges,))
        conn.execute(f"DELETE FROM nodes WHERE id IN {_SET1}", (nodes,))
        conn.execute(f"DELETE FROM node_times WHERE id IN {_SET1}", (nodes,))
        for items in (nodes, edges):
            conn.execute(f"DELETE FROM support WHERE item_id IN {_SET1}", (items,))
        return Removed(node_ids=sorted(set(node_ids)), edge_ids=sorted(edge_set))

    # -- reads -------------------------------------------------------------------------------

    def existing(self, ids: Sequence[str]) -> set[str]:
        """Which of these node ids are stored (without loading the nodes). Raises StoreError."""
        with self._transaction() as conn:
            return set(_column(conn, _STORED_NODES, (_ids(ids),)))

    def get_nodes(self, ids: Sequence[str]) -> list[Node]:
        """Nodes with these ids, in the order asked (missing ids are skipped). Raises StoreError."""
        with self._transaction() as conn:
            found = {node.id: node for node in _load_nodes(conn, ids)}
        return [found[i] for i in dict.fromkeys(ids) if i in found]

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
        query = f"{_NODE_COLUMNS} WHERE dataset = ? AND type = ?"
        params: list[Any] = [dataset, type]
        if name is not None:
            query += " AND name = ?"
            params.append(name)
        with self._transaction() as conn:
            rows = conn.execute(f"{query} ORDER BY id LIMIT ? OFFSET ?", [*params, limit, offset])
            return _nodes(conn, rows)

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
                        found += _time_branch(conn, dataset, type_, branch, start, end, limit)
            found.sort()
            return _load_nodes(conn, [row[-1] for row in found[:limit]], ordered=True)

    def edges_of(
        self,
        node_ids: Sequence[str],
        *,
        names: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        limit: int = 1000,
    ) -> list[Edge]:
        """Edges touching `node_ids` (only `names` if given, never `exclude`), at most `limit`."""
        query = (
            f"{_EDGE_COLUMNS} WHERE ({_TOUCHING})"
            " AND (?3 IS NULL OR name IN (SELECT value FROM json_each(?3)))"
            " AND name NOT IN (SELECT value FROM json_each(?4)) LIMIT ?2"
        )
        wanted = None if names is None else _ids(names)
        with self._transaction() as conn:
            rows = conn.execute(query, (_ids(node_ids), limit, wanted, _ids(exclude)))
            return _edges(conn, rows)

    def neighbourhood(
        self, node_ids: Sequence[str], *, hops: int = 1, limit: int = 500
    ) -> Subgraph:
        """Nodes within `hops` of the seeds, nearest first, at most `limit`; edges among them."""
        if hops < 0 or limit < 0:
            raise ValueError(f"hops and limit must be >= 0, got {hops} and {limit}")
        with self._transaction() as conn:
            stored = set(_column(conn, _STORED_NODES, (_ids(node_ids),)))
            reached = [i for i in dict.fromkeys(node_ids) if i in stored][:limit]
            frontier = reached
            for _ in range(hops):
                room = limit - len(reached)
                if not frontier or room <= 0:
                    break
                frontier = _column(conn, _NEIGHBOURS, (_ids(frontier), _ids(reached), room))
                reached = reached + frontier
            edges = _edges(conn, conn.execute(_AMONG, (_ids(reached),)))
            nodes = {node.id: node for node in _load_nodes(conn, reached)}
        return Subgraph(nodes=[nodes[i] for i in reached if i in nodes], edges=edges)

    def count(self, dataset: str) -> dict[str, int]:
        """Node counts per type and the edge count (key "edges") of a dataset."""
        by_type = "SELECT type, count(*) FROM nodes WHERE dataset = ? GROUP BY type"
        with self._transaction() as conn:
            counts = dict(conn.execute(by_type, (dataset,)).fetchall())
            edges = conn.execute("SELECT count(*) FROM edges WHERE dataset = ?", (dataset,))
            counts["edges"] = edges.fetchone()[0]
        return counts


def _write_edges(conn: sqlite3.Connection, edges: Sequence[Edge]) -> None:
    """Upsert edges whose ends are stored, with their support."""
    rows = [(e.id, e.source, e.name, e.target, e.dataset, _dumps(e.properties)) for e in edges]
    support = [(e.id, s.document_id, s.chunk_id) for e in edges for s in e.support]
    conn.executemany(_UPSERT_EDGE, rows)
    conn.executemany(_ADD_SUPPORT, support)


def _resolve(conn: sqlite3.Connection, missing: Iterable[str]) -> dict[str, str]:
    """Missing node ids that redirects lead to a stored node: id -> that node."""
    return graph_merge.resolve(
        missing,
        lambda ids: dict(conn.execute(_REDIRECTS, (_ids(ids),)).fetchall()),
        lambda ids: set(_column(conn, _STORED_NODES, (_ids(ids),))),
    )


def _raise_if_missing(missing: Sequence[str]) -> None:
    """ValueError naming a few edge endpoints that are not stored nodes."""
    if missing:
        raise ValueError(
            f"{len(missing)} edge endpoint(s) are not stored nodes, e.g. "
            f"{sorted(missing)[:3]}; upsert the nodes before their edges"
        )


def _load_nodes(
    conn: sqlite3.Connection, ids: Iterable[str], *, ordered: bool = False
) -> list[Node]:
    """Nodes with these ids, in storage order (or in the order of `ids`)."""
    ids = list(ids)
    nodes = _nodes(conn, conn.execute(f"{_NODE_COLUMNS} WHERE id IN {_SET1}", (_ids(ids),)))
    if not ordered:
        return nodes
    by_id = {node.id: node for node in nodes}
    return [by_id[i] for i in ids if i in by_id]


def _time_branch(
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


def _nodes(conn: sqlite3.Connection, rows: Iterable[tuple]) -> list[Node]:
    """Node records from `_NODE_COLUMNS` rows, with their support."""
    rows = list(rows)
    support = _support_of(conn, [row[0] for row in rows])
    return [
        Node(id=i, type=t, dataset=d, name=n, properties=_loads(p), support=support[i])
        for i, t, d, n, p in rows
    ]


def _edges(conn: sqlite3.Connection, rows: Iterable[tuple]) -> list[Edge]:
    """Edge records from `_EDGE_COLUMNS` rows, with their support."""
    rows = list(rows)
    support = _support_of(conn, [row[0] for row in rows])
    return [
        Edge(source=s, name=n, target=t, dataset=d, properties=_loads(p), support=support[i])
        for i, s, n, t, d, p in rows
    ]


def _support_of(conn: sqlite3.Connection, item_ids: list[str]) -> dict[str, list[Support]]:
    """The support of each item, read in one query."""
    support: dict[str, list[Support]] = {item_id: [] for item_id in item_ids}
    query = f"SELECT item_id, document_id, chunk_id FROM support WHERE item_id IN {_SET1}"
    for item_id, document_id, chunk_id in conn.execute(query, (_ids(support),)):
        support[item_id].append(Support(document_id=document_id, chunk_id=chunk_id))
    return support
