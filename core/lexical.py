"""BM25 over document chunks: the tokeniser and the scoring every lexical index shares.

Tokenisation works for space-less scripts too: Latin (and other alphabetic) text becomes
lower-cased words, while runs of Han, Hiragana, Katakana or Hangul characters become their
single characters plus every adjacent pair (unigrams + bigrams, the usual CJK indexing
scheme, which needs no dictionary). SQLite FTS5's default tokenizer would index a whole
Chinese sentence as one token, hence an index of our own.

Adapters of the `LexicalIndex` port (core/ports/; `core/stores/sqlite/lexical.py`,
`core/stores/redis/lexical.py`) store postings per dataset and answer the two reads BM25 needs;
`bm25_search` does the scoring the same way for both.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence

from core.ports import LexicalIndex

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
