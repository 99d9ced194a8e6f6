"""Step 1, classify: detect each document's kind and partition it into typed Elements.

The kind comes from the file extension (content wins where it is unambiguous: an HTML page
saved as .txt); the partitioner for each kind lives in `pipelines/formats/`. Text formats
are streamed in blocks. A large .txt/.md document is planned as segments (see
pipelines/formats/segments.py): each is classified on its own, from its own bytes, so no
batch holds more of the document than one segment. A broken or unsupported document becomes
a DocumentError in the batch; it never fails the batch.
"""

from __future__ import annotations

import functools
import re
from pathlib import PurePath
from typing import BinaryIO, ClassVar

from core.models.jobs import DocumentError
from core.ports import BlobStore
from pipelines.base import INGEST, StepContext, StepQueue, StepServices
from pipelines.formats import mail, office, pdf
from pipelines.formats.base import DocumentProblem, Limits, Partitioner, Source, too_large
from pipelines.formats.code import LANGUAGES, partition_code
from pipelines.formats.isolated import ISOLATED_KINDS, PARSERS, unparsable
from pipelines.formats.markup import (
    SPACY_MODEL,
    configure_unstructured,
    partition_html,
    partition_markup,
    partition_md,
)
from pipelines.formats.records import partition_json, partition_jsonl, partition_table
from pipelines.formats.segments import (
    SEGMENTABLE_ENCODINGS,
    SEGMENTABLE_KINDS,
    RangeReader,
    segment_span,
)
from pipelines.formats.text import candidate_encodings, decode_text, partition_txt, with_text
from pipelines.models import (
    ClassifiedBatch,
    ClassifiedDocument,
    DocumentBatch,
    DocumentRef,
    Element,
)

__all__ = [
    "SPACY_MODEL",
    "SUPPORTED_EXTENSIONS",
    "Classify",
    "DocumentProblem",
    "check_supported",
    "configure_unstructured",
    "decode_text",
    "kind_for",
    "partition_markup",
]

_KIND_BY_EXTENSION = {
    "txt": "txt",
    "text": "txt",
    "md": "md",
    "markdown": "md",
    "html": "html",
    "htm": "html",
    "json": "json",
    "jsonl": "jsonl",
    "ndjson": "jsonl",
    "csv": "csv",
    "tsv": "tsv",
    "pdf": "pdf",
    "docx": "docx",
    "pptx": "pptx",
    "xlsx": "xlsx",
    "eml": "eml",
} | LANGUAGES
SUPPORTED_EXTENSIONS: frozenset[str] = frozenset(f".{ext}" for ext in _KIND_BY_EXTENSION)
_BINARY_KINDS = {"pdf", "docx", "pptx", "xlsx", "eml"}
_HTML_START = re.compile(r"\s*(<!doctype html|<html[\s>])", re.IGNORECASE)

_PARTITIONERS: dict[str, Partitioner] = {
    "txt": partition_txt,
    "md": partition_md,
    "html": partition_html,
    "json": partition_json,
    "jsonl": partition_jsonl,
    "csv": functools.partial(partition_table, delimiter=","),
    "tsv": functools.partial(partition_table, delimiter="\t"),
    "pdf": pdf.partition_pdf,
    "docx": functools.partial(office.partition_office, kind="docx"),
    "pptx": functools.partial(office.partition_office, kind="pptx"),
    "xlsx": functools.partial(office.partition_office, kind="xlsx"),
    "eml": mail.partition_eml,
}
for _language in set(LANGUAGES.values()):
    _PARTITIONERS[_language] = functools.partial(partition_code, language=_language)


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


def _head_problem(kind: str, head: bytes) -> str | None:
    """Why a `kind` file cannot start with these bytes; None when it can."""
    if kind == "pdf":
        return pdf.check_head(head)
    if kind in ("docx", "pptx", "xlsx"):
        return office.check_head(kind, head)
    if kind == "eml":
        return mail.check_head(head)
    try:
        decode_text(head, complete=False)
    except DocumentProblem as err:
        return str(err)
    return None


def check_supported(name: str, head: bytes) -> str | None:
    """Why a file cannot be ingested, judged by its name and first bytes; None when it can."""
    try:
        kind = kind_for(PurePath(name).suffix)
    except DocumentProblem as err:
        return str(err)
    if not head:
        return "the file is empty (0 bytes); add it again with its content"
    return _head_problem(kind, head)


class Classify:
    """Reads each document's bytes and partitions it into title/text/list/table/code elements."""

    name: ClassVar[str] = "classify"
    queue: ClassVar[StepQueue] = INGEST

    @classmethod
    def build(cls, services: StepServices, context: StepContext) -> Classify:
        """From the settings' file size, unpacking and parsing time limits."""
        s = services.settings
        limits = Limits(
            max_unpacked_bytes=s.max_unpacked_bytes,
            max_compression_ratio=s.max_compression_ratio,
            max_unpacked_part_bytes=s.max_unpacked_part_bytes,
        )
        return cls(services.blobs, s.max_file_bytes, limits, s.parse_timeout_seconds)

    def __init__(
        self,
        blobs: BlobStore,
        max_bytes: int,
        limits: Limits | None = None,
        parse_timeout_s: float = 600.0,
    ) -> None:
        """`parse_timeout_s` bounds the wall time of one document's structural parser (run in
        a child process, pipelines/formats/isolated.py); 0 parses in this thread, unbounded."""
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be at least 1, got {max_bytes}")
        if parse_timeout_s < 0:
            raise ValueError(f"parse_timeout_s must be 0 (no limit) or more, got {parse_timeout_s}")
        self.blobs = blobs
        self.max_bytes = max_bytes
        self.parse_timeout_s = parse_timeout_s
        base = limits or Limits()
        self.limits = Limits(
            max_bytes=max_bytes,
            max_unpacked_bytes=base.max_unpacked_bytes,
            max_compression_ratio=base.max_compression_ratio,
            block_bytes=base.block_bytes,
            max_unpacked_part_bytes=base.max_unpacked_part_bytes,
        )

    def run(self, batch: DocumentBatch) -> ClassifiedBatch:
        out = ClassifiedBatch(dataset=batch.dataset)
        for ref in batch.documents:
            try:
                out.documents.append(self._classify(ref))
            except DocumentProblem as err:
                where = f"segment {ref.segment + 1} of {ref.segments}: " if ref.segments > 1 else ""
                out.errors.append(
                    DocumentError(
                        document_id=ref.id,
                        document_name=ref.name,
                        step=self.name,
                        message=f"{where}{err}",
                    )
                )
        return out

    def _classify(self, ref: DocumentRef) -> ClassifiedDocument:
        kind = kind_for(ref.extension or PurePath(ref.name).suffix)
        if ref.size > self.max_bytes:
            raise DocumentProblem(too_large(self.max_bytes))
        source = Source(name=ref.name, open=functools.partial(self._open, ref), limits=self.limits)
        with source.open() as stream:
            head = stream.read(self.limits.block_bytes)
        if not head:
            raise DocumentProblem("the file is empty (0 bytes); add it again with its content")
        if problem := _head_problem(kind, head):
            raise DocumentProblem(problem)
        # Content over extension where it is unambiguous: an HTML page saved as .txt.
        if kind == "txt" and _HTML_START.match(decode_text(head[:1024], complete=False)):
            kind = "html"
        index_base = 0
        if ref.segments > 1:
            span = self._segment(ref, kind, head)
            if (span is None and ref.segment > 0) or (span is not None and not span):
                # Not cut after all (see _segment): the first segment reads the whole document.
                # Or the last segment is empty: the cut before it found the end of the file.
                return ClassifiedDocument(document=ref, kind=kind, elements=[], index_base=0)
            if span is not None:
                opener = functools.partial(self._open_range, ref, span)
                source = Source(name=ref.name, open=opener, limits=self.limits)
                index_base = span.start
        elements = self._partition(kind, source)
        # A segment of blank lines is no problem: the document has text elsewhere.
        whole = ref.segments == 1
        if whole and not elements and kind not in _BINARY_KINDS and _only_whitespace(source):
            raise DocumentProblem("the file contains only whitespace; add it again with its text")
        return ClassifiedDocument(document=ref, kind=kind, elements=elements, index_base=index_base)

    def _partition(self, kind: str, source: Source) -> list[Element]:
        if kind in ISOLATED_KINDS and self.parse_timeout_s:
            return PARSERS.partition(_PARTITIONERS[kind], kind, source, self.parse_timeout_s)
        try:
            return _PARTITIONERS[kind](source)
        except DocumentProblem:
            raise
        # A parser failing on one document is that document's problem, whatever it raised.
        except Exception as err:
            raise unparsable(kind, type(err).__name__, str(err)) from err

    def _segment(self, ref: DocumentRef, kind: str, head: bytes) -> range | None:
        """The bytes of the planned segment `ref` (pipelines/formats/segments.py), or None when
        the document cannot be cut: its content is not plain text or markdown (an HTML page
        saved as .txt) or its encoding is not ASCII-compatible (UTF-16 and UTF-32 are read
        whole)."""
        if kind not in SEGMENTABLE_KINDS:
            return None
        if candidate_encodings(head, complete=False)[0] not in SEGMENTABLE_ENCODINGS:
            return None
        if ref.segment_bytes < 1:
            raise ValueError(f"segment {ref.segment} of {ref.name} was planned without a size")
        with self._open(ref) as stream:
            if not stream.seekable():
                return None
            return segment_span(stream, ref.segment, ref.segments, ref.segment_bytes)

    def _open(self, ref: DocumentRef) -> BinaryIO:
        """The document's stored bytes, refused when larger than max_bytes. Raises
        DocumentProblem."""
        try:
            stream = self.blobs.open(ref.blob_key)
        except FileNotFoundError as err:
            raise DocumentProblem(
                f"the stored bytes of this document are missing (blob {ref.blob_key!r}); "
                "add the file again"
            ) from err
        except ValueError as err:  # the blob store refused the key
            raise DocumentProblem(f"{err}; add the file again") from err
        if stream.seekable():
            size = stream.seek(0, 2)
            stream.seek(0)
            if size > self.max_bytes:
                stream.close()
                raise DocumentProblem(too_large(self.max_bytes))
        return stream

    def _open_range(self, ref: DocumentRef, span: range) -> BinaryIO:
        """The bytes `span` of the document, as a stream of their own."""
        return RangeReader(self._open(ref), span)  # type: ignore[return-value]


def _only_whitespace(source: Source) -> bool:
    return with_text(source, lambda blocks: all(not block.strip() for block in blocks))
