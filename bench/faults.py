"""The fault harness in full, on demand: every fault kind against one salted corpus.

An undisturbed run of the corpus first, then each fault in a run of its own, compared id by id
with it (tests/e2e/faults/): busy workers SIGKILLed (x10, thread and prefork pools, llm and
ingest queues; and prefork pool children), Redis (append-only, fsync every second) SIGKILLed
x3 and Neo4j SIGKILLed x3 on instances of the harness's own, 20% LLM faults of every kind, an
LLM hanging past the client's timeout, a full disk under the blob store, workers killed during
a re-cognify, a delete killed half way. Prints per fault: lost / duplicated / changed, the
faults that hit a running step and the time each took to be taken up again (target <= 60 s,
default settings: the visibility timeout is an hour).

    eval "$(deploy/services.sh start)"
    .venv/bin/python bench/faults.py [--documents 30] [--only worker,redis,...]

Exits 1 when any run lost, duplicated or changed anything, failed, or recovered too slowly.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable
from pathlib import Path

from common import services

from core.models.jobs import JobStatus
from tests.distributed import write_corpus
from tests.e2e.faults.harness import Stack
from tests.e2e.faults.injectors import RECOVERY_TARGET_S
from tests.e2e.faults.kinds import (
    SLOW_MODELS,
    FullDisk,
    delete_with_kill,
    disk_full,
    kill_workers,
    llm_faults,
    llm_hang,
    recognify_with_kills,
    server_kills,
)
from tests.e2e.faults.scenario import Outcome, Scenario, cleanup, run
from tests.e2e.faults.servers import OwnNeo4j, OwnRedis

KINDS = ("worker", "child", "llm", "hang", "redis", "neo4j", "disk", "recognify", "delete")


def verdict(outcome: Outcome, kills: int) -> list[str]:
    """What is wrong with a run (empty: nothing)."""
    problems = []
    job = outcome.result.job
    if job.status is not JobStatus.SUCCEEDED or job.errors:
        problems.append(f"job {job.status.value} with {len(job.errors)} document errors")
    if outcome.result.chat_calls() < job.counts.get("chunks", 0):
        problems.append("fewer LLM calls than chunks: a cache answered")
    if len(outcome.kills) < kills:
        problems.append(f"{len(outcome.kills)} of {kills} faults hit a running step")
    slow = [k for k in outcome.kills if k.recovery is None or k.recovery > RECOVERY_TARGET_S]
    if slow:
        problems.append(f"{len(slow)} recoveries above {RECOVERY_TARGET_S:.0f}s")
    if outcome.diff is None or not outcome.diff.clean:
        problems.append("stores differ from the undisturbed run")
    return problems


def row(name: str, outcome: Outcome | None, problems: list[str]) -> str:
    if outcome is None:
        return f"{name:<44} FAILED: {'; '.join(problems)}"
    diff = outcome.diff
    counts = f"{len(diff.lost)} lost, {len(diff.duplicated)} duplicated, " if diff else ""
    counts += f"{len(diff.changed)} changed" if diff else ""
    times = outcome.recoveries()
    recovery = (
        f"recovery max {max(times):.1f}s median {statistics.median(times):.1f}s"
        if times
        else "no recovery measured"
    )
    if any(k.back_after for k in outcome.kills):
        back = max(k.back_after for k in outcome.kills)
        recovery += f" after the server answered (its restart: up to {back:.0f}s)"
    status = "ok" if not problems else "PROBLEM: " + "; ".join(problems)
    return f"{name:<44} {counts}; {len(outcome.kills)} faults; {recovery}; {status}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--documents", type=int, default=30)
    parser.add_argument("--worker-kills", type=int, default=10)
    parser.add_argument("--server-kills", type=int, default=3)
    parser.add_argument("--only", default=",".join(KINDS), help=f"among {','.join(KINDS)}")
    args = parser.parse_args()
    only = set(args.only.split(","))
    unknown = only - set(KINDS)
    if unknown:
        parser.error(f"unknown kinds {sorted(unknown)}; choose among {','.join(KINDS)}")

    folder = Path(tempfile.mkdtemp(prefix="cogmill-bench-faults-"))
    redis_url, neo4j_uri = services()
    shared = Stack(redis_url.rsplit("/", 1)[0] + "/7", neo4j_uri)
    corpus = write_corpus(folder / "corpus", args.documents)
    dataset = f"bench-faults-{uuid.uuid4().hex[:8]}"
    own_redis = OwnRedis(folder / "own-redis")
    own_neo4j: OwnNeo4j | None = None
    rows: list[str] = []
    failed = False
    started = time.monotonic()
    try:
        reference = run(Scenario("undisturbed"), shared, corpus, dataset, folder / "reference")
        print(reference.report(), flush=True)
        own_redis.start()
        plan: list[tuple[str, Callable[[], tuple[Scenario, Stack]], int]] = [
            ("worker", lambda: (mixed_kills(args.worker_kills), shared), args.worker_kills),
            ("child", lambda: (child_kills(3), shared), 3),
            ("llm", lambda: (llm_faults(0.2), shared), 0),
            ("llm", lambda: (llm_faults(0.2, scheduled=True), shared), 0),
            ("hang", lambda: (llm_hang(), shared), 0),
            (
                "redis",
                lambda: (
                    server_kills("redis", own_redis, args.server_kills),
                    Stack(own_redis.url, shared.neo4j_uri),
                ),
                args.server_kills,
            ),
            ("recognify", lambda: (recognify_with_kills(3), shared), 3),
            ("delete", lambda: (delete_with_kill(), shared), 0),
        ]
        disk = FullDisk(free_pages=max(2, args.documents // 3))
        if "disk" in only:
            if (why := FullDisk.available()) is None:
                plan.append(("disk", lambda: (disk_full(disk), shared), 0))
            else:
                rows.append(f"{'blob store disk full':<44} SKIPPED: {why}")
        if "neo4j" in only:
            own_neo4j = OwnNeo4j(folder / "own-neo4j", own_redis.port)
            own_neo4j.start()
            neo, count = own_neo4j, args.server_kills
            neo_stack = Stack(own_redis.url, neo.uri)
            plan.append(("neo4j", lambda: (server_kills("neo4j", neo, count), neo_stack), count))
        for kind, build, kills in plan:
            if kind not in only:
                continue
            scenario, stack = build()
            scenario.timeout = 900
            outcome, problems = None, []
            try:
                outcome = run(scenario, stack, corpus, dataset, folder / kind, reference.result)
                print(outcome.report(), flush=True)
                problems = verdict(outcome, kills)
            except Exception as err:  # noqa: BLE001 - one broken run must not hide the others
                traceback.print_exc()
                problems = [f"{type(err).__name__}: {str(err)[:300]}"]
            finally:
                disk.close()
            failed = failed or bool(problems)
            rows.append(row(scenario.name, outcome, problems))
    finally:
        if own_neo4j is not None:
            own_neo4j.stop()
        own_redis.stop()
        cleanup(shared, dataset, folder)
    print(f"\nfault harness: {args.documents} documents, {time.monotonic() - started:.0f}s in all")
    print("\n".join(rows))
    if not failed:
        shutil.rmtree(folder, ignore_errors=True)
    else:
        print(f"worker logs kept in {folder}")
    return 1 if failed else 0


def mixed_kills(count: int) -> Scenario:
    """Busy workers of both pools, one of each per queue, SIGKILLed whatever they run."""
    workers = [(pool, queue, 2) for pool in ("threads", "prefork") for queue in ("llm", "ingest")]
    chaos = kill_workers(count)
    return Scenario(f"SIGKILL worker x{count}", workers, llm_faults=dict(SLOW_MODELS), chaos=chaos)


def child_kills(count: int) -> Scenario:
    """Prefork pool children SIGKILLed (an OOM kill of one child), the worker left running."""
    chaos = kill_workers(count, targets=(lambda w: w.pool == "prefork",), child_only=True)
    workers = [("prefork", "ingest,llm", 2), ("threads", "ingest,llm", 2)]
    return Scenario(f"SIGKILL prefork pool child x{count}", workers, chaos=chaos)


if __name__ == "__main__":
    sys.exit(main())
