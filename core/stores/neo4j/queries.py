"""The Cypher text of the Neo4j graph store (core/stores/neo4j/graph.py), kept apart so
that the adapter reads as Python. The data model is described there.
"""

from __future__ import annotations

import re

from core.stores import timeline

SCHEMA = (
    "CREATE CONSTRAINT cogmill_node_id IF NOT EXISTS FOR (n:Node) REQUIRE n.id IS UNIQUE",
    # (dataset, type, id): per-dataset scans, and find_nodes pages in index order (no sort).
    "CREATE INDEX cogmill_node_type IF NOT EXISTS FOR (n:Node) ON (n.dataset, n.type, n.id)",
    "CREATE INDEX cogmill_node_name IF NOT EXISTS FOR (n:Node) ON (n.dataset, n.name)",
    "CREATE INDEX cogmill_rel_dataset IF NOT EXISTS FOR ()-[r:REL]-() ON (r.dataset)",
    # find_in_time: one seek per (dataset, type, bin), in position order (core/stores/timeline.py).
    "CREATE INDEX cogmill_node_time IF NOT EXISTS"
    " FOR (n:Node) ON (n.dataset, n.type, n._tb, n._tp)",
    "CREATE CONSTRAINT cogmill_support_key IF NOT EXISTS FOR (p:_Support) REQUIRE p.key IS UNIQUE",
    "CREATE INDEX cogmill_support_doc IF NOT EXISTS FOR (p:_Support) ON (p.dataset, p.doc)",
    # merge_nodes: a merged-away node's id -> the node it went into (core/stores/graph_merge).
    "CREATE CONSTRAINT cogmill_redirect_id IF NOT EXISTS FOR (r:_Redirect) REQUIRE r.id IS UNIQUE",
    "CREATE INDEX cogmill_redirect_dataset IF NOT EXISTS FOR (r:_Redirect) ON (r.dataset)",
)
# What the store waits for at start (a constraint's index has its name): its own, not every
# index of a database it may share with another application, which may never come online.
SCHEMA_NAMES = tuple(re.findall(r"(?:CONSTRAINT|INDEX) (\w+) IF NOT EXISTS", " ".join(SCHEMA)))
UNREADY_INDEXES = (
    "SHOW INDEXES YIELD name, state WHERE name IN $names AND state <> 'ONLINE' RETURN name"
)
# The existence predicates are always true; they let the planner seek the (dataset, type, id)
# index with the dataset alone, where it would otherwise scan every :Node.
IN_DATASET = "MATCH (n:Node {dataset: $dataset}) WHERE n.type IS NOT NULL AND n.id IS NOT NULL"

UPSERT_NODES = """UNWIND $rows AS row MERGE (n:Node {id: row.id})
ON CREATE SET n.type = row.type, n.dataset = row.dataset, n:$(row.labels), n.name = row.name
SET n.name = CASE row.name WHEN '' THEN n.name ELSE row.name END, n += row.props"""
# Runs after UPSERT_NODES in its transaction, which holds the nodes' locks by then; the
# _Support nodes are locked in key order, so writers of the same chunks take them alike.
LINK_SUPPORT = """UNWIND $links AS link MERGE (p:_Support {key: link.key})
ON CREATE SET p.dataset = link.dataset, p.doc = link.doc, p.pair = link.pair
WITH p, link MATCH (n:Node {id: link.node}) MERGE (p)-[:SUPPORTS]->(n)"""
SUPPORT_MOVED = "MATCH (s:_Schema {support: 'nodes'}) RETURN count(s) > 0"
SERVER_STARTED = """CALL dbms.queryJmx('java.lang:type=Runtime') YIELD attributes
RETURN attributes.StartTime.value"""
OLD_SUPPORT = """MATCH (n:Node) WHERE n._support IS NOT NULL WITH n LIMIT $batch
RETURN collect([n.id, n.dataset, n._support])"""
# A node map as `_node` reads it: the properties plus the support pairs.
NODE = "n{.*, _support: COLLECT { MATCH (n)<-[:SUPPORTS]-(p:_Support) RETURN p.pair }}"
# The time bin `_tb` and position `_tp` of a node from its merged start_epoch / end_epoch.
NUMBER = "CASE WHEN n.{0} IS :: INTEGER NOT NULL | FLOAT NOT NULL THEN n.{0} END"
TIME_BIN = f"""WITH n, {NUMBER.format(timeline.START)} AS lo, {NUMBER.format(timeline.END)} AS hi
SET n._tp = coalesce(lo, hi), n._tb = CASE WHEN lo IS NULL AND hi IS NULL THEN null
    WHEN lo IS NULL THEN {timeline.OPEN_START} WHEN hi IS NULL THEN {timeline.OPEN_END}
    ELSE {timeline.FIRST_BIN} + size([b IN {list(timeline.BOUNDS)} WHERE b <= hi - lo]) END"""

MISSING = "UNWIND $ids AS id WITH id WHERE NOT EXISTS { (:Node {id: id}) } RETURN collect(id)"
# Write-locks a batch's endpoints in id order before any edge is merged: MERGE would lock
# each edge's two ends as it goes, in an order that deadlocks against other writers.
LOCK_ENDS = """UNWIND $ids AS id MATCH (n:Node {id: id})
SET n._lock = true REMOVE n._lock RETURN collect(id)"""
# Claims (core/stores/neo4j/facts.py) come as [prefix, claim]: one whose (document, chunk)
# prefix is kept already is not added again.
UPSERT_EDGES = """UNWIND $rows AS row
MATCH (a:Node {id: row.source}) MATCH (b:Node {id: row.target})
MERGE (a)-[r:REL {name: row.name}]->(b)
ON CREATE SET r.id = row.id, r.dataset = row.dataset, r._support = [], r._docs = []
SET r += row.props, r._support = r._support + [s IN row.support WHERE NOT s IN r._support],
    r._docs = r._docs + [d IN row.docs WHERE NOT d IN r._docs],
    r._claims = CASE WHEN row.claims = [] THEN r._claims ELSE coalesce(r._claims, [])
        + [c IN row.claims WHERE none(x IN coalesce(r._claims, []) WHERE x STARTS WITH c[0])
            | c[1]] END"""
EDGE = "{s: startNode(r).id, t: endNode(r).id, p: properties(r)}"
# A relationship's key and group, when it is a fact with claims or a group (facts.py).
TIMED = """CASE WHEN r._claims IS NULL AND r.fact_group IS NULL THEN null
    ELSE [r.id, startNode(r).id, r.name, endNode(r).id, r.fact_group, r.fact_side] END"""
# Deleting nodes: the ids of the edges they take with them come back with theirs, and the
# facts among those edges (their subjects' validity is derived again).
DETACH = f"""OPTIONAL MATCH (n)-[r:REL]-() WITH n, id, collect(r.id) AS rels,
    collect({TIMED}) AS timed
DETACH DELETE n RETURN id, rels, timed"""
# Edge deletes return [deleted ids, facts changed].
DOC_EDGES = f"""MATCH ()-[r:REL {{dataset: $dataset}}]->() WHERE $doc IN r._docs
WITH r, {TIMED} AS timed
SET r._support = [s IN r._support WHERE NOT s STARTS WITH $prefix],
    r._docs = [d IN r._docs WHERE d <> $doc],
    r._claims = CASE WHEN r._claims IS NULL THEN null
        ELSE [c IN r._claims WHERE NOT c STARTS WITH $prefix] END
WITH r, r.id AS id, timed, r._support = [] AS gone
FOREACH (_ IN CASE WHEN gone THEN [1] ELSE [] END | DELETE r)
RETURN [collect(CASE WHEN gone THEN id END), collect(timed)]"""
# A node is locked before "is any support left?" is asked, so support another writer is
# adding at that moment is either seen or waited for, never deleted with the node.
DOC_NODES = f"""MATCH (p:_Support {{dataset: $dataset, doc: $doc}})
OPTIONAL MATCH (p)-[:SUPPORTS]->(n:Node)
WITH collect(DISTINCT p) AS chunks, collect(DISTINCT n) AS nodes
FOREACH (p IN chunks | DETACH DELETE p)
WITH nodes UNWIND nodes AS n WITH n ORDER BY n.id SET n._lock = true REMOVE n._lock
WITH n, n.id AS id WHERE NOT EXISTS {{ (n)<-[:SUPPORTS]-() }}
{DETACH}"""
DATASET_SUPPORT = """MATCH (p:_Support {dataset: $dataset}) WHERE p.doc IS NOT NULL
WITH p LIMIT $batch DETACH DELETE p RETURN count(*)"""
DATASET_EDGES = """MATCH ()-[r:REL {dataset: $dataset}]->() WITH r, r.id AS id LIMIT $batch
DELETE r RETURN [collect(id), []]"""
DATASET_NODES = f"{IN_DATASET} WITH n, n.id AS id LIMIT $batch {DETACH}"
# The _Support nodes that supported only the deleted nodes go with them (locked first, as in
# DOC_NODES, so a link another writer is adding is never deleted with them).
DELETE_NODES = f"""CALL () {{ UNWIND $ids AS id MATCH (:Node {{id: id}})<-[:SUPPORTS]-(p:_Support)
    WITH DISTINCT p ORDER BY p.key SET p._lock = true REMOVE p._lock
    WITH p WHERE NOT EXISTS {{ (p)-[:SUPPORTS]->(m) WHERE NOT m.id IN $ids }}
    DETACH DELETE p }}
UNWIND $ids AS id MATCH (n:Node {{id: id}}) {DETACH}"""
STORED = "UNWIND $ids AS id MATCH (n:Node {id: id}) RETURN collect(n.id)"
# LIMIT stops the expansion after `room` new nodes instead of reading all of a hub's edges.
NEIGHBOURS = """UNWIND $ids AS id MATCH (:Node {id: id})-[:REL]-(m:Node)
WHERE NOT m.id IN $reached WITH DISTINCT m.id AS id LIMIT $room RETURN collect(id)"""
AMONG = f"""UNWIND $ids AS id MATCH (a:Node {{id: id}})-[r:REL]->(b:Node)
WHERE b.id IN $ids RETURN collect({EDGE})"""
EDGES_OF = f"""UNWIND $ids AS id MATCH (:Node {{id: id}})-[r:REL]-()
WHERE ($names IS NULL OR r.name IN $names) AND NOT r.name IN $exclude
WITH DISTINCT r LIMIT $limit RETURN collect({EDGE})"""
# EDGES_OF's match and limit (no `names`), returning the ends and name only (relation_ends).
_RELATIONS = """UNWIND ${ids} AS id MATCH (:Node {{id: id}})-[r:REL]-()
WHERE NOT r.name IN $exclude
AND ($containing IS NULL OR any(w IN $containing WHERE toLower(r.name) CONTAINS w))
WITH DISTINCT r LIMIT ${limit} RETURN collect([startNode(r).id, r.name, endNode(r).id])"""
RELATION_ENDS = _RELATIONS.format(ids="ids", limit="limit")
# EDGES_OF's match and limit, returning the ends only (edge_ends).
EDGE_ENDS = """UNWIND $ids AS id MATCH (:Node {id: id})-[r:REL]-()
WHERE r.name IN $names WITH DISTINCT r LIMIT $limit
RETURN collect([startNode(r).id, endNode(r).id])"""
# Name, support count and support chunks of a node `n` (node_chunks); past $most the count
# alone (from the node's degree, not its support). A plain support pair comes as its chunk
# id, split here (codec.chunk_ids), others as [pair].
_NODE_CHUNKS = """WITH n, COUNT { (n)<-[:SUPPORTS]-() } AS supports
RETURN collect([n.id, n.name, supports, CASE WHEN supports > $most THEN [] ELSE
    COLLECT { MATCH (n)<-[:SUPPORTS]-(p:_Support) WITH p.pair AS pair, split(p.pair, '"') AS parts
        RETURN CASE WHEN size(parts) = 5 AND NOT pair CONTAINS '\\\\' THEN parts[3]
            ELSE [pair] END } END])"""
NODE_CHUNKS = f"""UNWIND $ids AS id MATCH (n:Node {{id: id}}) WHERE n.type = $type
{_NODE_CHUNKS}"""
# EDGE_ENDS of the chunks, RELATION_ENDS of the relation sources and NODE_CHUNKS of the
# entities, the ends reached and the far ends of relations named by a `far` word, one read.
FRONTIER = f"""CALL () {{ UNWIND $ids AS id MATCH (:Node {{id: id}})-[r:REL]-()
    WHERE r.name IN $names WITH DISTINCT r LIMIT $limit
    RETURN collect([startNode(r).id, endNode(r).id]) AS ends }}
CALL () {{ {_RELATIONS.format(ids="relation_ids", limit="relation_limit")} AS relations }}
WITH ends, relations, $entities + [e IN ends WHERE e[0] IN $ids | e[1]]
    + [e IN ends WHERE e[1] IN $ids | e[0]]
    + reduce(far = [], e IN relations | far + CASE WHEN
        any(w IN $far WHERE toLower(e[1]) CONTAINS w) THEN [e[0], e[2]] ELSE [] END) AS reached
CALL (reached) {{ UNWIND reached AS id WITH DISTINCT id WHERE NOT id IN $skip
    MATCH (n:Node {{id: id}}) WHERE n.type = $type {_NODE_CHUNKS} AS nodes }}
RETURN [ends, nodes, relations]"""

# merge_nodes (writes.merge).
MEMBER_SUPPORT = """UNWIND $ids AS id MATCH (:Node {id: id})<-[:SUPPORTS]-(p:_Support)
RETURN collect([id, p.key, p.pair])"""
MOVE_SUPPORT = """MATCH (t:Node {id: $into}) UNWIND $keys AS key MATCH (p:_Support {key: key})
MERGE (p)-[:SUPPORTS]->(t)"""
MEMBER_EDGES = f"""UNWIND $ids AS id MATCH (:Node {{id: id}})-[r:REL]-()
WITH DISTINCT r RETURN collect({EDGE})"""
REDIRECT = (
    """UNWIND $ids AS id MERGE (r:_Redirect {id: id}) SET r.dataset = $dataset, r.to = $into"""
)
REDIRECTS = "UNWIND $ids AS id MATCH (r:_Redirect {id: id}) RETURN collect([id, r.to])"
DATASET_REDIRECTS = """MATCH (r:_Redirect {dataset: $dataset}) WITH r LIMIT $batch
DELETE r RETURN count(*)"""


def find_nodes(*, by_name: bool, by_names: bool) -> str:
    """A page of one type's nodes in a dataset by id order, of `$name` (`by_name`) and of any
    of `$names` (`by_names`)."""
    named = "AND n.name = $name" if by_name else ""
    if by_names:
        named += " AND n.name IN $names"
    # Ordered like the (dataset, type, id) index, so pages come from it without a sort; by
    # name, from the (dataset, name) index (the planner would scan every node of the type).
    hint, order = (
        ("USING INDEX n:Node(dataset, name)", "n.id") if named else ("", "n.dataset, n.type, n.id")
    )
    return f"""MATCH (n:Node {{dataset: $dataset, type: $type}}) {hint}
            WHERE n.id IS NOT NULL {named}
            WITH n ORDER BY {order} SKIP $offset LIMIT $limit
            RETURN collect({NODE})"""
