"""Distributed-mode benchmark: worker processes on Redis, Neo4j graph + vectors, test LLM server.

    .venv/bin/python bench/distributed.py throughput   # (a) chunks/s at 0 ms LLM, 1x and 4x
    .venv/bin/python bench/distributed.py latency      # (b) 1,000 ms per call, 32 in flight

Needs Redis and Neo4j (`deploy/services.sh start`; the URLs below are its defaults). The LLM
and the embeddings come from tests/llm_server.py, so the figures measure cogmill itself: the
Celery chains, the stores and the bookkeeping. The same worker processes serve an untimed
warm-up ingest and then every timed run, as a deployment's long-running workers would. Each
run prints one JSON line: chunks/s, the Neo4j write rate inside the pipeline (nodes and
relationships written / time spent writing them), and every worker's peak RSS so far.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.catalog import AddReport  # noqa: E402
from core.settings import Settings  # noqa: E402
from pipelines.classify import check_supported  # noqa: E402
from tests.llm_server import LLMTestServer  # noqa: E402
from workers.celery_app import configure  # noqa: E402
from workers.jobs import JobTracker  # noqa: E402
from workers.orchestration import cognify  # noqa: E402
from workers.runtime import Runtime, use_runtime  # noqa: E402

DATA = ROOT.parent / "shared" / "bench" / "data"


def write_passages(folder: Path, copies: int, limit: int | None, run: str) -> list[Path]:
    """The MuSiQue passages as files, `copies` times, each tagged with the run and its copy:
    no text repeats, within a run or across runs, so no LLM answer comes from the cache."""
    passages = json.loads((DATA / "musique_train_corpus.json").read_text())[:limit]
    paths = []
    for copy in range(copies):
        for index, passage in enumerate(passages):
            path = folder / f"{copy}-{index:05d}.txt"
            tag = f" ({run} copy {copy})"
            path.write_text(f"{passage['title']}{tag}\n{passage['text']}", encoding="utf-8")
            paths.append(path)
    return paths


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


@dataclass
class Service:
    """Workers, the stand-in LLM and a runtime that enqueues jobs, up for all of a mode's runs."""

    args: argparse.Namespace
    runtime: Runtime
    llm: LLMTestServer
    workers: list[subprocess.Popen[bytes]]
    home: Path
    datasets: list[str] = field(default_factory=list)


@contextlib.contextmanager
def service(args: argparse.Namespace, latency_ms: int) -> Iterator[Service]:
    """Worker processes that serve every run of the mode, as a deployment's workers would.

    With a slow LLM the workers are split by queue, as in docker-compose.yml: one process for
    `ingest`, one whose threads only wait on the LLM (`llm`). The runs' datasets are removed
    at the end, after every run has been timed: Neo4j goes on merging its vector indexes for
    a while after a large delete.
    """
    home = Path(tempfile.mkdtemp(prefix="cogmill-dbench-"))
    if latency_ms:
        workers = [
            ["--queues", "ingest", "--concurrency", str(args.threads)],
            ["--queues", "llm", "--concurrency", str(args.llm_threads)],
        ]
    else:
        workers = [["--concurrency", str(args.threads)]] * args.workers
    # Chat answers take `latency_ms`; embeddings are instant (a stand-in for a fast endpoint).
    with LLMTestServer(latency_ms=latency_ms, embedding_latency_ms=0, embedding_dim=384) as llm:
        env = {
            "COGMILL_HOME": str(home),
            "COGMILL_BROKER_URL": args.redis,
            "COGMILL_RESULT_BACKEND": args.redis,
            "COGMILL_REDIS_URL": args.redis,
            "COGMILL_REDIS_PREFIX": f"bench-{uuid.uuid4().hex[:8]}:",
            "COGMILL_NEO4J_URI": args.neo4j,
            "COGMILL_VECTOR_STORE": "neo4j",
            "COGMILL_LLM_BASE_URL": llm.base_url,
            "COGMILL_EMBEDDING_BASE_URL": llm.base_url,
            # In flight per process: one llm process when the LLM is slow, else every worker.
            "COGMILL_LLM_CONCURRENCY": str(
                args.in_flight if latency_ms else max(1, args.in_flight // len(workers))
            ),
            "COGMILL_BATCH_SIZE": str(args.batch_size),
            "COGMILL_LOG_LEVEL": os.environ.get("COGMILL_LOG_LEVEL", "WARNING"),
        }
        os.environ.update(env)
        settings = Settings()
        configure(settings)
        runtime = Runtime(settings)
        use_runtime(runtime)
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "api.cli", "worker", "--pool", "threads", *worker_args],
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=(home / f"worker-{i}.log").open("w"),
            )
            for i, worker_args in enumerate(workers)
        ]
        running = Service(args, runtime, llm, procs, home)
        try:
            time.sleep(args.warmup)  # workers load their code and connect
            yield running
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(60)
            for dataset in running.datasets:
                runtime.catalog.remove_dataset(dataset)
            runtime.close()
            use_runtime(None)


def ingest(svc: Service, copies: int) -> dict[str, object]:
    """One timed cognify job over `copies` of the passages, in a dataset of its own."""
    dataset = f"bench-{uuid.uuid4().hex[:8]}"
    svc.datasets.append(dataset)
    folder = svc.home / dataset
    folder.mkdir()
    paths = write_passages(folder, copies, svc.args.limit, dataset)
    runtime = svc.runtime
    runtime.catalog.ensure_dataset(dataset)
    report = AddReport()
    for path in paths:
        runtime.catalog.add_file(dataset, path, path.name, report, check_supported)
    calls = svc.llm.calls()
    started = time.perf_counter()
    job = cognify(runtime, dataset)
    tracker = JobTracker(runtime.state)
    while not job.status.finished:  # the status alone: the finished job holds the counts
        time.sleep(0.2)
        job = tracker.get(job.id, live=False)
    elapsed = time.perf_counter() - started
    counts = job.counts
    write_s = counts.get("graph_write_ms", 0) / 1000
    return {
        "documents": len(paths),
        "llm_latency_ms": svc.llm.stats()["config"]["latency_ms"],
        "in_flight": svc.args.in_flight,
        "status": job.status.value,
        "errors": len(job.errors),
        "seconds": round(elapsed, 1),
        "chunks": counts.get("chunks", 0),
        "chunks_per_s": round(counts.get("chunks", 0) / elapsed, 1),
        "llm_calls": svc.llm.calls() - calls,
        "nodes_written": counts.get("nodes_written", 0),
        "edges_written": counts.get("edges_written", 0),
        "graph_write_s": round(write_s, 1),
        "nodes_per_s": round(counts.get("nodes_written", 0) / write_s) if write_s else None,
        "rels_per_s": round(counts.get("edges_written", 0) / write_s) if write_s else None,
        # Peak so far: flat from the 1x run to the 4x run means no growth with the corpus.
        "worker_peak_rss_mib": [round(peak_rss_mib(p.pid)) for p in svc.workers],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["throughput", "latency"])
    parser.add_argument("--redis", default="redis://127.0.0.1:6390/0")
    parser.add_argument("--neo4j", default="bolt://127.0.0.1:7697")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2, help="worker threads per process")
    parser.add_argument("--in-flight", type=int, default=32, help="LLM calls in flight, in all")
    parser.add_argument("--llm-threads", type=int, default=8, help="threads of the llm worker")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--limit", type=int, default=None, help="passages per copy")
    parser.add_argument("--warmup", type=float, default=8.0)
    parser.add_argument(
        "--warmup-copies", type=int, default=2, help="throughput: copies ingested untimed first"
    )
    parser.add_argument("--scale", type=int, default=4, help="copies of the corpus, second run")
    args = parser.parse_args()
    latency_ms = 0 if args.mode == "throughput" else 1000
    copies = [1, args.scale] if args.mode == "throughput" else [1]
    with service(args, latency_ms) as svc:
        # Untimed: a fresh Neo4j's JIT compiles for about two minutes, taking 0.6 of a core
        # (per-thread CPU of its "C2 CompilerThread"s); a 1x job in that time runs ~20% slower.
        # With the slow LLM, Neo4j has time to spare: no warm-up.
        if args.warmup_copies and not latency_ms:
            ingest(svc, args.warmup_copies)
        results = [ingest(svc, n) for n in copies]
    for figures in results:
        print(json.dumps(figures))
    if args.mode == "throughput":
        ratio = results[1]["seconds"] / results[0]["seconds"]
        target = round(args.scale * 1.1, 1)
        print(json.dumps({f"time_ratio_{args.scale}x": round(ratio, 2), "at_most": target}))
    if args.mode == "latency":
        ideal = args.in_flight * 1000 / 1000  # one call per chunk, one second each
        share = results[0]["chunks_per_s"] / ideal
        print(json.dumps({"ideal_chunks_per_s": ideal, "share_of_ideal": round(share, 2)}))


if __name__ == "__main__":
    main()
