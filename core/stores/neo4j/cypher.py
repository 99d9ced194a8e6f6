"""Runs caller-supplied Cypher on Neo4j in read-only transactions (CYPHER, NATURAL_LANGUAGE).

Kept apart from the graph store: this is the one place where text we did not write reaches the
database, so it gets its own session settings (READ access mode, a timeout, a row cap) and
its results come back as plain JSON-ready values, never driver records.
"""

from __future__ import annotations

from typing import Any

from neo4j import READ_ACCESS
from neo4j.exceptions import ClientError, TransientError
from neo4j.graph import Node as DriverNode
from neo4j.graph import Path as DriverPath
from neo4j.graph import Relationship as DriverRelationship

from core.ports import CypherError
from core.stores.neo4j.connection import Neo4jConnection


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
    """CypherRunner on one Neo4j database: READ transactions that Neo4j ends at `timeout`
    seconds (between rows and at store reads; cypher_guard refuses what loops within a row);
    shared by threads."""

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
        """At most `limit` rows of `query` run in a READ transaction, never retried (a query
        that hit the time or memory bound would only hit it again).

        Raises CypherError when the database refuses the query or stops it at a bound,
        StoreError when it fails.
        """
        driver = self._conn.driver
        with self._conn.errors():
            try:
                with (
                    driver.session(database=self.database, default_access_mode=READ_ACCESS) as s,
                    s.begin_transaction(timeout=self.timeout) as tx,
                ):
                    result = tx.run(query, params)
                    rows = []
                    for record in result:
                        rows.append({key: _plain(value) for key, value in record.items()})
                        if len(rows) >= limit:
                            break
                    result.consume()  # lets the server end the query early past the limit
                    tx.rollback()  # read-only: nothing to commit
                    return rows
            except ClientError as err:
                raise CypherError(self._refusal(err)) from err
            except TransientError as err:
                if "MemoryPoolOutOfMemory" not in (err.code or ""):
                    raise  # the server is busy or restarting: a StoreError
                raise CypherError(self._refusal(err)) from err

    def _refusal(self, err: ClientError | TransientError) -> str:
        """Why Neo4j refused or stopped the query, in our words where it hit a bound."""
        code = err.code or ""
        if "TransactionTimedOut" in code or "Terminated" in code:
            return (
                f"the query ran past the {self.timeout:g} s bound "
                "(COGMILL_CYPHER_TIMEOUT_SECONDS) and Neo4j stopped it; narrow it with a label, "
                "a property or a LIMIT"
            )
        if "MemoryPoolOutOfMemory" in code:
            return (
                "the query needs more memory than Neo4j allows one transaction "
                "(db.memory.transaction.max); narrow it with a label, a property or a LIMIT"
            )
        return f"Neo4j refused the query: {err.message} ({code})"

    def close(self) -> None:
        """Close the driver; later queries raise StoreError."""
        self._conn.close()
