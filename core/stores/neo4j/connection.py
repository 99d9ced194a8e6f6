"""Neo4j plumbing shared by every Neo4j adapter (graph, vectors, Cypher): one driver per
database, the server named in messages without its credentials, and driver errors mapped to
StoreError. The adapters keep only their queries.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from neo4j import READ_ACCESS, Driver, GraphDatabase, Record
from neo4j.exceptions import DriverError, Neo4jError

from core.ports import StoreError

log = logging.getLogger("cogmill.neo4j")
T = TypeVar("T")
# The driver warns at every retry of a managed transaction with the server's whole message: a
# deadlock's is a multi-line dump of locks. Writers to shared nodes meet deadlock detection
# now and then, and a retry settles it; `Neo4jConnection.transaction` logs a retried
# transaction as one debug line with its retry count, and warns only when one gives up.
DRIVER_RETRY_WARNING = "Transaction failed and will be retried"


# Waiting for an index by name, up to Neo4j's own default wait: a store waits for its own
# indexes only, never for every index of a database it may share.
AWAIT_INDEX = "CALL db.awaitIndex($name, $timeout)"
INDEX_TIMEOUT_S = 300


class QuietRetries(logging.Filter):
    """Drops the driver's per-retry warnings (see DRIVER_RETRY_WARNING)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(DRIVER_RETRY_WARNING)


def quiet_driver_retries() -> None:
    """Install `QuietRetries` on the driver's session logger, once per process."""
    driver_log = logging.getLogger("neo4j.session")
    if not any(isinstance(f, QuietRetries) for f in driver_log.filters):
        driver_log.addFilter(QuietRetries())


def first_line(err: BaseException) -> str:
    """An error as one line: its code (a Neo4j error's) and the first line of its message."""
    message = (str(err).strip().splitlines() or [type(err).__name__])[0]
    code = getattr(err, "code", None)
    return f"{code}: {message}" if code and code not in message else message


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
        quiet_driver_retries()

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

    def transaction(
        self, work: Callable[..., T], params: dict[str, Any], *, write: bool = True
    ) -> T:
        """`work(tx, **params)` in one managed transaction, re-run by the driver on transient
        errors (a deadlock, a busy server): a retried transaction is one debug line with its
        retry count, one that ran out of retries a warning. Driver errors are raised as they
        come: callers wrap this in `errors()`."""
        attempts = 0

        def attempt(tx: Any, **values: Any) -> T:
            nonlocal attempts
            attempts += 1
            return work(tx, **values)

        # Shared bookmarks: each call sees this process's earlier writes, even on a cluster.
        bookmarks = self.driver.execute_query_bookmark_manager
        name = getattr(work, "__name__", "transaction")
        try:
            with self.driver.session(database=self.database, bookmark_manager=bookmarks) as s:
                result = (s.execute_write if write else s.execute_read)(attempt, **params)
        except (Neo4jError, DriverError) as err:
            if err.is_retryable():  # transient, but the retry time ran out
                log.warning(
                    "neo4j_transaction_gave_up work=%s attempts=%d error=%s",
                    name,
                    attempts,
                    first_line(err),
                )
            raise
        if attempts > 1:
            log.debug("neo4j_transaction_retried work=%s retries=%d", name, attempts - 1)
        return result

    def close(self) -> None:
        """Close the driver and its connections; later `errors()` blocks raise StoreError."""
        self.closed = True
        self.driver.close()
