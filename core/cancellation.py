"""Stopping a running step whose job was cancelled: between documents, and inside a parse.

A worker runs each step inside `watching(stop)`, where `stop` asks the job's state whether
it was cancelled. A step calls `check()` before each document, and a wait on a parser's
child process asks `requested()` while it waits (pipelines/formats/isolated.py then kills
the child), so a cancel ends a running step within seconds instead of after its batch. `stop`
reads a store, so it is asked at most once per CHECK_SECONDS; once it said yes, it stays yes.
Outside `watching` (a CLI parse, a test) nothing is ever cancelled.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from core.errors import Conflict

CHECK_SECONDS = 1.0


class Cancelled(Conflict):
    """The job was cancelled while a step ran; the step stopped and stored nothing."""

    code = "job_cancelled"


class _Watch:
    """`stop`, asked at most once per `every` seconds."""

    def __init__(self, stop: Callable[[], bool], every: float) -> None:
        self.stop, self.every = stop, every
        self.asked_at = -math.inf
        self.stopped = False

    def __call__(self) -> bool:
        now = time.monotonic()
        if not self.stopped and now - self.asked_at >= self.every:
            self.asked_at = now  # threads racing here cost one more read, nothing else
            self.stopped = bool(self.stop())
        return self.stopped


_WATCH: ContextVar[_Watch | None] = ContextVar("cogmill_cancel_watch", default=None)


@contextmanager
def watching(stop: Callable[[], bool], every: float = CHECK_SECONDS) -> Iterator[None]:
    """Within the block, `requested()` and `check()` ask `stop` (at most once per `every` s)."""
    token = _WATCH.set(_Watch(stop, every))
    try:
        yield
    finally:
        _WATCH.reset(token)


def requested() -> bool:
    """True once the work this thread runs was asked to stop."""
    watch = _WATCH.get()
    return watch is not None and watch()


def check() -> None:
    """Raise Cancelled when the work this thread runs was asked to stop."""
    if requested():
        raise Cancelled("the job was cancelled; its running step stopped before the next document")
