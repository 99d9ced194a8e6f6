"""One SQLite file in WAL mode behind a lock: the base of the small embedded SQLite stores."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from core.ports import StoreError


class SQLiteFile:
    """A connection to `path` with `schema` applied; thread-safe, other processes may open it.

    One connection behind a lock: the calls are small, and a lock is simpler than per-thread
    connections that must all be closed. The timeout is the busy timeout that lets a second
    process wait for the write lock instead of failing.
    """

    def __init__(self, path: Path, schema: str, what: str) -> None:
        self.path, self.what = path, what
        self._lock = threading.Lock()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                path, timeout=10.0, isolation_level=None, check_same_thread=False
            )
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.executescript(schema)
        except (OSError, sqlite3.Error) as err:
            raise StoreError(f"cannot open {what} {path}: {err}") from err

    @contextmanager
    def _db(self, *, write: bool = False) -> Iterator[sqlite3.Connection]:
        """The connection, held exclusively; `write` wraps the block in one write transaction."""
        with self._lock:
            try:
                if not write:
                    yield self._conn
                    return
                # IMMEDIATE takes the write lock up front, so read-then-write is atomic
                # across processes too.
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    yield self._conn
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
                self._conn.execute("COMMIT")
            except sqlite3.Error as err:
                raise StoreError(f"{self.what} {self.path}: {err}") from err

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            self._conn.close()
