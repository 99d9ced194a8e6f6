"""The LexicalIndex contract on SQLite, and on Redis: fakeredis and the test server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from core.models.lexical import LexicalDoc
from core.ports import StoreError
from core.stores.redis.lexical import RedisLexicalIndex
from core.stores.sqlite.lexical import SQLiteLexicalIndex
from tests.backends import RedisBackend
from tests.contracts.lexical_index import (
    DOCS,
    LexicalIndexContract,
    expected_postings,
    total_length,
)


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

    def test_long_chunks_and_known_chunks_in_one_call(
        self, lexical_index: RedisLexicalIndex, redis_backend: RedisBackend
    ) -> None:
        # One add script writes many chunks; Lua's unpack takes a few thousand values at
        # most, so a chunk of 9,000 distinct terms and a term in 250 chunks go in slices.
        long = LexicalDoc("long", "d", " ".join(f"w{i} shared" for i in range(9000)))
        many = [LexicalDoc(f"c{i}", "d", f"shared w{i} x{i}") for i in range(250)]
        lexical_index.add("ds", many[:10])
        lexical_index.add("ds", [long, *many])  # the first 10 are known: left as they are
        docs = [long, *many]
        assert lexical_index.count("ds") == len(docs)
        terms = ["shared", "w7", "w8999", "x249"]
        assert set(lexical_index.postings(["ds"], terms)) == expected_postings(docs, terms)
        stats = lexical_index.corpus_stats(["ds"], terms)
        assert stats.total_length == total_length(docs)
        assert stats.df == {"shared": 251, "w7": 2, "w8999": 1, "x249": 1}
        with redis_backend.client(decode_responses=True) as client:
            key = f"{redis_backend.prefix}lex:ds:c:long"
            assert client.scard(key) == 9001  # its terms, so that remove finds them all
        lexical_index.remove("ds", ["long"])
        assert lexical_index.corpus_stats(["ds"], ["w8999"]).df == {"w8999": 0}


def test_an_unreachable_redis_is_named_without_its_password() -> None:
    index = RedisLexicalIndex("redis://:s3cret@127.0.0.1:1/0")
    with pytest.raises(StoreError, match=r"127\.0\.0\.1:1") as caught:
        index.count("ds")
    assert "s3cret" not in str(caught.value)
    index.close()
