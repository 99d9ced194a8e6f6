"""Redis (append-only, fsync every second, as compose runs it) and Neo4j SIGKILLed while steps
run, and restarted on their data: the job ends as the undisturbed run did. The servers are the
harness's own, on free ports; the shared test services are never touched."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.faults.conftest import check
from tests.e2e.faults.harness import RunResult, Stack
from tests.e2e.faults.kinds import server_kills
from tests.e2e.faults.scenario import run
from tests.e2e.faults.servers import OwnNeo4j, OwnRedis

pytestmark = [pytest.mark.e2e, pytest.mark.services]


@pytest.fixture(scope="module")
def own_redis(fault_dir: Path) -> Iterator[OwnRedis]:
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is missing: apt-get install -y redis-server")
    server = OwnRedis(fault_dir / "own-redis")
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def own_neo4j(fault_dir: Path, own_redis: OwnRedis) -> Iterator[OwnNeo4j]:
    if shutil.which("java") is None:
        pytest.fail("java is missing: the Neo4j launcher (deploy/services.sh) needs Java 17+")
    server = OwnNeo4j(fault_dir / "own-neo4j", own_redis.port)
    server.start()
    yield server
    server.stop()


def test_redis_killed_mid_step_loses_nothing(
    own_redis: OwnRedis,
    shared_stack: Stack,
    corpus: list[Path],
    dataset: str,
    fault_dir: Path,
    reference: RunResult,
) -> None:
    stack = Stack(own_redis.url, shared_stack.neo4j_uri)
    scenario = server_kills("redis", own_redis, 1)
    outcome = run(scenario, stack, corpus, dataset, fault_dir / "redis-kill", reference)
    check(outcome, kills=1)


def test_neo4j_killed_mid_step_loses_nothing(
    own_neo4j: OwnNeo4j,
    own_redis: OwnRedis,
    corpus: list[Path],
    dataset: str,
    fault_dir: Path,
    reference: RunResult,
) -> None:
    stack = Stack(own_redis.url, own_neo4j.uri)
    scenario = server_kills("neo4j", own_neo4j, 1)
    outcome = run(scenario, stack, corpus, dataset, fault_dir / "neo4j-kill", reference)
    check(outcome, kills=1)
