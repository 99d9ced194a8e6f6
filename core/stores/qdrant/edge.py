"""Vectors in Qdrant Edge (embedded mode): one in-process shard per collection.

Facts this adapter leans on (qdrant-edge-py 0.9, checked by experiment):
- An EdgeShard is internally synchronised (a WAL mutex and a segment-holder RwLock) and releases
  the GIL while it works, so worker threads may upsert, search and optimize one shard at once;
  our lock only guards the registry of open shards.
- Every update goes to a write-ahead log first, so it survives the process dying without flush()
  or close(); close() flushes the WAL and segments. A shard folder can be open in one store (one
  process) at a time: Edge holds a lock on its WAL.
- Nothing builds indexes or flushes in the background. Left alone, a collection is one appendable
  segment whose id map and payload index live on the heap and grow with it, and a WAL that is
  cut only by flush(): 400k points held 228 MiB of heap and 766 MB of WAL (bench/vector_memory.py).
  So every `segment_points` points written to a collection the store seals its appendable segment
  (optimize(): the points move to an immutable, memory-mapped segment) and flushes (the WAL is cut).
- Engine failures arrive as a bare `Exception`; they leave this module as StoreError.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import qdrant_edge as qe

from core.models.vectors import VectorHit, VectorPoint, check_collection, check_dim, point_id
from core.ports import StoreError, VectorQuery
from core.sequences import batched

_SHARD_MARKER = "edge_config.json"  # Edge writes it into every shard folder it creates
_DATASET = "dataset"  # payload key of the dataset a point belongs to
# Points per update call: each call is one WAL entry, and the WAL works in 32 MiB segments.
_UPSERT_BATCH = 512
# A sealed segment takes in merges up to this many sealed segments' worth of points, and merging
# starts above this many segments: few segments to search, and a merge rewrites a bounded size.
_MERGE_SEGMENTS = 8


@contextmanager
def _engine_errors(action: str, collection: str) -> Iterator[None]:
    """Turn an engine failure into StoreError naming what was being done."""
    try:
        yield
    except Exception as err:  # qdrant_edge raises bare Exception for engine errors
        raise StoreError(
            f"Qdrant Edge {action} on collection {collection!r} failed: {err}"
        ) from err


def _is_collection(name: str) -> bool:
    try:
        check_collection(name)
    except ValueError:
        return False
    return True


def _in_datasets(datasets: Sequence[str]) -> qe.Filter:
    """A filter matching points of any of the datasets."""
    return qe.Filter(must=[qe.FieldCondition(_DATASET, match=qe.MatchAny(list(datasets)))])


def _in_dataset(dataset: str) -> qe.Filter:
    """A filter matching points of one dataset."""
    return qe.Filter(must=[qe.FieldCondition(_DATASET, match=qe.MatchValue(dataset))])


class QdrantEdgeVectorStore:
    """VectorStore on Qdrant Edge shards stored under `path/<collection>/`, cosine distance."""

    def __init__(self, path: Path, dim: int, *, segment_points: int = 20_000) -> None:
        if dim < 1:
            raise ValueError(f"vector dimension must be positive, got {dim}")
        if segment_points < 0:
            raise ValueError(f"segment_points must be 0 (never seal) or more, got {segment_points}")
        self.path = Path(path)
        self.dim = dim
        self.segment_points = segment_points
        self._lock = threading.Lock()  # guards the fields below, not the shards themselves
        self._shards: dict[str, qe.EdgeShard] = {}
        self._closed = False
        self._unsealed: dict[str, int] = {}  # points written per collection since its last seal
        self._sealing: set[str] = set()  # collections a thread is sealing now
        self.seals = 0  # seal passes run (for tests and benches)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            folders = sorted(self.path.iterdir())
        except OSError as err:
            raise StoreError(f"cannot open vector store {self.path}: {err}") from err
        try:
            for folder in folders:
                if _is_collection(folder.name) and (folder / _SHARD_MARKER).is_file():
                    self._shards[folder.name] = self._open(folder.name)
        except StoreError:
            self.close()  # release the WAL locks of the shards already opened
            raise

    def _config(self) -> qe.EdgeConfig:
        """The shard configuration every collection of this store shares.

        Vectors, payloads and id maps are memory-mapped files left cold (pages are read when
        touched, not all at load, and the kernel may drop them again). A sealed segment gets no
        HNSW graph (m=0): it is scanned exactly, as the appendable segment is, so a search
        answers the same before and after a seal, and sealing costs a copy, not a graph build.
        optimize() seals an appendable segment above half `segment_points` points.
        """
        optimizers = None
        if self.segment_points:
            seal_kb = max(1, self.segment_points * self.dim * 4 // 1024 // 2)
            optimizers = qe.EdgeOptimizersConfig(
                indexing_threshold=seal_kb,
                max_segment_size=2 * seal_kb * _MERGE_SEGMENTS,
                default_segment_number=_MERGE_SEGMENTS,
            )
        return qe.EdgeConfig(
            vectors=qe.EdgeVectorParams(
                size=self.dim, distance=qe.Distance.Cosine, memory=qe.Memory.Cold
            ),
            hnsw_config=qe.HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10_000),
            optimizers=optimizers,
            payload_memory=qe.Memory.Cold,
            id_tracker_memory=qe.Memory.Cold,
        )

    def _open(self, collection: str) -> qe.EdgeShard:
        """Load an existing shard; Edge refuses it when its dim differs from ours."""
        try:
            shard = qe.EdgeShard.load(str(self.path / collection), self._config())
            self._ensure_dataset_index(shard)
        except Exception as err:  # bare Exception from the engine
            raise StoreError(
                f"cannot open vector collection {collection!r} in {self.path} (a folder is usable "
                f"by one store in one process at a time; dim must be {self.dim}): {err}"
            ) from err
        return shard

    def _create(self, collection: str) -> qe.EdgeShard:
        """Create a new, empty shard with the dataset index."""
        with _engine_errors("create", collection):
            shard = qe.EdgeShard.create(str(self.path / collection), self._config())
            self._ensure_dataset_index(shard)
        return shard

    @staticmethod
    def _ensure_dataset_index(shard: qe.EdgeShard) -> None:
        """Index `dataset` as the tenant key (also repairs a crash between create and index).

        Without it every filtered exact scan reads payloads: 8.8 ms instead of 1.3 ms per search
        over 20k x 384 points.
        """
        if _DATASET not in shard.info().payload_schema:
            params = qe.KeywordIndexParams(is_tenant=True)
            shard.update(qe.UpdateOperation.create_field_index(_DATASET, params))

    @contextmanager
    def _registry(self) -> Iterator[dict[str, qe.EdgeShard]]:
        """The open shards by collection, held under the lock; StoreError once closed."""
        with self._lock:
            if self._closed:
                raise StoreError(f"vector store {self.path} is closed")
            yield self._shards

    def _shard(self, collection: str) -> qe.EdgeShard | None:
        """The shard of a collection, or None when it does not exist."""
        check_collection(collection)
        with self._registry() as shards:
            return shards.get(collection)

    def _shard_or_create(self, collection: str) -> qe.EdgeShard:
        """The shard of a collection, created (once, under the lock) when missing."""
        check_collection(collection)
        with self._registry() as shards:
            if collection not in shards:
                shards[collection] = self._create(collection)
            return shards[collection]

    def _all_shards(self) -> list[tuple[str, qe.EdgeShard]]:
        """A snapshot of every open collection and its shard."""
        with self._registry() as shards:
            return list(shards.items())

    def upsert(self, collection: str, points: Sequence[VectorPoint]) -> None:
        """Insert or replace points by id, creating the collection; ValueError on a bad dim/id."""
        check_collection(collection)
        # Validate the whole call before writing, so a bad point writes nothing.
        for point in points:
            check_dim(point.vector, self.dim, f"vector of point {point.id!r}")
        edge_points = [
            qe.Point(point_id(p.id), p.vector, {**p.payload, _DATASET: p.dataset}) for p in points
        ]
        if not edge_points:
            return
        shard = self._shard_or_create(collection)
        with _engine_errors("upsert", collection):
            for chunk in batched(edge_points, _UPSERT_BATCH):
                shard.update(qe.UpdateOperation.upsert_points(list(chunk)))
        if self._seal_due(collection, len(edge_points)):
            self._seal(collection, shard)

    def _seal_due(self, collection: str, written: int) -> bool:
        """Count points written; True (and claimed) when the collection's seal is due."""
        if not self.segment_points:
            return False
        with self._lock:
            unsealed = self._unsealed.get(collection, 0) + written
            due = unsealed >= self.segment_points and collection not in self._sealing
            self._unsealed[collection] = 0 if due else unsealed
            if due:
                self._sealing.add(collection)
            return due

    def _seal(self, collection: str, shard: qe.EdgeShard) -> None:
        """Move the appendable segment's points into a sealed one, then flush (cuts the WAL).

        Runs in the writing thread; other threads keep reading and writing the shard meanwhile.
        """
        try:
            with _engine_errors("seal", collection):
                shard.optimize()
                shard.flush()
        finally:
            with self._lock:
                self._sealing.discard(collection)
                self.seals += 1

    def search(
        self, collection: str, vector: Sequence[float], *, datasets: Sequence[str], limit: int = 10
    ) -> list[VectorHit]:
        """Nearest points (cosine, best first) within the datasets; [] for an unknown collection."""
        check_dim(vector, self.dim, "query vector")
        if limit < 1:
            raise ValueError(f"search limit must be positive, got {limit}")
        shard = self._shard(collection)
        if shard is None or not datasets:
            return []
        request = qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest([float(x) for x in vector]),
            filter=_in_datasets(datasets),
            with_payload=True,
        )
        with _engine_errors("search", collection):
            scored = shard.query(request)
        # Edge hands ids back as uuid.UUID; ours are canonical UUID strings.
        return [VectorHit(id=str(p.id), score=p.score, payload=p.payload or {}) for p in scored]

    def search_batch(
        self, queries: Sequence[VectorQuery], *, datasets: Sequence[str]
    ) -> list[list[VectorHit]]:
        """`search` of each (collection, vector, limit), in order."""
        return [self.search(c, v, datasets=datasets, limit=n) for c, v, n in queries]

    def delete(self, ids: Sequence[str]) -> None:
        """Remove points with these ids from every collection. Raises StoreError."""
        point_ids = [point_id(i) for i in ids]
        if not point_ids:
            return
        for collection, shard in self._all_shards():
            with _engine_errors("delete", collection):
                for chunk in batched(point_ids, _UPSERT_BATCH):
                    shard.update(qe.UpdateOperation.delete_points(list(chunk)))

    def delete_dataset(self, dataset: str) -> None:
        """Remove every point of a dataset from every collection. Raises StoreError."""
        for collection, shard in self._all_shards():
            with _engine_errors("delete_dataset", collection):
                shard.update(qe.UpdateOperation.delete_points_by_filter(_in_dataset(dataset)))

    def count(self, collection: str, *, dataset: str | None = None) -> int:
        """Number of points in a collection (0 when it does not exist)."""
        shard = self._shard(collection)
        if shard is None:
            return 0
        request = qe.CountRequest(exact=True, filter=_in_dataset(dataset) if dataset else None)
        with _engine_errors("count", collection):
            return shard.count(request)

    def optimize(self) -> None:
        """Seal, merge and vacuum segments in every collection; blocks, reads and writes go on.

        Not part of the port: upserts seal every `segment_points` points on their own; this also
        drops deleted points' space. Searches stay exact scans (see _config).
        """
        for collection, shard in self._all_shards():
            with _engine_errors("optimize", collection):
                shard.optimize()

    def segments(self) -> dict[str, int]:
        """Segments per collection (Edge's own layout, for benches; not part of the port)."""
        counts = {}
        for collection, shard in self._all_shards():
            with _engine_errors("info", collection):
                counts[collection] = shard.info().segments_count
        return counts

    def close(self) -> None:
        """Flush and release every shard; later calls raise StoreError. Safe to call twice."""
        with self._lock:
            self._closed = True
            shards, self._shards = self._shards, {}
        failures = []
        for collection, shard in shards.items():
            try:
                shard.close()  # flushes the WAL and segments, then releases the folder lock
            except Exception as err:  # bare Exception from the engine; close the others first
                failures.append(f"{collection}: {err}")
        if failures:
            raise StoreError(f"closing vector store {self.path} failed: {'; '.join(failures)}")
