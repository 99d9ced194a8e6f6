"""Batch mode's first pass over a step: the LLM requests the cache cannot answer are noted
instead of sent, to go to the Batch API as one file (workers/llm_batches/).

While `collecting()` is open in a context (a thread, and the asyncio tasks it starts copy
it), the LLM client asks `defer` before it sends a request the cache did not answer: the
request is noted by its cache key and the client fails that one call with an LLMError, which
every step takes like an endpoint failure of that call. The step's output of such a pass is
thrown away; its requests are what counts.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

# The message of the LLMError a deferred call fails with.
DEFERRED = "deferred to the Batch API (batch mode's first pass: nothing was sent)"


@dataclass(frozen=True)
class Deferred:
    """One chat request for the Batch API; `key` is its LLM cache key (its custom_id)."""

    key: str
    model: str
    messages: list[dict[str, Any]]
    schema: type[BaseModel]
    schema_json: dict[str, Any]


@dataclass
class Collector:
    """The requests deferred while it is current, one per cache key, in the order asked."""

    requests: dict[str, Deferred] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, request: Deferred) -> None:
        with self._lock:
            self.requests.setdefault(request.key, request)

    def deferred(self) -> list[Deferred]:
        with self._lock:
            return list(self.requests.values())


_collector: ContextVar[Collector | None] = ContextVar("cogmill_deferral", default=None)


@contextmanager
def collecting() -> Iterator[Collector]:
    """Defer the uncached LLM requests made in this context during the block."""
    collector = Collector()
    token = _collector.set(collector)
    try:
        yield collector
    finally:
        _collector.reset(token)


def defer(
    key: str,
    model: str,
    messages: Sequence[dict[str, Any]],
    schema: type[BaseModel],
    schema_json: dict[str, Any],
) -> bool:
    """Note a request the cache did not answer when a collector is current: True then, and
    the caller must not send it (it fails the call with DEFERRED)."""
    collector = _collector.get()
    if collector is None:
        return False
    collector.add(Deferred(key, model, list(messages), schema, schema_json))
    return True
