"""The per-backend plumbing (core/stores/neo4j/connection.py, redis/connection.py): servers are
named in messages without their credentials, and client errors become StoreError."""

from __future__ import annotations

import pytest

from core.ports import StoreError
from core.stores.neo4j.connection import Neo4jConnection, redact
from core.stores.redis.connection import RedisConnection, redact_url

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("uri", "shown"),
    [
        ("bolt://127.0.0.1:7687", "bolt://127.0.0.1:7687"),
        ("neo4j://neo4j:s3cret@db.example:7687", "neo4j://db.example:7687"),
        ("neo4j+s://user:s3cret@db.example?policy=s3cret", "neo4j+s://db.example"),
    ],
)
def test_neo4j_uris_lose_their_credentials(uri: str, shown: str) -> None:
    assert redact(uri) == shown


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("redis://:s3cret@cache:6379/1", "redis://:***@cache:6379/1"),
        ("rediss://app:s3cret@cache:6380/0?password=s3cret", "rediss://app:***@cache:6380/0"),
    ],
)
def test_redis_urls_lose_their_password(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_a_neo4j_failure_is_a_store_error_naming_the_server_only() -> None:
    conn = Neo4jConnection("bolt://127.0.0.1:1", password="s3cret", database="graphs")
    try:
        where = r"127\.0\.0\.1:1 \(database graphs\)"
        with pytest.raises(StoreError, match=where) as caught, conn.errors("probe"):
            conn.driver.verify_connectivity()
        assert "s3cret" not in str(caught.value) and "probe failed" in str(caught.value)
    finally:
        conn.close()
    with pytest.raises(StoreError, match="closed"), conn.errors():
        pytest.fail("a closed connection runs nothing")


def test_a_redis_failure_is_a_store_error_naming_the_server_only() -> None:
    conn = RedisConnection("redis://:s3cret@127.0.0.1:1/0", role="lexical index")
    try:
        where = r"lexical index in Redis at .*127\.0\.0\.1:1"
        with pytest.raises(StoreError, match=where), conn.errors():
            conn.client.ping()
    finally:
        conn.close()


def test_errors_the_plumbing_does_not_own_pass_through() -> None:
    conn = RedisConnection("redis://127.0.0.1:1/0")
    with pytest.raises(KeyError), conn.errors():
        raise KeyError("not a Redis error")
    conn.close()
