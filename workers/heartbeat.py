"""Worker liveness: every process that runs steps renews a short-lived key while it lives.

A worker killed with SIGKILL (an OOM kill, a lost node) stops renewing, its key expires within
`ttl` seconds, and the sweeper re-publishes the step it held (workers/sweeper.py) instead of
waiting for the broker's visibility timeout (an hour by default) to redeliver the message.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Iterable

from core.ports import StateStore, StoreError

log = logging.getLogger("cogmill.heartbeat")


def worker_id() -> str:
    """This process as claims name it: host and pid (a prefork child is a worker of its own)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _alive_key(worker: str) -> str:
    return f"worker:{worker}:alive"


class Heartbeat:
    """A daemon thread that keeps this process's liveness key for `ttl` seconds ahead."""

    def __init__(self, state: StateStore, ttl: float) -> None:
        self.state, self.ttl, self.worker = state, ttl, worker_id()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cogmill-heartbeat", daemon=True)

    def start(self) -> None:
        self.beat()  # alive before the first claim, so no claim ever names a silent worker
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def beat(self) -> None:
        self.state.put(_alive_key(self.worker), str(time.time()), ttl=self.ttl)

    def _loop(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                self.beat()
            except StoreError as err:  # Redis restarting: the next beat renews the key
                log.warning("heartbeat skipped: %s", err)


_beats: dict[int, Heartbeat] = {}
_lock = threading.Lock()


def ensure_heartbeat(state: StateStore, ttl: float) -> str:
    """Start this process's heartbeat once (again in a forked child); returns its worker id."""
    pid = os.getpid()
    with _lock:
        if pid not in _beats:
            for inherited in _beats.values():  # a fork copies the parent's record, not its thread
                inherited.stop()
            _beats.clear()
            beat = Heartbeat(state, ttl)
            beat.start()
            _beats[pid] = beat
        return _beats[pid].worker


def alive(state: StateStore, workers: Iterable[str]) -> set[str]:
    """The workers among `workers` whose heartbeat has not expired."""
    names = sorted(set(workers))
    values = state.get_many([_alive_key(w) for w in names]) if names else []
    return {name for name, value in zip(names, values, strict=True) if value is not None}
