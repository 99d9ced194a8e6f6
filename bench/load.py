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
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.loadtest.figures import (  # noqa: E402
    RssSampler,
    cpu_seconds,
    job_figures,
    jobs_figures,
    route_figures,
    rss_figures,
)
from bench.loadtest.stack import LoadConfig, Stack  # noqa: E402
from bench.loadtest.traffic import JobLoop, run_clients, warm_up  # noqa: E402


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
