"""The load run's traffic: API clients calling every route in turn, one following a job's event
stream to its end, and cognify jobs back to back so that one runs all the while.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.loadtest.stack import Stack

SEARCH_TYPES = [
    "CHUNKS",
    "CHUNKS_LEXICAL",
    "SUMMARIES",
    "GRAPH_COMPLETION",
    "GRAPH_PPR",
    "TEMPORAL",
    None,
]
# The job's routes first: each client's first call reads the job started with them, so some
# polls see it running. Later turns can miss every running job: a turn is about as long as a
# job of the short CI run (a routed search and a recall take seconds each), so the clients'
# polls and the jobs' gaps can keep step for the whole run, as in one CI failure.
ROUTES = ["job", "events", *(f"search:{t or 'routed'}" for t in SEARCH_TYPES), "remember", "recall"]
QUESTIONS = [
    "Who met Ada Lovelace in London?",
    "What did Charles Babbage write about the Engine?",
    "Which reports did Grace Hopper review?",
    "What happened in 1845?",
    "Where did Alan Turing meet John von Neumann?",
]
MAX_JOBS = 1000  # back to back in one load run, at most
MAX_EVENT_LINES = 100_000  # read from one event stream at most
NOTES_PER_SESSION = 20  # a client starts a new session after this many notes


@dataclass
class Sample:
    route: str
    seconds: float
    error: str | None


@dataclass
class Recorder:
    """Every request's route, latency and error (None when it succeeded), from all threads."""

    samples: list[Sample] = field(default_factory=list)
    running_polls: int = 0  # job polls that found the job still queued or running
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, route: str, seconds: float, error: str | None) -> None:
        with self.lock:
            self.samples.append(Sample(route, seconds, error))

    def errors(self) -> list[str]:
        return [f"{s.route}: {s.error}" for s in self.samples if s.error is not None]


@dataclass(frozen=True)
class Target:
    """What the clients call about: the searched datasets and the job they poll and stream."""

    datasets: list[str]
    job_id: str


class JobLoop(threading.Thread):
    """Cognify jobs back to back, each on a new dataset of fresh text, so one is running all
    the while the clients call; none starts after `until` (time.monotonic()). The clients
    search the seed dataset and the one being cognified, and poll and stream its job."""

    def __init__(self, stack: Stack, seed: str, until: float) -> None:
        super().__init__(daemon=True)
        self.stack, self.seed, self.until = stack, seed, until
        self.finished: list[dict[str, Any]] = []
        self.error: str | None = None
        self.target = self._start()

    def _start(self) -> Target:
        dataset = self.stack.add_dataset(self.stack.config.documents)
        return Target([self.seed, dataset], self.stack.cognify(dataset))

    def run(self) -> None:
        try:
            for _ in range(MAX_JOBS):
                job = self.stack.wait_job(self.target.job_id, self.stack.config.deadline_s)
                self.finished.append(job)
                if job["status"] != "succeeded" or time.monotonic() >= self.until:
                    return
                self.target = self._start()
        except (httpx.HTTPError, TimeoutError) as err:
            self.error = f"{type(err).__name__}: {err}"


class Client:
    """One API client's mix: every route in turn, starting at its own offset."""

    def __init__(self, base_url: str, index: int, target: Callable[[], Target]) -> None:
        self.http = httpx.Client(base_url=base_url, timeout=60)
        self.index, self.target = index, target
        self.notes = 0
        self.running_polls = 0

    def question(self, step: int) -> str:
        return QUESTIONS[(self.index + step) % len(QUESTIONS)]

    def call(self, route: str, step: int, hold_s: float) -> float | None:
        """One request of `route`; raises RuntimeError for anything but a 2xx. Returns the
        seconds to the first event for `events` (the latency a reader feels), else None."""
        target = self.target()
        if route.startswith("search:"):
            kind = route.split(":", 1)[1]
            body: dict[str, Any] = {"query": self.question(step), "datasets": target.datasets}
            if kind != "routed":
                body.update(search_type=kind, top_k=5)
            self._check(self.http.post("/api/v1/search", json=body))
        elif route == "remember":
            self.notes += 1
            text = f"Client {self.index} noted fact {self.notes}: {self.question(step)}"
            self._check(self.http.post("/api/v1/remember", json={"text": text, **self._session()}))
        elif route == "recall":
            body = {"query": self.question(step), **self._session(), "datasets": target.datasets}
            self._check(self.http.post("/api/v1/recall", json={**body, "top_k": 5}))
        elif route == "job":
            response = self.http.get(f"/api/v1/jobs/{target.job_id}")
            self._check(response)
            self.running_polls += response.json()["status"] in ("queued", "running")
        elif route == "events":
            return read_events(self.http, target.job_id, hold_s)[0]
        return None

    def _session(self) -> dict[str, str]:
        return {"session": f"load-{self.index}-{self.notes // NOTES_PER_SESSION}"}

    @staticmethod
    def _check(response: httpx.Response) -> None:
        if not response.is_success:
            raise RuntimeError(f"HTTP {response.status_code} {response.text[:300]}")


def read_events(http: httpx.Client, job_id: str, hold_s: float) -> tuple[float, list[str]]:
    """Seconds to the first event and the kinds of the job's events read within `hold_s` (or
    until the stream ends, which it must do with `finished`); raises RuntimeError for a
    non-2xx or a stream without events."""
    kinds: list[str] = []
    started = time.perf_counter()
    first = 0.0
    with http.stream("GET", f"/api/v1/jobs/{job_id}/events") as response:
        if not response.is_success:
            response.read()
            raise RuntimeError(f"HTTP {response.status_code} {response.text[:300]}")
        for line in itertools.islice(response.iter_lines(), MAX_EVENT_LINES):
            if line.startswith("event: "):
                first = first or time.perf_counter() - started
                kinds.append(line[len("event: ") :])
            if kinds and time.perf_counter() - started > hold_s:
                return first, kinds  # closed early, as a browser tab that goes away
        if not kinds or kinds[-1] != "finished":
            raise RuntimeError(f"event stream ended without `finished`: {kinds}")
    return first, kinds


def run_clients(stack: Stack, jobs: JobLoop, until: Callable[[], bool]) -> Recorder:
    """`config.clients` threads calling every route in turn, plus one that follows the first
    job's event stream to the end, until `until()` is true, a client's count or the deadline."""
    config, recorder = stack.config, Recorder()
    deadline = time.monotonic() + config.deadline_s
    first_job = jobs.target.job_id

    def client(index: int) -> None:
        api = Client(stack.base_url, index, lambda: jobs.target)
        with api.http:
            for step in range(config.max_requests):
                if until() or time.monotonic() > deadline:
                    break
                route = ROUTES[(index + step) % len(ROUTES)]
                started = time.perf_counter()
                error, latency = None, None
                try:
                    latency = api.call(route, step, config.sse_hold_s)
                except Exception as err:  # noqa: BLE001 - every exception is a counted error
                    error = f"{type(err).__name__}: {err}"
                recorder.add(route, latency or time.perf_counter() - started, error)
        with recorder.lock:
            recorder.running_polls += api.running_polls

    def follower() -> None:
        started, error = time.perf_counter(), None
        with httpx.Client(base_url=stack.base_url, timeout=60) as http:
            try:
                _, kinds = read_events(http, first_job, hold_s=config.deadline_s)
                if "progress" not in kinds:
                    error = f"no progress event in {kinds}"
            except Exception as err:  # noqa: BLE001 - every exception is a counted error
                error = f"{type(err).__name__}: {err}"
        recorder.add("events:follow", time.perf_counter() - started, error)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(config.clients)]
    threads.append(threading.Thread(target=follower))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(config.deadline_s + 120)
    return recorder


def warm_up(stack: Stack, seed: str) -> None:
    """Every route once, so modules and connection pools load before RSS is watched."""
    target = Target([seed], stack.cognify(seed))  # nothing to do: finished at once
    api = Client(stack.base_url, 0, lambda: target)
    with api.http:
        for step, route in enumerate(ROUTES):
            api.call(route, step, hold_s=1.0)
