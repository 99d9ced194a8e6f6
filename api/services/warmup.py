"""Warm a graph server before users' searches meet it cold: the use case behind `cogmill
serve`'s warm-up.

A Neo4j server plans each statement on its first run and its JVM compiles the hot paths only
after some hundreds of runs. On the 1x MuSiQue store, through the API, the first hundred
GRAPH_PPR questions after a start took p50 / p95 67-74 / 360-371 ms, and 51-54 / 84 after a
warm-up of 200 questions (docs/benchmarks.md, Search latency). `Warmer` runs `queries`
searches' context retrievals (GRAPH_PPR and CHUNKS on names stored in the datasets; no LLM,
no session) when the API starts, and again whenever the server's start time changes: a Neo4j
restarted under a running API is warmed too. Each waits for a pause in users' searches. The
embedded stores have no server to warm (`server_started` is Neo4j's alone).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from api.services.datasets import names
from core.models.vocabulary import ENTITY
from core.ports import StoreError
from retrieval.models import SearchType
from retrieval.registry import RETRIEVERS
from runtime import Runtime

log = logging.getLogger("cogmill.api")

CHECK_S = 30.0  # how often the server's start time is read
STOP_WAIT_S = 5.0  # a stopping API waits this long for the thread (a question takes ~0.1 s)
MAX_DATASETS = 4  # the plans and the JVM's code are shared by all; the page cache is not
TYPES = (SearchType.GRAPH_PPR, SearchType.CHUNKS)
TOP_K = 10
# Users' searches first: a warm-up question waits for this long a pause in them. Searches that
# keep coming warm the server themselves (and queried during a warm-up, a cold server answered
# the first hundred GRAPH_PPR questions at p50 124 ms instead of 67-74 without one).
QUIET_S = 1.0


@dataclass(frozen=True)
class Warmed:
    """One warm-up: the searches it ran, over how many datasets, in how long."""

    queries: int
    datasets: int
    seconds: float


def questions(rt: Runtime, count: int) -> list[tuple[str, str]]:
    """Up to `count` (dataset, question) pairs, each question naming two entities stored in
    the dataset, spread over the first `MAX_DATASETS` datasets of every tenant."""
    stored = names(rt, None)[:MAX_DATASETS]
    per = -(-count // len(stored)) if stored else 0
    pairs = []
    for dataset in stored:
        found = [n.name for n in rt.graph.find_nodes(dataset, ENTITY, limit=2 * per) if n.name]
        pairs += [
            (dataset, f"How is {a} related to {b}?")
            for a, b in zip(found[::2], found[1::2], strict=False)  # an odd one out is left
        ]
    return pairs[:count]


def warm_up(rt: Runtime, count: int, stop: Callable[[], bool] = lambda: False) -> Warmed:
    """Run the searches' retrievals on `count` questions (each by every type in TYPES), each
    once users' searches pause, until done or `stop()`. Raises StoreError when a store fails."""
    started = time.monotonic()
    ctx = rt.retrieval()
    retrievers = [RETRIEVERS.create(kind, ctx) for kind in TYPES]
    asked = questions(rt, count)
    done = 0
    for dataset, question in asked:
        if not _quiet(rt, stop):
            break
        for retriever in retrievers:
            retriever.get_context(question, [dataset], TOP_K)
        done += 1
    return Warmed(done, len({d for d, _ in asked}), time.monotonic() - started)


def _quiet(rt: Runtime, stop: Callable[[], bool]) -> bool:
    """Wait until no user's search has run for `QUIET_S` (False: told to stop meanwhile)."""
    while not stop():
        if rt.priority.wait_quiet(QUIET_S, timeout=1.0):
            return True
    return False


def server_started(rt: Runtime) -> int | None:
    """When the graph server started (None: the graph has no server of its own). Raises
    StoreError."""
    started = getattr(rt.graph, "server_started", None)
    return started() if started is not None else None


class Warmer:
    """`warm_up` on a thread of its own: at start, then each time the graph server's start
    time (checked every `check_s`) differs from the one last warmed. `state` is "warming"
    while a warm-up runs or waits for the server, "warm" after; a store error is tried again
    at the next check, any other error is logged and leaves the state "off" until the server
    starts anew.
    """

    def __init__(
        self,
        rt: Runtime,
        queries: int,
        check_s: float = CHECK_S,
    ) -> None:
        self.rt, self.queries, self.check_s = rt, queries, check_s
        self._stop = threading.Event()
        self.state = "warming"
        self.last: Warmed | None = None
        self.rounds = 0  # warm-ups done: one per server start seen
        self._thread = threading.Thread(target=self._run, name="cogmill-warm-up", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to stop and wait a little: a read of a server that went away can
        retry for the driver's 30 s, and the daemon thread must not hold the API's shutdown."""
        self._stop.set()
        self._thread.join(timeout=STOP_WAIT_S)

    def _run(self) -> None:
        warmed_for: int | None = None
        while not self._stop.is_set():
            started = None
            try:
                started = server_started(self.rt)
                if started is not None and started != warmed_for:
                    self.state = "warming"
                    self.last = warm_up(self.rt, self.queries, self._stop.is_set)
                    warmed_for, self.state = started, "warm"
                    self.rounds += 1
                    log.info(
                        "warm_up_done queries=%d datasets=%d seconds=%.1f",
                        self.last.queries,
                        self.last.datasets,
                        self.last.seconds,
                    )
            except StoreError as err:  # the server went away: tried again at the next check
                log.warning("warm_up_failed: %s (tried again in %.0f s)", err, self.check_s)
            except Exception:  # noqa: BLE001 - a bug: logged; not tried again on this server
                log.exception("warm_up_failed")
                warmed_for, self.state = started, "off"
            self._stop.wait(self.check_s)
