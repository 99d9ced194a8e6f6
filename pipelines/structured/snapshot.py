"""A database behind a SQLAlchemy URL copied into a SQLite snapshot when added (`snapshot_sql`):
workers then need no database credentials, and the snapshot's content hash tells a plain
`cognify` whether the data changed. The snapshot is read like any SQLite source (tables.py).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipelines.structured.tables import TableProblem, quote


def snapshot_sql(
    url: str, target: Path, tables: Sequence[str] = (), batch: int = 5000
) -> list[str]:
    """Copy tables reachable through a SQLAlchemy URL into a new SQLite file, keys included.

    Returns the tables copied. Raises TableProblem for an unreachable database or unknown table.
    """
    import sqlalchemy as sa
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError

    try:
        engine = sa.create_engine(url)
    except (ArgumentError, NoSuchModuleError, ValueError) as err:
        raise TableProblem(
            f"cannot use the database URL ({err}); give a SQLAlchemy URL such as "
            "sqlite:///path/to/file.db or postgresql://user@host/db (with its driver installed)"
        ) from err
    try:
        with engine.connect() as source, sqlite3.connect(target) as out:
            inspector = sa.inspect(source)
            available = inspector.get_table_names()
            missing = sorted(set(tables) - set(available))
            if missing:
                raise TableProblem(
                    f"no table {', '.join(missing)} in the database; its tables: "
                    f"{', '.join(available) or '(none)'}"
                )
            chosen = list(tables) or available
            if not chosen:
                raise TableProblem("the database has no tables")
            for name in chosen:
                _copy_table(inspector, source, out, name, batch)
    except SQLAlchemyError as err:
        raise TableProblem(f"reading the database failed: {err}") from err
    finally:
        engine.dispose()
    return chosen


def _copy_table(
    inspector: Any, source: Any, out: sqlite3.Connection, name: str, batch: int
) -> None:
    import sqlalchemy as sa

    columns = [c["name"] for c in inspector.get_columns(name)]
    clauses = [quote(c) for c in columns]
    primary = inspector.get_pk_constraint(name).get("constrained_columns") or []
    if primary:
        clauses.append(f"PRIMARY KEY ({', '.join(quote(c) for c in primary)})")
    for fk in inspector.get_foreign_keys(name):
        clauses.append(
            f"FOREIGN KEY ({', '.join(quote(c) for c in fk['constrained_columns'])}) REFERENCES "
            f"{quote(fk['referred_table'])} ({', '.join(quote(c) for c in fk['referred_columns'])})"
        )
    # Untyped columns: SQLite keeps every value as given, whatever the source's types were.
    out.execute(f"CREATE TABLE {quote(name)} ({', '.join(clauses)})")
    insert = f"INSERT INTO {quote(name)} VALUES ({', '.join('?' for _ in columns)})"
    table = sa.table(name, *(sa.column(c) for c in columns))
    result = source.execution_options(stream_results=True).execute(sa.select(table))
    for part in result.partitions(batch):
        out.executemany(insert, [tuple(_sqlite_value(v) for v in row) for row in part])


def _sqlite_value(value: Any) -> Any:
    return value if value is None or isinstance(value, int | float | str | bytes) else str(value)
