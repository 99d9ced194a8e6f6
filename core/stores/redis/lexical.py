"""BM25 postings of chunks in Redis (distributed mode: every worker and API process shares them).

Per dataset, under the store prefix: `lex:<ds>:len` (hash chunk -> length in terms),
`lex:<ds>:total` (sum of lengths), `lex:<ds>:t:<term>` (hash chunk -> term frequency) and
`lex:<ds>:c:<chunk>` (the chunk's terms, so it can be removed). Adding (atomic per call of
up to _ADD_BATCH chunks) and removing (per chunk) are Lua scripts, so concurrent workers and
redelivered tasks keep the counts exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.lexical import term_counts
from core.models.lexical import CorpusStats, LexicalDoc, Posting
from core.stores.redis.connection import RedisConnection

# Chunks as ARGV runs `chunk, length, n, term1, tf1, ... termn, tfn` after the term and
# chunk-terms key prefixes. One call writes each term's postings of all its chunks in one HSET
# and each chunk's terms in one SADD: ingestion's per-term commands were most of Redis's (61
# SADD and 45 HSET per chunk). Chunks already indexed are left as they are. `unpack` takes a
# few thousand values at most, so long lists go in slices.
_ADD = """
local function each_slice(command, key, values)
  for i = 1, #values, 1000 do
    redis.call(command, key, unpack(values, i, math.min(i + 999, #values)))
  end
end
local chunks, at = {}, {}
local i = 3
while i <= #ARGV do
  chunks[#chunks + 1], at[#chunks + 1] = ARGV[i], i
  i = i + 3 + 2 * tonumber(ARGV[i + 2])
end
local known, lengths, postings, order, total = {}, {}, {}, {}, 0
for s = 1, #chunks, 1000 do
  local found = redis.call('HMGET', KEYS[1], unpack(chunks, s, math.min(s + 999, #chunks)))
  for k = 1, #found do known[s + k - 1] = found[k] end
end
for c = 1, #chunks do
  if not known[c] then
    local chunk, j = chunks[c], at[c]
    lengths[#lengths + 1], lengths[#lengths + 2] = chunk, ARGV[j + 1]
    total = total + tonumber(ARGV[j + 1])
    local terms = {}
    for t = j + 3, j + 2 + 2 * tonumber(ARGV[j + 2]), 2 do
      local term = ARGV[t]
      local p = postings[term]
      if not p then p = {}; postings[term] = p; order[#order + 1] = term end
      p[#p + 1], p[#p + 2] = chunk, ARGV[t + 1]
      terms[#terms + 1] = term
    end
    if #terms > 0 then each_slice('SADD', ARGV[2] .. chunk, terms) end
  end
end
if #lengths == 0 then return 0 end
each_slice('HSET', KEYS[1], lengths)
redis.call('INCRBY', KEYS[2], total)
for _, term in ipairs(order) do each_slice('HSET', ARGV[1] .. term, postings[term]) end
return #lengths / 2
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
_ADD_BATCH = 100  # chunks per add script: one call of 100 runs ~10 ms inside Redis


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
        chunk_terms = f"{self.prefix}lex:{dataset}:c:"
        unique = list({d.chunk_id: d for d in docs}.values())
        with self._conn.errors():
            for start in range(0, len(unique), _PIPELINE_BATCH):
                pipe = self._redis.pipeline(transaction=False)
                part = unique[start : start + _PIPELINE_BATCH]
                for first in range(0, len(part), _ADD_BATCH):
                    args: list[str | int] = [terms, chunk_terms]
                    for doc in part[first : first + _ADD_BATCH]:
                        counts, length = term_counts(doc.text)
                        args += (doc.chunk_id, length, len(counts))
                        args += [x for term, tf in counts.items() for x in (term, tf)]
                    self._add(keys=[lengths, total], args=args, client=pipe)
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
