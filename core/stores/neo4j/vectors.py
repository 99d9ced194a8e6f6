"""Vectors as nodes in Neo4j 5 (single-database mode): one vector index per collection.

Layout: a point is a node `:<ns>Vector:<ns>Vec_<collection>` with `id`, `dataset`, `payload`
(JSON) and `embedding`. Per collection: a uniqueness constraint on `id` (MERGE needs it to stay
duplicate-free under concurrent writers), a range index on `dataset` and a cosine vector index.
On `:<ns>Vector`: range indexes on `id` and `dataset` for deletes across collections.

Facts this adapter leans on (Neo4j 5.26, checked by experiment):
- Vector indexes quantize unless told not to; scores are then inexact.
- `queryNodes` and `vector.similarity.cosine` both score (1 + cos) / 2; we return cos.
- `CREATE ... IF NOT EXISTS` does nothing when another index covers the same label and
  property, and two processes creating the same rule at once get
  EquivalentSchemaRuleAlreadyExists: so we verify the index after creating it.
- The vector index has no filter: rare datasets need over-fetching or an exact scan.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

import neo4j
from neo4j.exceptions import Neo4jError

from core.models.vectors import VectorHit, VectorPoint, check_collection, check_dim, point_id
from core.ports import StoreError, VectorQuery
from core.sequences import batched
from core.stores.neo4j.connection import AWAIT_INDEX, INDEX_TIMEOUT_S, Neo4jConnection, Rows

_NAMESPACE = re.compile(r"[A-Za-z][A-Za-z0-9]{0,31}")
_WRITE_BATCH = 1000  # rows per UNWIND transaction: ~1.5 MB of parameters at 384 dims
_DELETE_BATCH = 5000  # nodes removed per transaction, so a big dataset never needs one huge tx
# HNSW candidates before the dataset filter: on 20k random 384-d vectors k=100 finds 94% of
# the true top 10 (k=40: 81%), at ~30 ms per query against ~60 ms for k=1600.
_OVERFETCH = 4
_MIN_K = 100
_MAX_K = 4096
# An exact scan costs ~17 us per point of the datasets (Neo4j 5.26, 384-d): datasets this
# small are scanned at once instead of widening the HNSW search.
_EXACT_SCAN_MAX = 2000
# HNSW build effort (`ef_construction`; Neo4j's default is 100). Measured on 8,059 MiniLM
# sentence vectors with 300 held-out queries: 50 costs Neo4j a third less CPU to insert and
# merge them, and recall moves from 0.9993 to 0.9987 (top 10 of k=100) and from 0.987 to 0.982
# (top 5 of k=24). Ingestion writes several vectors per chunk: this is much of Neo4j's work.
_EF_CONSTRUCTION = 50
# Attempts of an upsert batch that meets a point deleted under it (see `_upsert_batch`).
_UPSERT_ATTEMPTS = 5

# Cross-collection indexes (deletes) first, then the collection's own rules.
_SCHEMA = (
    "CREATE INDEX {ns}_vector_id IF NOT EXISTS FOR (n:`{base}`) ON (n.id)",
    "CREATE INDEX {ns}_vector_dataset IF NOT EXISTS FOR (n:`{base}`) ON (n.dataset)",
    "CREATE CONSTRAINT {index}_id IF NOT EXISTS FOR (n:`{label}`) REQUIRE n.id IS UNIQUE",
    "CREATE INDEX {index}_dataset IF NOT EXISTS FOR (n:`{label}`) ON (n.dataset)",
    "CREATE VECTOR INDEX {index} IF NOT EXISTS FOR (n:`{label}`) ON n.embedding OPTIONS "
    "{{indexConfig: {{`vector.dimensions`: {dim}, `vector.similarity_function`: 'cosine', "
    "`vector.quantization.enabled`: false, `vector.hnsw.ef_construction`: {ef}}}}}",
)
# One encoder for every payload: json.dumps builds a new one per call when given options.
_PAYLOAD = json.JSONEncoder(sort_keys=True)
_SHOW_INDEX = "SHOW VECTOR INDEXES YIELD name, options, state WHERE name = $name"
# A point whose stored vector equals the new one keeps it: ingestion re-embeds every entity
# and relation name it writes (pipelines/add_data_points.py), most of them stored already, and
# setting an equal vector cost Neo4j about as much again as comparing it (~0.2 ms a point).
_UPSERT = """
UNWIND $rows AS row
MERGE (n:`{coll}` {{id: row.id}})
ON CREATE SET n:`{base}`
SET n.dataset = row.dataset, n.payload = row.payload
WITH n, row WHERE n.embedding IS NULL OR n.embedding <> row.vector
CALL db.create.setNodeVectorProperty(n, 'embedding', row.vector)
"""
_QUERY_INDEX = """
CALL db.index.vector.queryNodes($index, $k, $vector) YIELD node, score
WITH node, score ORDER BY score DESC
WITH count(*) AS seen, collect(CASE WHEN node.dataset IN $datasets
  THEN [node.id, score, node.dataset, node.payload] END) AS hits
RETURN seen, hits[..$limit] AS hits
"""
# The same, for many searches in one round trip (`[i, seen, hits]` answers `$queries[i]`:
# index, k, vector, limit); first the point counts of collections not known to exist, from
# the count store (`{probes}`: a SHOW of their index would be a round trip of its own).
_QUERY_BATCH = """{probes} CALL () {{
UNWIND range(0, size($queries) - 1) AS i
WITH i, $queries[i] AS q
CALL db.index.vector.queryNodes(q.index, q.k, q.vector) YIELD node, score
WITH i, q.limit AS limit, node, score ORDER BY i, score DESC
WITH i, limit, count(*) AS seen, collect(CASE WHEN node.dataset IN $datasets
  THEN [node.id, score, node.dataset, node.payload] END) AS hits
RETURN collect([i, seen, hits[..limit]]) AS found }}
RETURN [{sizes}] AS sizes, found"""
_PROBE = "CALL () {{ MATCH (n:`{label}`) RETURN count(n) AS size{at} }}"
_EXACT_SCAN = """
MATCH (n:`{coll}`) WHERE n.dataset IN $datasets
WITH n, vector.similarity.cosine(n.embedding, $vector) AS score
ORDER BY score DESC LIMIT $limit
RETURN [n.id, score, n.dataset, n.payload] AS hit
"""


def _hit(row: list[Any]) -> VectorHit:
    """A hit from `[id, normalised score, dataset, payload JSON]`."""
    point_id, score, dataset, payload = row
    cosine = max(-1.0, min(1.0, 2.0 * score - 1.0))  # Neo4j scores (1 + cos) / 2
    return VectorHit(id=point_id, score=cosine, payload={**json.loads(payload), "dataset": dataset})


class Neo4jVectorStore:
    """VectorStore on Neo4j vector indexes; `namespace` prefixes every label and schema name."""

    def __init__(
        self,
        uri: str,
        dim: int,
        *,
        user: str = "neo4j",
        password: str = "",
        database: str = "neo4j",
        namespace: str = "Cogmill",
        timeout: float = 30.0,
    ) -> None:
        if dim < 1:
            raise ValueError(f"vector dimension must be positive, got {dim}")
        if not _NAMESPACE.fullmatch(namespace):
            raise ValueError(f"bad namespace {namespace!r}: a letter, then letters or digits")
        self.dim, self.database, self.namespace = dim, database, namespace
        self._base = f"{namespace}Vector"
        # `timeout` bounds both connecting and retrying transient failures (a restarting server).
        self._conn = Neo4jConnection(
            uri,
            user=user,
            password=password,
            database=database,
            connection_timeout=timeout,
            max_transaction_retry_time=timeout,
        )
        self.where, self._driver = self._conn.where, self._conn.driver
        self._lock = threading.Lock()  # serialises schema creation within this process
        self._ready: set[str] = set()  # collections whose schema is known to be in place

    def _errors(self, action: str) -> AbstractContextManager[None]:
        """Driver errors as StoreError naming the server and the action (also once closed)."""
        return self._conn.errors(f"vector {action}")

    def _run(self, query: str, **params: Any) -> list[neo4j.Record]:
        """Run one query in a managed (retried) transaction and return its records."""
        return self._conn.transaction(_records, {"query": query, "values": params})

    def _search(self, query: str, **params: Any) -> list[neo4j.Record]:
        """Run one read-only query auto-committed (`Neo4jConnection.read`) and return its
        records: searches skip a managed transaction's BEGIN and COMMIT."""
        return self._conn.read(query, params)

    def _label(self, collection: str) -> str:
        return f"{self.namespace}Vec_{collection}"

    def _index(self, collection: str) -> str:
        return f"{self.namespace}_vec_{collection}"

    def _ddl(self, template: str, **names: str) -> None:
        """Create a schema rule; losing a creation race to another process is no error."""
        try:
            query = template.format(
                ns=self.namespace, base=self._base, dim=self.dim, ef=_EF_CONSTRUCTION, **names
            )
            self._run(query)
        except Neo4jError as err:
            if err.code != "Neo.ClientError.Schema.EquivalentSchemaRuleAlreadyExists":
                raise

    def _ensure_collection(self, collection: str) -> None:
        """Create the collection's schema if missing, then verify and await its vector index."""
        if collection in self._ready:
            return
        names = {"label": self._label(collection), "index": self._index(collection)}
        with self._lock, self._errors("schema creation"):
            if collection in self._ready:
                return
            for template in _SCHEMA:
                self._ddl(template, **names)
            if not self._find_index(collection):
                raise StoreError(
                    f"vector index {names['index']} was not created on {self.where}: "
                    f"does another index cover :{names['label']}(embedding)?"
                )
            self._ready.add(collection)

    def _find_index(self, collection: str) -> bool:
        """Whether the collection's vector index exists; checks its config and awaits it."""
        index = self._index(collection)
        rows = self._run(_SHOW_INDEX, name=index)
        if not rows:
            return False
        config = rows[0]["options"]["indexConfig"]
        found = f"{config['vector.dimensions']}-d {config['vector.similarity_function']}"
        if found != f"{self.dim}-d COSINE":
            raise StoreError(
                f"vector collection {collection!r} on {self.where} holds {found} "
                f"vectors; this store needs {self.dim}-d COSINE"
            )
        if rows[0]["state"] != "ONLINE":
            self._run(AWAIT_INDEX, name=index, timeout=INDEX_TIMEOUT_S)
        return True

    def _exists(self, collection: str) -> bool:
        """Whether a collection exists; another process may have created it since we looked."""
        if collection not in self._ready:
            with self._errors("index lookup"):
                if self._find_index(collection):
                    self._ready.add(collection)
        return collection in self._ready

    def _rows(self, points: Sequence[VectorPoint]) -> list[dict[str, Any]]:
        """Validated upsert parameters; any bad point raises before anything is written."""
        rows = []
        for p in points:
            if len(p.vector) != self.dim:
                check_dim(p.vector, self.dim, f"vector of point {p.id!r}")
            try:
                payload = _PAYLOAD.encode(p.payload)
            except (TypeError, ValueError) as err:
                raise ValueError(f"payload of point {p.id!r} is not JSON: {err}") from err
            # VectorPoint validated its vector as a list of floats: sent as it is (converting
            # each of its 384 numbers again was half of this loop's ~30 us a point).
            rows.append(
                {"id": point_id(p.id), "dataset": p.dataset, "payload": payload, "vector": p.vector}
            )
        return rows

    def upsert(self, collection: str, points: Sequence[VectorPoint]) -> None:
        """Insert or replace points by id, creating the collection; ValueError on a bad dim/id."""
        check_collection(collection)
        rows = self._rows(points)
        if not rows:
            return
        self._ensure_collection(collection)
        query = _UPSERT.format(coll=self._label(collection), base=self._base)
        with self._errors(f"upsert into {collection!r}"):
            for chunk in batched(rows, _WRITE_BATCH):
                self._upsert_batch(query, Rows(chunk))

    def _upsert_batch(self, query: str, rows: list[dict[str, Any]]) -> None:
        """One batch, run again when a point it matched was deleted by another writer before
        its vector was set: Neo4j fails the procedure call then, not with a retryable error."""
        for attempt in range(_UPSERT_ATTEMPTS):
            try:
                self._run(query, rows=rows)
                return
            except Neo4jError as err:
                gone = "EntityNotFoundException" in (err.message or "")
                if not gone or attempt == _UPSERT_ATTEMPTS - 1:
                    raise

    def search(
        self, collection: str, vector: Sequence[float], *, datasets: Sequence[str], limit: int = 10
    ) -> list[VectorHit]:
        """Nearest points (cosine, best first) within the datasets; [] for an unknown collection."""
        check_dim(vector, self.dim, "query vector")
        if limit < 1:
            raise ValueError(f"search limit must be positive, got {limit}")
        check_collection(collection)
        if not datasets or not self._exists(collection):
            return []
        query = [float(x) for x in vector]
        with self._errors(f"search in {collection!r}"):
            return [_hit(row) for row in self._nearest(collection, query, list(datasets), limit)]

    def search_batch(
        self, queries: Sequence[VectorQuery], *, datasets: Sequence[str]
    ) -> list[list[VectorHit]]:
        """`search` of each (collection, vector, limit): one round trip for all (a collection
        not known yet is counted in it: no SHOW of its index), misses widened one by one."""
        return self._batch(
            [(c, v, n, max(n * _OVERFETCH, _MIN_K)) for c, v, n in queries], datasets
        )

    def _batch(
        self, queries: list[tuple[str, Sequence[float], int, int]], datasets: Sequence[str]
    ) -> list[list[VectorHit]]:
        """Searches of (collection, vector, limit, k) in one statement; a search that finds
        fewer than `limit` in the datasets among its k nearest widens as `search` does."""
        for collection, vector, limit, _ in queries:
            check_dim(vector, self.dim, "query vector")
            if limit < 1:
                raise ValueError(f"search limit must be positive, got {limit}")
            check_collection(collection)
        names, results = list(datasets), [list[VectorHit]() for _ in queries]
        if not names or not queries:
            return results
        # Collections not known to exist are counted in the statement: none there, no hits.
        probed = list(dict.fromkeys(q[0] for q in queries if q[0] not in self._ready))
        live = [i for i, query in enumerate(queries) if query[0] in self._ready]
        vectors = [[float(x) for x in queries[i][1]] for i in live]
        rows = [
            {
                "index": self._index(queries[i][0]),
                "k": queries[i][3],
                "vector": v,
                "limit": queries[i][2],
            }
            for i, v in zip(live, vectors, strict=True)
        ]
        probes = " ".join(_PROBE.format(label=self._label(c), at=at) for at, c in enumerate(probed))
        sizes = ", ".join(f"size{at}" for at in range(len(probed)))
        statement = _QUERY_BATCH.format(probes=probes, sizes=sizes)
        with self._errors("batch search"):
            [record] = self._search(statement, queries=Rows(rows), datasets=names)
            found = {i: (seen, hits) for i, seen, hits in record["found"]}
            for row_at, i in enumerate(live):
                collection, _, limit, k = queries[i]
                seen, hits = found.get(row_at, (k, []))
                if len(hits) < limit and seen >= k:  # too few in the datasets: widen as `search`
                    hits = self._nearest(collection, vectors[row_at], names, limit)
                results[i] = [_hit(hit) for hit in hits]
        stored = [c for c, size in zip(probed, record["sizes"], strict=True) if size]
        if any([self._exists(c) for c in stored]):  # found ready now: searched again, once
            return self._batch(queries, datasets)
        return results

    def _nearest(
        self, collection: str, vector: list[float], datasets: list[str], limit: int
    ) -> list[list[Any]]:
        """HNSW with over-fetch; rare datasets get a wider HNSW search, then an exact scan."""
        k = max(limit * _OVERFETCH, _MIN_K)
        hits, exhausted = self._query_index(collection, vector, datasets, k, limit)
        if len(hits) >= limit or exhausted:
            return hits
        size = self._size(collection, datasets)
        if size <= len(hits):
            return hits  # every point of the datasets was found already
        if size > _EXACT_SCAN_MAX:
            # Start from the candidate count the datasets' share of the collection calls for.
            k = max(2 * k, _OVERFETCH * limit * self._size(collection, None) // size)
            while k <= _MAX_K:
                hits, exhausted = self._query_index(collection, vector, datasets, k, limit)
                if len(hits) >= limit or exhausted:
                    return hits
                k *= 2
        query = _EXACT_SCAN.format(coll=self._label(collection))
        rows = self._search(query, vector=Rows(vector), datasets=datasets, limit=limit)
        return [r["hit"] for r in rows]

    def _query_index(
        self, collection: str, vector: list[float], datasets: list[str], k: int, limit: int
    ) -> tuple[list[list[Any]], bool]:
        """The best `limit` of the `k` nearest in the datasets, and whether the index ran dry."""
        index = self._index(collection)
        [row] = self._search(
            _QUERY_INDEX, index=index, k=k, vector=Rows(vector), datasets=datasets, limit=limit
        )
        return row["hits"], row["seen"] < k

    def delete(self, ids: Sequence[str]) -> None:
        """Remove points with these ids from every collection. Raises StoreError."""
        point_ids = [point_id(i) for i in ids]
        query = f"MATCH (n:`{self._base}`) WHERE n.id IN $ids DETACH DELETE n"
        with self._errors("delete"):
            for chunk in batched(point_ids, _DELETE_BATCH):
                self._run(query, ids=list(chunk))

    def delete_dataset(self, dataset: str) -> None:
        """Remove every point of a dataset from every collection. Raises StoreError."""
        query = (
            f"MATCH (n:`{self._base}`) WHERE n.dataset = $dataset "
            "WITH n LIMIT $batch DETACH DELETE n RETURN count(*) AS removed"
        )
        with self._errors(f"delete of dataset {dataset!r}"):
            while self._run(query, dataset=dataset, batch=_DELETE_BATCH)[0]["removed"]:
                pass

    def count(self, collection: str, *, dataset: str | None = None) -> int:
        """Number of points in a collection (0 when it does not exist)."""
        check_collection(collection)
        with self._errors(f"count of {collection!r}"):
            return self._size(collection, None if dataset is None else [dataset])

    def _size(self, collection: str, datasets: list[str] | None) -> int:
        """Points in a collection, or in some of its datasets; a missing label counts 0."""
        where = "" if datasets is None else "WHERE n.dataset IN $datasets"
        query = f"MATCH (n:`{self._label(collection)}`) {where} RETURN count(n) AS size"
        return self._search(query, datasets=datasets)[0]["size"]

    def close(self) -> None:
        """Release the driver's connections; later calls raise StoreError. Safe to call twice."""
        self._conn.close()


def _records(
    tx: neo4j.ManagedTransaction, query: str, values: dict[str, Any]
) -> list[neo4j.Record]:
    """The records of one query in a transaction (`Neo4jConnection.transaction`'s work)."""
    return list(tx.run(query, values))
