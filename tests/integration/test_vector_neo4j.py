"""The VectorStore contract on a real Neo4j server (COGMILL_TEST_NEO4J_URI), plus its own paths.

The server is shared: every test gets a namespace of its own (labels and schema names) and
removes its nodes, indexes and constraints afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import neo4j
import numpy as np
import pytest

from core.ports import StoreError
from core.stores.neo4j import vectors as vector_neo4j
from core.stores.neo4j.vectors import Neo4jVectorStore
from tests.contracts.vector_store import (
    CHUNKS,
    VectorStoreContract,
    point,
    random_vectors,
    run_threads,
)
from tests.services import neo4j_uri

pytestmark = [pytest.mark.integration, pytest.mark.services]

DIM = 8


@pytest.fixture(scope="module")
def test_neo4j_uri() -> str:
    return neo4j_uri()


@pytest.fixture
def namespace(test_neo4j_uri: str) -> Iterator[str]:
    """A fresh namespace, wiped (nodes, indexes, constraints) after the test."""
    name = f"T{uuid.uuid4().hex[:12]}"
    yield name
    with neo4j.GraphDatabase.driver(test_neo4j_uri, auth=None) as driver:
        driver.execute_query(f"MATCH (n:`{name}Vector`) DETACH DELETE n")
        for kind, kinds in (("CONSTRAINT", "CONSTRAINTS"), ("INDEX", "INDEXES")):
            rows, _, _ = driver.execute_query(
                f"SHOW {kinds} YIELD name WHERE name STARTS WITH $prefix", prefix=f"{name}_"
            )
            for row in rows:
                driver.execute_query(f"DROP {kind} `{row['name']}` IF EXISTS")


@pytest.fixture
def open_store(test_neo4j_uri: str, namespace: str) -> Iterator[Callable[..., Neo4jVectorStore]]:
    """Opens stores on the test namespace and closes them all after the test."""
    opened: list[Neo4jVectorStore] = []

    def open_(dim: int = DIM) -> Neo4jVectorStore:
        opened.append(Neo4jVectorStore(test_neo4j_uri, dim, namespace=namespace))
        return opened[-1]

    yield open_
    for store in opened:
        store.close()


@pytest.fixture
def vector_store_dim() -> int:
    return DIM


@pytest.fixture
def vector_store(open_store: Callable[..., Neo4jVectorStore]) -> Neo4jVectorStore:
    return open_store()


@pytest.fixture
def reopen_vector_store(
    open_store: Callable[..., Neo4jVectorStore],
) -> Callable[[Neo4jVectorStore], Neo4jVectorStore]:
    def reopen(store: Neo4jVectorStore) -> Neo4jVectorStore:
        store.close()
        return open_store(store.dim)

    return reopen


def brute_force(vectors: np.ndarray, query: np.ndarray, limit: int) -> list[int]:
    """Indexes of the `limit` rows of `vectors` nearest to `query` by cosine."""
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return list(np.argsort(-(unit @ (query / np.linalg.norm(query))))[:limit])


class TestNeo4jVectorStore(VectorStoreContract):
    def test_stores_in_two_processes_create_one_collection_at_once(
        self, open_store: Callable[..., Neo4jVectorStore]
    ) -> None:
        # Separate stores have separate drivers and locks, like separate worker processes.
        stores = [open_store() for _ in range(3)]
        vectors = random_vectors(3, DIM)
        run_threads(3, lambda i: stores[i].upsert(CHUNKS, [point(vectors[i])]))
        assert stores[0].count(CHUNKS) == 3

    def test_upserts_racing_deletes_of_the_same_points_never_fail(
        self, open_store: Callable[..., Neo4jVectorStore]
    ) -> None:
        # An entity merge deletes a vector while another batch upserts it (the fault harness): the
        # upsert matched the point before the delete, then set its vector on a deleted node.
        writer, deleter = open_store(), open_store()
        points = [point(v) for v in random_vectors(5, DIM)]
        ids = [p.id for p in points]

        def work(i: int) -> None:
            for _ in range(200):
                if i == 0:
                    writer.upsert(CHUNKS, points)
                else:
                    deleter.delete(ids)

        run_threads(2, work)
        writer.upsert(CHUNKS, points)
        assert writer.count(CHUNKS) == 5

    @pytest.mark.parametrize(
        ("exact_scan_max", "max_k", "index_searches"),
        [(2000, 4096, 1), (0, 4096, 2), (0, 200, 1)],
        ids=["exact-scan-at-once", "wider-hnsw-search", "exact-scan-when-too-wide"],
    )
    def test_a_rare_dataset_in_a_big_collection_gets_its_true_nearest(
        self,
        vector_store: Neo4jVectorStore,
        monkeypatch: pytest.MonkeyPatch,
        exact_scan_max: int,
        max_k: int,
        index_searches: int,
    ) -> None:
        monkeypatch.setattr(vector_neo4j, "_EXACT_SCAN_MAX", exact_scan_max)
        monkeypatch.setattr(vector_neo4j, "_MAX_K", max_k)
        searched_k: list[int] = []
        query_index = Neo4jVectorStore._query_index

        def spy(self: Neo4jVectorStore, *args: Any) -> Any:
            searched_k.append(args[3])
            return query_index(self, *args)

        monkeypatch.setattr(Neo4jVectorStore, "_query_index", spy)
        vectors = np.array(random_vectors(1530, DIM, seed=11))
        common = [point(v, "common") for v in vectors[:1500]]
        rare = [point(v, "rare") for v in vectors[1500:]]
        vector_store.upsert(CHUNKS, common + rare)
        query = vectors[3]  # a "common" point: the rare ones are far down the HNSW list

        hits = vector_store.search(CHUNKS, query.tolist(), datasets=["rare"], limit=10)

        expected = [rare[i].id for i in brute_force(vectors[1500:], query, 10)]
        assert [hit.id for hit in hits] == expected
        assert all(hit.payload["dataset"] == "rare" for hit in hits)
        assert len(searched_k) == index_searches, searched_k

    def test_a_collection_of_another_dimension_is_refused(
        self, vector_store: Neo4jVectorStore, open_store: Callable[..., Neo4jVectorStore]
    ) -> None:
        vector_store.upsert(CHUNKS, [point(random_vectors(1, DIM)[0])])
        other = open_store(16)
        with pytest.raises(StoreError, match="needs 16-d"):
            other.search(CHUNKS, [1.0] * 16, datasets=["a"])
        with pytest.raises(StoreError, match="needs 16-d"):
            other.upsert(CHUNKS, [point([1.0] * 16)])

    def test_ids_must_be_uuids(self, vector_store: Neo4jVectorStore) -> None:
        bad = point(random_vectors(1, DIM)[0]).model_copy(update={"id": "entity:ada"})
        with pytest.raises(ValueError, match="not a UUID"):
            vector_store.upsert(CHUNKS, [bad])
        with pytest.raises(ValueError, match="not a UUID"):
            vector_store.delete(["entity:ada"])

    def test_limit_must_be_positive(self, vector_store: Neo4jVectorStore) -> None:
        with pytest.raises(ValueError, match="limit"):
            vector_store.search(CHUNKS, [1.0] * DIM, datasets=["a"], limit=0)

    def test_closed_store_refuses_calls(self, vector_store: Neo4jVectorStore) -> None:
        vector_store.close()
        with pytest.raises(StoreError, match="closed"):
            vector_store.count(CHUNKS)

    def test_unreachable_server_is_a_store_error_without_password(self) -> None:
        store = Neo4jVectorStore("bolt://127.0.0.1:1", DIM, password="s3cret", timeout=1)
        try:
            with pytest.raises(StoreError, match=r"127\.0\.0\.1:1") as caught:
                store.count(CHUNKS)
            assert "s3cret" not in str(caught.value)
        finally:
            store.close()
