"""Runs caller-supplied Cypher on Neo4j in read-only transactions (CYPHER, NATURAL_LANGUAGE).

Kept apart from the graph store: this is the one place where text we did not write reaches the
database, so it gets its own session settings (READ access mode, a timeout, a row cap) and
its results come back as plain JSON-ready values, never driver records.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from neo4j import READ_ACCESS, ManagedTransaction, unit_of_work
from neo4j.exceptions import BrokenRecordError, ClientError, DatabaseError, Neo4jError
from neo4j.graph import Node as DriverNode
from neo4j.graph import Path as DriverPath
from neo4j.graph import Relationship as DriverRelationship

from core.ports import CypherError
from core.stores.neo4j.connection import Neo4jConnection

log = logging.getLogger("cogmill.cypher")
# What the query did wrong, by the last part of Neo4j's status code; Neo4j's own message (Java
# exception names, parser expectations) goes to the log and to `CypherError.detail`.
REFUSALS = {
    "SyntaxError": "the query is not valid Cypher, or a value in it cannot be parsed (a date, "
    "a point, a type that does not fit); check it",
    "ArgumentError": "a function or procedure in the query got an argument it does not take; "
    "check the arguments",
    "ArithmeticError": "arithmetic in the query failed (a division by zero, or a number out "
    "of range); check its numbers",
    "TypeError": "a value in the query has the wrong type for where it is used; check it",
    "ProcedureCallFailed": "a procedure the query calls failed (e.g. an index name that does "
    "not exist, or an argument out of range); check its arguments",
    "ProcedureNotFound": "the query calls a procedure this Neo4j does not have; check its name",
    "AccessMode": "the query would write, and CYPHER runs read-only; check it only reads",
    "Forbidden": "the query does something CYPHER may not do; check it only reads",
    "TransactionTimedOutClientConfiguration": "the query ran over its time limit; check it can "
    "be cheaper (a narrower MATCH, a LIMIT)",
    "TransactionTimedOut": "the query ran over its time limit; check it can be cheaper (a "
    "narrower MATCH, a LIMIT)",
    "ExecutionFailed": "the query failed while running (e.g. a negative index or length given "
    "to a string function); check its function arguments",
}
DEFAULT_REFUSAL = "the database refused the query; check it against the Cypher manual"
_POSITION = re.compile(r"\(line (\d+), column (\d+)")


def _refusal(err: Exception) -> CypherError:
    """The query's fault in cogmill's words, with where Neo4j found it when it says."""
    code = getattr(err, "code", None) or ""
    text = getattr(err, "message", None) or str(err)
    reason = REFUSALS.get(code.rpartition(".")[2], DEFAULT_REFUSAL)
    if isinstance(err, BrokenRecordError):
        reason = "a value the query returns cannot be read (e.g. a date out of range); check it"
    found = _POSITION.search(text)
    where = f" (near line {found[1]}, column {found[2]})" if found else ""
    log.info("cypher_refused code=%s detail=%r", code, text[:2000])
    return CypherError(f"{reason}{where}", detail=f"{text} ({code})" if code else text)


def _plain(value: Any) -> Any:
    """A driver value as JSON-ready Python: nodes and relationships become dicts."""
    if isinstance(value, DriverNode):
        props = {k: v for k, v in value.items() if not k.startswith("_")}
        return {"labels": sorted(value.labels), **_plain(props)}
    if isinstance(value, DriverRelationship):
        props = {k: v for k, v in value.items() if not k.startswith("_")}
        ends = {"start": _end_id(value.start_node), "end": _end_id(value.end_node)}
        return {"type": value.type, **ends, **_plain(props)}
    if isinstance(value, DriverPath):
        return {"nodes": [_plain(n) for n in value.nodes]}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)  # temporal and spatial values


def _end_id(node: DriverNode | None) -> Any:
    return None if node is None else node.get("id")


class Neo4jCypherRunner:
    """CypherRunner on one Neo4j database: READ transactions with a timeout; shared by threads."""

    def __init__(
        self,
        uri: str,
        *,
        user: str = "neo4j",
        password: str = "",
        database: str = "neo4j",
        timeout: float = 30.0,
        pool_size: int = 4,
    ) -> None:
        """`pool_size`: connections shared by the threads running queries at once (one runner
        serves a whole process: the runtime keeps it)."""
        self._conn = Neo4jConnection(
            uri, user=user, password=password, database=database, max_connection_pool_size=pool_size
        )
        self.uri, self.database, self.timeout = self._conn.uri, database, timeout

    def run_read(self, query: str, params: dict[str, Any], limit: int) -> list[dict[str, Any]]:
        """At most `limit` rows of `query` run in a READ transaction.

        Raises CypherError when the database refuses the query (or fails on its values),
        StoreError when it fails.
        """

        @unit_of_work(timeout=self.timeout)
        def work(tx: ManagedTransaction) -> list[dict[str, Any]]:
            result = tx.run(query, params)
            rows = []
            for record in result:
                rows.append({key: _plain(value) for key, value in record.items()})
                if len(rows) >= limit:
                    break
            result.consume()  # lets the server end the query early past the limit
            return rows

        driver = self._conn.driver
        with self._conn.errors():
            try:
                with driver.session(database=self.database, default_access_mode=READ_ACCESS) as s:
                    return s.execute_read(work)
            except (ClientError, BrokenRecordError) as err:
                raise _refusal(err) from err
            except DatabaseError as err:
                if not _query_failed(err):
                    raise
                raise _refusal(err) from err

    def close(self) -> None:
        """Close the driver; later queries raise StoreError."""
        self._conn.close()


def _query_failed(err: Neo4jError) -> bool:
    """A DatabaseError that the query's values caused, not the database."""
    return (err.code or "").endswith(".Statement.ExecutionFailed")
