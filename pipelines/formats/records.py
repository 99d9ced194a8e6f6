"""Record formats: JSON, JSON Lines and CSV/TSV. Lines and rows are streamed.

A JSON record becomes `key: value; a.b: value`; a table row `column: value, column: value`
under the header's names. Ragged CSV rows are kept: missing cells are left out, extra cells
are named `column N`.

JSON nested deeper than MAX_JSON_DEPTH levels is refused as a per-document problem (one such
file once failed its whole batch with a RecursionError); `too_deep` checks without recursion.
"""

from __future__ import annotations

import csv
import itertools
import json
from collections.abc import Iterator

from pipelines.formats.base import ROWS_PER_ELEMENT, DocumentProblem, Source
from pipelines.formats.markup import column_names, row_line
from pipelines.formats.text import read_text, with_text
from pipelines.models import Element

_SNIFF_LINES = 20
MAX_JSON_DEPTH = 100
TOO_DEEP = (
    f"the JSON is nested deeper than {MAX_JSON_DEPTH} levels; flatten the records, or save it "
    "as .txt to ingest it as plain text"
)


def lines(blocks: Iterator[str]) -> Iterator[str]:
    """Lines of streamed text, each with its line end."""
    rest = ""
    for block in blocks:
        buffer, start = rest + block, 0
        # Only "\n" ends a line: str.splitlines() would also cut at \x0c, \u2028 and others,
        # which may sit inside a CSV cell or a JSON string.
        while (end := buffer.find("\n", start)) != -1:
            yield buffer[start : end + 1]
            start = end + 1
        rest = buffer[start:]
    if rest:
        yield rest


def partition_json(source: Source) -> list[Element]:
    """One element per record: items of a top-level array or of arrays under a top-level key."""
    return json_elements(read_text(source))


def too_deep(value: object, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether a parsed JSON value nests lists and objects more than `limit` levels deep."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False


def _parse(text: str) -> object:
    """json.loads, with nesting past the parser's own limit or MAX_JSON_DEPTH refused."""
    try:
        value = json.loads(text)
    except RecursionError as err:
        raise DocumentProblem(TOO_DEEP) from err
    if too_deep(value):
        raise DocumentProblem(TOO_DEEP)
    return value


def json_elements(text: str) -> list[Element]:
    try:
        value = _parse(text)
    except json.JSONDecodeError as err:
        if err.msg == "Extra data":  # one value per line: JSON Lines saved as .json
            try:
                return _jsonl_elements(iter(text.splitlines()))
            except DocumentProblem:
                pass
        raise DocumentProblem(
            f"invalid JSON at line {err.lineno}, column {err.colno}: {err.msg}; "
            "fix it, or save it as .txt to ingest it as plain text"
        ) from err
    return [Element(kind="text", text=record) for record in _records(value) if record]


def partition_jsonl(source: Source) -> list[Element]:
    """One element per line's JSON value; a line that is not JSON rejects the document."""
    return with_text(source, lambda blocks: _jsonl_elements(lines(blocks)))


def _jsonl_elements(rows: Iterator[str]) -> list[Element]:
    elements = []
    for number, line in enumerate(rows, 1):
        if not line.strip():
            continue
        try:
            value = _parse(line)
        except DocumentProblem as err:
            raise DocumentProblem(f"line {number}: {err}") from err
        except json.JSONDecodeError as err:
            raise DocumentProblem(
                f"invalid JSON on line {number}, column {err.colno}: {err.msg}; "
                "fix that line (JSON Lines holds one JSON value per line)"
            ) from err
        if rendered := _render(value):
            elements.append(Element(kind="text", text=rendered))
    return elements


def _records(value: object) -> list[str]:
    if isinstance(value, list):
        return [_render(item) for item in value]
    if not isinstance(value, dict):
        return [_render(value)]
    nested = {k: v for k, v in value.items() if isinstance(v, list) and not _all_scalars(v)}
    head = {k: v for k, v in value.items() if k not in nested}
    return [_render(head)] + [_render(item, key) for key, items in nested.items() for item in items]


def _render(value: object, path: str = "") -> str:
    """A JSON value as `key: value; a.b: value`, nested keys joined with dots."""
    return "; ".join(f"{key}: {text}" if key else text for key, text in _flatten(value, path))


def _flatten(value: object, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _flatten(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list) and _all_scalars(value):
        if value:
            yield path, ", ".join(_scalar(item) for item in value)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _flatten(item, f"{path}[{index}]")
    elif value is not None and value != "":
        yield path, _scalar(value)


def _all_scalars(items: list) -> bool:
    return not any(isinstance(item, dict | list) for item in items)


def _scalar(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def partition_table(source: Source, delimiter: str) -> list[Element]:
    """CSV/TSV, streamed: the first row names the columns; each group of rows is one element."""
    return with_text(source, lambda blocks: table_elements(lines(blocks), delimiter))


def table_elements(rows_text: Iterator[str], delimiter: str) -> list[Element]:
    head = list(itertools.islice(rows_text, _SNIFF_LINES))
    reader = csv.reader(itertools.chain(head, rows_text), _dialect(head, delimiter))
    try:
        rows = (row for row in reader if any(cell.strip() for cell in row))
        header = next(rows, None)
        if header is None:
            return []
        names = column_names(header)
        elements, group, empty = [], [], True
        for row in rows:
            empty = False
            if line := row_line(names, row):
                group.append(line)
            if len(group) == ROWS_PER_ELEMENT:
                elements.append(Element(kind="table", text="\n".join(group)))
                group = []
    except csv.Error as err:
        raise DocumentProblem(
            f"could not read the table at line {reader.line_num}: {err}; an unclosed quote "
            "often causes this. Fix the file, or save it as .txt to ingest it as plain text"
        ) from err
    if empty:
        group = [", ".join(names)]
    if group:
        elements.append(Element(kind="table", text="\n".join(group)))
    return elements


def _dialect(head: list[str], preferred: str) -> type[csv.Dialect] | csv.Dialect:
    """The sniffed dialect (';' and '|' CSVs exist), else the extension's delimiter."""
    sample = "".join(head)
    fallback = csv.excel_tab if preferred == "\t" else csv.excel
    try:
        dialect = csv.Sniffer().sniff(sample, delimiters=",;\t|")
    except csv.Error:
        return fallback
    return dialect if head and dialect.delimiter in head[0] else fallback
