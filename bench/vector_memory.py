"""Process memory of the embedded vector store (Qdrant Edge) while it fills up.

    .venv/bin/python bench/vector_memory.py                          # 50k, 100k, 200k, 400k
    .venv/bin/python bench/vector_memory.py --sizes 20000,40000 --out rss.jsonl

Upserts real-shaped points into a QdrantEdgeVectorStore in a fresh folder, as AddDataPoints
does: 384-d unit vectors (clustered, like sentence embeddings), a payload like the pipeline's
(`type`, a relationship's `name`), one dataset, upsert calls of 512 points per collection,
spread over the collections a text ingest fills (chunks 40%, summaries 40%, entity names 15%,
relationship names 5%). A 200 MB text file is on the order of 200k chunks plus summaries and
names. After each size it prints one JSON line: the process's RSS split into anonymous memory
(heap: what cannot be given back without freeing it) and file-backed pages (mmap'd store
files: the kernel reclaims them under pressure), the peak, the store's size on disk, upsert
seconds, and searches: p50 latency and recall@10 of 20 queries against an exact top-10
computed here (the points are regenerated from their seeds, so the bench keeps no vectors).
No models are loaded: the RSS is the store's plus the interpreter's baseline, printed first.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.models.vectors import VectorPoint  # noqa: E402
from core.stores.qdrant.edge import QdrantEdgeVectorStore  # noqa: E402

DIM = 384
DATASET = "default:large"
BATCH = 512  # AddDataPoints upserts embed_batch_size * 8 points per call
# (collection, share of the points, payload): what a text ingest writes.
COLLECTIONS = (
    ("DocumentChunk_text", 0.40, {"type": "DocumentChunk"}),
    ("TextSummary_text", 0.40, {"type": "TextSummary"}),
    ("Entity_name", 0.15, {"type": "Entity"}),
    ("EdgeType_relationship_name", 0.05, {"type": "EdgeType", "name": "relates to"}),
)
CENTRES = np.random.default_rng(0).standard_normal((256, DIM)).astype(np.float32)
QUERIES = 20


def status_mib() -> dict[str, float]:
    """RSS fields of /proc/self/status in MiB, and the dirty file-backed pages among them.

    Clean file-backed pages (RssFile minus FileDirty) are page cache the kernel drops under
    memory pressure without writing anything; anonymous pages stay until they are freed.
    """
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
            fields[name] = round(int(value.split()[0]) / 1024, 1)
    rollup = {}
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines()[1:]:
        name, _, value = line.partition(":")
        rollup[name] = int(value.split()[0])
    dirty = rollup["Private_Dirty"] + rollup["Shared_Dirty"] - rollup["Anonymous"]
    fields["FileDirty"] = round(max(0, dirty) / 1024, 1)
    return fields


def trim_heap() -> None:
    """Give the allocator's free memory back to the kernel (glibc), so RssAnon is live data."""
    ctypes.CDLL("libc.so.6").malloc_trim(0)


def vectors(seed: int, count: int) -> np.ndarray:
    """`count` unit vectors near random centres, the same for the same seed."""
    rng = np.random.default_rng(seed + 1)
    rows = CENTRES[rng.integers(0, len(CENTRES), count)] + rng.standard_normal(
        (count, DIM), dtype=np.float32
    )
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def plan(total: int) -> Iterator[tuple[str, dict[str, str], int, int]]:
    """(collection, payload, seed, count) of every upsert call up to `total` points."""
    share = {name: 0 for name, _, _ in COLLECTIONS}
    written = 0
    seed = 0
    while written < total:
        for name, fraction, payload in COLLECTIONS:
            count = min(max(1, round(BATCH * fraction / 0.4)), total - written)
            if count <= 0:
                return
            yield name, payload, seed, count
            share[name] += count
            written += count
            seed += 1


def point_ids(seed: int, count: int) -> list[str]:
    return [str(uuid.uuid5(uuid.NAMESPACE_OID, f"{seed}:{i}")) for i in range(count)]


def exact_top10(calls: list[tuple[str, int, int]], queries: np.ndarray) -> list[list[str]]:
    """The exact cosine top-10 ids in DocumentChunk_text for each query."""
    best: list[list[tuple[float, str]]] = [[] for _ in queries]
    for _, seed, count in calls:
        scores = vectors(seed, count) @ queries.T
        ids = point_ids(seed, count)
        for q in range(len(queries)):
            top = np.argsort(-scores[:, q])[:10]
            best[q] = sorted(best[q] + [(float(scores[i, q]), ids[i]) for i in top])[-10:]
    return [[i for _, i in sorted(row, reverse=True)] for row in best]


def measure_search(
    store: QdrantEdgeVectorStore, queries: np.ndarray, exact: list[list[str]]
) -> dict[str, object]:
    """p50 latency and recall@10 against the exact top-10 over the chunk collection."""
    seconds, found = [], 0
    tops = []
    for query, truth in zip(queries, exact, strict=True):
        started = time.perf_counter()
        hits = store.search("DocumentChunk_text", query.tolist(), datasets=[DATASET], limit=10)
        seconds.append(time.perf_counter() - started)
        tops.append([h.id for h in hits])
        found += len(set(tops[-1]) & set(truth))
    return {
        "search_p50_ms": round(statistics.median(seconds) * 1000, 1),
        "recall_at_10": round(found / (10 * len(queries)), 3),
        "top10": tops,
    }


def folder_mib(path: Path) -> float:
    """Disk space the store's files take (allocated blocks: Edge preallocates sparse files)."""
    blocks = sum(f.stat().st_blocks for f in path.rglob("*") if f.is_file())
    return round(blocks * 512 / 2**20, 1)


def run(args: argparse.Namespace) -> None:
    sizes = sorted(int(s) for s in args.sizes.split(","))
    home = Path(tempfile.mkdtemp(prefix="cogmill-vecmem-", dir=args.dir))
    queries = vectors(10**9, QUERIES)
    emit(args, {"baseline": status_mib(), "home": str(home)})
    store = QdrantEdgeVectorStore(home / "vectors", DIM)
    calls = list(plan(sizes[-1]))
    done = written = 0
    chunk_calls: list[tuple[str, int, int]] = []
    upsert_s = upsert_cpu_s = 0.0  # wall and process CPU inside upsert calls (seals included)
    try:
        for size in sizes:
            while done < len(calls) and written < size:
                name, payload, seed, count = calls[done]
                batch = vectors(seed, count)
                points = [
                    VectorPoint(id=i, vector=v.tolist(), dataset=DATASET, payload=payload)
                    for i, v in zip(point_ids(seed, count), batch, strict=True)
                ]
                started, cpu = time.perf_counter(), time.process_time()
                store.upsert(name, points)
                upsert_s += time.perf_counter() - started
                upsert_cpu_s += time.process_time() - cpu
                if name == "DocumentChunk_text":
                    chunk_calls.append((name, seed, count))
                done += 1
                written += count
            exact = exact_top10(chunk_calls, queries)
            search = measure_search(store, queries, exact)
            top10 = search.pop("top10")
            if args.trim:
                trim_heap()
            emit(
                args,
                {
                    "points": written,
                    "rss_mib": status_mib(),
                    "disk_mib": folder_mib(home),
                    "wal_mib": sum(folder_mib(f) for f in home.glob("vectors/*/wal")),
                    "upsert_s": round(upsert_s, 1),
                    "upsert_cpu_s": round(upsert_cpu_s, 1),
                    **search,
                    "segments": store.segments(),
                },
            )
        if args.reopen:
            store.close()
            store = QdrantEdgeVectorStore(home / "vectors", DIM)
            again = measure_search(store, queries, exact)
            same = again.pop("top10") == top10
            emit(args, {"reopened": True, "rss_mib": status_mib(), **again, "same_top10": same})
    finally:
        store.close()
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)


def emit(args: argparse.Namespace, record: dict[str, object]) -> None:
    line = json.dumps(record)
    print(line, flush=True)
    if args.out:
        with open(args.out, "a", encoding="utf-8") as out:
            out.write(line + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="50000,100000,200000,400000")
    parser.add_argument("--dir", default=None, help="parent folder of the store (default: tmp)")
    parser.add_argument("--out", default=None, help="also append the JSON lines to this file")
    parser.add_argument("--keep", action="store_true", help="keep the store folder")
    parser.add_argument(
        "--trim", action="store_true", help="malloc_trim before reading the RSS (glibc)"
    )
    parser.add_argument("--reopen", action="store_true", help="close, reopen and search again")
    run(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
