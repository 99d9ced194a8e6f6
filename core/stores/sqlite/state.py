"""Job state, counters, sets and event streams in one SQLite file (embedded mode)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from core.sequences import batched
from core.stores.sqlite.file import SQLiteFile

_KEYS_PER_QUERY = 500  # bound parameters per SELECT, well below SQLite's limit
# Counters live in kv as decimal strings, so `get` reads a counter like Redis GET does.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL, expires_at REAL);
CREATE INDEX IF NOT EXISTS kv_expires ON kv (expires_at) WHERE expires_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS sets (key TEXT, member TEXT, PRIMARY KEY (key, member));
CREATE TABLE IF NOT EXISTS set_expiry (key TEXT PRIMARY KEY, expires_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS set_expiry_at ON set_expiry (expires_at);
CREATE TABLE IF NOT EXISTS events (stream TEXT, seq INTEGER, event TEXT NOT NULL,
                                   PRIMARY KEY (stream, seq));
"""

# Keys in [prefix, prefix + U+10FFFF) start with prefix (UTF-8 byte order is code point order);
# a range keeps the index usable and needs no LIKE escaping.
_LIVE_KEYS = """
SELECT key FROM kv WHERE key >= :lo AND key < :hi AND (expires_at IS NULL OR expires_at > :now)
UNION SELECT key FROM sets WHERE key >= :lo AND key < :hi
UNION SELECT stream FROM events WHERE stream >= :lo AND stream < :hi
ORDER BY 1
"""
# A set whose expiry has passed reads as empty until a write purges it (`_purge_sets`).
_LIVE_SET = "NOT EXISTS (SELECT 1 FROM set_expiry e WHERE e.key = ? AND e.expires_at <= ?)"


class SQLiteStateStore(SQLiteFile):
    """StateStore on SQLite in WAL mode; thread-safe, and other processes may open the file."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, _SCHEMA, "state store")

    def put(self, key: str, value: str, *, ttl: float | None = None) -> None:
        """Set a string value, expiring after `ttl` seconds when given. Raises StoreError."""
        expires_at = _expiry(ttl)
        with self._db() as db:
            db.execute(
                "INSERT INTO kv (key, value, expires_at) VALUES (?, ?, ?) ON CONFLICT (key)"
                " DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at",
                (key, value, expires_at),
            )

    def get(self, key: str) -> str | None:
        """The value, or None when missing or expired."""
        now = time.time()
        with self._db() as db:
            row = db.execute("SELECT value, expires_at FROM kv WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            value, expires_at = row
            if expires_at is not None and expires_at <= now:
                db.execute("DELETE FROM kv WHERE key = ? AND expires_at <= ?", (key, now))
                return None
            return value

    def get_many(self, keys: Sequence[str]) -> list[str | None]:
        """Each key's value in order (None where missing or expired), in one transaction."""
        now, found = time.time(), {}
        with self._db() as db:
            for part in batched(list(dict.fromkeys(keys)), _KEYS_PER_QUERY):
                marks = ",".join("?" * len(part))
                query = f"SELECT key, value, expires_at FROM kv WHERE key IN ({marks})"
                for key, value, expires_at in db.execute(query, part):
                    if expires_at is None or expires_at > now:
                        found[key] = value
        return [found.get(key) for key in keys]

    def delete(self, *keys: str) -> None:
        """Remove keys from kv, sets and events (no error when missing), in one transaction."""
        rows = [(key,) for key in keys]
        with self._db(write=True) as db:
            db.executemany("DELETE FROM kv WHERE key = ?", rows)
            db.executemany("DELETE FROM sets WHERE key = ?", rows)
            db.executemany("DELETE FROM set_expiry WHERE key = ?", rows)
            db.executemany("DELETE FROM events WHERE stream = ?", rows)

    def keys(self, prefix: str) -> list[str]:
        """Live keys of any kind starting with `prefix`, sorted."""
        now = time.time()
        with self._db() as db:
            db.execute("DELETE FROM kv WHERE expires_at <= ?", (now,))
            _purge_sets(db, now)
            rows = db.execute(_LIVE_KEYS, {"lo": prefix, "hi": prefix + "\U0010ffff", "now": now})
            return [key for (key,) in rows]

    def incr(self, key: str, amount: int = 1) -> int:
        """Atomically add to an integer counter and return the new value. ValueError if not one."""
        with self._db(write=True) as db:
            return _incr(db, key, amount)

    def incr_many(self, amounts: Mapping[str, int]) -> None:
        """Add to several counters in one write transaction. ValueError when a key does not
        hold an integer (the others are still added)."""
        bad: list[str] = []
        with self._db(write=True) as db:
            for key, amount in amounts.items():
                try:
                    _incr(db, key, amount)
                except ValueError:
                    bad.append(key)
        if bad:
            raise ValueError(f"keys {bad!r} do not hold integer counters")

    def reserve(self, key: str, amount: int, limit: int, *, ttl: float) -> int | None:
        """Add `amount` to a counter if the sum stays within `limit` (one write transaction,
        so another process's reservation waits for it): the new sum, or None."""
        expires_at = _expiry(ttl)
        with self._db(write=True) as db:
            total = _counter(db, key) + amount
            if total > limit:
                return None
            db.execute(
                "INSERT OR REPLACE INTO kv (key, value, expires_at) VALUES (?, ?, ?)",
                (key, str(total), expires_at),
            )
            return total

    def release(self, key: str, amount: int) -> None:
        """Take back a reservation; the counter is removed at zero or below."""
        with self._db(write=True) as db:
            if _counter(db, key) - amount <= 0:
                db.execute("DELETE FROM kv WHERE key = ?", (key,))
            else:
                _incr(db, key, -amount)

    def add_member(self, key: str, member: str, *, ttl: float | None = None) -> bool:
        """Add to a set; True when the member was new. With `ttl`, the set expires then."""
        expires_at = _expiry(ttl)
        with self._db(write=True) as db:
            _purge_sets(db, time.time(), key)
            cursor = db.execute(
                "INSERT INTO sets (key, member) VALUES (?, ?) ON CONFLICT DO NOTHING", (key, member)
            )
            if expires_at is not None:
                db.execute(
                    "INSERT INTO set_expiry (key, expires_at) VALUES (?, ?) ON CONFLICT (key)"
                    " DO UPDATE SET expires_at = excluded.expires_at",
                    (key, expires_at),
                )
            return cursor.rowcount == 1

    def remove_member(self, key: str, member: str) -> bool:
        """Remove from a set; True when the member was there."""
        with self._db() as db:
            cursor = db.execute("DELETE FROM sets WHERE key = ? AND member = ?", (key, member))
            return cursor.rowcount == 1

    def count_members(self, key: str) -> int:
        """Size of a set (0 when missing)."""
        with self._db() as db:
            query = f"SELECT count(*) FROM sets WHERE key = ? AND {_LIVE_SET}"
            return db.execute(query, (key, key, time.time())).fetchone()[0]

    def add_members(self, members: Mapping[str, Sequence[str]]) -> dict[str, set[str]]:
        """Add members to several sets, then return each of those sets whole (one transaction)."""
        with self._db(write=True) as db:
            now = time.time()
            for key, items in members.items():
                if items:
                    _purge_sets(db, now, key)
            db.executemany(
                "INSERT INTO sets (key, member) VALUES (?, ?) ON CONFLICT DO NOTHING",
                [(key, member) for key, items in members.items() for member in items],
            )
            query = f"SELECT member FROM sets WHERE key = ? AND {_LIVE_SET}"
            return {key: {m for (m,) in db.execute(query, (key, key, now))} for key in members}

    def append_event(self, stream: str, event: str) -> int:
        """Append to an ordered stream and return the event's sequence number (from 1)."""
        # One INSERT ... SELECT takes the write lock before it reads MAX(seq), so concurrent
        # writers (threads or processes) get consecutive, unique numbers.
        with self._db() as db:
            row = db.execute(
                "INSERT INTO events (stream, seq, event)"
                " SELECT ?, coalesce(max(seq), 0) + 1, ? FROM events WHERE stream = ?"
                " RETURNING seq",
                (stream, event, stream),
            ).fetchone()
            return row[0]

    def read_events(
        self, stream: str, *, after: int = 0, limit: int = 1000
    ) -> list[tuple[int, str]]:
        """Events with sequence numbers above `after`, oldest first. ValueError on limit < 1."""
        _check_window(after, limit)
        with self._db() as db:
            rows = db.execute(
                "SELECT seq, event FROM events WHERE stream = ? AND seq > ? ORDER BY seq LIMIT ?",
                (stream, after, limit),
            )
            return [(seq, event) for seq, event in rows]


def _purge_sets(db: sqlite3.Connection, now: float, key: str | None = None) -> None:
    """Remove the sets (one, or all) whose expiry has passed."""
    where = "expires_at <= ?" + (" AND key = ?" if key is not None else "")
    args = (now,) if key is None else (now, key)
    db.execute(f"DELETE FROM sets WHERE key IN (SELECT key FROM set_expiry WHERE {where})", args)
    db.execute(f"DELETE FROM set_expiry WHERE {where}", args)


def _expiry(ttl: float | None) -> float | None:
    if ttl is None:
        return None
    if ttl <= 0:
        raise ValueError(f"ttl must be positive seconds, got {ttl!r}")
    return time.time() + ttl


def _counter(db: sqlite3.Connection, key: str) -> int:
    """A counter's value (0 when missing or expired). ValueError when it holds no integer."""
    row = db.execute("SELECT value, expires_at FROM kv WHERE key = ?", (key,)).fetchone()
    if row is None or (row[1] is not None and row[1] <= time.time()):
        return 0
    return _as_int(key, row[0])


def _incr(db: sqlite3.Connection, key: str, amount: int) -> int:
    row = db.execute("SELECT value, expires_at FROM kv WHERE key = ?", (key,)).fetchone()
    expired = row is not None and row[1] is not None and row[1] <= time.time()
    if row is None or expired:
        current, expires_at = 0, None
    else:
        current, expires_at = _as_int(key, row[0]), row[1]
    new = current + amount
    db.execute(
        "INSERT OR REPLACE INTO kv (key, value, expires_at) VALUES (?, ?, ?)",
        (key, str(new), expires_at),
    )
    return new


def _as_int(key: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"key {key!r} holds {value!r}, not an integer counter") from None


def _check_window(after: int, limit: int) -> None:
    if after < 0 or limit < 1:
        raise ValueError(f"need after >= 0 and limit >= 1, got after={after}, limit={limit}")
