"""Text decoding and plain-text partitioning, streamed in blocks.

The encoding is judged from the first block: a byte-order mark, UTF-16 without one (NULs in
every other byte), UTF-8, then cp1252 and latin-1 when the result reads as text. A later
block that does not decode restarts the document with the next candidate, so a large file
is never held as bytes and as text at the same time.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Iterator
from typing import TypeVar

from pipelines.formats.base import DocumentProblem, Source
from pipelines.models import Element

T = TypeVar("T")
MAGIC = (
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"%PDF-", "a PDF"),
    (b"PK\x03\x04", "a ZIP archive (or a Word/Excel/PowerPoint file)"),
    (b"\xd0\xcf\x11\xe0", "a legacy Microsoft Office file (.doc/.xls/.ppt)"),
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
_LEGACY = ("cp1252", "latin-1")
TRIED = "UTF-8, UTF-16/UTF-32 (with a byte-order mark or as plain UTF-16 text), cp1252, latin-1"
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]")
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_BLANK_LINES = re.compile(r"\n[ \t]*\n")
_TITLE_WORDS = 12
_CONTINUED = tuple(".,;:!?-–—")
_BULLET = re.compile(r"(?:[-*+•◦▪‣]|\d{1,3}[.)])\s")
MAX_PARAGRAPH_CHARS = 1 << 20  # a longer run without a blank line is cut at a line end


class _Undecodable(Exception):
    """A block did not decode with the encoding being tried."""


def binary_kind(head: bytes) -> str | None:
    """What a binary file is by its magic bytes ("a PNG image"), or None."""
    return next((what for magic, what in MAGIC if head.startswith(magic)), None)


def candidate_encodings(head: bytes, *, complete: bool) -> list[str]:
    """Encodings worth trying, best first, judged from the first bytes. Raises DocumentProblem."""
    if not head:
        raise DocumentProblem("the file is empty (0 bytes); add it again with its content")
    if what := binary_kind(head):
        raise DocumentProblem(f"binary content: this is {what}, not text; {_convert_hint()}")
    for bom, encoding in _BOMS:
        if head.startswith(bom):
            _check(head, encoding, complete, f"it starts with a {encoding.upper()} byte-order mark")
            return [encoding]
    if b"\x00" in head:
        if wide := _utf16_without_bom(head):
            return [wide]
        raise DocumentProblem(
            f"binary content (a NUL byte at offset {head.index(0)}); tried {TRIED}. "
            f"This is not a text document; {_convert_hint()}"
        )
    candidates = []
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=complete)
        candidates.append("utf-8")
    except UnicodeDecodeError:
        pass
    # Legacy Windows/ISO-8859 text is common; random binary also "decodes", so check the result.
    for encoding in _LEGACY:
        try:
            if looks_like_text(head.decode(encoding)):
                candidates.append(encoding)
        except UnicodeDecodeError:
            continue
    if not candidates:
        raise DocumentProblem(f"binary content: undecodable, tried {TRIED}; {_convert_hint()}")
    return candidates


def _convert_hint() -> str:
    return "convert it to UTF-8 text or to a supported format first"


def _check(head: bytes, encoding: str, complete: bool, why: str) -> None:
    try:
        codecs.getincrementaldecoder(encoding)().decode(head, final=complete)
    except UnicodeDecodeError as err:
        raise DocumentProblem(
            f"{why} but is not valid {encoding.upper()} (byte {err.start}); re-save it as UTF-8"
        ) from err


def _utf16_without_bom(head: bytes) -> str | None:
    """utf-16-le/-be when NULs sit in every other byte (mostly-ASCII UTF-16), else None."""
    sample = head[: len(head) - len(head) % 2]
    if len(sample) < 4:
        return None
    for encoding, zeros in (("utf-16-le", sample[1::2]), ("utf-16-be", sample[0::2])):
        if zeros.count(0) >= 0.9 * len(zeros):
            try:
                if looks_like_text(sample.decode(encoding)):
                    return encoding
            except UnicodeDecodeError:
                return None
    return None


def looks_like_text(text: str) -> bool:
    """Few control characters and mostly ASCII: text in a legacy 8-bit encoding."""
    limit = max(1, len(text) // 100)
    return len(_CONTROL.findall(text)) <= limit and len(_NON_ASCII.findall(text)) <= len(text) * 0.3


def decode_text(data: bytes, *, complete: bool = True) -> str:
    """The text of `data` in the first candidate encoding that decodes. Raises DocumentProblem.

    `complete=False` accepts a head cut inside a multi-byte character.
    """
    candidates = candidate_encodings(data, complete=complete)
    for encoding in candidates:
        try:
            return codecs.getincrementaldecoder(encoding)().decode(data, final=complete)
        except UnicodeDecodeError:
            continue
    raise DocumentProblem(f"binary content: undecodable, tried {', '.join(candidates)}")


def with_text(source: Source, consume: Callable[[Iterator[str]], T]) -> T:
    """`consume(blocks of decoded text)`, retried with the next encoding when one fails."""
    with source.open() as stream:
        head = stream.read(source.limits.block_bytes)
    failures = []
    for encoding in candidate_encodings(head, complete=False):
        try:
            return consume(_blocks(source, encoding))
        except _Undecodable as err:
            failures.append(f"{encoding} ({err})")
    raise DocumentProblem(
        f"undecodable text: {'; '.join(failures)}; tried {TRIED}. Re-save the file as UTF-8"
    )


def _blocks(source: Source, encoding: str) -> Iterator[str]:
    decoder = codecs.getincrementaldecoder(encoding)()
    legacy = encoding in _LEGACY
    offset = 0
    with source.open() as stream:
        while True:
            data = stream.read(source.limits.block_bytes)
            try:
                text = decoder.decode(data, final=not data)
            except UnicodeDecodeError as err:
                raise _Undecodable(f"invalid byte at offset {offset + err.start}") from err
            if legacy and not looks_like_text(text):
                raise _Undecodable(f"binary-looking bytes after offset {offset}")
            if text:
                yield text
            if not data:
                return
            offset += len(data)


def read_text(source: Source) -> str:
    """The whole decoded text (formats parsed as one piece); bounded by max_bytes upstream."""
    return with_text(source, lambda blocks: "".join(blocks))


def paragraphs(blocks: Iterator[str]) -> Iterator[str]:
    """Blank-line separated paragraphs of streamed text, newlines normalised to \\n."""
    buffer = ""
    for block in blocks:
        buffer += block
        held = "\r" if buffer.endswith("\r") else ""  # its "\n" may start the next block
        buffer = buffer[: len(buffer) - len(held)].replace("\r\n", "\n").replace("\r", "\n")
        parts = _BLANK_LINES.split(buffer)
        buffer = parts.pop() + held
        yield from parts
        while len(buffer) > MAX_PARAGRAPH_CHARS:
            cut = _cut_point(buffer)
            yield buffer[:cut]
            buffer = buffer[cut:]
    if buffer:
        yield buffer.replace("\r\n", "\n").replace("\r", "\n")


def _cut_point(text: str) -> int:
    """Where to cut an over-long paragraph: the last line end, else the last space."""
    window = text[:MAX_PARAGRAPH_CHARS]
    for sep in ("\n", " "):
        if (at := window.rfind(sep)) > 0:
            return at + 1
    return MAX_PARAGRAPH_CHARS


def paragraph_element(block: str) -> Element | None:
    """A paragraph as a text element; a paragraph of bullet lines is a list."""
    lines = [line.strip() for line in block.split("\n") if line.strip()]
    if not lines:
        return None
    if all(_BULLET.match(line) for line in lines):
        return Element(kind="list", text="\n".join(lines))
    if len(lines) > 1 and is_title_line(lines[0], lines[1:]):
        # The line break stays, so the extractor does not read "X\nX is ..." as one name "X X".
        return Element(kind="text", text=lines[0] + "\n" + " ".join(lines[1:]))
    return Element(kind="text", text=" ".join(lines))


def is_title_line(line: str, rest: list[str]) -> bool:
    """A paragraph's first line that heads it ("Quillon Labs" over its text), not wrapped prose:
    a few words, no closing punctuation, at most half as long as the longest line after it."""
    return (
        len(line.split()) <= _TITLE_WORDS
        and not line.endswith(_CONTINUED)
        and 2 * len(line) <= max(len(other) for other in rest)
    )


def partition_txt(source: Source) -> list[Element]:
    """Plain text, streamed: paragraphs split on blank lines; bullet paragraphs are lists."""
    return with_text(source, _txt_elements)


def _txt_elements(blocks: Iterator[str]) -> list[Element]:
    return [e for block in paragraphs(blocks) if (e := paragraph_element(block))]
