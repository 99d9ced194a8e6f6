"""The SQL of the embedded graph store (see graph.py): schema and statements."""

from __future__ import annotations

from core.stores import timeline

# nodes and edges are rowid tables on purpose: rows are appended in write order and only
# their thin key indexes take random uuid keys; as WITHOUT ROWID tables (wide rows on
# random pages) batched writes took 1.5-2x as long. `support` rows are all key, so there
# WITHOUT ROWID saves a copy of each row and keeps reads index-only.
SCHEMA = (
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
# table kept by upsert_nodes and tx.remove, as properties are JSON text that no
# index can order.
TIME_SCHEMA = (
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
INDEX_TIMES = f"""INSERT OR REPLACE INTO node_times (id, dataset, type, bin, pos, lo, hi)
SELECT id, dataset, type, time_bin(lo, hi), coalesce(lo, hi), lo, hi FROM (
    SELECT id, dataset, type, {_NUMBER.format(timeline.START)} AS lo,
        {_NUMBER.format(timeline.END)} AS hi FROM nodes WHERE {{where}}
) WHERE lo IS NOT NULL OR hi IS NOT NULL"""

# The id sets of parameters 1 and 2, each bound as one JSON array.
SET1 = "(SELECT value FROM json_each(?1))"
SET2 = "(SELECT value FROM json_each(?2))"
NODE_COLUMNS = "SELECT id, type, dataset, name, properties FROM nodes"
EDGE_COLUMNS = "SELECT id, source, name, target, dataset, properties FROM edges"

UPSERT_NODE = """INSERT INTO nodes (id, type, dataset, name, properties) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET
    name = CASE WHEN excluded.name <> '' THEN excluded.name ELSE nodes.name END,
    properties = merge_properties(nodes.properties, excluded.properties)"""
UPSERT_EDGE = """INSERT INTO edges (id, source, name, target, dataset, properties)
VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (source, name, target) DO UPDATE SET
    properties = merge_properties(edges.properties, excluded.properties)"""
ADD_SUPPORT = "INSERT OR IGNORE INTO support (item_id, document_id, chunk_id) VALUES (?, ?, ?)"
MISSING_NODES = "SELECT value FROM json_each(?1) WHERE value NOT IN (SELECT id FROM nodes)"
STORED_NODES = "SELECT value FROM json_each(?1) WHERE value IN (SELECT id FROM nodes)"
TOUCHING = f"source IN {SET1} OR target IN {SET1}"
REDIRECTS = f"SELECT id, target FROM redirects WHERE id IN {SET1}"
ADD_REDIRECTS = """INSERT OR REPLACE INTO redirects (id, dataset, target)
SELECT value, ?2, ?3 FROM json_each(?1)"""
# CROSS JOIN pins the join order: start from the document's support rows, not the dataset.
SUPPORTED_BY = """SELECT DISTINCT s.item_id FROM support AS s CROSS JOIN {table} AS t
ON t.id = s.item_id WHERE s.document_id = ?1 AND t.dataset = ?2"""
UNSUPPORTED = """SELECT value FROM json_each(?1)
WHERE NOT EXISTS (SELECT 1 FROM support WHERE item_id = value)"""
# `+target` keeps SQLite from probing every (target, source) pair of the set (n² seeks);
# walking each node's outgoing edges instead costs its out-degree.
AMONG = f"{EDGE_COLUMNS} WHERE source IN {SET1} AND +target IN {SET1}"
# Stops after ?3 new ids rather than reading every edge of a hub.
NEIGHBOURS = f"""SELECT DISTINCT nb FROM (
    SELECT target AS nb FROM edges WHERE source IN {SET1}
    UNION ALL SELECT source FROM edges WHERE target IN {SET1}
) WHERE nb NOT IN {SET2} LIMIT ?3"""
# edge_ends: `id` is selected only to keep edges_of's plan (a non-covering index walk): the
# order, and so which edges a hit limit keeps, stays the same.
EDGE_ENDS = f"""SELECT id, source, target FROM edges WHERE ({TOUCHING})
AND name IN (SELECT value FROM json_each(?3)) LIMIT ?2"""
# node_chunks: names of the nodes of one type, then their support records' chunks (empty for
# a whole document's) in the order support_of reads them (the primary key's: item, document,
# chunk).
NAMES_OF_TYPE = f"SELECT id, name FROM nodes WHERE id IN {SET1} AND type = ?2"
SUPPORT_CHUNKS = f"""SELECT item_id, chunk_id FROM support WHERE item_id IN {SET1}
ORDER BY item_id, document_id, chunk_id"""
# relation_ends: two index walks instead of edges_of's OR (the outgoing half is index-only, its
# primary key), ~40% less CPU than the OR plan on GRAPH_PPR's frontiers.
_RELATION_HALF = f"""SELECT source, name, target FROM edges WHERE {{}} IN {SET1}
AND name NOT IN (SELECT value FROM json_each(?3)) AND (?4 IS NULL OR EXISTS
(SELECT 1 FROM json_each(?4) WHERE instr(lower(name), value) > 0))"""
RELATION_ENDS = f"""{_RELATION_HALF.format("source")} UNION ALL {_RELATION_HALF.format("target")}
AND source NOT IN {SET1} LIMIT ?2"""
