"""Neo4j deadlocks between concurrent writers are retried quietly: one debug line per retried
transaction with its retry count, none of the driver's multi-line warnings; a warning only
when a transaction runs out of retries. Two transactions lock two nodes in opposite orders,
so the server's deadlock detection picks one of them."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from neo4j.exceptions import TransientError

from core.stores.neo4j.connection import Neo4jConnection
from tests.services import neo4j_uri

pytestmark = [pytest.mark.integration, pytest.mark.services]


@pytest.fixture
def nodes() -> Iterator[tuple[str, str]]:
    tag = uuid.uuid4().hex[:8]
    ids = (f"retry-a-{tag}", f"retry-b-{tag}")
    conn = Neo4jConnection(neo4j_uri())
    try:
        conn.driver.execute_query("UNWIND $ids AS id CREATE (:RetryTest {id: id, x: 0})", ids=ids)
        yield ids
        conn.driver.execute_query("MATCH (n:RetryTest) WHERE n.id IN $ids DELETE n", ids=ids)
    finally:
        conn.close()


def lock_both(tx: Any, first: str, second: str, both: threading.Barrier) -> None:
    """Lock `first`, wait until the other transaction holds its first node, lock `second`."""
    tx.run("MATCH (n:RetryTest {id: $id}) SET n.x = n.x + 1", id=first).consume()
    with contextlib.suppress(threading.BrokenBarrierError):  # a retry finds it broken
        both.wait(timeout=10)
    tx.run("MATCH (n:RetryTest {id: $id}) SET n.x = n.x + 1", id=second).consume()


def deadlock(conn: Neo4jConnection, ids: tuple[str, str]) -> list[BaseException]:
    """Run the two opposite transactions at once; the errors they raised."""
    both, errors = threading.Barrier(2), []

    def run(first: str, second: str) -> None:
        try:
            conn.transaction(lock_both, {"first": first, "second": second, "both": both})
        except BaseException as err:  # the test looks at it
            errors.append(err)
        finally:
            both.abort()

    threads = [threading.Thread(target=run, args=pair) for pair in (ids, ids[::-1])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return errors


def test_a_retried_deadlock_is_one_debug_line(
    nodes: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    conn = Neo4jConnection(neo4j_uri(), initial_retry_delay=0.05)
    # The driver's own warnings too (set_level also sets the capture's level: DEBUG last).
    caplog.set_level(logging.WARNING, logger="neo4j")
    caplog.set_level(logging.DEBUG, logger="cogmill.neo4j")
    try:
        assert deadlock(conn, nodes) == []
    finally:
        conn.close()
    retried = [r for r in caplog.records if r.name == "cogmill.neo4j"]
    assert [(r.levelno, r.getMessage()) for r in retried] == [
        (logging.DEBUG, "neo4j_transaction_retried work=lock_both retries=1")
    ], [r.getMessage() for r in caplog.records]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


def test_a_deadlock_out_of_retries_is_one_warning(
    nodes: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    conn = Neo4jConnection(neo4j_uri(), max_transaction_retry_time=0)
    caplog.set_level(logging.DEBUG, logger="cogmill.neo4j")
    try:
        started = time.monotonic()
        [error] = deadlock(conn, nodes)
        assert time.monotonic() - started < 30
    finally:
        conn.close()
    assert isinstance(error, TransientError) and "Deadlock" in (error.code or ""), error
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "\n" not in warnings[0], warnings
    assert warnings[0].startswith("neo4j_transaction_gave_up work=lock_both attempts=1 error=")
    assert "DeadlockDetected" in warnings[0]
