"""Structured sources read as tables whose rows are streamed: CSV/TSV, JSON/JSONL records, SQLite.

`open_tables` opens one stored document and yields its tables; each `TableSource.rows()`
starts a fresh pass over the rows, so the steps stream a table several times (profile, keys,
nodes, references) instead of holding it in memory. Only a `.json` file is parsed whole (the
standard library cannot stream a JSON array); its size is bounded by COGMILL_MAX_FILE_BYTES.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import re
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any, BinaryIO

from core.catalog import SQLITE_MAGIC
from core.ports import BlobStore
from pipelines.classify import check_supported
from pipelines.formats.base import TableProblem
from pipelines.formats.records import TOO_DEEP, too_deep
from pipelines.models import DocumentRef

DELIMITED = {"csv": ",", "tsv": "\t"}
_HEAD = 65536
_INTEGRAL_FLOAT = re.compile(r"^-?\d+\.0+$")

Row = dict[str, str]  # column -> value as text, "" when empty or missing


@dataclass
class ForeignKeySpec:
    """`table.columns` references `ref_table.ref_columns` (empty ref columns: its primary key)."""

    columns: list[str]
    ref_table: str
    ref_columns: list[str] = field(default_factory=list)


@dataclass
class TableSource:
    """One table of a document; `rows()` starts a new streamed pass over its rows."""

    name: str
    columns: list[str]  # known up front for CSV and SQLite; JSON columns come from profiling
    rows: Callable[[], Iterator[Row]]
    primary_key: list[str] = field(default_factory=list)  # declared by a SQLite schema
    foreign_keys: list[ForeignKeySpec] = field(default_factory=list)


def value_text(value: Any) -> str:
    """A cell as text: strings stripped, None as "", other JSON values in JSON form."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if isinstance(value, bool | int | float | list | dict):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)  # decimals, dates from a SQL snapshot


def key_text(value: str) -> str:
    """A key value as compared across tables: "7.0" in one file matches "7" in another."""
    return value[: value.index(".")] if _INTEGRAL_FLOAT.match(value) else value


def check_source(name: str, head: bytes) -> str | None:
    """Why a file cannot be added; None when it can (text formats, or a SQLite database file)."""
    return None if head.startswith(SQLITE_MAGIC) else check_supported(name, head)


@contextmanager
def open_tables(blobs: BlobStore, ref: DocumentRef) -> Iterator[list[TableSource]]:
    """The tables of a stored document, readable while the context is open. Raises TableProblem."""
    with ExitStack() as stack:
        try:
            stream = stack.enter_context(blobs.open(ref.blob_key))
        except (FileNotFoundError, ValueError) as err:
            raise TableProblem(
                f"the stored bytes of this document are missing ({err}); add the file again"
            ) from err
        head = stream.read(_HEAD)
        if head.startswith(SQLITE_MAGIC):
            path = _local_path(stream, stack)
            yield _sqlite_tables(path, stack)
            return
        ext = (ref.extension or PurePath(ref.name).suffix).lower().lstrip(".")
        problem = check_supported(ref.name, head) if head else "the file is empty (0 bytes)"
        if problem:
            raise TableProblem(problem)
        encoding = _encoding(head)
        table = PurePath(ref.name).stem
        if ext in DELIMITED:
            yield [_delimited_table(blobs, ref.blob_key, table, encoding, head, DELIMITED[ext])]
        elif ext in ("jsonl", "ndjson"):
            yield [TableSource(table, [], lambda: _jsonl_rows(blobs, ref.blob_key, encoding))]
        elif ext == "json":
            stream.seek(0)
            yield _json_tables(table, io.TextIOWrapper(stream, encoding=encoding))
        else:
            raise TableProblem(
                f"'.{ext}' files are not tables; the structured pipeline reads .csv, .tsv, "
                ".json (a list of records), .jsonl and SQLite files. Add it with "
                "`--pipeline default` to ingest it as text"
            )


def _encoding(head: bytes) -> str:
    for bom, name in (
        (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF16_LE, "utf-16"),
        (codecs.BOM_UTF16_BE, "utf-16"),
    ):
        if head.startswith(bom):
            return name
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return "cp1252"  # check_supported accepted it as legacy 8-bit text
    return "utf-8"


@contextmanager
def _text(blobs: BlobStore, key: str, encoding: str) -> Iterator[io.TextIOWrapper]:
    with blobs.open(key) as raw:
        yield io.TextIOWrapper(raw, encoding=encoding, newline="")


def _decode_error(err: UnicodeDecodeError, encoding: str) -> TableProblem:
    return TableProblem(
        f"the file is not valid {encoding} further in ({err.reason}); re-save it as UTF-8"
    )


def _delimited_table(
    blobs: BlobStore, key: str, table: str, encoding: str, head: bytes, delimiter: str
) -> TableSource:
    sample = head.decode(encoding, errors="ignore")
    dialect = _dialect(sample, delimiter)
    header = next((r for r in csv.reader(io.StringIO(sample), dialect) if any(r)), None)
    if header is None:
        raise TableProblem("no header row: the first non-empty line must name the columns")
    columns = unique_names(header)

    def rows() -> Iterator[Row]:
        with _text(blobs, key, encoding) as text:
            try:
                yield from _delimited_rows(csv.reader(text, dialect), columns)
            except UnicodeDecodeError as err:
                raise _decode_error(err, encoding) from err
            except csv.Error as err:
                raise TableProblem(f"malformed CSV: {err}; fix the quoting of that line") from err

    return TableSource(table, columns, rows)


def _delimited_rows(reader: Iterator[list[str]], columns: list[str]) -> Iterator[Row]:
    header_seen = False
    width = len(columns)
    for cells in reader:
        if not any(cell.strip() for cell in cells):
            continue
        if not header_seen:
            header_seen = True
            continue
        if len(cells) > width and any(c.strip() for c in cells[width:]):
            raise TableProblem(
                f"line {getattr(reader, 'line_num', '?')} has {len(cells)} cells but the header "
                f"names {width} columns; fix that line or add the missing column names"
            )
        yield {col: (cells[i].strip() if i < len(cells) else "") for i, col in enumerate(columns)}


def _dialect(sample: str, preferred: str) -> type[csv.Dialect] | csv.Dialect:
    """The sniffed dialect (';' and '|' files exist), else the extension's delimiter."""
    lines = "\n".join(sample.splitlines()[:20])
    fallback = csv.excel_tab if preferred == "\t" else csv.excel
    try:
        dialect = csv.Sniffer().sniff(lines, delimiters=",;\t|")
    except csv.Error:
        return fallback
    return dialect if dialect.delimiter in lines.split("\n", 1)[0] else fallback


def unique_names(header: Sequence[str]) -> list[str]:
    """Column names: blanks become `column_N`, repeats get a `_2`, `_3`... suffix."""
    names: list[str] = []
    for index, raw in enumerate(header, 1):
        name = raw.strip() or f"column_{index}"
        candidate, n = name, 1
        while candidate in names:
            n += 1
            candidate = f"{name}_{n}"
        names.append(candidate)
    return names


def _record(value: Any, where: str) -> Row:
    if not isinstance(value, dict):
        raise TableProblem(
            f"{where} is {type(value).__name__}, not a record (a JSON object); "
            "a record file holds one object per row"
        )
    return {str(k): value_text(v) for k, v in value.items()}


def _jsonl_rows(blobs: BlobStore, key: str, encoding: str) -> Iterator[Row]:
    with _text(blobs, key, encoding) as text:
        try:
            for number, line in enumerate(text, 1):
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                except json.JSONDecodeError as err:
                    raise TableProblem(
                        f"invalid JSON on line {number}, column {err.colno}: {err.msg}; "
                        "fix that line (JSON Lines holds one object per line)"
                    ) from err
                except RecursionError as err:
                    raise TableProblem(f"line {number}: {TOO_DEEP}") from err
                if too_deep(value):
                    raise TableProblem(f"line {number}: {TOO_DEEP}")
                yield _record(value, f"line {number}")
        except UnicodeDecodeError as err:
            raise _decode_error(err, encoding) from err


def _json_tables(table: str, text: io.TextIOWrapper) -> list[TableSource]:
    """A list of records is one table; an object of lists of records is one table per key."""
    try:
        value = json.load(text)
    except json.JSONDecodeError as err:
        raise TableProblem(
            f"invalid JSON at line {err.lineno}, column {err.colno}: {err.msg}; fix it, or save "
            "one record per line as .jsonl"
        ) from err
    except UnicodeDecodeError as err:
        raise _decode_error(err, text.encoding) from err
    except RecursionError as err:
        raise TableProblem(TOO_DEEP) from err
    if too_deep(value):
        raise TableProblem(TOO_DEEP)
    if isinstance(value, list):
        groups = {table: value}
    elif isinstance(value, dict):
        groups = {k: v for k, v in value.items() if isinstance(v, list) and v}
    else:
        groups = {}
    if not groups or not all(isinstance(item, dict) for items in groups.values() for item in items):
        raise TableProblem(
            "this JSON is not a list of records: use a top-level array of objects (one per row), "
            "or an object whose values are such arrays (one table per key); add other JSON "
            "with `--pipeline default`"
        )

    def reader(items: list[dict]) -> Callable[[], Iterator[Row]]:
        return lambda: (_record(item, f"item {i}") for i, item in enumerate(items))

    return [TableSource(name, [], reader(items)) for name, items in groups.items()]


def _local_path(stream: BinaryIO, stack: ExitStack) -> Path:
    """A filesystem path with the blob's bytes: the blob file itself, else a temporary copy."""
    name = getattr(stream, "name", None)
    if isinstance(name, str) and Path(name).is_file():
        return Path(name)
    folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="cogmill-sqlite-")))
    stream.seek(0)
    with (folder / "source.sqlite").open("wb") as copy:
        shutil.copyfileobj(stream, copy, length=1 << 20)
    return folder / "source.sqlite"


def quote(identifier: str) -> str:
    """An SQL identifier in double quotes."""
    return '"' + identifier.replace('"', '""') + '"'


def _sqlite_tables(path: Path, stack: ExitStack) -> list[TableSource]:
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
        stack.callback(conn.close)
        names = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
                "ORDER BY name"
            )
        ]
        tables = [_sqlite_table(conn, name) for name in names]
    except sqlite3.DatabaseError as err:
        raise TableProblem(
            f"not a readable SQLite database ({err}); check the file with `sqlite3 FILE .tables`"
        ) from err
    if not tables:
        raise TableProblem("the SQLite database has no tables; add a database that holds data")
    return tables


def _sqlite_table(conn: sqlite3.Connection, name: str) -> TableSource:
    info = conn.execute(f"PRAGMA table_info({quote(name)})").fetchall()
    columns = [row[1] for row in info]
    primary = [row[1] for row in sorted((r for r in info if r[5]), key=lambda r: r[5])]
    grouped: dict[int, ForeignKeySpec] = {}
    for fk_id, _seq, ref_table, source, target, *_ in conn.execute(
        f"PRAGMA foreign_key_list({quote(name)})"
    ):
        spec = grouped.setdefault(fk_id, ForeignKeySpec([], ref_table, []))
        spec.columns.append(source)
        if target:
            spec.ref_columns.append(target)
    select = f"SELECT {', '.join(quote(c) for c in columns)} FROM {quote(name)}"

    def rows() -> Iterator[Row]:
        try:
            for values in conn.execute(select):
                yield {col: value_text(v) for col, v in zip(columns, values, strict=True)}
        except sqlite3.DatabaseError as err:
            raise TableProblem(f"reading table {name!r} failed: {err}") from err

    return TableSource(name, columns, rows, primary, list(grouped.values()))
