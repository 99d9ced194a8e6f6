"""The StateStore contract on Redis: fakeredis (no server) and the test server
(COGMILL_TEST_REDIS_URL, marked `services`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from core.ports import StoreError
from core.stores.redis.state import RedisStateStore
from tests.backends import RedisBackend
from tests.contracts.state_store import StateStoreContract


def make_store(backend: RedisBackend, prefix: str) -> RedisStateStore:
    client = backend.adapter_client(decode_responses=True)
    return RedisStateStore(backend.url, prefix=prefix, client=client)


@pytest.fixture
def state_store(redis_backend: RedisBackend) -> Iterator[RedisStateStore]:
    # A key space of its own per test (the backend's prefix), removed afterwards.
    store = make_store(redis_backend, redis_backend.prefix)
    yield store
    store.close()


class TestRedisStateStore(StateStoreContract):
    def test_keys_of_other_prefixes_are_invisible(
        self, state_store: RedisStateStore, redis_backend: RedisBackend
    ) -> None:
        other = make_store(redis_backend, redis_backend.prefix + "other:")
        try:
            other.put("k", "v")
            assert state_store.get("k") is None
            assert other.keys("") == ["k"]
            # The other prefix nests inside this store's: its keys are this store's too.
            assert state_store.keys("other:") == ["other:k"]
        finally:
            other.close()


def test_unreachable_server_raises_store_error_without_password() -> None:
    store = RedisStateStore("redis://:s3cret@127.0.0.1:1/0")
    with pytest.raises(StoreError, match=r"127\.0\.0\.1:1") as caught:
        store.get("k")
    assert "s3cret" not in str(caught.value)
    store.close()
