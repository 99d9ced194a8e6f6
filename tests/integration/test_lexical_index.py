"""The LexicalIndex contract on SQLite, and on Redis: fakeredis and the test server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from core.ports import StoreError
from core.stores.lexical_redis import RedisLexicalIndex
from core.stores.lexical_sqlite import SQLiteLexicalIndex
from tests.backends import RedisBackend, redis_backend_fixture  # noqa: F401 - fixture by name
from tests.contracts.lexical_index import DOCS, LexicalIndexContract

pytestmark = pytest.mark.integration


class TestSQLiteLexicalIndex(LexicalIndexContract):
    @pytest.fixture
    def lexical_index(self, tmp_path: Path) -> Iterator[SQLiteLexicalIndex]:
        index = SQLiteLexicalIndex(tmp_path / "lexical.sqlite")
        yield index
        index.close()


class TestRedisLexicalIndex(LexicalIndexContract):
    @pytest.fixture
    def lexical_index(self, redis_backend: RedisBackend) -> Iterator[RedisLexicalIndex]:
        client = redis_backend.adapter_client(decode_responses=True)
        index = RedisLexicalIndex(redis_backend.url, prefix=redis_backend.prefix, client=client)
        yield index
        index.close()

    def test_keys_stay_under_the_prefix(
        self, lexical_index: RedisLexicalIndex, redis_backend: RedisBackend
    ) -> None:
        lexical_index.add("ds", DOCS)
        with redis_backend.client(decode_responses=True) as client:
            mine = list(client.scan_iter(match=f"{redis_backend.prefix}*", count=1000))
            assert mine and all(key.startswith(f"{redis_backend.prefix}lex:ds:") for key in mine)
        lexical_index.remove_dataset("ds")
        with redis_backend.client() as client:
            assert list(client.scan_iter(match=f"{redis_backend.prefix}*", count=1000)) == []


def test_an_unreachable_redis_is_named_without_its_password() -> None:
    index = RedisLexicalIndex("redis://:s3cret@127.0.0.1:1/0")
    with pytest.raises(StoreError, match=r"127\.0\.0\.1:1") as caught:
        index.count("ds")
    assert "s3cret" not in str(caught.value)
    index.close()
