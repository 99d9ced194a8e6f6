"""Job state, counters, sets and event streams in Redis (distributed mode)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import redis

from core.sequences import batched
from core.stores.redis.connection import RedisConnection

_GLOB_SPECIAL = re.compile(r"([\\*?\[\]])")
# add_members: ARGV[i] says how many of the members after the counts go to KEYS[i]; each set
# is added to, then read whole. SADD takes at most 1,000 at a time (Lua's unpack is bounded).
_ADD_MEMBERS = """
local at, out = #KEYS + 1, {}
for i, key in ipairs(KEYS) do
  local last = at + tonumber(ARGV[i]) - 1
  for j = at, last, 1000 do
    redis.call('SADD', key, unpack(ARGV, j, math.min(j + 999, last)))
  end
  at = last + 1
  out[i] = redis.call('SMEMBERS', key)
end
return out
"""

# reserve: KEYS[1] a counter, ARGV amount, limit, ttl in ms. INCRBY only when the sum stays
# within the limit (one script: no other client runs between the read and the add).
_RESERVE = """
local current = redis.call('GET', KEYS[1])
local total = tonumber(current or '0')
if total == nil then return redis.error_reply('not an integer') end
total = total + tonumber(ARGV[1])
if total > tonumber(ARGV[2]) then return false end
redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return total
"""
# release: KEYS[1] a counter, ARGV[1] the amount; gone at zero (or below, once expired).
_RELEASE = """
local total = redis.call('DECRBY', KEYS[1], ARGV[1])
if total <= 0 then redis.call('DEL', KEYS[1]) end
return total
"""


class RedisStateStore:
    """StateStore on Redis; keys live under `prefix` so several users can share one server."""

    def __init__(self, url: str, *, prefix: str = "cogmill:", client: Any = None) -> None:
        """`client`: an open client (decode_responses=True) to use instead of connecting to
        `url`, e.g. a fakeredis one in tests; the store closes it."""
        self._conn = RedisConnection(url, client=client)
        self.url, self.prefix, self._redis = self._conn.url, prefix, self._conn.client
        self._add_members = self._redis.register_script(_ADD_MEMBERS)
        self._reserve = self._redis.register_script(_RESERVE)
        self._release = self._redis.register_script(_RELEASE)

    def _key(self, key: str) -> str:
        return self.prefix + key

    def put(self, key: str, value: str, *, ttl: float | None = None) -> None:
        """Set a string value, expiring after `ttl` seconds when given. Raises StoreError."""
        # PX, not EX: TTLs below a second are legitimate; a plain SET also clears an old TTL.
        px = _milliseconds(ttl) if ttl is not None else None
        with self._conn.errors():
            self._redis.set(self._key(key), value, px=px)

    def get(self, key: str) -> str | None:
        """The value, or None when missing or expired."""
        with self._conn.errors():
            return self._redis.get(self._key(key))

    def get_many(self, keys: Sequence[str]) -> list[str | None]:
        """Each key's value in order (None where missing or expired), in one round trip."""
        if not keys:
            return []
        with self._conn.errors():
            return self._redis.mget([self._key(key) for key in keys])

    def delete(self, *keys: str) -> None:
        """Remove keys of any kind (no error when missing): one DEL per 1,000."""
        with self._conn.errors():
            for part in batched(keys, 1000):
                self._redis.delete(*(self._key(key) for key in part))

    def keys(self, prefix: str) -> list[str]:
        """Live keys of any kind starting with `prefix`, sorted."""
        pattern = _GLOB_SPECIAL.sub(r"\\\1", self.prefix + prefix) + "*"
        with self._conn.errors():
            # SCAN may return a key more than once; the set removes repeats.
            found = set(self._redis.scan_iter(match=pattern, count=1000))
        return sorted(key[len(self.prefix) :] for key in found)

    def incr(self, key: str, amount: int = 1) -> int:
        """Atomically add to an integer counter and return the new value. ValueError if not one."""
        with self._conn.errors():
            try:
                return self._redis.incrby(self._key(key), amount)
            except redis.ResponseError as err:
                if "not an integer" not in str(err):
                    raise
                raise ValueError(f"key {key!r} does not hold an integer counter") from None

    def incr_many(self, amounts: Mapping[str, int]) -> None:
        """INCRBY each key by its amount in one round trip (a pipeline, not a transaction: each
        counter is still atomic, and the caller reads none of them back). Raises StoreError;
        ValueError when a key does not hold an integer (the others are still added)."""
        if not amounts:
            return
        with self._conn.errors():
            pipe = self._redis.pipeline(transaction=False)
            for key, amount in amounts.items():
                pipe.incrby(self._key(key), amount)
            replies = pipe.execute(raise_on_error=False)
        bad = [k for k, r in zip(amounts, replies, strict=True) if isinstance(r, Exception)]
        if bad:
            raise ValueError(f"key {bad[0]!r} does not hold an integer counter")

    def reserve(self, key: str, amount: int, limit: int, *, ttl: float) -> int | None:
        """Add `amount` to a counter if the sum stays within `limit` (one script, atomic): the
        new sum, or None. The counter expires `ttl` s after the last reservation."""
        args = [amount, limit, _milliseconds(ttl)]
        with self._conn.errors():
            try:
                total = self._reserve(keys=[self._key(key)], args=args)
            except redis.ResponseError as err:
                if "not an integer" not in str(err):
                    raise
                raise ValueError(f"key {key!r} does not hold an integer counter") from None
        return None if total is None else int(total)

    def release(self, key: str, amount: int) -> None:
        """Take back a reservation; the counter is removed at zero or below."""
        with self._conn.errors():
            self._release(keys=[self._key(key)], args=[amount])

    def add_member(self, key: str, member: str, *, ttl: float | None = None) -> bool:
        """Add to a set; True when the member was new. With `ttl`, the set expires then."""
        with self._conn.errors():
            if ttl is None:
                return self._redis.sadd(self._key(key), member) == 1
            pipe = self._redis.pipeline(transaction=True)
            pipe.sadd(self._key(key), member)
            pipe.pexpire(self._key(key), _milliseconds(ttl))
            added, _ = pipe.execute()
            return added == 1

    def remove_member(self, key: str, member: str) -> bool:
        """Remove from a set; True when the member was there."""
        with self._conn.errors():
            return self._redis.srem(self._key(key), member) == 1

    def count_members(self, key: str) -> int:
        """Size of a set (0 when missing)."""
        with self._conn.errors():
            return self._redis.scard(self._key(key))

    def add_members(self, members: Mapping[str, Sequence[str]]) -> dict[str, set[str]]:
        """Add members to several sets, then return each of those sets whole (one script call,
        atomic; a MULTI pipeline of SADDs and SMEMBERS cost the caller 4x the CPU)."""
        if not members:
            return {}
        keys = list(members)
        args: list[str | int] = [len(members[key]) for key in keys]
        for key in keys:
            args.extend(members[key])
        with self._conn.errors():
            replies = self._add_members(keys=[self._key(key) for key in keys], args=args)
        return {key: set(reply) for key, reply in zip(keys, replies, strict=True)}

    def append_event(self, stream: str, event: str) -> int:
        """Append to an ordered stream and return the event's sequence number (from 1)."""
        # A stream is a list that is only ever appended to, so the length RPUSH returns
        # (atomically) is the event's number and list index + 1 is every event's number.
        with self._conn.errors():
            return self._redis.rpush(self._key(stream), event)

    def read_events(
        self, stream: str, *, after: int = 0, limit: int = 1000
    ) -> list[tuple[int, str]]:
        """Events with sequence numbers above `after`, oldest first. ValueError on limit < 1."""
        if after < 0 or limit < 1:
            raise ValueError(f"need after >= 0 and limit >= 1, got after={after}, limit={limit}")
        with self._conn.errors():
            events = self._redis.lrange(self._key(stream), after, after + limit - 1)
        return [(after + 1 + i, event) for i, event in enumerate(events)]

    def close(self) -> None:
        """Close the connection pool (idempotent)."""
        self._conn.close()


def _milliseconds(ttl: float) -> int:
    if ttl <= 0:
        raise ValueError(f"ttl must be positive seconds, got {ttl!r}")
    return math.ceil(ttl * 1000)
