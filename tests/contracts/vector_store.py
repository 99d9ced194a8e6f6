"""The VectorStore contract; each adapter's test module inherits it and provides fixtures.

Fixtures an adapter's test module provides:
- `vector_store`: an empty store, closed after the test (close() must be safe to call twice);
- `vector_store_dim`: the dimension that store was opened with;
- `reopen_vector_store` (optional): a callable that closes a store and returns a new one over
  the same data. Adapters without it skip the persistence test.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from core.models.vectors import VectorPoint, collection_name
from core.ports import VectorStore

CHUNKS = collection_name("DocumentChunk", "text")
ENTITIES = collection_name("Entity", "name")
SCORE_SLACK = 1e-5  # float rounding of cosine similarity


def new_id() -> str:
    """A fresh point id, shaped like the uuid5 ids the pipelines produce."""
    return str(uuid.uuid4())


def axis(dim: int, index: int, scale: float = 1.0) -> list[float]:
    """A vector along one axis."""
    vector = [0.0] * dim
    vector[index] = scale
    return vector


def random_vectors(count: int, dim: int, seed: int = 7) -> list[list[float]]:
    """Reproducible random vectors."""
    return np.random.default_rng(seed).standard_normal((count, dim)).tolist()


def point(vector: Sequence[float], dataset: str = "a", **payload: object) -> VectorPoint:
    """A point with a fresh id."""
    return VectorPoint(id=new_id(), vector=list(vector), dataset=dataset, payload=payload)


def run_threads(count: int, target: Callable[[int], None]) -> None:
    """Run `target(worker_index)` on `count` threads released together; re-raise their errors."""
    start = threading.Barrier(count)

    def run(index: int) -> None:
        start.wait()
        target(index)

    with ThreadPoolExecutor(count) as pool:
        futures = [pool.submit(run, index) for index in range(count)]
    for future in futures:
        future.result()


class VectorStoreContract:
    """Behaviour every VectorStore adapter must show."""

    def test_is_a_vector_store(self, vector_store: VectorStore) -> None:
        assert isinstance(vector_store, VectorStore)

    def test_search_returns_nearest_first_by_cosine(
        self, vector_store: VectorStore, vector_store_dim: int
    ) -> None:
        dim = vector_store_dim
        x, y = point(axis(dim, 0)), point(axis(dim, 1))
        between = point([1.0, 1.0] + [0.0] * (dim - 2))
        opposite = point(axis(dim, 0, -1.0))
        vector_store.upsert(CHUNKS, [y, opposite, between, x])

        hits = vector_store.search(CHUNKS, axis(dim, 0, 5.0), datasets=["a"], limit=10)

        # Cosine ignores length: the query is 5 * x, and x scores 1.
        assert [hit.id for hit in hits] == [x.id, between.id, y.id, opposite.id]
        assert hits[0].score == pytest.approx(1.0, abs=SCORE_SLACK)
        assert hits[1].score == pytest.approx(2**-0.5, abs=SCORE_SLACK)
        assert hits[2].score == pytest.approx(0.0, abs=SCORE_SLACK)
        assert hits[3].score == pytest.approx(-1.0, abs=SCORE_SLACK)
        assert all(-1 - SCORE_SLACK <= hit.score <= 1 + SCORE_SLACK for hit in hits)

    def test_limit_bounds_the_hits(self, vector_store: VectorStore, vector_store_dim: int) -> None:
        points = [point(v) for v in random_vectors(20, vector_store_dim)]
        vector_store.upsert(CHUNKS, points)
        hits = vector_store.search(CHUNKS, points[0].vector, datasets=["a"], limit=3)
        assert len(hits) == 3
        assert hits[0].id == points[0].id
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)

    def test_search_batch_answers_each_search_as_search_does(
        self, vector_store: VectorStore, vector_store_dim: int
    ) -> None:
        chunks = [point(v) for v in random_vectors(30, vector_store_dim)]
        entities = [point(v) for v in random_vectors(12, vector_store_dim, seed=3)]
        others = [point(v, "b") for v in random_vectors(30, vector_store_dim, seed=11)]
        vector_store.upsert(CHUNKS, chunks + others)
        vector_store.upsert(ENTITIES, entities)
        queries = [
            (CHUNKS, chunks[0].vector, 7),
            ("Missing_text", chunks[1].vector, 3),  # a collection nobody wrote: []
            (ENTITIES, entities[4].vector, 2),
            (CHUNKS, others[0].vector, 30),  # more than dataset "a" holds near it
            (ENTITIES, chunks[2].vector, 1),
        ]
        batch = vector_store.search_batch(queries, datasets=["a"])
        single = [vector_store.search(c, v, datasets=["a"], limit=n) for c, v, n in queries]
        assert [[(h.id, h.payload) for h in hits] for hits in batch] == [
            [(h.id, h.payload) for h in hits] for hits in single
        ]
        assert [len(hits) for hits in batch] == [7, 0, 2, 30, 1]
        assert batch[0][0].id == chunks[0].id and batch[2][0].id == entities[4].id
        scores = [[h.score for h in hits] for hits in batch]
        expected = [[h.score for h in hits] for hits in single]
        assert np.allclose(np.concatenate(scores), np.concatenate(expected), atol=SCORE_SLACK)
        assert vector_store.search_batch(queries, datasets=[]) == [[]] * 5
        assert vector_store.search_batch([], datasets=["a"]) == []
        with pytest.raises(ValueError):
            vector_store.search_batch([(CHUNKS, [1.0], 3)], datasets=["a"])
        with pytest.raises(ValueError):
            vector_store.search_batch([(CHUNKS, chunks[0].vector, 0)], datasets=["a"])

    def test_hit_carries_payload_and_dataset(
        self, vector_store: VectorStore, vector_store_dim: int
    ) -> None:
        p = point(axis(vector_store_dim, 0), "docs", name="Ada Lovelace", rank=2, tags=["x"])
        vector_store.upsert(ENTITIES, [p])
        [hit] = vector_store.search(ENTITIES, p.vector, datasets=["docs"])
        assert hit.payload == {"name": "Ada Lovelace", "rank": 2, "tags": ["x"], "dataset": "docs"}

    def test_upsert_same_id_replaces_vector_and_payload(
        self, vector_store: VectorStore, vector_store_dim: int
    ) -> None:
        dim = vector_store_dim
        first = point(axis(dim, 0), name="old")
        again = VectorPoint(id=first.id, vector=axis(dim, 1), dataset="a", payload={"name": "new"})
        vector_store.upsert(CHUNKS, [first])
        vector_store.upsert(CHUNKS, [again])
        vector_store.upsert(CHUNKS, [again])  # a retried task writes the same thing again

        assert vector_store.count(CHUNKS) == 1
        [hit] = vector_store.search(CHUNKS, axis(dim, 1), datasets=["a"])
        assert hit.id == first.id
        assert hit.score == pytest.approx(1.0, abs=SCORE_SLACK)
        assert hit.payload["name"] == "new"

    def test_dataset_filter_isolates_datasets(
        self, vector_store: VectorStore, vector_store_dim: int
    ) -> None:
        vectors = random_vectors(30, vector_store_dim)
        in_a = [point(v, "a") for v in vectors[:15]]
        in_b = [point(v, "b") for v in vectors[15:]]
        vector_store.upsert(CHUNKS, in_a + in_b)
        ids_a, ids_b = {p.id for p in in_a}, {p.id for p in in_b}

        # Querying with a "b" point's own vector must still return only "a" points.
        only_a = vector_store.search(CHUNKS, in_b[0].vector, datasets=["a"], limit=100)
        assert {hit.id for hit in only_a} == ids_a
        both = vector_store.search(CHUNKS, in_b[0].vector, datasets=["a", "b"], limit=100)
        assert {hit.id for hit in both} == ids_a | ids_b
        assert both[0].id == in_b[0].id
        assert vector_store.search(CHUNKS, in_b[0].vector, datasets=["c"], limit=100) == []
        assert vector_store.search(CHUNKS, in_b[0].vector, datasets=[], limit=100) == []

    def test_unknown_collection_is_empty(
        self, vector_store: VectorStore, vector_store_dim: int
    ) -> None:
        assert vector_store.search("Never_written", axis(vector_store_dim, 0), datasets=["a"]) == []
        assert vector_store.count("Never_written") == 0
        assert vector_store.count("Never_written", dataset="a") == 0

    def test_delete_ids_from_every_collection(
        self, vector_store: VectorStore, vector_store_dim: int
    ) -> None:
        dim = vector_store_dim
        shared = point(axis(dim, 0))
        kept = point(axis(dim, 1))
        vector_store.upsert(CHUNKS, [shared, kept])
        vector_store.upsert(ENTITIES, [shared])

        vector_store.delete([shared.id, new_id()])  # an id that was never stored is no error

        hits = vector_store.search(CHUNKS, axis(dim, 0), datasets=["a"])
        assert [hit.id for hit in hits] == [kept.id]
        assert vector_store.search(ENTITIES, axis(dim, 0), datasets=["a"]) == []
        assert vector_store.count(CHUNKS) == 1
        vector_store.delete([])

    def test_delete_dataset_keeps_other_datasets(
        self, vector_store: VectorStore, vector_store_dim: int
    ) -> None:
        vectors = random_vectors(8, vector_store_dim)
        for collection in (CHUNKS, ENTITIES):
            vector_store.upsert(collection, [point(v, "gone") for v in vectors[:5]])
            vector_store.upsert(collection, [point(v, "stays") for v in vectors[5:]])

        vector_store.delete_dataset("gone")
        vector_store.delete_dataset("never-existed")

        for collection in (CHUNKS, ENTITIES):
            assert vector_store.count(collection, dataset="gone") == 0
            assert vector_store.count(collection, dataset="stays") == 3
            assert vector_store.search(collection, vectors[0], datasets=["gone"]) == []
            assert len(vector_store.search(collection, vectors[0], datasets=["stays"])) == 3

    def test_count_with_and_without_dataset(
        self, vector_store: VectorStore, vector_store_dim: int
    ) -> None:
        vectors = random_vectors(7, vector_store_dim)
        vector_store.upsert(CHUNKS, [point(v, "a") for v in vectors[:4]])
        vector_store.upsert(CHUNKS, [point(v, "b") for v in vectors[4:]])
        assert vector_store.count(CHUNKS) == 7
        assert vector_store.count(CHUNKS, dataset="a") == 4
        assert vector_store.count(CHUNKS, dataset="b") == 3
        assert vector_store.count(CHUNKS, dataset="c") == 0

    def test_wrong_dimension_is_a_value_error_and_writes_nothing(
        self, vector_store: VectorStore, vector_store_dim: int
    ) -> None:
        dim = vector_store_dim
        good, bad = point(axis(dim, 0)), point([1.0] * (dim + 1))
        with pytest.raises(ValueError):
            vector_store.upsert(CHUNKS, [good, bad])
        assert vector_store.count(CHUNKS) == 0

        vector_store.upsert(CHUNKS, [good])
        with pytest.raises(ValueError):
            vector_store.search(CHUNKS, [1.0] * (dim - 1), datasets=["a"])

    @pytest.mark.parametrize("name", ["", "has-dash", "has space", "../escape", "a/b", "Zoë_name"])
    def test_bad_collection_name_is_a_value_error(
        self, vector_store: VectorStore, vector_store_dim: int, name: str
    ) -> None:
        vector = axis(vector_store_dim, 0)
        with pytest.raises(ValueError):
            vector_store.upsert(name, [point(vector)])
        with pytest.raises(ValueError):
            vector_store.search(name, vector, datasets=["a"])
        with pytest.raises(ValueError):
            vector_store.count(name)

    @pytest.mark.slow
    def test_batch_of_two_thousand_points(
        self, vector_store: VectorStore, vector_store_dim: int
    ) -> None:
        vectors = random_vectors(2000, vector_store_dim)
        points = [point(v, "ab"[i % 2]) for i, v in enumerate(vectors)]
        vector_store.upsert(CHUNKS, points)
        assert vector_store.count(CHUNKS) == 2000
        assert vector_store.count(CHUNKS, dataset="a") == 1000
        for probe in (points[0], points[1001], points[-1]):
            hits = vector_store.search(CHUNKS, probe.vector, datasets=["a", "b"], limit=5)
            assert hits[0].id == probe.id
            assert hits[0].score == pytest.approx(1.0, abs=SCORE_SLACK)

    def test_threads_write_and_search_at_once(
        self, vector_store: VectorStore, vector_store_dim: int
    ) -> None:
        vectors = random_vectors(4 * 150, vector_store_dim)

        def work(worker: int) -> None:
            # Every thread's first upsert races to create the same new collection.
            mine = [point(v, f"d{worker}") for v in vectors[worker * 150 : (worker + 1) * 150]]
            for start in range(0, len(mine), 30):
                vector_store.upsert(CHUNKS, mine[start : start + 30])
                hits = vector_store.search(CHUNKS, mine[start].vector, datasets=[f"d{worker}"])
                assert hits[0].id == mine[start].id

        run_threads(4, work)
        assert vector_store.count(CHUNKS) == 600
        assert vector_store.count(CHUNKS, dataset="d3") == 150

    def test_data_survives_close_and_reopen(
        self, vector_store: VectorStore, vector_store_dim: int, request: pytest.FixtureRequest
    ) -> None:
        try:
            reopen = request.getfixturevalue("reopen_vector_store")
        except pytest.FixtureLookupError:
            pytest.skip("this adapter provides no reopen_vector_store fixture")
        dim = vector_store_dim
        x, y = point(axis(dim, 0), "a", name="x"), point(axis(dim, 1), "b")
        vector_store.upsert(CHUNKS, [x])
        vector_store.upsert(ENTITIES, [y])

        reopened = reopen(vector_store)

        assert reopened.count(CHUNKS) == 1
        assert reopened.count(ENTITIES, dataset="b") == 1
        [hit] = reopened.search(CHUNKS, axis(dim, 0), datasets=["a"])
        assert (hit.id, hit.payload["name"]) == (x.id, "x")
        reopened.delete([y.id])  # collections found on open take part in deletes
        assert reopened.count(ENTITIES) == 0

    def test_search_batch_of_a_reopened_store_finds_the_stored_collections(
        self, vector_store: VectorStore, vector_store_dim: int, request: pytest.FixtureRequest
    ) -> None:
        try:
            reopen = request.getfixturevalue("reopen_vector_store")
        except pytest.FixtureLookupError:
            pytest.skip("this adapter provides no reopen_vector_store fixture")
        points = [point(v) for v in random_vectors(10, vector_store_dim)]
        vector_store.upsert(CHUNKS, points)
        reopened = reopen(vector_store)  # knows no collection yet (a process of its own)
        queries = [(CHUNKS, points[3].vector, 4), (ENTITIES, points[3].vector, 2)]
        first = reopened.search_batch(queries, datasets=["a"])
        assert [h.id for h in first[0]] == [
            h.id for h in reopened.search(*queries[0][:2], datasets=["a"], limit=4)
        ] and first[0][0].id == points[3].id
        assert first[1] == []
        again = reopened.search_batch(queries, datasets=["a"])
        assert [[h.id for h in hits] for hits in again] == [[h.id for h in hits] for hits in first]

    def test_close_twice_is_harmless(
        self, vector_store: VectorStore, vector_store_dim: int
    ) -> None:
        vector_store.upsert(CHUNKS, [point(axis(vector_store_dim, 0))])
        vector_store.close()
        vector_store.close()
