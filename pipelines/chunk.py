"""Step 2, chunk: token-bounded chunks that keep elements whole wherever they fit.

Tokens are the embedder's word-pieces without [CLS]/[SEP] (core/embeddings/tokenizer.py),
so `token_count` is what the embedding model reads. Whole elements are packed while they
fit; a larger element is cut into sentences (rows for tables, lines for lists), code into
its syntactic units (a class into its methods, and so on down; lines last), and a piece
still too large into runs of whole words. A title never ends a chunk when the content after
it can join it. Tokens are counted in bounded groups, so a huge document does not hold the
tokenizer's output for all of its text at once.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar

from tokenizers import Encoding

from core.embeddings.tokenizer import count_tokens, encode
from core.models.graph import chunk_id
from core.models.jobs import DocumentError
from pipelines.base import INGEST, StepContext, StepQueue, StepServices
from pipelines.formats.code import split_blocks
from pipelines.models import Chunk, ChunkBatch, ClassifiedBatch, ClassifiedDocument, Element

MIN_MAX_TOKENS = 16
COUNT_GROUP_CHARS = 1 << 20  # characters tokenized per call: few calls, bounded memory
_LINE_KINDS = {"table", "list", "code"}  # cut only between lines: a row is never split
# End of a sentence: . ! or ? (maybe closed by a quote or bracket), space, then a capital,
# digit or opening quote. Abbreviations like "e.g. X" split wrongly, which costs little here.
_SENTENCE_BREAK = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+(?=[\"'(\[]?[A-Z0-9])")


@dataclass(frozen=True)
class _Piece:
    """A whole element or a part of one, with its token count."""

    text: str
    tokens: int
    element: int
    kind: str


class ChunkDocuments:
    """Packs each document's elements into chunks of at most `max_tokens` tokens."""

    name: ClassVar[str] = "chunk"
    queue: ClassVar[StepQueue] = INGEST

    @classmethod
    def build(cls, services: StepServices, context: StepContext) -> ChunkDocuments:
        """From the settings' chunk size and overlap."""
        s = services.settings
        return cls(s.chunk_tokens, s.chunk_overlap_tokens)

    def __init__(self, max_tokens: int = 256, overlap_tokens: int = 0) -> None:
        if max_tokens < MIN_MAX_TOKENS:
            raise ValueError(f"max_tokens must be at least {MIN_MAX_TOKENS}, got {max_tokens}")
        if not 0 <= overlap_tokens < max_tokens:
            raise ValueError(
                f"overlap_tokens must be >= 0 and < max_tokens ({max_tokens}), got {overlap_tokens}"
            )
        self.max_tokens = max_tokens
        self.overlap_tokens = overlap_tokens

    def run(self, batch: ClassifiedBatch) -> ChunkBatch:
        out = ChunkBatch(dataset=batch.dataset, errors=list(batch.errors))
        # Few tokenizer calls for the whole batch: per-call overhead dominates small texts.
        elements = [_texts(doc.elements) for doc in batch.documents]
        counts = _count_grouped(text for texts in elements for _, text in texts)
        for doc, texts in zip(batch.documents, elements, strict=True):
            if not texts:
                if doc.document.segments == 1:  # a segment may be blank; its document is not
                    out.errors.append(_no_text(doc, self.name))
                else:
                    out.documents.append(doc.document)
                continue
            pieces = self._pieces(texts, [next(counts) for _ in texts])
            out.chunks.extend(self._chunks(doc, _pack(pieces, self._budget)))
            out.documents.append(doc.document)
        return out

    @property
    def _budget(self) -> int:
        """Tokens left for a chunk's own content once the overlap is in."""
        return self.max_tokens - self.overlap_tokens

    def _pieces(self, texts: list[tuple[str, str]], counts: list[int]) -> list[_Piece]:
        """Elements that fit as they are; larger ones cut into sentences, lines or words."""
        pieces: list[_Piece] = []
        for index, ((kind, text), tokens) in enumerate(zip(texts, counts, strict=True)):
            parts = [(text, tokens)] if tokens <= self._budget else _split(text, kind, self._budget)
            pieces.extend(_Piece(part, n, index, kind) for part, n in parts)
        return pieces

    def _chunks(self, doc: ClassifiedDocument, packed: list[list[_Piece]]) -> list[Chunk]:
        """Chunk models for one document, each prefixed by the previous chunk's tail."""
        contents = [_join(pieces) for pieces in packed]
        tails = [("", 0)] + _tails(contents[:-1], self.overlap_tokens)
        ref = doc.document
        chunks = []
        for local, (pieces, content) in enumerate(zip(packed, contents, strict=True)):
            tail, tail_tokens = tails[local]
            text = tail + _joiner(packed[local - 1][-1], pieces[0]) + content if tail else content
            index = doc.index_base + local  # a later segment's chunks follow the earlier ones'
            chunks.append(
                Chunk(
                    id=chunk_id(ref.id, index),
                    document_id=ref.id,
                    document_name=ref.name,
                    index=index,
                    text=text,
                    # Word-pieces never span whitespace, so joined counts simply add up.
                    token_count=tail_tokens + sum(piece.tokens for piece in pieces),
                )
            )
        return chunks


def _texts(elements: Sequence[Element]) -> list[tuple[str, str]]:
    """(kind, text) of the elements that have text."""
    return [(e.kind, e.text.strip()) for e in elements if e.text.strip()]


def _count_grouped(texts: Iterator[str]) -> Iterator[int]:
    """Token counts of the texts, in order, tokenized about COUNT_GROUP_CHARS at a time."""
    group: list[str] = []
    size = 0
    for text in texts:
        group.append(text)
        size += len(text)
        if size >= COUNT_GROUP_CHARS:
            yield from count_tokens(group)
            group, size = [], 0
    yield from count_tokens(group)


def _no_text(doc: ClassifiedDocument, step: str) -> DocumentError:
    return DocumentError(
        document_id=doc.document.id,
        document_name=doc.document.name,
        step=step,
        message=f"no text left after classification as {doc.kind} (only markup, scripts or "
        "empty values); check the file's content",
    )


def _split(text: str, kind: str, limit: int) -> list[tuple[str, int]]:
    """Parts of at most `limit` tokens: code units, lines or sentences, then word runs."""
    if kind == "code":
        return _code_parts(text, limit)
    if kind in _LINE_KINDS:
        parts = [line.strip() for line in text.split("\n") if line.strip()]
    else:
        parts = [part for part in _SENTENCE_BREAK.split(text) if part.strip()]
    return _fit(parts, limit)


def _code_parts(text: str, limit: int) -> list[tuple[str, int]]:
    """Syntactic units of code that fit, splitting a unit too large at its next level; lines
    (indentation kept) when no level gives two units."""
    blocks = [block.strip("\n") for block in split_blocks(text)]
    blocks = [block for block in blocks if block.strip()]
    if len(blocks) < 2:
        return _fit([line.rstrip() for line in text.split("\n") if line.strip()], limit)
    out: list[tuple[str, int]] = []
    for block, tokens in zip(blocks, count_tokens(blocks), strict=True):
        out.extend([(block, tokens)] if tokens <= limit else _code_parts(block, limit))
    return out


def _fit(parts: list[str], limit: int) -> list[tuple[str, int]]:
    """The parts with their token counts; a part above `limit` cut into runs of words."""
    out: list[tuple[str, int]] = []
    for part, encoding in zip(parts, encode(parts), strict=True):
        if len(encoding) <= limit:
            out.append((part, len(encoding)))
        else:
            out.extend(_word_runs(part, encoding, limit))
    return out


def _words(text: str, encoding: Encoding) -> list[tuple[int, int, int]]:
    """(start char, end char, tokens) of each whitespace-separated word of `text`."""
    words: list[list[int]] = []
    for start, end in encoding.offsets:
        # Tokens with only whitespace between them start a new word; "e-mail" stays one.
        if words and not text[words[-1][1] : start].isspace():
            words[-1][1], words[-1][2] = end, words[-1][2] + 1
        else:
            words.append([start, end, 1])
    return [(start, end, tokens) for start, end, tokens in words]


def _word_runs(text: str, encoding: Encoding, limit: int) -> list[tuple[str, int]]:
    """Runs of whole words of at most `limit` tokens; a longer word is cut every `limit` chars."""
    runs: list[tuple[str, int]] = []
    start, end, used = 0, 0, 0
    for word_start, word_end, tokens in _words(text, encoding):
        if used and used + tokens > limit:
            runs.append((text[start:end], used))
            used = 0
        if tokens > limit:
            # Every word-piece covers at least one character, so `limit` characters fit.
            pieces = [
                text[i : min(i + limit, word_end)] for i in range(word_start, word_end, limit)
            ]
            runs.extend(zip(pieces, count_tokens(pieces), strict=True))
            continue
        if not used:
            start = word_start
        end, used = word_end, used + tokens
    if used:
        runs.append((text[start:end], used))
    return runs


def _pack(pieces: list[_Piece], budget: int) -> list[list[_Piece]]:
    """Greedy packing; titles at the end of a full chunk move on with the content after them."""
    chunks: list[list[_Piece]] = []
    current: list[_Piece] = []
    used = 0
    for piece in pieces:
        if current and used + piece.tokens > budget:
            carried = _trailing_titles(current)
            if (
                len(carried) == len(current)
                or sum(p.tokens for p in carried) + piece.tokens > budget
            ):
                carried = []
            chunks.append(current[: len(current) - len(carried)])
            current, used = carried, sum(p.tokens for p in carried)
        current.append(piece)
        used += piece.tokens
    if current:
        chunks.append(current)
    return chunks


def _trailing_titles(pieces: list[_Piece]) -> list[_Piece]:
    count = 0
    while count < len(pieces) and pieces[-1 - count].kind == "title":
        count += 1
    return pieces[len(pieces) - count :]


def _joiner(before: _Piece, after: _Piece) -> str:
    """Blank line between elements; a newline or space between parts of one element."""
    if before.element != after.element:
        return "\n\n"
    return "\n" if before.kind in _LINE_KINDS else " "


def _join(pieces: list[_Piece]) -> str:
    parts = [pieces[0].text]
    for before, after in zip(pieces, pieces[1:], strict=False):
        parts += [_joiner(before, after), after.text]
    return "".join(parts)


def _tails(texts: list[str], limit: int) -> list[tuple[str, int]]:
    """The last whole words of each text within `limit` tokens, and their count (the overlap)."""
    if not limit:
        return [("", 0) for _ in texts]
    tails = []
    for text, encoding in zip(texts, encode(texts), strict=True):
        start, used = len(text), 0
        for word_start, _, tokens in reversed(_words(text, encoding)):
            if used + tokens > limit:
                break
            start, used = word_start, used + tokens
        tails.append((text[start:], used))
    return tails
