"""Everything a dataset holds, read raw from either backend, for comparing two ingests of the
same content node for node and vector for vector.

Embedded: the SQLite graph's nodes, edges and support rows, and every Qdrant Edge point of
the dataset. Distributed: Neo4j's nodes, support and edges and its vector nodes
(tests/e2e/faults/stores.py reads them). Ids are compared as they are: both ingests use the
same dataset name, the first removed before the second.

`description` is left out: every writer of a shared entity or relation overwrites it (the last
writer wins, in whatever order batches and syncs ran), so two correct ingests differ in it; so
do the system times of facts (when the store recorded each one).
Embeddings are equal within EMBEDDING_TOLERANCE: the local model's float sums depend on which
texts share a batch (its padding), which differs between a step-by-step and a fresh ingest.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from typing import Any

import neo4j
import qdrant_edge as qe

from runtime import Runtime
from tests.backends import Backend
from tests.e2e.faults.stores import SYSTEM_TIMES, Snapshot, read_graph

ORDER_DEPENDENT = ("description",)
EMBEDDING_TOLERANCE = 2e-3


def _props(raw: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in raw.items() if k not in ORDER_DEPENDENT and k not in SYSTEM_TIMES}


def dataset_snapshot(backend: Backend, rt: Runtime, dataset: str) -> dict[str, dict[str, Any]]:
    """The dataset's nodes, edges and vectors by kind and key."""
    snap = Snapshot()
    if backend.distributed:
        with neo4j.GraphDatabase.driver(str(backend.neo4j)) as driver:
            read_graph(driver, dataset, snap)
        for kind in ("node", "edge"):
            for item in snap.items.get(kind, {}).values():
                item["props"] = _props(item["props"])
    else:
        _read_sqlite(rt, dataset, snap)
        _read_edge_vectors(rt, dataset, snap)
    assert not snap.repeated, snap.repeated
    return snap.items


def _read_sqlite(rt: Runtime, dataset: str, snap: Snapshot) -> None:
    path = rt.settings.home / "graph.sqlite"
    with closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as db:
        support: dict[str, list[str]] = {}
        for item, doc, chunk in db.execute(
            "SELECT s.item_id, s.document_id, s.chunk_id FROM support s JOIN nodes n "
            "ON n.id = s.item_id WHERE n.dataset = ? UNION ALL SELECT s.item_id, s.document_id, "
            "s.chunk_id FROM support s JOIN edges e ON e.id = s.item_id WHERE e.dataset = ?",
            (dataset, dataset),
        ):
            support.setdefault(item, []).append(f"{doc}|{chunk}")
        for node_id, kind, name, raw in db.execute(
            "SELECT id, type, name, properties FROM nodes WHERE dataset = ?", (dataset,)
        ):
            value = {"labels": [kind], "name": name, "props": _props(json.loads(raw))}
            snap.add("node", node_id, {**value, "support": sorted(support.get(node_id, []))})
        for edge_id, source, name, target, raw in db.execute(
            "SELECT id, source, name, target, properties FROM edges WHERE dataset = ?", (dataset,)
        ):
            value = {"ends": [source, target], "name": name, "props": _props(json.loads(raw))}
            snap.add("edge", edge_id, {**value, "support": sorted(support.get(edge_id, []))})


def _read_edge_vectors(rt: Runtime, dataset: str, snap: Snapshot) -> None:
    mine = qe.Filter(must=[qe.FieldCondition("dataset", match=qe.MatchValue(dataset))])
    for collection, shard in rt.vectors._all_shards():  # type: ignore[attr-defined]
        offset = None
        while True:
            request = qe.ScrollRequest(
                offset=offset, limit=1000, filter=mine, with_payload=True, with_vector=True
            )
            records, offset = shard.scroll(request)
            for record in records:
                vector = record.vector
                if isinstance(vector, dict):
                    vector = next(iter(vector.values()))
                value = {
                    "payload": dict(record.payload or {}),
                    "embedding": [round(float(x), 4) for x in vector or []],
                }
                snap.add("vector", f"{collection}/{record.id}", value)
            if offset is None:
                break


def differences(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]]) -> list[str]:
    """What differs between two snapshots, item by item (empty: equal)."""
    found = []
    for kind in sorted(set(a) | set(b)):
        left, right = a.get(kind, {}), b.get(kind, {})
        for key in sorted(set(left) - set(right))[:5]:
            found.append(f"{kind} {key} only in the first: {str(left[key])[:300]}")
        for key in sorted(set(right) - set(left))[:5]:
            found.append(f"{kind} {key} only in the second: {str(right[key])[:300]}")
        changed = [k for k in sorted(set(left) & set(right)) if not _same(left[k], right[k])]
        for key in changed[:5]:
            found.append(f"{kind} {key}: {str(left[key])[:300]} != {str(right[key])[:300]}")
    return found


def _same(a: Any, b: Any) -> bool:
    """Equal items; vectors' embeddings within EMBEDDING_TOLERANCE of each other."""
    if not (isinstance(a, dict) and isinstance(b, dict) and "embedding" in a and "embedding" in b):
        return bool(a == b)
    rest = ({k: v for k, v in x.items() if k != "embedding"} for x in (a, b))
    if next(rest) != next(rest) or len(a["embedding"]) != len(b["embedding"]):
        return False
    gaps = (abs(x - y) for x, y in zip(a["embedding"], b["embedding"], strict=True))
    return max(gaps, default=0.0) <= EMBEDDING_TOLERANCE
