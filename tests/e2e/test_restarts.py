"""A database restarted in the middle of a job: the job resumes and ends complete.

Redis runs here with append-only persistence (as in docker-compose.yml), started by the test
on its own port; Neo4j is the shared test server, killed with SIGKILL and started again.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from core.models.jobs import Job, JobStatus
from core.ports import StoreError
from tests.e2e.test_distributed import (
    ROOT,
    Workers,
    add,
    close_runtime,
    open_runtime,
    worker_env,
    write_corpus,
)
from tests.llm_server import LLMTestServer
from tests.services import redis_url
from workers.jobs import JobTracker
from workers.orchestration import cognify
from workers.runtime import Runtime

pytestmark = [pytest.mark.e2e, pytest.mark.services]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class AofRedis:
    """A redis-server with append-only persistence that can be restarted on the same data."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.port = folder, free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        subprocess.run(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--daemonize",
                "yes",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--dir",
                str(self.folder),
                "--pidfile",
                str(self.folder / "redis.pid"),
            ],
            check=True,
        )
        self._wait(up=True)

    def restart(self) -> None:
        subprocess.run(["redis-cli", "-p", str(self.port), "shutdown"], check=False)
        self._wait(up=False)
        time.sleep(1.0)  # workers see the broker gone before it comes back
        self.start()

    def stop(self) -> None:
        subprocess.run(["redis-cli", "-p", str(self.port), "shutdown", "nosave"], check=False)

    def _wait(self, up: bool) -> None:
        for _ in range(100):
            answered = (
                subprocess.run(
                    ["redis-cli", "-p", str(self.port), "ping"], capture_output=True, text=True
                ).stdout.strip()
                == "PONG"
            )
            if answered == up:
                return
            time.sleep(0.1)
        raise RuntimeError(f"redis on {self.port} did not come {'up' if up else 'down'}")


@pytest.fixture
def llm() -> Iterator[LLMTestServer]:
    with LLMTestServer(latency_ms=300) as server:
        yield server


def settings_env(tmp_path: Path, redis: str, llm: LLMTestServer) -> dict[str, str]:
    return worker_env(
        tmp_path / "home",
        redis,
        llm,
        task_soft_time_limit_seconds="40",
        task_time_limit_seconds="50",
        visibility_timeout_seconds="60",
        # A chain that still loses a message in the restart is resumed within ~75 s.
        sweep_interval_seconds="5",
        sweep_stall_seconds="65",
    )


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """Runtime + two workers over the given Redis URL; yields a starter function."""
    started: list[tuple[Runtime, Workers]] = []

    def start(redis: str, llm: LLMTestServer) -> tuple[Runtime, Workers]:
        env = settings_env(tmp_path, redis, llm)
        runtime = open_runtime(env, monkeypatch)
        workers = Workers(env, tmp_path)
        workers.start()
        workers.start()
        started.append((runtime, workers))
        return runtime, workers

    yield start
    for runtime, workers in started:
        workers.stop_all()
        close_runtime(runtime)


def wait_through_outages(runtime: Runtime, job: Job, on_tick, timeout: float = 300) -> Job:  # noqa: ANN001
    tracker = JobTracker(runtime.state)
    deadline = time.monotonic() + timeout
    while not job.status.finished:
        assert time.monotonic() < deadline, f"job still {job.status} after {timeout}s: {job}"
        time.sleep(0.5)
        try:
            job = tracker.get(job.id)
        except StoreError:
            continue  # the state store is the Redis being restarted
        on_tick(job)
    return job


def assert_complete(runtime: Runtime, dataset: str, job: Job, documents: int) -> None:
    assert job.status is JobStatus.SUCCEEDED, job
    assert job.counts["documents"] == documents and not job.errors
    chunks = runtime.graph.find_nodes(dataset, "DocumentChunk", limit=10_000)
    assert len({c.properties["document_id"] for c in chunks}) == documents
    assert runtime.vectors.count("DocumentChunk_text", dataset=dataset) == len(chunks)


def test_redis_restarted_mid_job(cluster, llm: LLMTestServer, tmp_path: Path) -> None:  # noqa: ANN001
    redis_url()  # the Redis server binary must be there (skips or fails like the other tests)
    folder = tmp_path / "redis"
    folder.mkdir()
    server = AofRedis(folder)
    server.start()
    try:
        runtime, workers = cluster(server.url, llm)
        dataset = f"restart-{uuid.uuid4().hex[:8]}"
        add(runtime, dataset, write_corpus(tmp_path, 20))
        restarts: list[int] = []

        def restart_once(job: Job) -> None:
            if not restarts and job.counts.get("batches_done", 0) >= 1:
                restarts.append(job.counts["batches_done"])
                server.restart()
            # Celery's consumer can exit on a reconnect error ("Unrecoverable error"); a
            # deployment restarts it (docker-compose `restart: unless-stopped`), so do we.
            workers.replace_exited(2)

        job = wait_through_outages(runtime, cognify(runtime, dataset), restart_once)
        assert restarts, "the job ended before Redis was restarted"
        assert_complete(runtime, dataset, job, 20)
        runtime.catalog.remove_dataset(dataset)
    finally:
        server.stop()


def _services_dir() -> Path:
    return Path(os.environ.get("COGMILL_SERVICES_DIR", ROOT / ".services"))


@pytest.mark.skipif(shutil.which("java") is None, reason="restarting Neo4j needs its launcher")
def test_neo4j_killed_and_restarted_mid_job(cluster, llm: LLMTestServer, tmp_path: Path) -> None:  # noqa: ANN001
    pid_file = _services_dir() / "neo4j.pid"
    if not pid_file.exists():
        pytest.skip("Neo4j was not started by deploy/services.sh here; cannot restart it")
    broker = redis_url().rsplit("/", 1)[0] + "/6"
    redis.Redis.from_url(broker).flushdb()  # this test's own database: no stale queues
    runtime, _ = cluster(broker, llm)
    dataset = f"restart-{uuid.uuid4().hex[:8]}"
    add(runtime, dataset, write_corpus(tmp_path, 20))
    restarts: list[int] = []

    def kill_once(job: Job) -> None:
        if not restarts and job.counts.get("batches_done", 0) >= 1:
            restarts.append(job.counts["batches_done"])
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
            time.sleep(1.0)
            subprocess.run(
                [str(ROOT / "deploy" / "services.sh"), "start"],
                cwd=ROOT,
                check=True,
                capture_output=True,
            )

    job = wait_through_outages(runtime, cognify(runtime, dataset), kill_once)
    assert restarts, "the job ended before Neo4j was restarted"
    assert_complete(runtime, dataset, job, 20)
    runtime.catalog.remove_dataset(dataset)
