"""Neo4j plumbing shared by every Neo4j adapter (graph, vectors, Cypher): one driver per
database, the server named in messages without its credentials, and driver errors mapped to
StoreError. The adapters keep only their queries.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from neo4j import READ_ACCESS, Driver, GraphDatabase, Record
from neo4j.exceptions import DriverError, Neo4jError

from core.ports import StoreError


def redact(uri: str) -> str:
    """The URI without credentials or query (which may carry them), for messages and logs."""
    parts = urlsplit(uri)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2], query=""))


class Rows(list[Any]):
    """A list query parameter whose repr is its length. The driver (neo4j 6.4, Bolt5x5.run)
    formats every RUN's parameters for a debug log line whether or not debug logging is on:
    ~0.2 ms of a worker's CPU per 384-d vector sent, seven times the rest of sending it."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<{len(self)} rows>"


class Neo4jConnection:
    """A driver on one database of a Neo4j server; `errors()` maps what the driver raises."""

    def __init__(
        self,
        uri: str,
        *,
        user: str = "neo4j",
        password: str = "",
        database: str = "neo4j",
        **driver_options: Any,
    ) -> None:
        """`driver_options`: keyword arguments of `GraphDatabase.driver` (pool size, timeouts)."""
        self.uri = redact(uri)
        self.database = database
        auth = (user, password) if password else None
        # No "label does not exist" warning per read before the first write of a label.
        driver_options.setdefault("notifications_min_severity", "OFF")
        self.driver: Driver = GraphDatabase.driver(uri, auth=auth, **driver_options)
        # `read` retries as long as the driver's managed transactions do.
        self._retry_s = float(driver_options.get("max_transaction_retry_time", 30.0))
        self._first_delay = float(driver_options.get("initial_retry_delay", 1.0))
        self.closed = False

    @property
    def where(self) -> str:
        """The server and database, as messages name them."""
        return f"Neo4j at {self.uri} (database {self.database})"

    @contextmanager
    def errors(self, action: str = "") -> Iterator[None]:
        """Driver errors as StoreError naming the server (and `action`); a closed connection
        raises StoreError before anything runs."""
        doing = f" {action} failed:" if action else ""
        if self.closed:
            raise StoreError(f"{self.where}:{doing} the connection is closed")
        try:
            yield
        except (Neo4jError, DriverError) as err:
            raise StoreError(f"{self.where}:{doing} {err}") from err

    def read(self, query: str, params: dict[str, Any]) -> list[Record]:
        """The records of one read-only statement, auto-committed: no BEGIN and COMMIT
        messages, which cost a short read (GRAPH_PPR's hops) about as much again of the
        client's and the server's CPU as a managed transaction. The statement is re-run on the
        errors the driver would retry one on (a restarted or busy server), with the same
        doubling delays and total time; reading twice changes nothing. Driver errors are
        raised as they come: callers wrap this in `errors()`."""
        delay, deadline = self._first_delay, time.monotonic() + self._retry_s
        bookmarks = self.driver.execute_query_bookmark_manager  # sees this process's writes
        while True:
            try:
                with self.driver.session(
                    database=self.database,
                    default_access_mode=READ_ACCESS,
                    bookmark_manager=bookmarks,
                ) as session:
                    return list(session.run(query, params))
            except (Neo4jError, DriverError) as err:
                if not err.is_retryable() or time.monotonic() + delay > deadline:
                    raise
            time.sleep(delay)
            delay *= 2

    def close(self) -> None:
        """Close the driver and its connections; later `errors()` blocks raise StoreError."""
        self.closed = True
        self.driver.close()
