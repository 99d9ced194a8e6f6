"""The VectorStore contract on Qdrant Edge, plus what only an embedded, file-based store has."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from core.models.vectors import VectorPoint
from core.ports import StoreError
from core.sequences import batched
from core.settings import Settings
from core.stores import factory
from core.stores.qdrant.edge import QdrantEdgeVectorStore
from tests.contracts.vector_store import (
    CHUNKS,
    VectorStoreContract,
    point,
    random_vectors,
    run_threads,
)

DIM = 8


@pytest.fixture
def vector_store_dim() -> int:
    return DIM


@pytest.fixture
def vector_store(tmp_path: Path) -> Iterator[QdrantEdgeVectorStore]:
    store = QdrantEdgeVectorStore(tmp_path / "vectors", DIM)
    yield store
    store.close()


@pytest.fixture
def reopen_vector_store(
    tmp_path: Path,
) -> Iterator[Callable[[QdrantEdgeVectorStore], QdrantEdgeVectorStore]]:
    opened: list[QdrantEdgeVectorStore] = []

    def reopen(store: QdrantEdgeVectorStore) -> QdrantEdgeVectorStore:
        store.close()
        opened.append(QdrantEdgeVectorStore(store.path, store.dim))
        return opened[-1]

    yield reopen
    for store in opened:
        store.close()


class TestQdrantEdgeVectorStore(VectorStoreContract):
    def test_collections_are_folders_found_on_open(
        self, vector_store: QdrantEdgeVectorStore
    ) -> None:
        vector_store.upsert(CHUNKS, [point(v) for v in random_vectors(3, DIM)])
        (vector_store.path / "stray-folder").mkdir()  # not a shard: ignored on open
        vector_store.close()
        assert (vector_store.path / CHUNKS).is_dir()
        reopened = QdrantEdgeVectorStore(vector_store.path, DIM)
        try:
            assert reopened.count(CHUNKS) == 3
        finally:
            reopened.close()

    def test_a_second_store_on_the_same_folder_is_refused(
        self, vector_store: QdrantEdgeVectorStore
    ) -> None:
        vector_store.upsert(CHUNKS, [point(random_vectors(1, DIM)[0])])
        with pytest.raises(StoreError, match="one store"):
            QdrantEdgeVectorStore(vector_store.path, DIM)

    def test_reopening_with_another_dim_is_refused(
        self, vector_store: QdrantEdgeVectorStore
    ) -> None:
        vector_store.upsert(CHUNKS, [point(random_vectors(1, DIM)[0])])
        vector_store.close()
        with pytest.raises(StoreError, match="dim must be 16"):
            QdrantEdgeVectorStore(vector_store.path, 16)

    def test_ids_must_be_uuids(self, vector_store: QdrantEdgeVectorStore) -> None:
        bad = point(random_vectors(1, DIM)[0]).model_copy(update={"id": "entity:ada"})
        with pytest.raises(ValueError, match="not a UUID"):
            vector_store.upsert(CHUNKS, [bad])
        with pytest.raises(ValueError, match="not a UUID"):
            vector_store.delete(["entity:ada"])

    def test_optimize_keeps_results(self, vector_store: QdrantEdgeVectorStore) -> None:
        points = [point(v) for v in random_vectors(500, DIM)]
        vector_store.upsert(CHUNKS, points)
        before = vector_store.search(CHUNKS, points[7].vector, datasets=["a"], limit=5)
        vector_store.optimize()
        after = vector_store.search(CHUNKS, points[7].vector, datasets=["a"], limit=5)
        assert [h.id for h in after] == [h.id for h in before]
        assert after[0].id == points[7].id

    def test_upserts_seal_segments_and_every_point_is_still_found(self, tmp_path: Path) -> None:
        # A seal every 300 points: 1,200 points in calls of 100 seal four times, and each
        # search answers as in a store that never seals (sealed segments are exact scans too).
        sealing = QdrantEdgeVectorStore(tmp_path / "sealing", DIM, segment_points=300)
        plain = QdrantEdgeVectorStore(tmp_path / "plain", DIM, segment_points=0)
        points = [point(v) for v in random_vectors(1200, DIM)]
        try:
            for part in batched(points, 100):
                sealing.upsert(CHUNKS, part)
                plain.upsert(CHUNKS, part)
            assert (sealing.seals, plain.seals) == (4, 0)
            assert sealing.segments()[CHUNKS] > 1 == plain.segments()[CHUNKS]
            assert sealing.count(CHUNKS) == 1200
            for p in points[::40]:
                hits = sealing.search(CHUNKS, p.vector, datasets=["a"], limit=10)
                assert hits[0].id == p.id
                expected = plain.search(CHUNKS, p.vector, datasets=["a"], limit=10)
                assert [h.id for h in hits] == [h.id for h in expected]
            sealing.close()
            sealing = QdrantEdgeVectorStore(tmp_path / "sealing", DIM, segment_points=300)
            assert sealing.count(CHUNKS) == 1200
            hits = sealing.search(CHUNKS, points[-1].vector, datasets=["a"], limit=1)
            assert [h.id for h in hits] == [points[-1].id]
        finally:
            sealing.close()
            plain.close()

    def test_seals_while_threads_write_and_search(self, tmp_path: Path) -> None:
        # Four threads write 150 points each in calls of 30 and search after each call, while
        # the calls that cross a seal every 60 points seal the segment under the others.
        store = QdrantEdgeVectorStore(tmp_path / "vectors", DIM, segment_points=60)
        vectors = random_vectors(600, DIM)
        written: list[list[VectorPoint]] = [[] for _ in range(4)]

        def work(worker: int) -> None:
            mine = [point(v, f"d{worker}") for v in vectors[worker * 150 : (worker + 1) * 150]]
            written[worker] = mine
            for part in batched(mine, 30):
                store.upsert(CHUNKS, part)
                hits = store.search(CHUNKS, part[0].vector, datasets=[f"d{worker}"], limit=1)
                assert [h.id for h in hits] == [part[0].id]

        try:
            run_threads(4, work)
            assert store.seals >= 1  # a seal due while another runs waits for the next write
            assert store.count(CHUNKS) == 600
            for worker, mine in enumerate(written):
                for p in mine:
                    hits = store.search(CHUNKS, p.vector, datasets=[f"d{worker}"], limit=1)
                    assert [h.id for h in hits] == [p.id]
        finally:
            store.close()

    def test_the_factory_passes_the_segment_setting(self, tmp_path: Path) -> None:
        settings = Settings(home=tmp_path, vector_store="qdrant_edge", vector_segment_points=123)
        store = factory.vector_store(settings, DIM)
        try:
            assert isinstance(store, QdrantEdgeVectorStore)
            assert store.segment_points == 123
        finally:
            store.close()

    def test_negative_segment_points_is_refused(self, tmp_path: Path) -> None:
        with pytest.raises(ValueError, match="segment_points"):
            QdrantEdgeVectorStore(tmp_path / "vectors", DIM, segment_points=-1)

    def test_closed_store_refuses_calls(self, vector_store: QdrantEdgeVectorStore) -> None:
        vector_store.close()
        with pytest.raises(StoreError, match="closed"):
            vector_store.count(CHUNKS)
