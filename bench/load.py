"""Load and soak: concurrent API clients against `cogmill serve` while a cognify job runs.

    .venv/bin/python bench/load.py                                # both pools, 8 clients
    .venv/bin/python bench/load.py --pool prefork --clients 4 --duration 60

Distributed mode, all on loopback: `cogmill worker` processes (`--pool threads` or `prefork`)
on Redis, Neo4j graph + Neo4j vectors, the LLM and the embeddings behind tests/llm_server.py,
and the API as a `cogmill serve` subprocess. First an undisturbed cognify job (fresh text, no
LLM cache hits) gives the job's throughput without traffic; then jobs of the same size (fresh
text again) run back to back for the whole load phase while N clients search (every common
type), remember and recall in sessions, poll the running job and read its event stream, and
one more client follows the first job's stream from start to finish. Prints requests/s,
p50/p95/p99 per route, every error (any non-2xx or exception), the server's RSS sampled from
/proc every second (start, peak, end, slope after warm-up) and the jobs' chunks/s beside the
undisturbed run's. Every loop is bounded by a count and a deadline.
Needs Redis and Neo4j (`deploy/services.sh start`; the URLs below are its defaults).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.llm_server import LLMTestServer  # noqa: E402

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
PEOPLE = ["Ada Lovelace", "Charles Babbage", "Grace Hopper", "Alan Turing", "John von Neumann"]
CITIES = ["London", "Paris", "Philadelphia", "Princeton", "Manchester"]
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
class LoadConfig:
    """One load run: the stack, the corpus, the traffic and its bounds."""

    pool: str = "threads"
    clients: int = 8
    duration_s: float = 600.0  # clients run this long (and until the last job has finished)
    warmup_s: float = 120.0  # RSS growth and slope are measured after this
    deadline_s: float = 900.0  # hard limit of the loaded phase, whatever happens
    max_requests: int = 100_000  # per client
    documents: int = 200  # per job; the seed dataset the clients search has as many
    batch_size: int = 4
    workers: int = 2
    concurrency: int = 2  # per worker process
    llm_latency_ms: float = 200.0
    sse_hold_s: float = 2.0  # a client reads a job's event stream this long, then closes it
    baseline: bool = True  # run the undisturbed job first
    redis_url: str = "redis://127.0.0.1:6390/8"
    neo4j_uri: str = "bolt://127.0.0.1:7697"


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


def write_corpus(tag: str, count: int) -> list[dict[str, str]]:
    """`count` short notes linked through shared names, places and years; `tag` makes the text
    new (no LLM cache hits) for every call."""
    docs = []
    for i in range(count):
        a, b = PEOPLE[i % len(PEOPLE)], PEOPLE[(i + 2) % len(PEOPLE)]
        city, year = CITIES[i % len(CITIES)], 1840 + i % 30
        text = (
            f"Note {i}-{tag}. {a} met {b} in {city} on 3 March {year}.\n\n"
            f"{a} wrote Report {i}-{tag} about Engine {i % 7}. {b} reviewed Report {i}-{tag} "
            f"in {year + 1}. The Engine {i % 7} was shown in {CITIES[(i + 1) % len(CITIES)]}."
        )
        docs.append({"name": f"note-{i:04d}.txt", "text": text})
    return docs


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS, VmHWM (KiB) and Threads of a live process, from /proc."""
    wanted = {"VmRSS", "VmHWM", "Threads"}
    status = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in wanted:
            status[key] = int(value.split()[0])
    return status


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


class Stack:
    """The test LLM, worker processes and `cogmill serve`, all on 127.0.0.1; a context manager.
    Everything it stored (datasets, Redis keys under its own prefix) is removed on exit."""

    def __init__(self, config: LoadConfig) -> None:
        self.config = config
        self.home = Path(tempfile.mkdtemp(prefix="cogmill-load-"))
        self.prefix = f"load-{uuid.uuid4().hex[:8]}:"
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.datasets: list[str] = []
        self.llm = LLMTestServer(
            latency_ms=config.llm_latency_ms, embedding_latency_ms=0, embedding_dim=384
        )

    def env(self) -> dict[str, str]:
        url = self.config.redis_url
        return {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "COGMILL_HOME": str(self.home),
            "COGMILL_BROKER_URL": url,
            "COGMILL_RESULT_BACKEND": url,
            "COGMILL_REDIS_URL": url,
            "COGMILL_REDIS_PREFIX": self.prefix,
            "COGMILL_NEO4J_URI": self.config.neo4j_uri,
            "COGMILL_VECTOR_STORE": "neo4j",
            "COGMILL_LLM_BASE_URL": self.llm.base_url,
            "COGMILL_EMBEDDING_BASE_URL": self.llm.base_url,
            "COGMILL_EMBEDDING_DIM": "384",
            "COGMILL_BATCH_SIZE": str(self.config.batch_size),
            "COGMILL_LOG_LEVEL": os.environ.get("COGMILL_LOG_LEVEL", "WARNING"),
        }

    def _spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = (self.home / f"{name}.log").open("w")
        cmd = [sys.executable, "-m", "api.cli", *args]
        proc = subprocess.Popen(cmd, env=self.env(), cwd=ROOT, stdout=log, stderr=log)
        self.procs.append(proc)
        return proc

    def __enter__(self) -> Stack:
        self.llm.__enter__()
        try:
            for i in range(self.config.workers):
                pool = ["--pool", self.config.pool, "--concurrency", str(self.config.concurrency)]
                self._spawn(f"worker-{i}", "worker", *pool)
            self.server = self._spawn(
                "api", "serve", "--host", "127.0.0.1", "--port", str(self.port)
            )
            self.http = httpx.Client(base_url=self.base_url, timeout=60)
            self._wait_ready()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _wait_ready(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        for _ in range(int(timeout * 2)):
            if time.monotonic() > deadline:
                break
            if self.server.poll() is not None:
                raise RuntimeError(f"cogmill serve exited: {self.log_tail('api')}")
            with contextlib.suppress(httpx.TransportError):
                if self.http.get("/ready").status_code == 200:
                    return
            time.sleep(0.5)
        raise RuntimeError(f"cogmill serve not ready after {timeout}s: {self.log_tail('api')}")

    def log_tail(self, name: str, chars: int = 3000) -> str:
        path = self.home / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def __exit__(self, *exc: object) -> None:
        try:
            if hasattr(self, "http"):
                for dataset in self.datasets:
                    with contextlib.suppress(httpx.HTTPError):
                        self.http.delete(f"/api/v1/datasets/{dataset}", timeout=300)
                self.http.close()
        finally:
            for proc in self.procs:
                proc.terminate()
            for proc in self.procs:
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
            self.llm.close()
            self._forget_keys()
            shutil.rmtree(self.home, ignore_errors=True)

    def _forget_keys(self) -> None:
        with redis.Redis.from_url(self.config.redis_url) as client:
            keys = list(
                itertools.islice(client.scan_iter(f"{self.prefix}*", count=1000), 1_000_000)
            )
            for start in range(0, len(keys), 1000):
                client.delete(*keys[start : start + 1000])

    def add_dataset(self, documents: int) -> str:
        """A new dataset holding `documents` notes of fresh text."""
        name = f"load-{uuid.uuid4().hex[:8]}"
        self.datasets.append(name)
        body = {"documents": write_corpus(name, documents)}
        response = self.http.post(f"/api/v1/datasets/{name}/data", json=body)
        response.raise_for_status()
        return name

    def cognify(self, dataset: str) -> str:
        response = self.http.post(f"/api/v1/datasets/{dataset}/cognify", json={})
        response.raise_for_status()
        return response.json()["job_id"]

    def wait_job(self, job_id: str, timeout: float) -> dict[str, Any]:
        """The job once it finished, polled once a second; fails after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        for _ in range(int(timeout) + 1):  # at most one poll a second until the deadline
            job = self.http.get(f"/api/v1/jobs/{job_id}").raise_for_status().json()
            if job["status"] in ("succeeded", "failed", "cancelled"):
                return job
            if time.monotonic() > deadline:
                break
            time.sleep(1)
        raise TimeoutError(f"job still {job['status']} after {timeout}s: {job}")


def job_figures(job: dict[str, Any]) -> dict[str, Any]:
    """Status, chunks and chunks/s from the job's own timestamps (created to finished)."""
    started = datetime.fromisoformat(job["created_at"])
    ended = datetime.fromisoformat(job["finished_at"])
    seconds = (ended - started).total_seconds()
    chunks = job["counts"].get("chunks", 0)
    return {
        "status": job["status"],
        "errors": len(job["errors"]),
        "documents": job["counts"].get("documents", 0),
        "chunks": chunks,
        "seconds": round(seconds, 1),
        "chunks_per_s": round(chunks / seconds, 2) if seconds else None,
    }


class RssSampler(threading.Thread):
    """The server's RSS (MiB), thread count and CPU seconds every second until stopped."""

    def __init__(self, pid: int, limit_s: float) -> None:
        super().__init__(daemon=True)
        self.pid, self.limit = pid, int(limit_s) + 1
        self.stop = threading.Event()
        self.samples: list[tuple[float, float, int]] = []  # (seconds, RSS MiB, threads)
        self.started = time.monotonic()

    def run(self) -> None:
        for _ in range(self.limit):
            status = proc_status(self.pid)
            at = time.monotonic() - self.started
            self.samples.append((at, status["VmRSS"] / 1024, status["Threads"]))
            if self.stop.wait(1.0):
                return


def slope_per_min(samples: list[tuple[float, float, int]]) -> float:
    """The least-squares slope of RSS over time, MiB per minute (0 for under 3 samples)."""
    if len(samples) < 3:
        return 0.0
    return round(float(np.polyfit([s[0] for s in samples], [s[1] for s in samples], 1)[0]) * 60, 2)


def rss_figures(samples: list[tuple[float, float, int]], warmup_s: float) -> dict[str, Any]:
    """Start, peak, end; after warm-up the baseline, growth and slope, and the slope of the
    second half alone (a leak keeps its slope; memory settling after warm-up loses it)."""
    after = [s for s in samples if s[0] >= warmup_s] or samples[-1:]
    end = float(np.mean([s[1] for s in after[-3:]]))
    return {
        "samples": len(samples),
        "start_mib": round(samples[0][1], 1),
        "warm_mib": round(after[0][1], 1),
        "peak_mib": round(max(s[1] for s in samples), 1),
        "end_mib": round(end, 1),
        "growth_after_warmup": round(end / after[0][1] - 1, 3),
        "slope_mib_per_min": slope_per_min(after),
        "slope_second_half_mib_per_min": slope_per_min(after[len(after) // 2 :]),
        "threads_warm_end": [after[0][2], samples[-1][2]],
        "every_10s_mib": [round(s[1], 1) for s in samples[::10]],
    }


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


def route_figures(recorder: Recorder, seconds: float) -> dict[str, dict[str, float]]:
    """Requests, requests/s and p50/p95/p99 (ms) per route, and for all of them together."""
    by_route: dict[str, list[float]] = {}
    for sample in recorder.samples:
        by_route.setdefault(sample.route, []).append(sample.seconds)
    by_route["all"] = [s.seconds for s in recorder.samples]
    figures = {}
    for route, latencies in by_route.items():
        p50, p95, p99 = np.percentile(np.array(latencies) * 1000, [50, 95, 99])
        figures[route] = {
            "n": len(latencies),
            "rps": round(len(latencies) / seconds, 2),
            "p50_ms": round(float(p50), 1),
            "p95_ms": round(float(p95), 1),
            "p99_ms": round(float(p99), 1),
        }
    return figures


def warm_up(stack: Stack, seed: str) -> None:
    """Every route once, so modules and connection pools load before RSS is watched."""
    target = Target([seed], stack.cognify(seed))  # nothing to do: finished at once
    api = Client(stack.base_url, 0, lambda: target)
    with api.http:
        for step, route in enumerate(ROUTES):
            api.call(route, step, hold_s=1.0)


def jobs_figures(jobs: list[dict[str, Any]]) -> dict[str, Any]:
    """The jobs run under load: how many, their statuses, totals and chunks/s (the first
    job's too: it started with the clients, as the undisturbed job started alone)."""
    figures = [job_figures(job) for job in jobs]
    rates = [f["chunks_per_s"] for f in figures if f["chunks_per_s"]] or [0.0]
    return {
        "jobs": len(figures),
        "statuses": dict(Counter(f["status"] for f in figures)),
        "document_errors": sum(f["errors"] for f in figures),
        "documents": sum(f["documents"] for f in figures),
        "chunks": sum(f["chunks"] for f in figures),
        "chunks_per_s_median": round(statistics.median(rates), 2),
        "chunks_per_s_min_max": [min(rates), max(rates)],
        "first": figures[0] if figures else None,
    }


def run_load(config: LoadConfig) -> dict[str, Any]:
    """The whole run on a fresh stack: seed, undisturbed job, load phase; every figure."""
    with Stack(config) as stack:
        seed = stack.add_dataset(config.documents)  # what the clients search, besides the job's
        seed_job = stack.wait_job(stack.cognify(seed), config.deadline_s)
        if seed_job["status"] != "succeeded":
            raise RuntimeError(f"the seed job did not succeed: {seed_job}")
        undisturbed = None
        if config.baseline:
            alone = stack.add_dataset(config.documents)
            undisturbed = job_figures(stack.wait_job(stack.cognify(alone), config.deadline_s))
        warm_up(stack, seed)
        sampler = RssSampler(stack.server.pid, config.deadline_s + 60)
        cpu_before = cpu_seconds(stack.server.pid)
        sampler.start()
        started = time.monotonic()
        jobs = JobLoop(stack, seed, until=started + config.duration_s)
        jobs.start()

        def until() -> bool:
            return not jobs.is_alive() and time.monotonic() - started >= config.duration_s

        recorder = run_clients(stack, jobs, until)
        elapsed = time.monotonic() - started
        sampler.stop.set()
        sampler.join(10)
        jobs.join(config.deadline_s)
        cpu = cpu_seconds(stack.server.pid) - cpu_before
        served = len(recorder.samples)
        return {
            "pool": config.pool,
            "clients": config.clients,
            "documents_per_job": config.documents,
            "llm_latency_ms": config.llm_latency_ms,
            "load_seconds": round(elapsed, 1),
            "requests": served,
            "requests_per_s": round(served / elapsed, 2),
            "job_polls_while_running": recorder.running_polls,
            "server_cpu_ms_per_request": round(cpu * 1000 / served, 1) if served else None,
            "errors": recorder.errors() + ([f"job loop: {jobs.error}"] if jobs.error else []),
            "routes": route_figures(recorder, elapsed),
            "rss": rss_figures(sampler.samples, config.warmup_s),
            "jobs_under_load": jobs_figures(jobs.finished),
            "job_undisturbed": undisturbed,
        }


def print_report(report: dict[str, Any]) -> None:
    """A table per route and the other figures, then the whole report as one JSON line."""
    print(
        f"\n== pool {report['pool']}: {report['clients']} clients, {report['load_seconds']} s, "
        f"{report['requests']} requests, {report['requests_per_s']} req/s, "
        f"{len(report['errors'])} errors"
    )
    print(f"{'route':28} {'n':>6} {'req/s':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
    for route, f in report["routes"].items():
        print(
            f"{route:28} {f['n']:>6} {f['rps']:>7} {f['p50_ms']:>8} {f['p95_ms']:>8} "
            f"{f['p99_ms']:>8}"
        )
    for error in report["errors"]:
        print("ERROR", error)
    print("server RSS:", json.dumps(report["rss"]))
    print("jobs under load:", json.dumps(report["jobs_under_load"]))
    print("job undisturbed:", json.dumps(report["job_undisturbed"]))
    print(json.dumps(report), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    defaults = LoadConfig()
    parser.add_argument("--pool", choices=["threads", "prefork", "both"], default="both")
    parser.add_argument("--clients", type=int, default=defaults.clients)
    parser.add_argument("--duration", type=float, default=defaults.duration_s)
    parser.add_argument("--warmup", type=float, default=defaults.warmup_s)
    parser.add_argument("--deadline", type=float, default=defaults.deadline_s)
    parser.add_argument("--documents", type=int, default=defaults.documents)
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    parser.add_argument("--workers", type=int, default=defaults.workers)
    parser.add_argument("--concurrency", type=int, default=defaults.concurrency)
    parser.add_argument("--llm-latency-ms", type=float, default=defaults.llm_latency_ms)
    parser.add_argument("--redis", default=defaults.redis_url)
    parser.add_argument("--neo4j", default=defaults.neo4j_uri)
    args = parser.parse_args()
    # A plain `kill` unwinds like Ctrl-C: the stack stops its processes and removes its data.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    pools = ["threads", "prefork"] if args.pool == "both" else [args.pool]
    failed = False
    for pool in pools:
        config = LoadConfig(
            pool=pool,
            clients=args.clients,
            duration_s=args.duration,
            warmup_s=args.warmup,
            deadline_s=args.deadline,
            documents=args.documents,
            batch_size=args.batch_size,
            workers=args.workers,
            concurrency=args.concurrency,
            llm_latency_ms=args.llm_latency_ms,
            redis_url=args.redis,
            neo4j_uri=args.neo4j,
        )
        report = run_load(config)
        print_report(report)
        statuses = report["jobs_under_load"]["statuses"]
        failed |= bool(report["errors"]) or set(statuses) != {"succeeded"}
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
