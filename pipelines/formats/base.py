"""What every partitioner shares: the Source it reads, its limits, and the errors a document
that cannot be read raises (DocumentProblem; TableProblem for pipelines/structured/tables.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

from core.errors import InvalidInput
from pipelines.models import Element

BLOCK_BYTES = 1 << 20  # text is read and decoded in blocks of this size, never all at once
ROWS_PER_ELEMENT = 20  # table rows per element; the chunker splits further by row


class DocumentProblem(InvalidInput):
    """A document cannot be classified; the message says what is wrong and what to do."""

    code = "unreadable_document"


class TableProblem(InvalidInput):
    """A document cannot be read as tables; the message says what is wrong and what to do."""

    code = "unreadable_table"


@dataclass(frozen=True)
class Limits:
    """Bounds on what one document may cost to read.

    `max_unpacked_bytes` (the whole document), `max_unpacked_part_bytes` (one ZIP member or
    PDF stream) and `max_compression_ratio` guard compressed formats (docx, pptx, xlsx, PDF):
    a few kilobytes can declare or inflate to gigabytes (a "decompression bomb").
    """

    max_bytes: int = 200 * 1024 * 1024
    max_unpacked_bytes: int = 256 * 1024 * 1024
    max_compression_ratio: int = 250
    block_bytes: int = BLOCK_BYTES
    max_unpacked_part_bytes: int = 128 * 1024 * 1024

    def __post_init__(self) -> None:
        names = ("max_bytes", "max_unpacked_bytes", "max_compression_ratio", "block_bytes")
        for name in (*names, "max_unpacked_part_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")


@dataclass(frozen=True)
class Source:
    """One document to partition: a way to open its bytes (again), its name and limits."""

    name: str
    open: Callable[[], BinaryIO]
    limits: Limits = Limits()


Partitioner = Callable[[Source], list[Element]]


def read_all(source: Source) -> bytes:
    """The whole document (formats that cannot be streamed); at most `max_bytes` of it."""
    with source.open() as stream:
        data = stream.read(source.limits.max_bytes + 1)
    if len(data) > source.limits.max_bytes:
        raise DocumentProblem(too_large(source.limits.max_bytes))
    return data


def too_large(max_bytes: int) -> str:
    return (
        f"the file is larger than the limit of {max_bytes} bytes; split it into smaller files "
        "or raise the limit (COGMILL_MAX_FILE_BYTES)"
    )


def group_rows(lines: list[str], kind: str = "table") -> list[Element]:
    """Rendered table rows as elements of ROWS_PER_ELEMENT rows each."""
    return [
        Element(kind=kind, text="\n".join(lines[start : start + ROWS_PER_ELEMENT]))
        for start in range(0, len(lines), ROWS_PER_ELEMENT)
    ]
