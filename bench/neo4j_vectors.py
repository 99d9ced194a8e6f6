"""What a vector costs Neo4j to write: in its HNSW index, re-sent unchanged, or with no index.

    .venv/bin/python bench/neo4j_vectors.py [--points 4000] [--base 20000] [--neo4j URI]

Against the test Neo4j (`eval "$(deploy/services.sh start)"`), under a namespace of its own
(removed afterwards): first `--base` points fill an indexed collection, as a store that
already holds a corpus; then, each timed by Neo4j's CPU (/proc of the server process, so
run it on a quiet machine for wall figures; CPU per point moves less with load):
  indexed new      `--points` new points upserted through Neo4jVectorStore (the HNSW insert)
  indexed, small   the same again in transactions of `--small` rows, as a job's batches write
                   one collection's points (batching index updates the other way round)
  re-sent equal    the points of `indexed new` upserted again unchanged: what a batch pays for
                   the entity and relation names already stored (compared, not re-indexed)
  no index         new points as plain node properties under a label with no vector index:
                   what storing them would cost if an index elsewhere held the vectors (and
                   again in small transactions: the per-transaction cost without the index)
Prints CPU-ms per 1,000 points and per point of each, and with `--per-chunk N=COUNT,...`
(points per chunk of each collection, from a distributed run's created counts) what
dropping a collection's index writes would save per chunk.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import DEFAULT_NEO4J_URI  # noqa: E402
from bench.processes import listening_pid, tree_cpu_s  # noqa: E402
from core.models.vectors import VectorPoint  # noqa: E402
from core.stores.neo4j.vectors import Neo4jVectorStore  # noqa: E402

DIM = 384
NAMESPACE = "BenchVecCost"
COLLECTION = "Entity_name"
PLAIN = f"{NAMESPACE}Plain"
PLAIN_UPSERT = f"""UNWIND $rows AS row
MERGE (n:`{PLAIN}` {{id: row.id}}) SET n.dataset = row.dataset, n.payload = row.payload,
n.embedding = row.vector"""
CENTRES = np.random.default_rng(0).standard_normal((256, DIM)).astype(np.float32)


def vectors(seed: int, count: int) -> list[list[float]]:
    """`count` unit vectors near random centres (like sentence embeddings), by seed."""
    rng = np.random.default_rng(seed + 1)
    picked = CENTRES[rng.integers(0, len(CENTRES), count)]
    rows = picked + rng.standard_normal((count, DIM), dtype=np.float32)
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).tolist()


def points(seed: int, count: int) -> list[VectorPoint]:
    ids = [str(uuid.uuid5(uuid.NAMESPACE_OID, f"{seed}:{i}")) for i in range(count)]
    return [
        VectorPoint(id=i, vector=v, dataset="bench", payload={"type": "Entity"})
        for i, v in zip(ids, vectors(seed, count), strict=True)
    ]


def variants(store: Neo4jVectorStore, small: int) -> dict[str, Callable[[int, int], None]]:
    """The ways of writing `count` points of a seed; "re-sent equal" writes again the points
    "indexed new" wrote (its seed is 20 below)."""
    driver = store._driver

    def indexed(rows: int) -> Callable[[int, int], None]:
        def run(seed: int, count: int) -> None:
            batch = points(seed, count)
            for first in range(0, count, rows):
                store.upsert(COLLECTION, batch[first : first + rows])

        return run

    def plain(rows: int) -> Callable[[int, int], None]:
        def run(seed: int, count: int) -> None:
            batch = store._rows(points(seed, count))  # the adapter's own parameters
            for first in range(0, count, rows):
                driver.execute_query(PLAIN_UPSERT, rows=batch[first : first + rows])

        return run

    return {
        "indexed new": indexed(1000),
        f"indexed, {small} a tx": indexed(small),
        "re-sent equal": lambda seed, count: indexed(1000)(seed - 20, count),
        "no index": plain(1000),
        f"no index, {small} a tx": plain(small),
    }


def timed(neo4j_pid: int, work: Callable[[], None]) -> tuple[float, float]:
    """(Neo4j CPU seconds, wall seconds) of `work`."""
    cpu, wall = tree_cpu_s(neo4j_pid), time.perf_counter()
    work()
    return tree_cpu_s(neo4j_pid) - cpu, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--neo4j", default=os.environ.get("COGMILL_TEST_NEO4J_URI", DEFAULT_NEO4J_URI)
    )
    parser.add_argument("--points", type=int, default=4000)
    parser.add_argument("--base", type=int, default=20000, help="points stored before timing")
    parser.add_argument("--small", type=int, default=40, help="rows per small transaction")
    parser.add_argument("--per-chunk", default="", help="e.g. Entity_name=4.9,EdgeType=0.2")
    args = parser.parse_args()
    port = int(args.neo4j.rsplit(":", 1)[1].split("/")[0])
    pid = listening_pid(port)
    if pid is None:
        sys.exit(f"no process of this user listens on Neo4j's port {port}")
    store = Neo4jVectorStore(args.neo4j, DIM, namespace=NAMESPACE)
    rows: dict[str, tuple[float, float]] = {}
    try:
        for start in range(0, args.base, 1000):  # the corpus already there, untimed
            store.upsert(COLLECTION, points(10_000 + start, min(1000, args.base - start)))
        store._driver.execute_query(
            f"CREATE INDEX {NAMESPACE}_plain_id IF NOT EXISTS FOR (n:`{PLAIN}`) ON (n.id)"
        )
        ways = variants(store, args.small)
        for offset, run in enumerate(ways.values()):  # warm-up: Neo4j's JIT, plans, caches
            run(100 + 10 * offset, 200)
        for offset, (name, run) in enumerate(ways.items()):
            rows[name] = timed(pid, partial(run, 1 + 10 * offset, args.points))
    finally:
        cleanup(store)
    report(rows, args)


def cleanup(store: Neo4jVectorStore) -> None:
    """The bench's nodes, constraints and indexes gone; the store closed."""
    store.delete_dataset("bench")
    run = store._driver.execute_query
    while run(f"MATCH (n:`{PLAIN}`) WITH n LIMIT 5000 DETACH DELETE n RETURN count(*)")[0][0][0]:
        pass
    for kind, plural in (("CONSTRAINT", "CONSTRAINTS"), ("INDEX", "INDEXES")):
        found, _, _ = run(f"SHOW {plural} YIELD name WHERE name STARTS WITH $ns RETURN name",
                          ns=NAMESPACE)  # fmt: skip
        for record in found:
            run(f"DROP {kind} {record['name']} IF EXISTS")
    store.close()


def report(rows: dict[str, tuple[float, float]], args: argparse.Namespace) -> None:
    load = os.getloadavg()[0]
    print(f"Neo4j CPU per vector written, {args.points:,} points of {DIM} dims after "
          f"{args.base:,} stored (load {load:.1f}):")  # fmt: skip
    per_point = {}
    for name, (cpu, wall) in rows.items():
        per_point[name] = 1000 * cpu / args.points
        print(
            f"  {name:<22} {1000 * cpu:9.0f} CPU-ms, {per_point[name]:6.3f} CPU-ms/point, "
            f"wall {wall:6.1f} s"
        )
    hnsw = per_point["indexed new"] - per_point["no index"]
    print(f"  the HNSW insert itself: {hnsw:.3f} CPU-ms/point (indexed new - no index)")
    small = args.small
    per_tx = (per_point[f"indexed, {small} a tx"] - per_point["indexed new"]) * small
    plain_tx = (per_point[f"no index, {small} a tx"] - per_point["no index"]) * small
    print(
        f"  a transaction of {small} rows costs {per_tx:.1f} CPU-ms more than its share of "
        f"1,000-row ones with the index, {plain_tx:.1f} without"
    )
    for part in filter(None, args.per_chunk.split(",")):
        name, _, count = part.partition("=")
        print(
            f"  {name}: {float(count):.2f} new points per chunk -> index writes "
            f"{float(count) * hnsw:.2f} CPU-ms/chunk, all of the write "
            f"{float(count) * per_point['indexed new']:.2f} CPU-ms/chunk"
        )


if __name__ == "__main__":
    main()
