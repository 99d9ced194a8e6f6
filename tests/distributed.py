"""Distributed mode for tests and benches: `cogmill worker` processes on Redis, Neo4j graph +
Neo4j vectors, and this process's runtime on the same settings.

The settings reach the worker processes through the environment (`worker_env`); this process
opens its runtime on the same values (`open_runtime`), with Celery pointed at their broker, so
the jobs it plans run on the workers. `WorkerPool` starts, kills and replaces workers as a
supervisor (compose `restart:`) would. `write_corpus` makes documents linked through shared
names, salted so no LLM cache (shared through Redis) has seen them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from core.settings import Settings
from runtime import Runtime, use_runtime
from workers.celery_app import configure

ROOT = Path(__file__).resolve().parents[1]
TOPICS = ["Ada Lovelace", "Charles Babbage", "Grace Hopper", "Alan Turing", "John von Neumann"]
DISTRIBUTED_STORES = ("Neo4jGraphStore", "Neo4jVectorStore", "RedisStateStore")


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


def worker_env(
    home: Path, redis_url: str, neo4j_uri: str, llm_base_url: str, **settings: str
) -> dict[str, str]:
    """Settings the test process and its worker processes share through the environment:
    Redis (with its database number) for the broker, results, state and postings under a fresh
    prefix, Neo4j for the graph and the vectors, the test LLM server, batches of two;
    `settings` adds or overrides COGMILL_* variables (lower case, no prefix)."""
    return {
        "COGMILL_HOME": str(home),
        "COGMILL_BROKER_URL": redis_url,
        "COGMILL_RESULT_BACKEND": redis_url,
        "COGMILL_REDIS_URL": redis_url,
        "COGMILL_REDIS_PREFIX": f"test-{uuid.uuid4().hex[:10]}:",
        "COGMILL_NEO4J_URI": neo4j_uri,
        "COGMILL_VECTOR_STORE": "neo4j",
        "COGMILL_LLM_BASE_URL": llm_base_url,
        "COGMILL_BATCH_SIZE": "2",
        **{f"COGMILL_{name.upper()}": value for name, value in settings.items()},
    }


def open_runtime(env: dict[str, str]) -> Runtime:
    """This process's runtime on `env` (as `worker_env` makes it), installed for tasks, with
    Celery on its broker; the stores must be the distributed ones (no silent fallback)."""
    values = {k.removeprefix("COGMILL_").lower(): v for k, v in env.items()}
    settings = Settings(_env_file=None, **values)  # type: ignore[call-arg, arg-type]
    configure(settings)
    runtime = Runtime(settings)
    use_runtime(runtime)
    return runtime


def close_runtime(runtime: Runtime) -> None:
    """Undo `open_runtime`: close the stores, back to the in-memory broker."""
    runtime.close()
    use_runtime(None)
    configure(Settings(_env_file=None, broker_url="memory://", result_backend="cache+memory://"))  # type: ignore[call-arg]


@contextmanager
def distributed_runtime(env: dict[str, str]) -> Iterator[Runtime]:
    """`open_runtime` for a `with` block, checking the stores are the distributed ones."""
    runtime = open_runtime(env)
    try:
        stores = (
            type(runtime.graph).__name__,
            type(runtime.vectors).__name__,
            type(runtime.state).__name__,
        )
        assert stores == DISTRIBUTED_STORES, stores
        yield runtime
    finally:
        close_runtime(runtime)


@dataclass
class Worker:
    """One `cogmill worker` process (its own process group: a prefork pool's children too)."""

    proc: subprocess.Popen
    pool: str
    queues: str
    concurrency: int
    replaced: bool = field(default=False)

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
    """Worker processes on `env`, killed and replaced at will (as compose `restart:` does);
    each logs to `log_dir`."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env = {**os.environ, **env, "PYTHONPATH": str(ROOT), "COGMILL_LOG_LEVEL": "INFO"}
        self.log_dir = log_dir
        self.workers: list[Worker] = []

    def start(
        self, pool: str = "threads", queues: str = "ingest,llm", concurrency: int = 2
    ) -> Worker:
        log = (self.log_dir / f"worker-{len(self.workers)}-{pool}.log").open("w")
        cmd = [
            sys.executable,
            "-m",
            "api.cli",
            "worker",
            "--pool",
            pool,
            "--queues",
            queues,
            "--concurrency",
            str(concurrency),
        ]
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
        exited = [w for w in self.workers if not w.alive() and not w.replaced]
        for worker in exited:
            worker.replaced = True
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


@contextmanager
def running_workers(env: dict[str, str], log_dir: Path, count: int = 2) -> Iterator[WorkerPool]:
    """`count` thread-pool workers on both queues for a `with` block, stopped afterwards."""
    pool = WorkerPool(env, log_dir)
    try:
        for _ in range(count):
            pool.start()
        yield pool
    finally:
        pool.stop_all()


class _gone:
    """Ignore ProcessLookupError: the process group is gone already."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, *_: object) -> bool:
        return kind is ProcessLookupError
