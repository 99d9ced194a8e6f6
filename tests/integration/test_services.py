"""Proves the CI harness: a real Redis and a real Neo4j answer."""

from __future__ import annotations

import pytest
import redis
from neo4j import GraphDatabase

from tests.services import neo4j_uri, redis_url

pytestmark = pytest.mark.services


def test_redis_answers_ping() -> None:
    client = redis.Redis.from_url(redis_url())
    try:
        assert client.ping() is True
    finally:
        client.close()


def test_neo4j_answers_a_query() -> None:
    with GraphDatabase.driver(neo4j_uri(), auth=None) as driver:
        records, _, _ = driver.execute_query("RETURN 1 AS one", database_="neo4j")
    assert records[0]["one"] == 1
