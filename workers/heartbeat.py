"""Worker liveness: every process that runs steps renews a short-lived key while it lives,
listing the steps it is running.

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
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from core.ports import StateStore, StoreError

log = logging.getLogger("cogmill.heartbeat")


def worker_id() -> str:
    """This process as claims name it: host and pid (a prefork child is a worker of its own)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _alive_key(worker: str) -> str:
    return f"worker:{worker}:alive"


class Heartbeat:
    """A daemon thread that keeps this process's liveness key `ttl` seconds ahead, with the
    steps the process runs."""

    def __init__(self, state: StateStore, ttl: float) -> None:
        self.state, self.ttl, self.worker = state, ttl, worker_id()
        self._running: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cogmill-heartbeat", daemon=True)

    def start(self) -> None:
        self.beat()  # alive before the first claim, so no claim ever names a silent worker
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    @contextmanager
    def running(self, step: str) -> Iterator[None]:
        """List `step` in the beats while the block runs."""
        with self._lock:
            self._running[step] = self._running.get(step, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                if self._running[step] == 1:
                    del self._running[step]
                else:
                    self._running[step] -= 1

    def beat(self) -> None:
        with self._lock:
            running = sorted(self._running)
        self.state.put(_alive_key(self.worker), json.dumps(running), ttl=self.ttl)

    def _loop(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                self.beat()
            except StoreError as err:  # Redis restarting: the next beat renews the key
                log.warning("heartbeat skipped: %s", err)


_beats: dict[int, Heartbeat] = {}
_lock = threading.Lock()


def ensure_heartbeat(state: StateStore, ttl: float) -> Heartbeat:
    """This process's heartbeat, started on first use (again in a forked child)."""
    pid = os.getpid()
    with _lock:
        if pid not in _beats:
            for inherited in _beats.values():  # a fork copies the parent's record, not its thread
                inherited.stop()
            _beats.clear()
            beat = Heartbeat(state, ttl)
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
