"""JSON uploads read from a spooled file, each document's text streamed to a file of its own.

`POST /datasets/{name}/data` also takes `{"documents": [{"name", "text"}...], "node_set",
"document_date"}`.
Parsed whole, a 150 MB body was held about three times over (the body, the parsed text, the
copy written out: 450 MiB). The body is spooled to disk as it arrives, then read here in
CHUNK_BYTES pieces: a document's `text` string is decoded piece by piece straight into its
file, so memory stays at a few pieces whatever the sizes. Everything else in the body is
small by construction: names, the node set and values of keys the schema ignores are kept
only up to SMALL_VALUE_BYTES (an unknown key's value is skipped, not kept), nesting is bounded
by MAX_DEPTH. What the schema checks (types, lengths, the number of documents) is then checked
by `DocumentsAdd` itself, on the body with each streamed text replaced by "".
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, NoReturn

from api.http.errors import FileTooLarge, TooManyFiles
from core.errors import InvalidInput

CHUNK_BYTES = 1 << 16
SMALL_VALUE_BYTES = 1 << 16
MAX_DEPTH = 64
MAX_DOCUMENTS = 1000

_WS = re.compile(rb"[ \t\n\r]*")
# A string's content up to its closing quote, the end of the buffer, or a fault; each match
# ends between two tokens (never inside an escape), so what it spans decodes on its own.
_CONTENT = re.compile(rb'[^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*')
_SCALAR = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|true|false|null")
_SURROGATE = re.compile("[\ud800-\udfff]")
_LONGEST_ESCAPE = 6  # \uXXXX
_LONGEST_SCALAR = 512


class MalformedJSON(InvalidInput):
    """A JSON upload's body is no JSON (or not the shape an upload has); says where."""

    code = "malformed_json"


class TextTooLarge(FileTooLarge):
    """A document's text in a JSON upload is over COGMILL_MAX_FILE_BYTES; `index` says which."""

    def __init__(self, message: str = "", *, index: int = 0) -> None:
        super().__init__(message)
        self.index = index


class TooManyDocuments(TooManyFiles):
    """More documents in one JSON upload than one request may carry."""


@dataclass
class ParsedUpload:
    """What the body held: `body` to validate (each streamed text as ""), and the file each
    document's text was written to (None where `text` was no string)."""

    body: dict[str, Any] = field(default_factory=dict)
    texts: list[Path | None] = field(default_factory=list)


class _Text:
    """Decodes a string's content pieces into a UTF-8 file, counting its bytes."""

    def __init__(self, out: BinaryIO, limit: int, index: int) -> None:
        self.out, self.limit, self.index = out, limit, index
        self.size = 0
        self.carry = ""  # a high surrogate whose low half is in the next piece

    def __call__(self, piece: bytes) -> None:
        self.write(self.carry + _decoded(b'"' + piece + b'"'))

    def write(self, text: str) -> None:
        self.carry = ""
        if text and "\ud800" <= text[-1] <= "\udbff":  # its low half may come next
            text, self.carry = text[:-1], text[-1]
        if _SURROGATE.search(text):  # escaped pairs become one character; a lone half U+FFFD
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        data = text.encode()
        self.size += len(data)
        if self.size > self.limit:
            raise TextTooLarge(
                f"the text of document {self.index} of the JSON body is larger than the limit "
                f"of {self.limit} bytes; split it, or raise COGMILL_MAX_FILE_BYTES on the server",
                index=self.index,
            )
        self.out.write(data)

    def close(self) -> None:
        if self.carry:  # a high surrogate at the very end: no character
            self.carry = ""
            self.write("\ufffd")


class _Parser:
    """A recursive-descent reader of one upload body from a binary file."""

    def __init__(self, source: BinaryIO, folder: Path, limit: int, chunk: int) -> None:
        self.source, self.folder, self.limit, self.chunk = source, folder, limit, chunk
        self.buf, self.pos, self.offset, self.eof = b"", 0, 0, False

    # -- the buffer ---------------------------------------------------------------------------

    def fill(self) -> bool:
        """Read one more chunk; False at the end of the file."""
        if self.eof:
            return False
        more = self.source.read(self.chunk)
        if not more:
            self.eof = True
            return False
        self.offset += self.pos
        self.buf, self.pos = self.buf[self.pos :] + more, 0
        return True

    def peek(self) -> bytes:
        """The next byte after whitespace (b"" at the end)."""
        while True:
            self.pos = _end(_WS, self.buf, self.pos)
            if self.pos < len(self.buf) or not self.fill():
                return self.buf[self.pos : self.pos + 1]

    def expect(self, byte: bytes) -> None:
        if self.peek() != byte:
            self.fail(f"expected {byte.decode()!r}")
        self.pos += 1

    def fail(self, what: str) -> NoReturn:
        found = self.buf[self.pos : self.pos + 1]
        near = f"found {found.decode('latin-1')!r}" if found else "found the end of the body"
        raise MalformedJSON(f"invalid JSON at byte {self.offset + self.pos}: {what}, {near}")

    # -- values -------------------------------------------------------------------------------

    def string(self, sink: Callable[[bytes], None]) -> None:
        """A string (the next token), its content passed to `sink` in token-aligned pieces."""
        self.expect(b'"')
        while True:
            end = _end(_CONTENT, self.buf, self.pos)
            if end < len(self.buf) and self.buf[end : end + 1] == b'"':
                sink(self.buf[self.pos : end])
                self.pos = end + 1
                return
            partial = end == len(self.buf) or (
                self.buf[end : end + 1] == b"\\" and len(self.buf) - end < _LONGEST_ESCAPE
            )
            if not partial:
                self.pos = end
                self.fail("invalid escape or control character in a string")
            if end > self.pos:
                sink(self.buf[self.pos : end])
                self.pos = end
            if not self.fill():
                self.fail("unterminated string")

    def small(self) -> Any:
        """The next value, parsed, when its JSON is at most SMALL_VALUE_BYTES."""
        raw = bytearray()

        def keep(piece: bytes) -> None:
            raw.extend(piece)
            if len(raw) > SMALL_VALUE_BYTES:
                self.fail(f"a name or field value over {SMALL_VALUE_BYTES} bytes")

        self.value(keep, 0)
        return _decoded(bytes(raw))

    def value(self, sink: Callable[[bytes], None] | None, depth: int) -> None:
        """Read (and pass to `sink` as raw JSON, if any) or skip the next value."""
        if depth > MAX_DEPTH:
            self.fail(f"nested deeper than {MAX_DEPTH} levels")
        keep = sink or (lambda _: None)
        first = self.peek()
        if first == b'"':
            keep(b'"')
            self.string(keep)
            keep(b'"')
        elif first in (b"{", b"["):
            self.container(first, keep, depth)
        else:
            while len(self.buf) - self.pos < _LONGEST_SCALAR and self.fill():
                pass
            match = _SCALAR.match(self.buf, self.pos)
            if match is None:
                self.fail("expected a value")
            keep(match.group())
            self.pos = match.end()

    def container(self, first: bytes, keep: Callable[[bytes], None], depth: int) -> None:
        close = b"}" if first == b"{" else b"]"
        self.pos += 1
        keep(first)
        if self.peek() == close:
            self.pos += 1
            keep(close)
            return
        while True:
            if first == b"{":
                if self.peek() != b'"':
                    self.fail("expected a key")
                self.value(keep, depth + 1)
                self.expect(b":")
                keep(b":")
            self.value(keep, depth + 1)
            if self.peek() == b",":
                self.pos += 1
                keep(b",")
                continue
            self.expect(close)
            keep(close)
            return

    def members(self, each: Callable[[str], None]) -> None:
        """An object (the next token): `each(key)` reads each member's value."""
        self.expect(b"{")
        if self.peek() == b"}":
            self.pos += 1
            return
        while True:
            if self.peek() != b'"':
                self.fail("expected a key")
            key = self.small()
            self.expect(b":")
            each(key)
            if self.peek() == b",":
                self.pos += 1
                continue
            self.expect(b"}")
            return

    # -- the upload's shape -------------------------------------------------------------------

    def upload(self) -> ParsedUpload:
        parsed = ParsedUpload()
        if self.peek() != b"{":
            self.fail('expected an object {"documents": [...]}')

        def member(key: str) -> None:
            if key in parsed.body:
                self.fail(f"{key!r} is given twice")
            if key == "documents" and self.peek() == b"[":
                parsed.body[key] = self.documents(parsed)
            elif key in ("documents", "node_set", "document_date"):
                parsed.body[key] = self.small()
            else:
                self.value(None, 1)  # the schema ignores other keys

        self.members(member)
        if self.peek() != b"":
            self.fail("expected the end of the body")
        return parsed

    def documents(self, parsed: ParsedUpload) -> list[dict[str, Any]]:
        self.expect(b"[")
        found: list[dict[str, Any]] = []
        if self.peek() == b"]":
            self.pos += 1
            return found
        while True:
            if len(found) == MAX_DOCUMENTS:
                raise TooManyDocuments(f"at most {MAX_DOCUMENTS} documents per request; send fewer")
            if self.peek() == b"{":
                found.append(self.document(len(found), parsed))
            else:
                found.append(self.small())  # not an object: the schema says so
                parsed.texts.append(None)
            if self.peek() == b",":
                self.pos += 1
                continue
            self.expect(b"]")
            return found

    def document(self, index: int, parsed: ParsedUpload) -> dict[str, Any]:
        doc: dict[str, Any] = {}
        path = self.folder / str(index)
        parsed.texts.append(None)

        def member(key: str) -> None:
            if key == "text" and self.peek() == b'"':
                with path.open("wb") as out:
                    text = _Text(out, self.limit, index)
                    self.string(text)
                    text.close()
                doc[key], parsed.texts[index] = "", path
            elif key in ("name", "text"):
                doc[key] = self.small()
            else:
                self.value(None, 2)

        self.members(member)
        return doc


def _decoded(raw: bytes) -> Any:
    """A JSON value the scanner delimited. MalformedJSON for what only decoding finds: bytes
    that are no UTF-8, a number with more digits than Python converts."""
    try:
        return json.loads(raw)
    except ValueError as err:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        what = "bytes that are not UTF-8" if isinstance(err, UnicodeDecodeError) else "a value"
        raise MalformedJSON(f"invalid JSON: {what} that cannot be read") from None


def _end(pattern: re.Pattern[bytes], data: bytes, pos: int) -> int:
    """Where `pattern` (one that matches the empty string too) stops matching from `pos`."""
    match = pattern.match(data, pos)
    assert match is not None
    return match.end()


def parse_upload(
    body: Path, folder: Path, limit: int, *, chunk_bytes: int = CHUNK_BYTES
) -> ParsedUpload:
    """The upload in the spooled file `body`, each document's text written to `folder`/<index>
    (UTF-8, at most `limit` bytes), reading `chunk_bytes` at a time. Raises MalformedJSON,
    TextTooLarge, TooManyDocuments."""
    with body.open("rb") as source:
        return _Parser(source, folder, limit, chunk_bytes).upload()
