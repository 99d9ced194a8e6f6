"""A PDF's streams measured, bounded, before pdfminer decodes them (decompression bombs).

pdfminer inflates a stream whole (`zlib.decompress`), so a 204 kB PDF once took 200 MB of
memory. Before extraction, every stream is run through its filters here with bounded
decoders that count the output and stop at `max_unpacked_part_bytes` for one stream or
`max_unpacked_bytes` for the document; a PDF over either is refused with a per-document
error. Images count too (a /Subtype is only a claim, and a page's contents are decoded
whatever they claim); JPEG and the other image codecs count at their packed size.

The streams are found through pdfminer's own cross-reference (the one extraction uses);
objects inside object streams cannot be streams, and the object streams themselves are
measured like any other stream.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Iterator
from typing import Any, BinaryIO

from pipelines.formats.base import DocumentProblem, Limits

_STEP = 1 << 16  # output bytes asked of a decoder at a time


class _TooLarge(Exception):
    """A stream unpacked past the bytes left for it."""


def check_pdf_streams(stream: BinaryIO, limits: Limits) -> None:
    """Refuse a PDF whose streams unpack past the limits (DocumentProblem)."""
    total = 0
    for objid, pdf_stream in _streams(stream):
        room = min(limits.max_unpacked_part_bytes, limits.max_unpacked_bytes - total)
        try:
            total += _unpacked_size(pdf_stream, room)
        except _TooLarge:
            if room < limits.max_unpacked_part_bytes:
                raise DocumentProblem(
                    f"refused as a possible decompression bomb: its streams unpack to more "
                    f"than {limits.max_unpacked_bytes} bytes (COGMILL_MAX_UNPACKED_BYTES)"
                ) from None
            raise DocumentProblem(
                f"refused as a possible decompression bomb: stream {objid} unpacks to more "
                f"than {limits.max_unpacked_part_bytes} bytes "
                "(COGMILL_MAX_UNPACKED_PART_BYTES)"
            ) from None


def _streams(stream: BinaryIO) -> Iterator[tuple[int, Any]]:
    """(object id, PDFStream) of every stream object pdfminer's xref places in the file."""
    from pdfminer.pdfdocument import PDFDocument
    from pdfminer.pdfparser import PDFParser
    from pdfminer.pdftypes import PDFStream

    document = PDFDocument(PDFParser(stream))
    seen: set[int] = set()
    for xref in document.xrefs:
        for objid in xref.get_objids():
            if objid in seen:
                continue
            seen.add(objid)
            try:
                in_stream, _, _ = xref.get_pos(objid)
            except KeyError:
                continue
            if in_stream is not None:
                continue  # inside an object stream: not a stream itself
            obj = document.getobj(objid)  # parsed, not decoded
            if isinstance(obj, PDFStream):
                yield objid, obj


def _unpacked_size(pdf_stream: Any, room: int) -> int:
    """The stream's size after its filters; _TooLarge past `room` bytes."""
    from pdfminer.ascii85 import ascii85decode, asciihexdecode
    from pdfminer.pdftypes import (
        LITERALS_ASCII85_DECODE,
        LITERALS_ASCIIHEX_DECODE,
        LITERALS_FLATE_DECODE,
        LITERALS_LZW_DECODE,
        LITERALS_RUNLENGTH_DECODE,
    )

    data: bytes | _Counted = pdf_stream.get_rawdata() or b""
    if pdf_stream.decipher:
        data = pdf_stream.decipher(pdf_stream.objid, pdf_stream.genno, data, pdf_stream.attrs)
    filters = pdf_stream.get_filters()
    for at, (name, _) in enumerate(filters):
        if not isinstance(data, bytes):
            break  # counted by the last stage
        last = at == len(filters) - 1  # the last stage's output is only counted, not kept
        if name in LITERALS_FLATE_DECODE:
            data = _bounded(_inflate(data), room, last)
        elif name in LITERALS_LZW_DECODE:
            data = _bounded(_lzw(data), room, last)
        elif name in LITERALS_RUNLENGTH_DECODE:
            data = _bounded(_run_length(data), room, last)
        elif name in LITERALS_ASCII85_DECODE:
            data = ascii85decode(data)  # never longer than its input
        elif name in LITERALS_ASCIIHEX_DECODE:
            data = asciihexdecode(data)
        else:
            break  # image codecs: pdfminer does not decode them for text
    if len(data) > room:
        raise _TooLarge
    return len(data)


def _bounded(chunks: Iterator[bytes], room: int, count_only: bool) -> bytes | _Counted:
    """The decoder's output (or only its size), _TooLarge past `room` bytes."""
    out, size = bytearray(), 0
    for chunk in chunks:
        size += len(chunk)
        if size > room:
            raise _TooLarge
        if not count_only:
            out += chunk
    return _Counted(size) if count_only else bytes(out)


class _Counted:
    """Stands for decoded bytes that were counted but not kept (`len` is their size)."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size


def _inflate(data: bytes) -> Iterator[bytes]:
    """zlib output in steps (as pdfminer reads it: a damaged tail ends the stream)."""
    inflater = zlib.decompressobj()
    pending = data
    try:
        while pending and not inflater.eof:
            yield inflater.decompress(pending, _STEP)
            pending = inflater.unconsumed_tail
        yield inflater.flush()
    except zlib.error:
        return


def _lzw(data: bytes) -> Iterator[bytes]:
    from pdfminer.lzw import LZWDecoder

    yield from LZWDecoder(io.BytesIO(data)).run()


def _run_length(data: bytes) -> Iterator[bytes]:
    """RunLengthDecode (PDF 7.4.5) yielded run by run."""
    i = 0
    while i < len(data):
        length = data[i]
        if length == 128:
            return
        if length < 128:
            yield data[i + 1 : i + 2 + length]
            i += length + 2
        else:
            yield data[i + 1 : i + 2] * (257 - length)
            i += 2
