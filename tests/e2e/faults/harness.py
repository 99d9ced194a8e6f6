"""Runs of one corpus in distributed mode: an undisturbed reference, then disturbed runs.

Every run gets a fresh Redis prefix (so an empty LLM cache, its own queues, job state and
postings) and the same dataset name; the previous run's data is removed from the graph and the
vectors, and the removal checked, before the next run starts. The worker processes are
`python -m api.cli worker` with the pool and queues asked for, on the run's settings; the LLM
and the embeddings are the local test server with some latency.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from core.catalog import AddReport
from core.models.jobs import Job
from core.ports import StoreError
from core.settings import Settings
from pipelines.classify import check_supported
from tests.e2e.faults import stores
from tests.llm_server import LLMTestServer
from workers.celery_app import configure
from workers.jobs import JobTracker
from workers.runtime import Runtime, use_runtime

ROOT = Path(__file__).resolve().parents[3]
EMBEDDING_DIM = 384  # the collections other tests made in the shared Neo4j are 384-d
LLM_LATENCY_MS = 300.0
TOPICS = ["Ada Lovelace", "Charles Babbage", "Grace Hopper", "Alan Turing", "John von Neumann"]


def write_corpus(folder: Path, count: int, salt: str | None = None) -> list[Path]:
    """Documents linked through shared names, their text salted so no cache has seen it."""
    salt = salt or uuid.uuid4().hex[:8]
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        a, b = TOPICS[i % len(TOPICS)], TOPICS[(i + 1) % len(TOPICS)]
        path = folder / f"note_{i:03d}.txt"
        path.write_text(
            f"Note {i}-{salt}. {a} met {b} in London in {1840 + i}.\n\n"
            f"{a} wrote Report {i} about Engine {i % 7}. {b} reviewed Report {i}.\n\n"
            f"Memo {salt}-{i} says Workshop {i % 3} hosted {b}.",
            encoding="utf-8",
        )
        paths.append(path)
    return paths


@dataclass
class Stack:
    """The Redis (broker, state, postings) and Neo4j (graph, vectors) a run uses."""

    redis_url: str  # with its database number
    neo4j_uri: str


def run_env(stack: Stack, llm: LLMTestServer, home: Path, **settings: str) -> dict[str, str]:
    """COGMILL_* settings of one run, shared with its workers through the environment."""
    return {
        "COGMILL_HOME": str(home),
        "COGMILL_BROKER_URL": stack.redis_url,
        "COGMILL_RESULT_BACKEND": stack.redis_url,
        "COGMILL_REDIS_URL": stack.redis_url,
        "COGMILL_REDIS_PREFIX": f"fault-{uuid.uuid4().hex[:10]}:",
        "COGMILL_NEO4J_URI": stack.neo4j_uri,
        "COGMILL_VECTOR_STORE": "neo4j",
        "COGMILL_LLM_BASE_URL": llm.base_url,
        "COGMILL_EMBEDDING_BASE_URL": llm.base_url,
        "COGMILL_EMBEDDING_DIM": str(EMBEDDING_DIM),
        "COGMILL_BATCH_SIZE": "2",
        **{f"COGMILL_{name.upper()}": value for name, value in settings.items()},
    }


def llm_server(**faults: Any) -> LLMTestServer:
    """The test LLM with latency and 384-d embeddings; `faults` as LLMTestServer takes them."""
    options = {"latency_ms": LLM_LATENCY_MS, "embedding_latency_ms": 20.0}
    return LLMTestServer(embedding_dim=EMBEDDING_DIM, **{**options, **faults})


def open_runtime(env: dict[str, str]) -> Runtime:
    """This process's runtime on a run's settings, installed for tasks, Celery on its broker."""
    values = {k.removeprefix("COGMILL_").lower(): v for k, v in env.items()}
    settings = Settings(_env_file=None, **values)  # type: ignore[call-arg, arg-type]
    configure(settings)
    runtime = Runtime(settings)
    use_runtime(runtime)
    return runtime


def close_runtime(runtime: Runtime) -> None:
    runtime.close()
    use_runtime(None)
    configure(Settings(_env_file=None, broker_url="memory://", result_backend="cache+memory://"))  # type: ignore[call-arg]


@dataclass
class Worker:
    """One `cogmill worker` process (its own process group: a prefork pool's children too)."""

    proc: subprocess.Popen
    pool: str
    queues: str
    concurrency: int

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def pids(self) -> set[int]:
        """The main process and its descendants (prefork children)."""
        found, todo = {self.pid}, [self.pid]
        while todo:
            pid = todo.pop()
            try:
                children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in found:
                    found.add(child)
                    todo.append(child)
        return found


class WorkerPool:
    """Worker processes of one run, killed and replaced at will (as compose `restart:` does)."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env = {**os.environ, **env, "PYTHONPATH": str(ROOT), "COGMILL_LOG_LEVEL": "INFO"}
        self.log_dir = log_dir
        self.workers: list[Worker] = []

    def start(
        self, pool: str = "threads", queues: str = "ingest,llm", concurrency: int = 2
    ) -> Worker:
        log = (self.log_dir / f"worker-{len(self.workers)}-{pool}.log").open("w")
        cmd = [sys.executable, "-m", "api.cli", "worker", "--pool", pool, "--queues", queues,
               "--concurrency", str(concurrency)]  # fmt: skip
        proc = subprocess.Popen(
            cmd, env=self.env, cwd=ROOT, stdout=log, stderr=log, start_new_session=True
        )
        worker = Worker(proc, pool, queues, concurrency)
        self.workers.append(worker)
        return worker

    def live(self) -> list[Worker]:
        return [w for w in self.workers if w.alive()]

    def owner(self, pid: int) -> Worker | None:
        """The live worker whose process (or pool child) has this pid."""
        return next((w for w in self.live() if pid in w.pids()), None)

    def kill(self, worker: Worker, pid: int | None = None) -> None:
        """SIGKILL one pool child (`pid`), or the whole worker: main process and children."""
        if pid is not None and pid != worker.pid:
            os.kill(pid, signal.SIGKILL)
            return
        os.killpg(worker.pid, signal.SIGKILL)
        worker.proc.wait(30)

    def replace(self, worker: Worker) -> Worker:
        return self.start(worker.pool, worker.queues, worker.concurrency)

    def replace_exited(self) -> int:
        """Start a like worker for each that exited (a consumer can exit on a broker outage)."""
        exited = [w for w in self.workers if not w.alive() and not getattr(w, "replaced", False)]
        for worker in exited:
            worker.replaced = True  # type: ignore[attr-defined]
            self.replace(worker)
        return len(exited)

    def stop_all(self) -> None:
        for worker in self.live():
            with _gone():
                os.killpg(worker.pid, signal.SIGTERM)
        for worker in self.workers:
            try:
                worker.proc.wait(30)
            except subprocess.TimeoutExpired:
                with _gone():
                    os.killpg(worker.pid, signal.SIGKILL)
                worker.proc.wait(10)
            with _gone():  # orphaned pool children of a worker killed earlier
                os.killpg(worker.pid, signal.SIGKILL)


class _gone:
    """Ignore ProcessLookupError: the process group is gone already."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, *_: object) -> bool:
        return kind is ProcessLookupError


def add_corpus(runtime: Runtime, dataset: str, paths: list[Path]) -> AddReport:
    runtime.catalog.ensure_dataset(dataset)
    report = AddReport()
    for path in paths:
        runtime.catalog.add_file(dataset, path, path.name, report, check_supported)
    return report


class JobStuckError(AssertionError):
    """The job did not finish in time."""


def wait_job(
    runtime: Runtime,
    job_id: str,
    timeout: float,
    on_tick: Callable[[Job | None], None] | None = None,
    interval: float = 0.2,
) -> Job:
    """Poll the job until it ends; a state store outage (a Redis being killed) is waited out."""
    tracker = JobTracker(runtime.state)
    deadline = time.monotonic() + timeout
    job: Job | None = None
    while True:
        try:
            job = tracker.get(job_id)
        except StoreError:
            job = None
        if job is not None and job.status.finished:
            return job
        if on_tick is not None:
            on_tick(job)
        if time.monotonic() > deadline:
            raise JobStuckError(f"job {job_id} not finished after {timeout:.0f}s: {job}")
        time.sleep(interval)


def remove_dataset(runtime: Runtime, dataset: str, prefixes: list[str]) -> None:
    """Remove a dataset and check nothing of it is left in the graph, vectors or postings."""
    runtime.catalog.remove_dataset(dataset)
    settings = runtime.settings
    for prefix in prefixes:
        left = stores.take(
            settings.neo4j_uri or "", settings.redis_url or "", prefix, dataset, None
        )
        assert stores.is_empty(left), f"removing {dataset} left {left.sizes()} behind"


@dataclass
class RunResult:
    """A finished run: the job, what it left in the stores, the LLM's counters, timings."""

    job: Job
    snapshot: stores.Snapshot
    llm_stats: dict[str, Any]
    seconds: float
    prefix: str
    events: list[dict] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)

    def chat_calls(self) -> int:
        return self.llm_stats["requests"].get("/v1/chat/completions", 0)

    def event_count(self, kind: str) -> int:
        return sum(1 for e in self.events if e.get("event") == kind)


def finish(
    runtime: Runtime, job: Job, llm: LLMTestServer, env: dict[str, str], started: float
) -> RunResult:
    """Snapshot a finished run (stores, job counts, events, LLM counters)."""
    s = runtime.settings
    prefix = env["COGMILL_REDIS_PREFIX"]
    snap = stores.take(s.neo4j_uri or "", s.redis_url or "", prefix, job.dataset, job)
    events = [e for _, e in JobTracker(runtime.state).events(job.id)]
    return RunResult(job, snap, llm.stats(), time.monotonic() - started, prefix, events)


def stuck_evidence(runtime: Runtime, job: Job) -> str:
    """Why a job may be stuck: each unrecorded batch's claim, generation and stored outputs,
    the messages in its queues and those delivered but not acknowledged (kombu's `unacked`)."""
    tracker = JobTracker(runtime.state)
    prefix = runtime.settings.redis_prefix
    lines = []
    claims = tracker.claims(job)
    for batch in range(job.total_batches):
        if tracker.batch_recorded(job.id, batch):
            continue
        outputs = sorted(
            key.rsplit(":", 1)[1]
            for key in runtime.state.keys(f"job:{job.id}:artifact:{batch}:")
            if key.count(":") == 4
        )
        lines.append(f"  batch {batch} unrecorded: claim {claims.get(batch)}, "
                     f"gen {tracker.generation(job.id, batch)}, stored {outputs}")  # fmt: skip
    with redis.Redis.from_url(runtime.settings.redis_url or "") as client:
        queued = {
            key.decode(errors="replace"): client.llen(key)
            for queue in ("ingest", "llm")
            for key in client.scan_iter(match=f"{prefix}{queue}*")
            if client.type(key) == b"list"  # priority lists; not the LLM cache's keys
        }
        lines.append(f"  queues {queued}")
        for tag, raw in client.hgetall(f"{prefix}unacked").items():
            message = json.loads(raw)[0]
            body = json.loads(base64.b64decode(message["body"]))
            kwargs = body[1] if len(body) > 1 else {}
            lines.append(f"  unacked {tag.decode()}: {kwargs}")
    events = [e for _, e in tracker.events(job.id)][-8:]
    lines += [f"  event {e}" for e in events]
    return "\n".join(lines)
