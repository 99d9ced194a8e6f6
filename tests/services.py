"""Addresses of the external test services: skip when one is missing, fail when CI requires it.

`COGMILL_TEST_REDIS_URL` (e.g. redis://127.0.0.1:6390/0) and `COGMILL_TEST_NEO4J_URI`
(e.g. bolt://127.0.0.1:7697) name the services; `COGMILL_REQUIRE_SERVICES=1` (set by `.ci/run`)
turns a missing one into a failure, so CI cannot pass by skipping. A test that asks for a
server must be marked `services` (tests/conftest.py tells `expect_services` which test runs),
or it fails: the fast tier, which leaves those tests out, must not need a server.
"""

from __future__ import annotations

import os
import socket
from typing import NoReturn
from urllib.parse import urlsplit

import pytest
import redis

# (the running test's node id, whether it is marked `services`); None outside a test run.
_running: tuple[str, bool] | None = None


def expect_services(marked: bool, test: str) -> None:
    """Note the test about to run and whether it is marked `services`."""
    global _running
    _running = (test, marked)


def redis_url() -> str:
    """The test Redis URL once it answers PING; skips or fails the test otherwise."""
    url = _env("COGMILL_TEST_REDIS_URL", "Redis")
    if (problem := redis_problem(url)) is not None:
        _unavailable(f"{problem} (COGMILL_TEST_REDIS_URL)")
    return url


# Databases of the test Redis for the tests whose worker processes share a Celery broker (its
# queues are consumed by whoever listens, and several modules flush theirs when they start),
# one each so that these modules can run at the same time (`pytest -n`). Everything else
# shares database 0 under key prefixes of its own. A Redis has 16 databases (0-15).
REDIS_DATABASES = {
    "beat": 4,
    "distributed": 5,
    "step_tasks": 6,
    "faults": 7,
    "usage_distributed": 8,
    "webhooks_distributed": 9,
    "budgets_distributed": 10,
    "metrics_distributed": 11,
    "batch_mode_distributed": 12,
    "distributed_pipelines": 13,
    "load": 14,
    "sweeper": 15,
    "fairness": 3,
}
assert len(set(REDIS_DATABASES.values())) == len(REDIS_DATABASES), "a database used twice"


def redis_database_url(user: str) -> str:
    """The test Redis URL on the database of `user` (a key of REDIS_DATABASES)."""
    return f"{redis_url().rsplit('/', 1)[0]}/{REDIS_DATABASES[user]}"


def neo4j_uri() -> str:
    """The test Neo4j bolt URI once its port accepts connections; skips or fails otherwise."""
    uri = _env("COGMILL_TEST_NEO4J_URI", "Neo4j")
    if (problem := neo4j_problem(uri)) is not None:
        _unavailable(f"{problem} (COGMILL_TEST_NEO4J_URI)")
    return uri


def redis_problem(url: str) -> str | None:
    """Why the Redis at `url` cannot be used (it does not answer PING), or None."""
    where = _host_port(url, default_port=6379)
    try:
        # A missing server refuses at once; 10 s only spares a busy one (a loaded machine).
        with redis.Redis.from_url(url, socket_connect_timeout=10, socket_timeout=10) as client:
            client.ping()
    except (redis.RedisError, ValueError) as err:
        return f"Redis at {where} does not answer: {err}"
    return None


def neo4j_problem(uri: str) -> str | None:
    """Why the Neo4j at `uri` cannot be used (its bolt port refuses), or None."""
    where = _host_port(uri, default_port=7687)
    host, _, port = where.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=10).close()
    except OSError as err:
        return f"Neo4j at {where} does not answer: {err}"
    return None


def _env(name: str, service: str) -> str:
    if _running is not None and not _running[1]:
        pytest.fail(
            f"{_running[0]} uses the {service} test server but is not marked `services`: "
            "mark it (pytest.mark.services, or the parameter that needs the server) so "
            "that the fast tier leaves it out",
            pytrace=False,
        )
    value = os.environ.get(name, "").strip()
    if not value:
        _unavailable(f"{service} tests need {name} (set it to a running {service} server)")
    return value


def _host_port(url: str, *, default_port: int) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname or '127.0.0.1'}:{parts.port or default_port}"


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("COGMILL_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{reason}; COGMILL_REQUIRE_SERVICES=1 requires it", pytrace=False)
    pytest.skip(reason)
