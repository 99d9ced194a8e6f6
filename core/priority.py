"""Searches before jobs, inside one process.

`cogmill serve` on the embedded broker runs a cognify job's steps on threads of the process
that answers searches. Their lower niceness gives searches the cores first, but not the
interpreter lock: a job thread descheduled at its lower priority while it holds the lock holds
every search up behind it. So the job's model work asks `Priority.wait_turn` at safe points
(before each half of an embedder layer, before each spaCy component of a batch), which waits
while a search runs: at most `most_wait_s` at a time, so a steady stream of searches slows a
job but cannot stall it.
Where nothing is `urgent` (a worker process, the CLI), `wait_turn` returns at once.
`wait_quiet` is for work that need not run while searches keep coming (a warm-up).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Pause = Callable[[], None]  # what background work calls at a safe point


def no_pause() -> None:
    """The `Pause` of work that never waits (nothing in the process is more urgent)."""


class Priority:
    """Counts the urgent calls in flight (`urgent`); background work waits for none
    (`wait_turn`)."""

    def __init__(self, most_wait_s: float = 0.25) -> None:
        if most_wait_s < 0:
            raise ValueError(f"most_wait_s must be at least 0, got {most_wait_s}")
        self.most_wait_s = most_wait_s
        self.waits = 0  # how often background work waited (tests, diagnostics)
        self._urgent = 0
        self._last_urgent = float("-inf")  # time.monotonic() when the last urgent block ended
        self._none_urgent = threading.Condition()

    @contextmanager
    def urgent(self) -> Iterator[None]:
        """Background work waits at its next safe point until this block (and every other
        urgent block) is done."""
        with self._none_urgent:
            self._urgent += 1
        try:
            yield
        finally:
            with self._none_urgent:
                self._urgent -= 1
                self._last_urgent = time.monotonic()
                if not self._urgent:
                    self._none_urgent.notify_all()

    def wait_turn(self) -> None:
        """Wait while urgent work runs, at most `most_wait_s`; return at once when none does."""
        if not self._urgent:  # the usual case, read without the lock: a stale 0 costs one turn
            return
        with self._none_urgent:
            self.waits += 1
            self._none_urgent.wait_for(lambda: not self._urgent, timeout=self.most_wait_s)

    def wait_quiet(self, quiet_s: float, timeout: float) -> bool:
        """Wait, for up to `timeout`, until no urgent work has run for `quiet_s`: for work that
        need not run at all while urgent work keeps coming (a warm-up: the searches warm the
        stores themselves). True when it is quiet."""
        deadline = time.monotonic() + timeout
        with self._none_urgent:
            while True:
                now = time.monotonic()
                quiet_at = self._last_urgent + quiet_s
                if not self._urgent and quiet_at <= now:
                    return True
                if now >= deadline:
                    return False
                until = deadline if self._urgent else min(quiet_at, deadline)
                self.waits += 1  # woken when the last urgent block ends, or when quiet
                self._none_urgent.wait(until - now)
