"""The stack a load run calls: the test LLM, `cogmill worker` processes and `cogmill serve`,
all on 127.0.0.1, on Redis and Neo4j; and the fresh-text corpus its datasets hold.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import redis

from tests.llm_server import LLMTestServer

ROOT = Path(__file__).resolve().parents[2]
PEOPLE = ["Ada Lovelace", "Charles Babbage", "Grace Hopper", "Alan Turing", "John von Neumann"]
CITIES = ["London", "Paris", "Philadelphia", "Princeton", "Manchester"]


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
