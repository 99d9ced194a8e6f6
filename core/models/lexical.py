"""Records exchanged with lexical indexes (see core/lexical.py and LexicalIndex in core/ports)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class LexicalDoc:
    """One chunk to index: its id, its document and its text."""

    chunk_id: str
    document_id: str
    text: str


@dataclass
class CorpusStats:
    """What BM25 needs about the searched datasets: chunk count, total length, term df."""

    chunks: int = 0
    total_length: int = 0
    df: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Posting:
    """A term in a chunk: how often, and how long that chunk is (in terms)."""

    term: str
    chunk_id: str
    tf: int
    length: int
