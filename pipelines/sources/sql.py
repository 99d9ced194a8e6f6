"""SQL tables as a source: one document per table, a SQLite file of its rows in key order.

A table's document is rebuilt from the one the dataset holds (its previous version): the
rows whose updated column (`updated_at`, a version: a value that grows with every insert and
update across the table) is at or above the cursor's high-water mark are written over it,
the source's keys are read to drop deleted rows, and rows whose keys are new but were not
read (a null or late updated value) are fetched by key. The document is then written afresh
in key order, so the same rows always give the same bytes: an unchanged table is an
unchanged document, and a sync ends with exactly the documents a first sync of the same rows
makes. A table without an updated column, without a cursor, or whose columns or keys changed
is read whole. Every table needs a primary key (from its schema or `--primary-key T=C`):
deleted rows are found by key. Each table is bounded by COGMILL_SYNC_SQL_MAX_ROWS rows.
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import shutil
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

from core.settings import Settings
from pipelines.sources.errors import SourceError
from pipelines.sources.listing import Entry, Listing, Scratch
from pipelines.sources.spec import ANY_TABLE, SourceSpec
from pipelines.structured.key_declarations import KeyDeclarations
from pipelines.structured.tables import quote

READ_BATCH = 2000
KEY_BATCH = 500
# The previous version of a table's document: (name, sha256) -> a local copy, or None.
Previous = Callable[[str, str], Path | None]


def encode_mark(value: Any) -> list[str] | None:
    """A high-water mark as JSON: [type, text], read back by `decode_mark`."""
    if value is None:
        return None
    for kind, cls in (("datetime", dt.datetime), ("date", dt.date)):
        if isinstance(value, cls):
            return [kind, value.isoformat()]
    if isinstance(value, bool | int):
        return ["int", str(int(value))]
    if isinstance(value, float):
        return ["float", repr(value)]
    if isinstance(value, decimal.Decimal):
        return ["decimal", str(value)]
    return ["str", str(value)]


def decode_mark(mark: list[str] | None) -> Any:
    if not mark:
        return None
    kind, text = mark
    readers: dict[str, Callable[[str], Any]] = {
        "datetime": dt.datetime.fromisoformat,
        "date": dt.date.fromisoformat,
        "int": int,
        "float": float,
        "decimal": decimal.Decimal,
        "str": str,
    }
    return readers[kind](text)


def sqlite_value(value: Any) -> Any:
    """A source value as the snapshot keeps it (as `add-sql` does: pipelines/structured/)."""
    return value if value is None or isinstance(value, int | float | str | bytes) else str(value)


def table_ddl(name: str, columns: list[str], key: list[str], fks: list[dict[str, Any]]) -> str:
    """The table's CREATE statement in a snapshot: untyped columns, its key, its references."""
    clauses = [quote(c) for c in columns]
    clauses.append(f"PRIMARY KEY ({', '.join(quote(c) for c in key)})")
    for fk in fks:
        mine = ", ".join(quote(c) for c in fk["constrained_columns"])
        theirs = ", ".join(quote(c) for c in fk["referred_columns"])
        clauses.append(f"FOREIGN KEY ({mine}) REFERENCES {quote(fk['referred_table'])} ({theirs})")
    return f"CREATE TABLE {quote(name)} ({', '.join(clauses)})"


class SqlScan:
    """One sync's reading of SQL tables against the cursor (`{"tables": {table: {"ddl",
    "digest", "mark"}}}`)."""

    def __init__(self, spec: SourceSpec, settings: Settings, scratch: Scratch, previous: Previous):
        self.spec, self.settings, self.scratch, self.previous = spec, settings, scratch, previous
        self.keys = spec.keys or KeyDeclarations()

    def name(self, table: str) -> str:
        """The document name of a table: the URL (password hidden) and the table."""
        return f"{self.spec.display()}#{table}"

    def listing(self, cursor: dict[str, Any]) -> Listing:
        import sqlalchemy as sa
        from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError

        try:
            engine = sa.create_engine(self.spec.location)
        except (ArgumentError, NoSuchModuleError, ValueError) as err:
            raise SourceError(
                f"cannot use the database URL ({err}); give a SQLAlchemy URL such as "
                "sqlite:///path/to/file.db (other databases need their driver installed)"
            ) from err
        listing = Listing(cursor={"tables": {}}, keys=self.spec.keys)
        known = cursor.get("tables", {})
        try:
            with engine.connect() as conn:
                for table in self._tables(sa.inspect(conn)):
                    self._table(conn, sa.inspect(conn), table, known.get(table), listing)
        except SQLAlchemyError as err:
            raise SourceError(f"reading the database failed: {str(err)[:500]}") from err
        finally:
            engine.dispose()
        return listing

    def _tables(self, inspector: Any) -> list[str]:
        available = inspector.get_table_names()
        missing = sorted(set(self.spec.tables) - set(available))
        if missing:
            raise SourceError(
                f"no table {', '.join(missing)} in the database; its tables: "
                f"{', '.join(available) or '(none)'}"
            )
        chosen = self.spec.tables or available
        if not chosen:
            raise SourceError("the database has no tables")
        if len(chosen) > self.settings.sync_sql_max_tables:
            raise SourceError(
                f"the database has {len(chosen)} tables, more than the "
                f"{self.settings.sync_sql_max_tables} allowed (COGMILL_SYNC_SQL_MAX_TABLES); "
                "choose some with --table"
            )
        return sorted(chosen)

    def _key(self, inspector: Any, table: str) -> list[str]:
        declared = self.keys.tables.get(table)
        if declared is not None and declared.primary_key:
            return [declared.primary_key]
        key = inspector.get_pk_constraint(table).get("constrained_columns") or []
        if not key:
            raise SourceError(
                f"table {table!r} has no primary key; declare one with --primary-key "
                f"{table}=COLUMN (a sync finds deleted rows by their keys)"
            )
        return list(key)

    def _updated(self, table: str, columns: list[str]) -> str | None:
        column = self.spec.updated.get(table)
        if column is not None and column not in columns:
            raise SourceError(f"table {table!r} has no column {column!r} (its updated column)")
        if column is None and self.spec.updated.get(ANY_TABLE) in columns:
            column = self.spec.updated[ANY_TABLE]
        return column

    def _table(
        self, conn: Any, inspector: Any, table: str, known: dict[str, Any] | None, out: Listing
    ) -> None:
        columns = [c["name"] for c in inspector.get_columns(table)]
        key = self._key(inspector, table)
        unknown = sorted(set(key) - set(columns))
        if unknown:
            raise SourceError(f"table {table!r} has no column {', '.join(unknown)} (its key)")
        ddl = table_ddl(table, columns, key, inspector.get_foreign_keys(table))
        updated = self._updated(table, columns)
        reader = TableReader(conn, table, columns, key, self.settings.sync_sql_max_rows)
        work = self.scratch.path()
        base = self._base(table, known, ddl, updated)
        if base is not None:
            shutil.copyfile(base, work)
        with closing(sqlite3.connect(work)) as db:
            if base is None:
                db.execute(ddl)
            since = decode_mark(known["mark"]) if base is not None and known else None
            mark = reader.write_rows(db, updated, since)
            reader.drop_deleted(db, fetch_missing=base is not None)
            db.commit()
        document = self.scratch.path()
        digest = canonical(work, document, table, ddl, key)
        out.cursor["tables"][table] = {"ddl": ddl, "digest": digest, "mark": encode_mark(mark)}
        size = document.stat().st_size
        out.entries[self.name(table)] = Entry(self.name(table), digest, lambda: document, size)

    def _base(
        self, table: str, known: dict[str, Any] | None, ddl: str, updated: str | None
    ) -> Path | None:
        """The previous document to update in place, or None to read the table whole."""
        if not known or not updated or known.get("ddl") != ddl or known.get("mark") is None:
            return None
        return self.previous(self.name(table), str(known.get("digest", "")))


class TableReader:
    """Rows of one source table, written into a work copy of its document."""

    def __init__(self, conn: Any, table: str, columns: list[str], key: list[str], most: int):
        import sqlalchemy as sa

        self.sa, self.conn, self.name = sa, conn, table
        self.table = sa.table(table, *(sa.column(c) for c in columns))
        self.columns, self.key, self.most = columns, key, most
        slots = ", ".join("?" for _ in columns)
        self.insert = f"INSERT OR REPLACE INTO {quote(table)} VALUES ({slots})"

    def _stream(self, query: Any) -> Iterator[Sequence[Any]]:
        result = self.conn.execution_options(stream_results=True).execute(query)
        for part in result.partitions(READ_BATCH):
            yield from part

    def write_rows(self, db: sqlite3.Connection, updated: str | None, since: Any) -> Any:
        """Write the rows changed since the mark (all without one); the new mark."""
        query = self.sa.select(self.table)
        if since is not None and updated is not None:
            query = query.where(self.table.c[updated] >= since)
        at = self.columns.index(updated) if updated else -1
        mark, rows = since, []
        for count, row in enumerate(self._stream(query), 1):
            self._bound(count)
            if at >= 0 and row[at] is not None and (mark is None or row[at] > mark):
                mark = row[at]
            rows.append(tuple(sqlite_value(v) for v in row))
            if len(rows) >= READ_BATCH:
                db.executemany(self.insert, rows)
                rows = []
        db.executemany(self.insert, rows)
        return mark

    def _bound(self, count: int) -> None:
        if count > self.most:
            raise SourceError(
                f"table {self.name!r} holds more than {self.most} rows "
                "(COGMILL_SYNC_SQL_MAX_ROWS); sync fewer tables or raise the bound"
            )

    def drop_deleted(self, db: sqlite3.Connection, *, fetch_missing: bool) -> None:
        """Drop the rows whose keys the source no longer has; fetch those it has and the
        copy lacks (a row written without a new updated value)."""
        cols = ", ".join(quote(c) for c in self.key)
        db.execute(f"CREATE TEMP TABLE _keys ({cols}, PRIMARY KEY ({cols}))")
        slots = ", ".join("?" for _ in self.key)
        query = self.sa.select(*(self.table.c[c] for c in self.key))
        batch: list[tuple[Any, ...]] = []
        for count, row in enumerate(self._stream(query), 1):
            self._bound(count)
            batch.append(tuple(sqlite_value(v) for v in row))
            if len(batch) >= READ_BATCH:
                db.executemany(f"INSERT OR IGNORE INTO _keys VALUES ({slots})", batch)
                batch = []
        db.executemany(f"INSERT OR IGNORE INTO _keys VALUES ({slots})", batch)
        table = quote(self.name)
        same = " AND ".join(f"k.{quote(c)} IS {table}.{quote(c)}" for c in self.key)
        db.execute(f"DELETE FROM {table} WHERE NOT EXISTS (SELECT 1 FROM _keys AS k WHERE {same})")
        if fetch_missing:
            missing = db.execute(
                f"SELECT * FROM _keys AS k WHERE NOT EXISTS (SELECT 1 FROM {table} WHERE {same})"
            ).fetchall()
            for start in range(0, len(missing), KEY_BATCH):
                self._fetch(db, missing[start : start + KEY_BATCH])
        db.execute("DROP TABLE _keys")

    def _fetch(self, db: sqlite3.Connection, keys: list[tuple[Any, ...]]) -> None:
        sa = self.sa
        if len(self.key) == 1:
            where = self.table.c[self.key[0]].in_([k[0] for k in keys])
        else:
            where = sa.tuple_(*(self.table.c[c] for c in self.key)).in_(keys)
        query = sa.select(self.table).where(where)
        db.executemany(self.insert, [tuple(map(sqlite_value, row)) for row in self._stream(query)])


def canonical(work: Path, target: Path, table: str, ddl: str, key: list[str]) -> str:
    """Write the table afresh in key order (the same rows give the same bytes); its sha256."""
    order = ", ".join(quote(c) for c in key)
    copy = f"INSERT INTO main.{quote(table)} SELECT * FROM work.{quote(table)} ORDER BY {order}"
    with closing(sqlite3.connect(target)) as db:
        db.execute(ddl)
        db.execute("ATTACH DATABASE ? AS work", (str(work),))
        db.execute(copy)
        db.commit()
        db.execute("DETACH DATABASE work")
    digest = hashlib.sha256()
    with target.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
