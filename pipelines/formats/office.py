"""Word, PowerPoint and Excel (Office Open XML) through `unstructured`, behind a ZIP guard.

These files are ZIP archives. Before any parser opens one, its central directory is checked:
the member count, the total declared uncompressed size, each member's declared size, and the
compression ratio of each member above 64 KiB and of the archive as a whole (many small
members of a high ratio add up). Python's zipfile never inflates a member past its declared
size (a lie fails the CRC check), so bounding the declared sizes bounds the real work.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Callable, Sequence
from typing import BinaryIO

from pipelines.formats.base import DocumentProblem, Limits, Source, group_rows
from pipelines.formats.markup import configure_unstructured, from_unstructured, html_table_rows
from pipelines.formats.markup import row_lines as render_rows
from pipelines.formats.text import binary_kind
from pipelines.models import Element

MAX_MEMBERS = 10_000
RATIO_MIN_BYTES = 64 * 1024  # smaller members say little by their ratio alone
# A cell of a sheet's XML (`<c r="A1" ...>`, with or without a namespace prefix); a match is
# at most _CELL_SPAN bytes, which the chunked count keeps from one chunk to the next.
_CELL = re.compile(rb"<(?:[A-Za-z_][\w.-]{0,30}:)?c[\s>/]")
_CELL_SPAN = 40
ZIP_MAGIC = b"PK\x03\x04"
# The part each format cannot do without, and the format's full name.
_MAIN_PART = {
    "docx": ("word/document.xml", "Word document"),
    "pptx": ("ppt/presentation.xml", "PowerPoint presentation"),
    "xlsx": ("xl/workbook.xml", "Excel workbook"),
}


def check_head(kind: str, head: bytes) -> str | None:
    """Why the first bytes cannot start a `kind` file; None when they can."""
    if head.startswith(ZIP_MAGIC):
        return None
    what = binary_kind(head) or _texty(head)
    return (
        f"not a valid .{kind} file: it is {what}, not an Office Open XML (ZIP) archive; "
        f"{_advice(kind, head)}"
    )


def _texty(head: bytes) -> str:
    if not head:
        return "empty"
    if b"\x00" not in head[:4096]:
        return "plain text"
    return "unrecognised binary data"


def _advice(kind: str, head: bytes) -> str:
    if head.startswith(b"\xd0\xcf\x11\xe0"):
        return f"save it in the newer .{kind} format from its Office application"
    if head and b"\x00" not in head[:4096]:
        first = head.split(b"\n", 1)[0]
        if kind == "xlsx" and (b"," in first or b";" in first or b"\t" in first):
            return "it looks like CSV: rename it .csv (or .tsv) and add it again"
        return "if it is text, rename it .txt and add it again"
    return f"re-export it as .{kind} from its application"


def check_archive(stream: BinaryIO, kind: str, source: Source) -> None:
    """Refuse a corrupt archive, a zip bomb, or one without the format's main part."""
    limits = source.limits
    main_part, full_name = _MAIN_PART[kind]
    try:
        with zipfile.ZipFile(stream) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as err:
        raise DocumentProblem(
            f"corrupt {full_name}: the ZIP container cannot be read ({err}); "
            f"open and re-save it in its application, then add it again"
        ) from err
    if len(members) > MAX_MEMBERS:
        raise DocumentProblem(
            f"refused as a possible zip bomb: {len(members)} archive members (limit "
            f"{MAX_MEMBERS}); a real {full_name} has far fewer"
        )
    declared = sum(m.file_size for m in members)
    if declared > limits.max_unpacked_bytes:
        raise DocumentProblem(
            f"refused as a possible zip bomb: it unpacks to {declared} bytes, above the limit "
            f"of {limits.max_unpacked_bytes} (COGMILL_MAX_UNPACKED_BYTES)"
        )
    for member in members:
        _check_member(member, limits)
    packed = sum(m.compress_size for m in members)
    if declared > RATIO_MIN_BYTES and declared / max(packed, 1) > limits.max_compression_ratio:
        raise DocumentProblem(
            f"refused as a possible zip bomb: its {len(members)} members are compressed "
            f"{declared / max(packed, 1):.0f}:1 together (limit {limits.max_compression_ratio}:1, "
            "COGMILL_MAX_COMPRESSION_RATIO)"
        )
    if main_part not in {m.filename for m in members}:
        raise DocumentProblem(
            f"not a valid {full_name}: the archive has no {main_part}; "
            f"is it another kind of ZIP file renamed .{kind}?"
        )


def _check_member(member: zipfile.ZipInfo, limits: Limits) -> None:
    """One member's declared size and compression ratio within the limits."""
    if member.file_size > limits.max_unpacked_part_bytes:
        raise DocumentProblem(
            f"refused as a possible zip bomb: member {member.filename[:200]!r} unpacks to "
            f"{member.file_size} bytes, above the limit of {limits.max_unpacked_part_bytes} "
            "(COGMILL_MAX_UNPACKED_PART_BYTES)"
        )
    ratio = member.file_size / max(member.compress_size, 1)
    if member.file_size > RATIO_MIN_BYTES and ratio > limits.max_compression_ratio:
        raise DocumentProblem(
            f"refused as a possible zip bomb: member {member.filename[:200]!r} is compressed "
            f"{ratio:.0f}:1 (limit {limits.max_compression_ratio}:1, "
            "COGMILL_MAX_COMPRESSION_RATIO)"
        )


def _partitioner(kind: str) -> Callable[[BinaryIO], Sequence[object]]:
    configure_unstructured()
    if kind == "docx":
        from unstructured.partition.docx import partition_docx

        return lambda f: partition_docx(file=f)
    if kind == "pptx":
        from unstructured.partition.pptx import partition_pptx

        return lambda f: partition_pptx(file=f)
    from unstructured.partition.xlsx import partition_xlsx

    return lambda f: partition_xlsx(file=f, find_subtable=False)


def partition_office(source: Source, kind: str) -> list[Element]:
    """A docx, pptx or xlsx file: checked as an archive first, then partitioned."""
    with source.open() as stream:
        problem = check_head(kind, stream.read(8))
        if problem:
            raise DocumentProblem(problem)
        stream.seek(0)
        check_archive(stream, kind, source)
        stream.seek(0)
        if kind == "xlsx":
            _check_cells(stream, source.limits.max_cells)
            stream.seek(0)
        parts = _partitioner(kind)(stream)
    return _sheets(parts) if kind == "xlsx" else from_unstructured(parts)


def _check_cells(stream: BinaryIO, limit: int) -> None:
    """Refuse a workbook of more than `limit` cells, counted in its sheets' XML a chunk at a
    time: the parser holds every cell (2 million took 2.7 GB and 13 minutes)."""
    cells = 0
    with zipfile.ZipFile(stream) as archive:
        for name in archive.namelist():
            if not (name.startswith("xl/worksheets/") and name.endswith(".xml")):
                continue
            with archive.open(name) as sheet:
                tail = b""
                while chunk := sheet.read(1 << 20):
                    data, done = tail + chunk, len(tail + chunk) - _CELL_SPAN
                    cells += sum(1 for m in _CELL.finditer(data) if m.start() < done)
                    tail = data[max(done, 0) :]
                    if cells > limit:
                        break
                cells += len(_CELL.findall(tail))
            if cells > limit:
                raise DocumentProblem(
                    f"the workbook has more than {limit} cells (COGMILL_MAX_DOCUMENT_CELLS); "
                    "split it, or save the sheets you need as .csv"
                )


def _sheets(parts: Sequence[object]) -> list[Element]:
    """Each sheet as a title (its name) and its rows, the first row naming the columns."""
    elements: list[Element] = []
    for part in parts:
        rows = html_table_rows(getattr(part.metadata, "text_as_html", None) or "")  # type: ignore[attr-defined]
        if not rows:
            continue
        sheet = getattr(part.metadata, "page_name", None)  # type: ignore[attr-defined]
        if sheet:
            elements.append(Element(kind="title", text=f"Sheet: {sheet}"))
        elements.extend(group_rows(render_rows(rows[0], rows[1:])))
    return elements
