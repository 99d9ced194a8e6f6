"""Every caller's Cypher stops on the Neo4j server at its bound, and the request with it.

A query whose work is rows (here two billion UNWIND rows) is ended by Neo4j's transaction
timeout: the answer comes at the bound, in cogmill's words, and SHOW TRANSACTIONS has nothing
of it left. A query that loops inside one expression (the reduce over range(1,400000) that ran
on at 100% CPU for minutes past a 30 s timeout) is never sent, whoever asks. Where the test
can see the server process (deploy/services.sh's pid file), its CPU is idle again afterwards.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.ports import CypherError
from core.stores.neo4j.cypher import Neo4jCypherRunner
from retrieval.cypher_confine import CypherScopeError, confine
from retrieval.cypher_guard import UnboundedExpression, check_read_only, check_row_bounded
from tests import services

pytestmark = [pytest.mark.integration, pytest.mark.services, pytest.mark.slow]

BOUND = 2.0
MARGIN = 8.0  # a loaded 2-core machine: the driver's round trips, not the server's work
# Its first string is a marker, unique per run: SHOW TRANSACTIONS can tell it from another
# test's query with a reduce() in it on the same server.
BOMB = "RETURN size(reduce(s='{marker}', x IN range(1,400000) | s+'aaaaaaaaaa')) AS n"


@pytest.fixture(scope="module")
def runner() -> Iterator[Neo4jCypherRunner]:
    cypher = Neo4jCypherRunner(services.neo4j_uri(), timeout=BOUND)
    yield cypher
    cypher.close()


def running(runner: Neo4jCypherRunner, marker: str) -> list[str]:
    """The queries of the server's open transactions that carry `marker`."""
    rows = runner.run_read("SHOW TRANSACTIONS YIELD currentQuery RETURN currentQuery", {}, 1000)
    return [r["currentQuery"] for r in rows if marker in (r["currentQuery"] or "")]


def server_cpu_seconds() -> float | None:
    """The Neo4j process's CPU time, where deploy/services.sh started it on this machine."""
    folder = os.environ.get("COGMILL_SERVICES_DIR", "")
    pid_file = Path(folder) / "neo4j.pid" if folder else None
    if pid_file is None or not pid_file.exists():
        return None
    fields = Path(f"/proc/{pid_file.read_text().strip()}/stat").read_text().rsplit(")", 1)[1]
    utime, stime = fields.split()[11:13]
    return (int(utime) + int(stime)) / os.sysconf("SC_CLK_TCK")


def test_a_long_query_stops_on_the_server_at_the_bound(runner: Neo4jCypherRunner) -> None:
    marker = f"bound-{uuid.uuid4().hex[:8]}"
    query = (
        "UNWIND range(1, 2000000000) AS x WITH x WHERE x < 0 "
        f"AND '{marker}' <> '' RETURN count(x) AS n"
    )
    started = time.monotonic()
    with pytest.raises(CypherError, match="ran past the 2 s bound") as caught:
        runner.run_read(check_row_bounded(check_read_only(query)), {}, 10)
    took = time.monotonic() - started
    assert BOUND <= took < BOUND + MARGIN, took
    assert "Neo4j" in str(caught.value) and "COGMILL_CYPHER_TIMEOUT_SECONDS" in str(caught.value)
    deadline = time.monotonic() + 5
    while running(runner, marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert running(runner, marker) == []
    before = server_cpu_seconds()
    if before is not None:
        time.sleep(3)
        after = server_cpu_seconds()
        assert after is not None and after - before < 1.5, after - before  # of 3 s: idle


@pytest.mark.parametrize("path", ["tenant (confined)", "operator (raw)"])
def test_a_query_that_loops_in_one_row_is_never_sent(runner: Neo4jCypherRunner, path: str) -> None:
    confine("RETURN 1", 1)  # the parser is built once per process (lark's LALR tables)
    marker = f"bomb-{uuid.uuid4().hex[:8]}"
    bomb = BOMB.format(marker=marker)
    started = time.monotonic()
    with pytest.raises((CypherScopeError, UnboundedExpression), match="reduce"):
        if path.startswith("tenant"):
            confine(bomb, 10)
        else:
            check_row_bounded(check_read_only(bomb))
    assert time.monotonic() - started < 1.0
    assert running(runner, marker) == []


@pytest.mark.parametrize(
    "query",
    [
        "RETURN [x IN range(1, 100000000) | x] AS l",
        "RETURN any(x IN range(1, 100000000) WHERE x < 0) AS a",
        "WITH range(1, 100000000) AS l RETURN size(l)",
    ],
)
def test_an_operator_may_not_loop_in_one_row_either(query: str) -> None:
    with pytest.raises(UnboundedExpression, match="loops inside one row"):
        check_row_bounded(check_read_only(query))


def test_unwinding_a_range_stays_allowed_each_item_is_a_row(runner: Neo4jCypherRunner) -> None:
    query = check_row_bounded("UNWIND range(1, 5) AS i RETURN i")
    assert [r["i"] for r in runner.run_read(query, {}, 10)] == [1, 2, 3, 4, 5]


def test_a_query_over_the_memory_or_time_bound_answers_in_our_words(
    runner: Neo4jCypherRunner,
) -> None:
    query = "UNWIND range(1, 20000000) AS x WITH collect(toString(x)) AS l RETURN size(l) AS n"
    started = time.monotonic()
    with pytest.raises(CypherError, match="memory than Neo4j allows|ran past the 2 s bound"):
        runner.run_read(query, {}, 1)
    assert time.monotonic() - started < BOUND + MARGIN
