"""LLM responses cached in the state store by a hash of (model, messages, schema).

A reply is stored zlib-compressed (base64, behind a `z:` mark): extraction JSON shrinks about
4x, and the cache holds one reply per chunk and summary ingested within its TTL. A value
without the mark is read as it is.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import zlib
from collections.abc import Sequence
from typing import Any

from core.ports import StateStore

KEY_PREFIX = "llm-cache:"
_COMPRESSED = "z:"


def cache_key(model: str, messages: Sequence[dict[str, Any]], schema: dict[str, Any]) -> str:
    """A stable sha256 of what determines an answer: model, messages and output schema."""
    # sort_keys and fixed separators: the same request must hash the same in every process.
    payload = json.dumps(
        [model, list(messages), schema], sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class LLMCache:
    """Raw JSON replies by cache key in a StateStore, expiring after `ttl` seconds if given."""

    def __init__(self, state: StateStore, ttl: float | None = None) -> None:
        if ttl is not None and not ttl > 0:
            raise ValueError(f"ttl must be positive seconds or None, got {ttl!r}")
        self.state = state
        self.ttl = ttl

    def get(self, key: str) -> str | None:
        """The cached reply, or None (also for a compressed value that does not decode: the
        call is then made again). Raises StoreError."""
        stored = self.state.get(KEY_PREFIX + key)
        if stored is None or not stored.startswith(_COMPRESSED):
            return stored
        try:
            return zlib.decompress(base64.b64decode(stored[len(_COMPRESSED) :])).decode("utf-8")
        except (binascii.Error, zlib.error, UnicodeDecodeError):
            return None

    def put(self, key: str, raw: str) -> None:
        """Store a validated reply. Raises StoreError."""
        packed = base64.b64encode(zlib.compress(raw.encode("utf-8"), 6)).decode("ascii")
        self.state.put(KEY_PREFIX + key, _COMPRESSED + packed, ttl=self.ttl)
