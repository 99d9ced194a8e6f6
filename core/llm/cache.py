"""LLM responses cached in the state store by a hash of (model, messages, schema)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from core.ports import StateStore

KEY_PREFIX = "llm-cache:"


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
        """The cached reply, or None. Raises StoreError."""
        return self.state.get(KEY_PREFIX + key)

    def put(self, key: str, raw: str) -> None:
        """Store a validated reply. Raises StoreError."""
        self.state.put(KEY_PREFIX + key, raw, ttl=self.ttl)
