"""Where a large text document is cut into segments, each classified and chunked on its own.

The planner splits a text document larger than `segment_bytes` into `ceil(size /
segment_bytes)` segments (workers/orchestration.py); segment k covers the bytes from
`boundary(k * segment_bytes)` to `boundary((k + 1) * segment_bytes)`. A boundary depends only
on the file and the nominal offset, so the segments tile the file exactly, every time, and
each can be read without the others. It is the end of the first blank line at or after the
offset (the paragraph break classify splits on anyway), else the end of the first line, else
the first space or tab, all within a window of `WINDOW_BYTES`; only a window without any
whitespace is cut at the first character boundary. Only ASCII-compatible encodings (UTF-8,
cp1252, latin-1) are cut: in them these bytes can only mean these characters.
"""

from __future__ import annotations

import io
import re
from typing import BinaryIO

SEGMENTABLE_KINDS = frozenset({"txt", "md"})
SEGMENTABLE_ENCODINGS = frozenset({"utf-8", "utf-8-sig", "cp1252", "latin-1"})
WINDOW_BYTES = 1 << 20
_CUTS = (
    re.compile(rb"(?>\r\n|\r|\n)[ \t]*(?>\r\n|\r|\n)"),  # a blank line: a paragraph break
    re.compile(rb"\r\n|\r|\n"),  # a line end
    re.compile(rb"[ \t]"),  # a space between words
)


def segment_count(size: int, segment_bytes: int) -> int:
    """How many segments the planner makes of a document of `size` bytes (1: not cut)."""
    if segment_bytes < 1:
        raise ValueError(f"segment_bytes must be at least 1, got {segment_bytes}")
    return max(1, -(-size // segment_bytes))


def window_bytes(segment_bytes: int) -> int:
    """How far past a nominal offset a cut is looked for: below a segment, so none is empty."""
    return max(1, min(WINDOW_BYTES, segment_bytes // 4))


def boundary(stream: BinaryIO, offset: int, size: int, segment_bytes: int) -> int:
    """The byte offset where a segment starting or ending near `offset` is cut (see above)."""
    if offset <= 0:
        return 0
    if offset >= size:
        return size
    stream.seek(offset)
    window = stream.read(window_bytes(segment_bytes))
    for cut in _CUTS:
        if found := cut.search(window):
            return offset + found.end()
    # No whitespace at all: never start inside a UTF-8 character (continuation bytes).
    skip = 0
    while skip < min(3, len(window)) and 0x80 <= window[skip] <= 0xBF:
        skip += 1
    return offset + skip


def segment_span(stream: BinaryIO, segment: int, segments: int, segment_bytes: int) -> range:
    """The bytes of segment `segment` (of `segments`) of the seekable `stream`."""
    size = stream.seek(0, io.SEEK_END)
    start = boundary(stream, segment * segment_bytes, size, segment_bytes)
    last = segment >= segments - 1
    end = size if last else boundary(stream, (segment + 1) * segment_bytes, size, segment_bytes)
    return range(start, max(start, end))


class RangeReader(io.RawIOBase):
    """The bytes `span` of an underlying stream, read as a stream of their own."""

    def __init__(self, stream: BinaryIO, span: range) -> None:
        super().__init__()
        self._stream, self._span = stream, span
        self._position = span.start
        stream.seek(span.start)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        wanted = min(len(buffer), self._span.stop - self._position)
        if wanted <= 0:
            return 0
        data = self._stream.read(wanted)
        buffer[: len(data)] = data
        self._position += len(data)
        return len(data)

    def close(self) -> None:
        self._stream.close()
        super().close()
