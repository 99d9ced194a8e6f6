"""BM25 postings of chunks in Redis (distributed mode: every worker and API process shares them).

Per dataset, under the store prefix: `lex:<ds>:len` (hash chunk -> length in terms),
`lex:<ds>:total` (sum of lengths), `lex:<ds>:t:<term>` (hash chunk -> term frequency) and
`lex:<ds>:c:<chunk>` (the chunk's terms, so it can be removed). Adding and removing a chunk
are Lua scripts, atomic per chunk, so concurrent workers and redelivered tasks keep the
counts exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.lexical import term_counts
from core.models.lexical import CorpusStats, LexicalDoc, Posting
from core.stores.redis_connection import RedisConnection

_ADD = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('INCRBY', KEYS[2], ARGV[2])
for i = 4, #ARGV, 2 do
  redis.call('HSET', ARGV[3] .. ARGV[i], ARGV[1], ARGV[i + 1])
  redis.call('SADD', KEYS[3], ARGV[i])
end
return 1
"""
_REMOVE = """
local length = redis.call('HGET', KEYS[1], ARGV[1])
if not length then return 0 end
for _, term in ipairs(redis.call('SMEMBERS', KEYS[3])) do
  redis.call('HDEL', ARGV[2] .. term, ARGV[1])
end
redis.call('DEL', KEYS[3])
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('DECRBY', KEYS[2], length)
return 1
"""
_PIPELINE_BATCH = 500


class RedisLexicalIndex:
    """LexicalIndex on Redis; keys live under `prefix` like the state store's."""

    def __init__(self, url: str, *, prefix: str = "cogmill:", client: Any = None) -> None:
        """`client`: an open client (decode_responses=True) to use instead of connecting to
        `url`, e.g. a fakeredis one in tests; the index closes it."""
        self._conn = RedisConnection(url, role="lexical index", client=client)
        self.url, self.prefix, self._redis = self._conn.url, prefix, self._conn.client
        self._add = self._redis.register_script(_ADD)
        self._remove = self._redis.register_script(_REMOVE)

    def _keys(self, dataset: str) -> tuple[str, str, str]:
        """(lengths hash, total counter, term key prefix) of a dataset."""
        base = f"{self.prefix}lex:{dataset}:"
        return base + "len", base + "total", base + "t:"

    def add(self, dataset: str, docs: Sequence[LexicalDoc]) -> None:
        """Index chunks; a chunk id already indexed is left as it is. Raises StoreError."""
        lengths, total, terms = self._keys(dataset)
        unique = list({d.chunk_id: d for d in docs}.values())
        with self._conn.errors():
            for start in range(0, len(unique), _PIPELINE_BATCH):
                pipe = self._redis.pipeline(transaction=False)
                for doc in unique[start : start + _PIPELINE_BATCH]:
                    counts, length = term_counts(doc.text)
                    flat = [x for term, tf in counts.items() for x in (term, tf)]
                    chunk_terms = f"{self.prefix}lex:{dataset}:c:{doc.chunk_id}"
                    self._add(
                        keys=[lengths, total, chunk_terms],
                        args=[doc.chunk_id, length, terms, *flat],
                        client=pipe,
                    )
                pipe.execute()

    def remove(self, dataset: str, ids: Sequence[str]) -> None:
        """Drop the postings of these ids (ids that are not indexed chunks are ignored)."""
        lengths, total, terms = self._keys(dataset)
        with self._conn.errors():
            for start in range(0, len(ids), _PIPELINE_BATCH):
                pipe = self._redis.pipeline(transaction=False)
                for chunk in ids[start : start + _PIPELINE_BATCH]:
                    chunk_terms = f"{self.prefix}lex:{dataset}:c:{chunk}"
                    self._remove(
                        keys=[lengths, total, chunk_terms], args=[chunk, terms], client=pipe
                    )
                pipe.execute()

    def remove_dataset(self, dataset: str) -> None:
        """Drop every posting of a dataset. Raises StoreError."""
        with self._conn.errors():
            batch: list[str] = []
            for key in self._redis.scan_iter(match=f"{self.prefix}lex:{dataset}:*", count=1000):
                batch.append(key)
                if len(batch) >= 1000:
                    self._redis.unlink(*batch)
                    batch = []
            if batch:
                self._redis.unlink(*batch)

    def count(self, dataset: str) -> int:
        """Number of chunks indexed for a dataset."""
        with self._conn.errors():
            return int(self._redis.hlen(self._keys(dataset)[0]))

    def corpus_stats(self, datasets: Sequence[str], terms: Sequence[str]) -> CorpusStats:
        """Chunk count, total length and document frequency of `terms` over the datasets."""
        stats = CorpusStats()
        with self._conn.errors():
            pipe = self._redis.pipeline(transaction=False)
            for dataset in datasets:
                lengths, total, prefix = self._keys(dataset)
                pipe.hlen(lengths)
                pipe.get(total)
                for term in terms:
                    pipe.hlen(prefix + term)
            replies = iter(pipe.execute())
        for _dataset in datasets:
            stats.chunks += int(next(replies))
            stats.total_length += int(next(replies) or 0)
            for term in terms:
                stats.df[term] = stats.df.get(term, 0) + int(next(replies))
        return stats

    def postings(self, datasets: Sequence[str], terms: Sequence[str]) -> list[Posting]:
        """Every posting of `terms` in the datasets."""
        found: list[Posting] = []
        with self._conn.errors():
            for dataset in datasets:
                lengths, _total, prefix = self._keys(dataset)
                pipe = self._redis.pipeline(transaction=False)
                for term in terms:
                    pipe.hgetall(prefix + term)
                tfs = dict(zip(terms, pipe.execute(), strict=True))
                chunks = sorted({c for by_chunk in tfs.values() for c in by_chunk})
                if not chunks:
                    continue
                length = dict(zip(chunks, self._redis.hmget(lengths, chunks), strict=True))
                found.extend(
                    Posting(term, chunk, int(tf), int(length[chunk]))
                    for term, by_chunk in tfs.items()
                    for chunk, tf in by_chunk.items()
                    if length.get(chunk) is not None
                )
        return found

    def close(self) -> None:
        """Close the connection pool."""
        self._conn.close()
