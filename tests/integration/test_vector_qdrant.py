"""The VectorStore contract on `qdrant-client` in local mode (the same client API as a server)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from core.ports import StoreError
from core.stores.qdrant.server import QdrantVectorStore
from tests.contracts.vector_store import CHUNKS, VectorStoreContract, point, random_vectors

DIM = 8


@pytest.fixture
def open_store(tmp_path: Path) -> Iterator[Callable[..., QdrantVectorStore]]:
    """Opens local-mode stores on one folder and closes them all after the test."""
    opened: list[QdrantVectorStore] = []

    def open_(dim: int = DIM, namespace: str = "cogmill") -> QdrantVectorStore:
        opened.append(QdrantVectorStore(dim, path=tmp_path / "qdrant", namespace=namespace))
        return opened[-1]

    yield open_
    for store in opened:
        store.close()


@pytest.fixture
def vector_store_dim() -> int:
    return DIM


@pytest.fixture
def vector_store(open_store: Callable[..., QdrantVectorStore]) -> QdrantVectorStore:
    return open_store()


@pytest.fixture
def reopen_vector_store(
    open_store: Callable[..., QdrantVectorStore],
) -> Callable[[QdrantVectorStore], QdrantVectorStore]:
    def reopen(store: QdrantVectorStore) -> QdrantVectorStore:
        store.close()
        return open_store(store.dim, store.namespace)

    return reopen


class TestQdrantVectorStore(VectorStoreContract):
    def test_other_namespaces_are_left_alone(
        self, vector_store: QdrantVectorStore, open_store: Callable[..., QdrantVectorStore]
    ) -> None:
        p = point(random_vectors(1, DIM)[0])
        vector_store.upsert(CHUNKS, [p])
        vector_store.close()  # local mode: one client per folder at a time
        other = open_store(namespace="other")
        other.upsert(CHUNKS, [p])
        other.delete([p.id])
        other.delete_dataset("a")
        other.close()
        assert open_store().count(CHUNKS) == 1

    def test_a_collection_of_another_dimension_is_refused(
        self, vector_store: QdrantVectorStore, open_store: Callable[..., QdrantVectorStore]
    ) -> None:
        vector_store.upsert(CHUNKS, [point(random_vectors(1, DIM)[0])])
        vector_store.close()
        other = open_store(16)
        with pytest.raises(StoreError, match="needs 16-d"):
            other.count(CHUNKS)
        with pytest.raises(StoreError, match="needs 16-d"):
            other.upsert(CHUNKS, [point([1.0] * 16)])

    def test_a_second_local_store_on_the_same_folder_is_refused(
        self, vector_store: QdrantVectorStore, open_store: Callable[..., QdrantVectorStore]
    ) -> None:
        with pytest.raises(StoreError, match="already accessed"):
            open_store()

    def test_ids_must_be_uuids(self, vector_store: QdrantVectorStore) -> None:
        bad = point(random_vectors(1, DIM)[0]).model_copy(update={"id": "entity:ada"})
        with pytest.raises(ValueError, match="not a UUID"):
            vector_store.upsert(CHUNKS, [bad])
        with pytest.raises(ValueError, match="not a UUID"):
            vector_store.delete(["entity:ada"])

    def test_limit_must_be_positive(self, vector_store: QdrantVectorStore) -> None:
        with pytest.raises(ValueError, match="limit"):
            vector_store.search(CHUNKS, [1.0] * DIM, datasets=["a"], limit=0)

    def test_closed_store_refuses_calls(self, vector_store: QdrantVectorStore) -> None:
        vector_store.close()
        with pytest.raises(StoreError, match="closed"):
            vector_store.count(CHUNKS)

    def test_url_or_path_but_not_both(self, tmp_path: Path) -> None:
        with pytest.raises(ValueError, match="exactly one"):
            QdrantVectorStore(DIM)
        with pytest.raises(ValueError, match="exactly one"):
            QdrantVectorStore(DIM, url="http://127.0.0.1:6333", path=tmp_path)

    @pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")
    def test_unreachable_server_is_a_store_error_naming_it(self) -> None:
        store = QdrantVectorStore(DIM, url="http://127.0.0.1:1", api_key="s3cret", timeout=2)
        try:
            with pytest.raises(StoreError, match=r"http://127\.0\.0\.1:1") as caught:
                store.count(CHUNKS)
            assert "s3cret" not in str(caught.value)
        finally:
            store.close()
