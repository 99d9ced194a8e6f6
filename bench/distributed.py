"""Distributed-mode benchmark: worker processes on Redis, Neo4j graph + vectors, test LLM server.

    .venv/bin/python bench/distributed.py throughput   # (a) 0 ms LLM: 1x and 4x (--scales 1,40)
    .venv/bin/python bench/distributed.py latency      # (b) 1,000 ms per call, 32 in flight

Needs Redis and Neo4j (`eval "$(deploy/services.sh start)"`: its exported URLs, else its
defaults). The LLM
and the embeddings come from tests/llm_server.py, run as a process of its own, so the figures
measure cogmill itself: the Celery chains, the stores and the bookkeeping. The same worker
processes serve an untimed warm-up ingest and then every timed run, as a deployment's
long-running workers would. The corpora are distinct passages (bench/corpora.py): 1x MuSiQue,
4x MuSiQue + 2Wiki, 10x and 40x both plus renamed generations of them (new entity names), said
so in the output.

A timed run is everything a user waits for: `add` of one file per passage (batched as
`cogmill add` does), then the cognify job to its end. Beside chunks/s it prints CPU-ms per
chunk of every process (workers, Neo4j, Redis, the stand-in, this driver) from /proc, nodes
and relationships *created* (counted in Neo4j before and after), and the floor measured in
the same run (bench/neo4j_floor.py): the same graph written by the neo4j driver alone plus
the embedder alone over the same passages (up to `--floor-up-to` x: the floor reads the
whole graph into this process). Sampled every 2 s over add + cognify: the RSS of every
process, Neo4j's files on disk and Redis's `used_memory` (bench/store_meter.py); at the end
of each run, what Redis's keys hold, by kind.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import corpora, dist_report  # noqa: E402
from bench.common import DEFAULT_NEO4J_URI, DEFAULT_REDIS_URL  # noqa: E402
from bench.neo4j_floor import embed_floor, graph_counts, graph_floor, vector_nodes  # noqa: E402
from bench.processes import (  # noqa: E402
    Snapshot,
    StandIn,
    cpu_s,
    listening_pid,
    rss_mib,
    rss_trend,
    snapshot,
    tree_cpu_s,
)
from bench.store_meter import Neo4jFiles, Sampler, redis_keys, redis_used_memory  # noqa: E402
from core.catalog import AddReport  # noqa: E402
from core.settings import Settings  # noqa: E402
from pipelines.classify import check_supported  # noqa: E402
from runtime import Runtime, use_runtime  # noqa: E402
from workers.celery_app import configure  # noqa: E402
from workers.jobs import JobTracker  # noqa: E402
from workers.orchestration import cognify  # noqa: E402

SAMPLE_EVERY_S = 2.0


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
    llm: StandIn
    workers: list[subprocess.Popen[bytes]]
    home: Path
    pool: list[corpora.Passage]
    datasets: list[str] = field(default_factory=list)

    @functools.cached_property
    def neo4j_files(self) -> Neo4jFiles:
        return Neo4jFiles(self.args.neo4j)

    def gauges(self) -> dict[str, Callable[[], float]]:
        """What a run samples, in MiB: every process's RSS, Neo4j's files, Redis's memory."""
        named = {f"worker {i}": p.pid for i, p in enumerate(self.workers)}
        pids = named | {"neo4j": self.args.neo4j_pid, "redis": self.args.redis_pid}
        gauges: dict[str, Callable[[], float]] = {
            f"RSS {name}": functools.partial(rss_mib, pid) for name, pid in pids.items()
        }
        files, mib = self.neo4j_files, 1 << 20
        gauges["Neo4j files"] = lambda: files.sizes()["all"] / mib
        gauges["Neo4j indexes"] = lambda: files.sizes()["indexes"] / mib
        gauges["Redis used_memory"] = lambda: redis_used_memory(self.args.redis) / mib
        return gauges

    def mark(self) -> Snapshot:
        """CPU so far of every process the runs use; the driver without its children."""
        return snapshot(
            {
                "workers": lambda: sum(tree_cpu_s(p.pid) for p in self.workers),
                "neo4j": lambda: tree_cpu_s(self.args.neo4j_pid),
                "redis": lambda: tree_cpu_s(self.args.redis_pid),
                "stand-in": lambda: tree_cpu_s(self.llm.proc.pid),
                "driver": lambda: cpu_s(os.getpid()),
            }
        )


def port_pid(url: str, what: str) -> int:
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    pid = listening_pid(port)
    if pid is None:
        sys.exit(f"no process of this user listens on {what}'s port {port}: its CPU cannot be read")
    return pid


def _python(args: argparse.Namespace, home: Path, i: int) -> list[str]:
    """The interpreter of worker `i`; under cProfile (written at its exit) with --profile."""
    if not args.profile:
        return [sys.executable]
    return [sys.executable, "-m", "cProfile", "-o", str(home / f"worker-{i}.prof")]


def _pool(args: argparse.Namespace) -> list[str]:
    # cProfile sees the main thread only: a profiled worker runs its tasks there (solo pool).
    return ["--pool", "solo"] if args.profile else ["--pool", "threads"]


@contextlib.contextmanager
def service(args: argparse.Namespace, latency_ms: int) -> Iterator[Service]:
    """Worker processes that serve every run of the mode, as a deployment's workers would.

    With a slow LLM the workers are split by queue, as in docker-compose.yml: one process for
    `ingest`, one whose threads only wait on the LLM (`llm`). The runs' datasets are removed
    at the end, after every run has been timed: Neo4j goes on merging its vector indexes for
    a while after a large delete.
    """
    home = Path(tempfile.mkdtemp(prefix="cogmill-dbench-"))
    pool = corpora.pool(args.data)  # exits when a corpus is missing: before any process starts
    if latency_ms:
        workers = [
            ["--queues", "ingest", "--concurrency", str(args.threads)],
            ["--queues", "llm", "--concurrency", str(args.llm_threads)],
        ]
    else:
        workers = [["--concurrency", str(args.threads)]] * args.workers
    # Chat answers take `latency_ms`; embeddings are instant (a stand-in for a fast endpoint).
    llm = StandIn(ROOT, latency_ms, 384, home / "stand-in.log")
    try:
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
                [*_python(args, home, i), "-m", "api.cli", "worker", *_pool(args), *worker_args],
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=(home / f"worker-{i}.log").open("w"),
            )
            for i, worker_args in enumerate(workers)
        ]
        running = Service(args, runtime, llm, procs, home, pool)
        if args.profile:
            print(f"profiles: {home}/worker-N.prof, written as the workers exit", file=sys.stderr)
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
    finally:
        llm.close()


def redis_commands(url: str) -> int:
    """Commands the Redis server has processed since it started (the stores' and the broker's:
    they share it here), for commands per chunk."""
    client = redis.Redis.from_url(url)
    try:
        return int(client.info("stats")["total_commands_processed"])
    finally:
        client.close()


def ingest(svc: Service, scale: int, *, floor: bool) -> dict[str, object]:
    """One timed run over `scale` x the base corpus, in a dataset of its own: `add` of every
    file, then the cognify job to its end; with `floor`, the floor of what it wrote."""
    args, runtime = svc.args, svc.runtime
    dataset = f"bench-{uuid.uuid4().hex[:8]}"
    svc.datasets.append(dataset)
    folder = svc.home / dataset
    folder.mkdir()
    passages = corpora.corpus(scale, args.limit or corpora.BASE, svc.pool)
    paths = corpora.write(folder, passages, dataset)
    calls = svc.llm.calls()
    before, vectors_before = graph_counts(args.neo4j), vector_nodes(args.neo4j)
    quiet = svc.mark()
    time.sleep(args.idle)  # what the processes burn with nothing to do (Neo4j's JIT, GC)
    start, commands = svc.mark(), redis_commands(args.redis)
    with Sampler(svc.gauges(), SAMPLE_EVERY_S) as sampler:
        runtime.catalog.ensure_dataset(dataset)
        report = AddReport()
        runtime.catalog.add_files(dataset, ((p.name, p) for p in paths), report, check_supported)
        added = svc.mark()
        progress = f"{scale}x ({len(paths):,} files)"
        print(f"{progress}: added in {added.at - start.at:.0f} s, cognifying", file=sys.stderr)
        job = cognify(runtime, dataset)
        tracker = JobTracker(runtime.state)
        while not job.status.finished:  # the status alone: the finished job holds the counts
            time.sleep(0.2)
            job = tracker.get(job.id, live=False)
        done, commands = svc.mark(), redis_commands(args.redis) - commands
    after = graph_counts(args.neo4j)
    counts = job.counts
    write_s = counts.get("graph_write_ms", 0) / 1000
    figures: dict[str, object] = {
        "scale": scale,
        "corpus": corpora.describe(passages),
        "documents": len(paths),
        "llm_latency_ms": svc.llm.stats()["config"]["latency_ms"],
        "in_flight": args.in_flight,
        "status": job.status.value,
        "errors": len(job.errors),
        "chunks": counts.get("chunks", 0),
        "idle": start.since(quiet),
        "add": added.since(start),
        "cognify": done.since(added),
        "total": done.since(start),
        "llm_calls": svc.llm.calls() - calls,
        "redis_commands": commands,
        "created": {k: after[k] - before[k] for k in after},
        "merges_written": {
            "nodes": counts.get("nodes_written", 0),
            "edges": counts.get("edges_written", 0),
            "graph_write_s": round(write_s, 1),
            "vectors": counts.get("vectors", 0),
        },
        # Peak so far: flat from the 1x run to the 4x run means no growth with the corpus.
        "worker_peak_rss_mib": [round(peak_rss_mib(p.pid)) for p in svc.workers],
        # Sampled over add + cognify: still growing at its end, or flat once warm?
        "sampled_mib": {name: rss_trend(s) for name, s in sampler.samples.items() if s},
        # What Redis holds once the job is over, by kind of key (every key: the broker's too).
        "redis_keys": redis_keys(args.redis, ""),
        "neo4j_files_mib": {k: round(v / (1 << 20)) for k, v in svc.neo4j_files.sizes().items()},
        "vector_nodes_created": {
            name: count - vectors_before.get(name, 0)
            for name, count in vector_nodes(args.neo4j).items()
        },
    }
    print(f"{progress}: cognified in {done.at - added.at:.0f} s", file=sys.stderr)
    if floor:
        texts = [path.read_text(encoding="utf-8") for path in paths]
        batches = -(-len(paths) // args.batch_size)  # the job's batches of documents
        figures["floor_graph"] = graph_floor(
            args.neo4j, dataset, batches, runtime.settings.write_batch_size, svc.mark
        )
        figures["floor_embed"] = embed_floor(
            runtime.embedder.embed, texts, args.batch_size, svc.mark
        )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["throughput", "latency"])
    parser.add_argument(
        "--redis", default=os.environ.get("COGMILL_TEST_REDIS_URL", DEFAULT_REDIS_URL)
    )
    parser.add_argument(
        "--neo4j", default=os.environ.get("COGMILL_TEST_NEO4J_URI", DEFAULT_NEO4J_URI)
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2, help="worker threads per process")
    parser.add_argument("--in-flight", type=int, default=32, help="LLM calls in flight, in all")
    parser.add_argument("--llm-threads", type=int, default=8, help="threads of the llm worker")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--limit", type=int, default=None, help="passages at 1x (1,890)")
    parser.add_argument("--warmup", type=float, default=8.0)
    parser.add_argument(
        "--warmup-scale", type=int, default=2, help="throughput: an untimed run of this scale first"
    )
    parser.add_argument(
        "--scales", default="1,4", help="throughput: the timed runs, e.g. 1,4,10 (x the 1x corpus)"
    )
    parser.add_argument("--idle", type=float, default=5.0, help="s idle, metered, before a run")
    parser.add_argument("--no-floor", action="store_true", help="skip the floor measurements")
    parser.add_argument(
        "--floor-up-to", type=int, default=4, help="measure the floor of runs up to this scale"
    )
    parser.add_argument("--data", type=Path, default=corpora.DATA, help="the corpora's folder")
    parser.add_argument("--json", action="store_true", help="also print each run as JSON")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="workers under cProfile, solo pool (one task at a time); the files' folder on stderr",
    )
    args = parser.parse_args()
    args.neo4j_pid = port_pid(args.neo4j, "Neo4j")
    args.redis_pid = port_pid(args.redis, "Redis")
    latency_ms = 0 if args.mode == "throughput" else 1000
    scales = [int(s) for s in args.scales.split(",")] if args.mode == "throughput" else [1]
    with service(args, latency_ms) as svc:
        # Untimed: a fresh Neo4j's JIT compiles for about two minutes, taking 0.6 of a core
        # (per-thread CPU of its "C2 CompilerThread"s); a 1x job in that time runs ~20% slower.
        # With the slow LLM, Neo4j has time to spare: no warm-up.
        if args.warmup_scale and not latency_ms:
            ingest(svc, args.warmup_scale, floor=False)
        results = [
            ingest(svc, n, floor=not args.no_floor and n <= args.floor_up_to) for n in scales
        ]
    dist_report.render(results, args, latency_ms)


if __name__ == "__main__":
    main()
