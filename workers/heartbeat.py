"""Worker liveness: every process that takes steps renews a short-lived key while it lives,
listing the steps it holds.

A worker killed with SIGKILL (an OOM kill, a lost node) stops renewing, its key expires within
`ttl` seconds, and the sweeper re-publishes the steps it held (workers/sweeper.py) instead of
waiting for the broker's visibility timeout (an hour by default) to redeliver the messages. A
step claimed as running that its live worker does not list (its end was lost with a Redis
crash, or the claim outlived its run) is re-published the same way.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable

from core.ports import StateStore, StoreError

log = logging.getLogger("cogmill.heartbeat")


def worker_id() -> str:
    """This process as claims name it: host and pid (a prefork child is a worker of its own)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _alive_key(worker: str) -> str:
    return f"worker:{worker}:alive"


class Heartbeat:
    """A daemon thread that keeps this process's liveness key `ttl` seconds ahead, with the
    steps the process holds (received, running, or handing its batch on to the next step).
    `dropped`, when given, names held steps the process no longer has: each beat releases them
    before it writes."""

    def __init__(
        self,
        state: StateStore,
        ttl: float,
        max_hold: float,
        dropped: Callable[[], Iterable[str]] | None = None,
    ) -> None:
        self.state, self.ttl, self.max_hold, self.worker = state, ttl, max_hold, worker_id()
        self.dropped = dropped
        self._held: dict[str, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cogmill-heartbeat", daemon=True)

    def start(self) -> None:
        self.beat()  # alive before the first claim, so no claim ever names a silent worker
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def hold(self, step: str) -> None:
        """List `step` in the beats (until `release`, or for at most `max_hold` seconds)."""
        with self._lock:
            self._held.setdefault(step, time.monotonic())

    def release(self, step: str) -> None:
        with self._lock:
            self._held.pop(step, None)

    def beat(self) -> None:
        for step in self.dropped() if self.dropped else ():
            self.release(step)
        with self._lock:
            expired = time.monotonic() - self.max_hold
            self._held = {step: at for step, at in self._held.items() if at > expired}
            held = sorted(self._held)
        self.state.put(_alive_key(self.worker), json.dumps(held), ttl=self.ttl)

    def _loop(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                self.beat()
            except StoreError as err:  # Redis restarting: the next beat renews the key
                log.warning("heartbeat skipped: %s", err)


_beats: dict[int, Heartbeat] = {}
_lock = threading.Lock()


def ensure_heartbeat(
    state: StateStore,
    ttl: float,
    max_hold: float,
    dropped: Callable[[], Iterable[str]] | None = None,
) -> Heartbeat:
    """This process's heartbeat, started on first use (again in a forked child)."""
    pid = os.getpid()
    with _lock:
        if pid not in _beats:
            for inherited in _beats.values():  # a fork copies the parent's record, not its thread
                inherited.stop()
            _beats.clear()
            beat = Heartbeat(state, ttl, max_hold, dropped)
            beat.start()
            _beats[pid] = beat
        return _beats[pid]


def running_steps(state: StateStore, workers: Iterable[str]) -> dict[str, set[str]]:
    """The steps each live worker among `workers` runs (a dead worker is absent)."""
    names = sorted(set(workers))
    values = state.get_many([_alive_key(w) for w in names]) if names else []
    return {
        name: set(json.loads(value))
        for name, value in zip(names, values, strict=True)
        if value is not None
    }
