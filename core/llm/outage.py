"""LLM and embeddings calls that gave up while the endpoint was unavailable.

A call that failed every attempt with a retryable error (timeout, 429, 5xx, connection) says
nothing about its input: the endpoint may answer a minute later. The worker running a step
watches for such calls (`watching`) and runs the step again after a pause instead of turning
its documents into errors at once (workers/tasks.py); the LLM cache makes the calls that did
succeed free the second time. A call refused as not retryable, or answered with an invalid
reply every time, is not an outage and is not counted.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field


@dataclass
class Outage:
    """How many calls gave up for want of an answer while it was current."""

    calls: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self) -> None:
        with self._lock:
            self.calls += 1


_current: ContextVar[Outage | None] = ContextVar("cogmill_outage", default=None)


@contextmanager
def watching() -> Iterator[Outage]:
    """Count the calls made in this context (and the asyncio tasks it starts) that gave up
    because the endpoint did not answer."""
    outage = Outage()
    token = _current.set(outage)
    try:
        yield outage
    finally:
        _current.reset(token)


def gave_up() -> None:
    """A call gave up after its attempts, each a retryable failure (no-op when unwatched)."""
    if (outage := _current.get()) is not None:
        outage.add()
