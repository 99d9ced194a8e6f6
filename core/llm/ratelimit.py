"""Request and token rate limits for LLM calls: in-process, or one global bucket in Redis.

Both limiters reserve capacity up front: `acquire` takes its request and tokens at once,
letting the bucket go into debt, and sleeps until that debt is repaid. Callers are served
in arrival order with one bucket update each, with no polling and no herd of retries when
the limit is hit.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from typing import Any

from core.stores.redis.connection import RedisConnection


def _per_second(per_minute: float | None, name: str) -> float:
    """A per-minute limit as a per-second rate; 0 or None means unlimited."""
    if per_minute is None:
        return 0.0
    if per_minute < 0 or not math.isfinite(per_minute):
        raise ValueError(f"{name} must be a positive number, 0 or None, got {per_minute!r}")
    return per_minute / 60.0


class _Limits:
    """Rates and bucket sizes shared by both limiters."""

    def __init__(
        self, requests_per_minute: float | None, tokens_per_minute: float | None, burst: float
    ) -> None:
        if not burst > 0:
            raise ValueError(f"burst_seconds must be positive, got {burst!r}")
        self.request_rate = _per_second(requests_per_minute, "requests_per_minute")
        self.token_rate = _per_second(tokens_per_minute, "tokens_per_minute")
        # A bucket holds `burst` seconds of capacity (at least one request): a full minute's
        # worth at once would trip providers that also enforce limits over shorter windows.
        self.request_capacity = max(1.0, self.request_rate * burst)
        self.token_capacity = max(1.0, self.token_rate * burst)

    @property
    def unlimited(self) -> bool:
        return self.request_rate == 0 and self.token_rate == 0


class LocalRateLimiter:
    """A token bucket for one process; safe across threads and their event loops."""

    def __init__(
        self,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        *,
        burst_seconds: float = 1.0,
    ) -> None:
        self._limits = _Limits(requests_per_minute, tokens_per_minute, burst_seconds)
        # A thread lock, not an asyncio one: Celery threads each run their own event loop.
        self._lock = threading.Lock()
        self._requests = self._limits.request_capacity
        self._tokens = self._limits.token_capacity
        self._updated = time.monotonic()

    async def acquire(self, tokens: int = 0) -> None:
        """Wait until one request using about `tokens` tokens may be sent."""
        if self._limits.unlimited:
            return
        wait = self._reserve(max(0, tokens))
        if wait > 0:
            await asyncio.sleep(wait)

    def _reserve(self, tokens: int) -> float:
        """Take one request and `tokens` from the buckets; the seconds until they are repaid."""
        limits = self._limits
        with self._lock:
            now = time.monotonic()
            elapsed, self._updated = now - self._updated, now
            wait = 0.0
            if limits.request_rate:
                level = min(limits.request_capacity, self._requests + elapsed * limits.request_rate)
                self._requests = level - 1
                wait = max(wait, -self._requests / limits.request_rate)
            if limits.token_rate:
                level = min(limits.token_capacity, self._tokens + elapsed * limits.token_rate)
                self._tokens = level - tokens
                wait = max(wait, -self._tokens / limits.token_rate)
            return wait


# KEYS[1]: the bucket hash. ARGV: request rate/s, request capacity, token rate/s, token
# capacity, tokens wanted. Returns the wait in seconds as a string (Lua numbers would be
# truncated to integers). Redis TIME is the clock, so workers on other hosts agree on it.
_RESERVE_LUA = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1000000
local r_rate, r_cap = tonumber(ARGV[1]), tonumber(ARGV[2])
local t_rate, t_cap = tonumber(ARGV[3]), tonumber(ARGV[4])
local cost = tonumber(ARGV[5])
local state = redis.call('HMGET', KEYS[1], 'r', 't', 'ts')
local r = tonumber(state[1]) or r_cap
local t = tonumber(state[2]) or t_cap
local elapsed = math.max(0, now - (tonumber(state[3]) or now))
local wait, refill = 0, 0
if r_rate > 0 then
  r = math.min(r_cap, r + elapsed * r_rate) - 1
  wait = math.max(wait, -r / r_rate)
  refill = math.max(refill, (r_cap - r) / r_rate)
end
if t_rate > 0 then
  t = math.min(t_cap, t + elapsed * t_rate) - cost
  wait = math.max(wait, -t / t_rate)
  refill = math.max(refill, (t_cap - t) / t_rate)
end
redis.call('HSET', KEYS[1], 'r', tostring(r), 't', tostring(t), 'ts', tostring(now))
-- Once full again the bucket equals a missing one, so let it expire then.
redis.call('PEXPIRE', KEYS[1], math.ceil(refill * 1000) + 1000)
return tostring(wait)
"""


class RedisRateLimiter:
    """One token bucket in Redis shared by every worker process (updated by a Lua script)."""

    def __init__(
        self,
        redis_url: str,
        key: str,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        *,
        burst_seconds: float = 1.0,
        client: Any = None,
    ) -> None:
        """`client`: an open client to use instead of connecting to `redis_url`, e.g. a
        fakeredis one in tests; the limiter closes it."""
        if not key:
            raise ValueError("key must name the shared bucket, e.g. 'cogmill:ratelimit:gpt-4o'")
        self._limits = _Limits(requests_per_minute, tokens_per_minute, burst_seconds)
        self.key = key
        self._conn = RedisConnection(
            redis_url, role="rate limiter", decode_responses=False, socket_timeout=10, client=client
        )
        self.url, self._redis = self._conn.url, self._conn.client
        # register_script runs EVALSHA and loads the script again after a server restart.
        self._script = self._redis.register_script(_RESERVE_LUA)

    async def acquire(self, tokens: int = 0) -> None:
        """Wait until one request using about `tokens` tokens may be sent. Raises StoreError."""
        if self._limits.unlimited:
            return
        # The sync client in a thread: its pool works for any event loop, unlike redis.asyncio.
        wait = await asyncio.to_thread(self._reserve, max(0, tokens))
        if wait > 0:
            await asyncio.sleep(wait)

    def _reserve(self, tokens: int) -> float:
        """Reserve capacity in the shared bucket; the seconds to wait before sending."""
        limits = self._limits
        args = [
            repr(limits.request_rate),
            repr(limits.request_capacity),
            repr(limits.token_rate),
            repr(limits.token_capacity),
            str(tokens),
        ]
        with self._conn.errors():
            return float(self._script(keys=[self.key], args=args))

    def close(self) -> None:
        """Release connections."""
        self._conn.close()
