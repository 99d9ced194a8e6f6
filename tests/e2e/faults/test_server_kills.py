"""Redis (append-only, fsync every second, as compose runs it) and Neo4j SIGKILLed while steps
run, and restarted on their data: the job ends as the undisturbed run did. The servers are the
harness's own, on free ports; the shared test services are never touched. Also: `cogmill
serve` warms a Neo4j restarted under it."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.http.app import create_app
from api.services.demo import SAMPLE_CORPUS
from api.services.warmup import Warmer, questions, server_started
from runtime import Runtime
from tests.backends import NEO4J, Backend, ingest
from tests.e2e.faults.conftest import check
from tests.e2e.faults.harness import RunResult, Stack
from tests.e2e.faults.kinds import server_kills
from tests.e2e.faults.scenario import run
from tests.e2e.faults.servers import OwnNeo4j, OwnRedis

# A group of its own under `pytest -n`: the longest module of the harness runs beside the
# others (each group runs the undisturbed reference once, tests/e2e/faults/conftest.py).
pytestmark = pytest.mark.xdist_group("e2e/faults/servers")


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


def test_serve_warms_neo4j_at_start_and_after_a_restart(
    own_neo4j: OwnNeo4j, own_redis: OwnRedis, tmp_path: Path
) -> None:
    """`cogmill serve`'s app runs its warm-up searches on the stored names once /ready is
    up, and again (only) when the Neo4j server it uses has started anew."""
    backend = Backend(NEO4J, tmp_path, neo4j=own_neo4j.uri, redis=own_redis.url)
    dataset = backend.dataset("warm")
    with backend.runtime() as rt:
        ingest(rt, dataset, sorted(SAMPLE_CORPUS.glob("*.txt")))
        named = len(questions(rt, 1000))
        assert named >= 4, f"the sample corpus named {named} pairs of entities"
        with TestClient(create_app(Runtime(backend.settings()), warm_up=True)) as client:
            warmer = client.app.state.warmer  # type: ignore[attr-defined]
            states = {client.get("/ready").json()["warm_up"]}
            deadline = time.monotonic() + 120
            while warmer.rounds == 0 and time.monotonic() < deadline:
                states.add(client.get("/ready").json()["warm_up"])
                time.sleep(0.05)
            ready = client.get("/ready").json()
            assert ready["ready"] and ready["warm_up"] == "warm", ready
            assert "warming" in states, states
            assert warmer.last.queries == min(named, rt.settings.serve_warm_up), warmer.last
            assert warmer.last.datasets == 1, warmer.last

        # Checked every half second: the same server is not warmed again, a restarted one is.
        warmer = Warmer(rt, 3, check_s=0.5)
        warmer.start()
        try:
            _wait(lambda: warmer.rounds == 1, 60)
            first = server_started(rt)
            time.sleep(2.0)
            assert warmer.rounds == 1 and server_started(rt) == first
            own_neo4j.stop()
            own_neo4j.start()
            _wait(lambda: warmer.rounds == 2, 120)
            assert server_started(rt) != first
            assert warmer.last is not None and warmer.last.queries == 3, warmer.last
        finally:
            warmer.stop()


def _wait(done: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"not done within {timeout:.0f}s"
        time.sleep(0.1)
