"""BM25 over document chunks: the tokeniser, the index port and the scoring they share.

Tokenisation works for space-less scripts too: Latin (and other alphabetic) text becomes
lower-cased words, while runs of Han, Hiragana, Katakana or Hangul characters become their
single characters plus every adjacent pair (unigrams + bigrams, the usual CJK indexing
scheme, which needs no dictionary). SQLite FTS5's default tokenizer would index a whole
Chinese sentence as one token, hence an index of our own.

Adapters (`core/stores/lexical_sqlite.py`, `lexical_redis.py`) store postings per dataset and
answer the two reads BM25 needs; `bm25_search` does the scoring the same way for both.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

_CJK = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u3040-\u309f"  # Hiragana
    "\u30a0-\u30ff"  # Katakana
    "\u3130-\u318f"  # Hangul compatibility Jamo
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\U00020000-\U0002ebef"  # CJK extensions B-F
)
_TOKEN = re.compile(rf"([{_CJK}]+)|((?:(?![{_CJK}])\w)+)")
# Words too common to help ranking; dropping them keeps postings lists (and queries) short.
_STOPWORDS = """a an and are as at be been but by did do does for from had has have he her his how i
    if in into is it its of on or our she so than that the their them then there these they
    this to was were what when where which who whom whose why will with you your"""
STOPWORDS = frozenset(_STOPWORDS.split())
K1, B = 1.2, 0.75


def tokenize(text: str) -> list[str]:
    """Index terms of a text, in order: words, and CJK character unigrams + bigrams."""
    terms: list[str] = []
    for cjk, word in _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold()):
        if cjk:
            terms.extend(cjk)
            terms.extend(cjk[i : i + 2] for i in range(len(cjk) - 1))
        elif word not in STOPWORDS and (len(word) > 1 or word.isdigit()):
            terms.append(word)
    return terms


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


@runtime_checkable
class LexicalIndex(Protocol):
    """Persistent term postings of chunks, per dataset."""

    def add(self, dataset: str, docs: Sequence[LexicalDoc]) -> None:
        """Index chunks; a chunk id already indexed is left as it is. Raises StoreError."""
        ...

    def remove(self, dataset: str, ids: Sequence[str]) -> None:
        """Drop the postings of these ids (ids that are not indexed chunks are ignored)."""
        ...

    def remove_dataset(self, dataset: str) -> None:
        """Drop every posting of a dataset. Raises StoreError."""
        ...

    def count(self, dataset: str) -> int:
        """Number of chunks indexed for a dataset."""
        ...

    def corpus_stats(self, datasets: Sequence[str], terms: Sequence[str]) -> CorpusStats:
        """Chunk count, total length and document frequency of `terms` over the datasets."""
        ...

    def postings(self, datasets: Sequence[str], terms: Sequence[str]) -> Iterable[Posting]:
        """Every posting of `terms` in the datasets."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


def term_counts(text: str) -> tuple[Counter[str], int]:
    """Term frequencies of a chunk and its length in terms."""
    terms = tokenize(text)
    return Counter(terms), len(terms)


def bm25_search(
    index: LexicalIndex, datasets: Sequence[str], query: str, limit: int
) -> list[tuple[str, float]]:
    """(chunk id, BM25 score) of the best chunks for the query, best first."""
    terms = sorted(set(tokenize(query)))
    if not terms or not datasets:
        return []
    stats = index.corpus_stats(datasets, terms)
    if stats.chunks == 0:
        return []
    avgdl = stats.total_length / stats.chunks or 1.0
    idf = {
        t: math.log(1 + (stats.chunks - df + 0.5) / (df + 0.5)) for t, df in stats.df.items() if df
    }
    scores: dict[str, float] = {}
    for p in index.postings(datasets, terms):
        norm = p.tf * (K1 + 1) / (p.tf + K1 * (1 - B + B * p.length / avgdl))
        scores[p.chunk_id] = scores.get(p.chunk_id, 0.0) + idf.get(p.term, 0.0) * norm
    best = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    return best[:limit]
