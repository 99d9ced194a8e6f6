"""CYPHER's two read-only walls against the real Neo4j: the filter (retrieval/cypher_guard.py)
and the READ access mode of the runner.

Each bypass a security probe found is refused by the filter; run past the filter straight into the
runner, Neo4j refuses the writes and the unknown procedures too. SHOW USERS and SHOW SETTINGS
are read commands that READ mode allows (on this server they answer), so for them the filter
is the only wall — the test says so by running them.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from core.ports import CypherError
from core.stores.neo4j.cypher import Neo4jCypherRunner
from retrieval.cypher import SCHEMA_QUERIES
from retrieval.cypher_guard import ReadOnlyViolation, check_read_only
from tests import services

pytestmark = [pytest.mark.integration, pytest.mark.services]

PROBE = "GuardProbe"
# The bypasses a probe found (and neighbours), each with what the filter's refusal names.
WRITES_AND_PROCEDURES = {
    "backticked procedure": ("CALL `dbms.setConfigValue`('db.logs.query.enabled', 'OFF')", "dbms"),
    "backticked parts": ("CALL `apoc`.`load`.`json`('file:///etc/passwd')", "apoc.load.json"),
    "comment ended by CR": (
        f"MATCH (n) WITH count(n) AS c // x\rCREATE (:{PROBE}) RETURN c",
        "CREATE",
    ),
    "comment ended by LS": (
        f"MATCH (n) WITH count(n) AS c // x\u2028CREATE (:{PROBE}) RETURN c",
        "CREATE",
    ),
    "word after a number": (f"RETURN 1CREATE (:{PROBE})", "CREATE"),
    "write in a subquery": (f"MATCH (n) CALL {{ CREATE (:{PROBE}) }} RETURN 1", "CREATE"),
    "plugin function": ("RETURN apoc.cypher.runFirstColumnSingle('RETURN 1', {}) AS x", "apoc"),
    "USE system": ("USE system MATCH (n) RETURN n", "USE"),
}
READ_COMMANDS = {"SHOW USERS": "SHOW USERS", "SHOW SETTINGS": "SHOW SETTINGS"}


@pytest.fixture(scope="module")
def runner() -> Iterator[Neo4jCypherRunner]:
    cypher = Neo4jCypherRunner(services.neo4j_uri())
    yield cypher
    cypher.close()


def _probes(runner: Neo4jCypherRunner) -> int:
    return runner.run_read(f"MATCH (n:{PROBE}) RETURN count(n) AS n", {}, 1)[0]["n"]


@pytest.mark.parametrize("case", sorted(WRITES_AND_PROCEDURES))
def test_each_bypass_is_refused_by_the_filter_and_by_neo4j(
    runner: Neo4jCypherRunner, case: str
) -> None:
    query, named = WRITES_AND_PROCEDURES[case]
    with pytest.raises(ReadOnlyViolation, match=named):
        check_read_only(query)
    with pytest.raises(CypherError):  # the second wall: READ mode (or no such procedure)
        runner.run_read(query, {}, 5)
    assert _probes(runner) == 0


@pytest.mark.parametrize("command", sorted(READ_COMMANDS))
def test_show_commands_are_refused_by_the_filter_which_is_their_only_wall(
    runner: Neo4jCypherRunner, command: str
) -> None:
    with pytest.raises(ReadOnlyViolation, match="SHOW"):
        check_read_only(READ_COMMANDS[command])
    assert runner.run_read(READ_COMMANDS[command], {}, 1)  # READ mode lets them answer


READS = [
    "MATCH (n) WHERE n.name = 'CREATE or DELETE' AND n.set IS NULL RETURN n.`delete` LIMIT 1",
    "MATCH (n) // CREATE\nRETURN count(n) AS n",
    "MATCH (n) /* SET n.x = 1 */ RETURN count(n) AS n;",
    "MATCH (n) RETURN n {.name, set: 1} AS m LIMIT 1",
    "CALL db.labels() YIELD label RETURN label LIMIT 1",
    "CALL `db`.`labels`() YIELD label RETURN label LIMIT 1",
    "CALL dbms.components() YIELD name RETURN name",
    "CALL () { MATCH (n) RETURN count(n) AS c } RETURN c",
    "UNWIND [1, 2] AS x WITH x WHERE EXISTS { MATCH (n) } OR true RETURN x",
    "RETURN duration.between(date('2020-01-01'), date('2021-01-01')).days AS d, "
    "vector.similarity.cosine([1.0, 0.0], [1.0, 0.0]) AS s, 'a\\'b' AS q",
]


@pytest.mark.parametrize("query", READS)
def test_read_queries_pass_the_filter_and_run(runner: Neo4jCypherRunner, query: str) -> None:
    assert check_read_only(query) == query
    runner.run_read(query, {}, 5)  # Neo4j runs it: the filter refused nothing it should allow


@pytest.mark.parametrize("name", sorted(SCHEMA_QUERIES))
def test_cogmills_own_schema_queries_pass_the_filter(name: str) -> None:
    assert check_read_only(SCHEMA_QUERIES[name])


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("MATCH (n) RETURN 'open", "unclosed string"),
        ("MATCH (n) RETURN n.`open", "unclosed backticked name"),
        ("MATCH (n) /* open", "unclosed /\\* comment"),
        ("MATCH (n) RETURN 1; MATCH (m) RETURN 2", "one statement"),
        ("EXPLAIN MATCH (n) RETURN n", "starts with 'EXPLAIN'"),
        ("CALL $name()", "procedure \\$ is not known"),
    ],
)
def test_what_cannot_be_tokenised_safely_is_refused(query: str, reason: str) -> None:
    with pytest.raises(ReadOnlyViolation, match=reason):
        check_read_only(query)
