"""The StateStore contract on a real Redis server (COGMILL_TEST_REDIS_URL)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from core.ports import StoreError
from core.stores.state_redis import RedisStateStore
from tests.contracts.state_store import StateStoreContract
from tests.services import redis_url

pytestmark = [pytest.mark.integration, pytest.mark.services]


@pytest.fixture(scope="module")
def test_redis_url() -> str:
    return redis_url()


@pytest.fixture
def state_store(test_redis_url: str) -> Iterator[RedisStateStore]:
    # A key space of its own per test, so tests never see each other's (or anyone's) keys.
    store = RedisStateStore(test_redis_url, prefix=f"cogmill-test:{uuid.uuid4().hex}:")
    yield store
    for key in store.keys(""):
        store.delete(key)
    store.close()


class TestRedisStateStore(StateStoreContract):
    def test_keys_of_other_prefixes_are_invisible(
        self, state_store: RedisStateStore, test_redis_url: str
    ) -> None:
        other = RedisStateStore(test_redis_url, prefix=f"cogmill-test:{uuid.uuid4().hex}:")
        try:
            other.put("k", "v")
            assert state_store.get("k") is None
            assert other.keys("") == ["k"]
        finally:
            other.delete("k")
            other.close()

    def test_unreachable_server_raises_store_error_without_password(self) -> None:
        store = RedisStateStore("redis://:s3cret@127.0.0.1:1/0")
        with pytest.raises(StoreError, match=r"127\.0\.0\.1:1") as caught:
            store.get("k")
        assert "s3cret" not in str(caught.value)
        store.close()
