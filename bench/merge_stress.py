"""Entity merges under concurrent batches, 50 runs against a serial run.

    .venv/bin/python bench/merge_stress.py                      # both backends, 50 runs each
    .venv/bin/python bench/merge_stress.py --backend neo4j --processes

The corpus, the steps and the comparison are tests/merge_stress.py's: one-document batches
sharing names and aliases ("NYC" / "New York City", "J. Smith" / "John Smith") beside
namesakes that must stay apart, ingested and then re-run (as a re-cognify) by several
concurrent writers in a shuffled order per run. Every run's final graph (node ids,
properties, support; edge ids, properties, support; vectors per collection) is compared with
one serial run of the same corpus on the same backend, and no batch may fail. Each run
prints one line; each backend ends with "N/50 identical to the serial run".

Writers are threads with their own store connections (Neo4j) or sharing the process's stores
(embedded); with --processes, Neo4j writers are worker processes instead. Needs Redis and
Neo4j for the neo4j backend (`eval "$(deploy/services.sh start)"`; bench/common.py).
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing as mp
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from common import services

from core.settings import Settings
from runtime import Runtime
from tests.merge_stress import (
    Corpus,
    MemoEmbedder,
    RunResult,
    Writer,
    differences,
    distributed_settings,
    forget,
    make_corpus,
    run_corpus,
    snapshot,
    writers_on,
)


class _Retries(logging.Handler):
    """Counts the Neo4j driver's transaction retries (deadlocks and other transient errors)
    in this process, instead of printing each."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += "will be retried" in record.getMessage()


RETRIES = _Retries()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("embedded", "neo4j", "both"), default="both")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--documents", type=int, default=24)
    parser.add_argument(
        "--processes", action="store_true", help="Neo4j writers as worker processes"
    )
    args = parser.parse_args()
    _count_retries()
    if args.runs < 1 or args.writers < 1 or args.documents < 1:
        parser.error("--runs, --writers and --documents must be >= 1")
    home = Path(tempfile.mkdtemp(prefix="merge-stress-"))
    embedder = MemoEmbedder(Runtime(Settings(home=home / "models")).embedder)
    failed = 0
    for backend in ("embedded", "neo4j") if args.backend == "both" else (args.backend,):
        identical = bench(backend, args, home / backend, embedder)
        print(f"{backend}: {identical}/{args.runs} identical to the serial run", flush=True)
        failed += identical != args.runs
    return 1 if failed else 0


def bench(backend: str, args: argparse.Namespace, home: Path, embedder: MemoEmbedder) -> int:
    """Serial reference, then `args.runs` concurrent runs; how many were identical."""
    tag = uuid.uuid4().hex[:8]
    if backend == "neo4j":
        redis_url, neo4j_uri = services()
        settings = distributed_settings(home, neo4j_uri, redis_url, f"cogmill-bench:{tag}:")
    else:
        settings = Settings(home=home)
    corpus = make_corpus(f"merge-stress-{tag}", documents=args.documents)
    with writers_on(settings, 1, embedder) as [serial]:
        expected = _once(corpus, lambda: run_corpus(corpus, [serial]), serial.runtime)
    nodes, edges = len(expected.snapshot["nodes"]), len(expected.snapshot["edges"])
    print(
        f"{backend} serial: {len(corpus.batches)} batches x 2 passes in {expected.seconds:.1f} s,"
        f" {nodes} nodes, {edges} edges, {len(expected.errors)} failed batches",
        flush=True,
    )
    if expected.errors:
        print("\n".join(f"  {e}" for e in expected.errors))
        return 0
    processes = args.processes and backend == "neo4j"
    identical = 0
    with _concurrent(settings, corpus, args.writers, embedder, processes) as run:
        for i in range(args.runs):
            retries_before = RETRIES.count
            result = run(i)
            diff = differences(expected.snapshot, result.snapshot)
            same = not diff and not result.errors
            identical += same
            kind = f"{args.writers} {'processes' if processes else 'threads'}"
            verdict = "identical" if same else f"DIFFERENT ({len(result.errors)} failed batches)"
            retried = "" if processes else f", {RETRIES.count - retries_before} tx retries"
            print(
                f"{backend} run {i + 1:>2}/{args.runs} ({kind}): {result.seconds:.1f} s{retried},"
                f" {verdict}"
            )
            for line in result.errors[:3] + diff:
                print(f"  {line}")
            sys.stdout.flush()
    return identical


def _once(corpus: Corpus, run: Any, runtime: Runtime) -> RunResult:
    """A run, after which the corpus's dataset is removed again."""
    try:
        return run()
    finally:
        forget(runtime, corpus.dataset)


@contextmanager
def _concurrent(
    settings: Settings, corpus: Corpus, count: int, embedder: MemoEmbedder, processes: bool
) -> Iterator[Any]:
    """A function running the corpus once with `count` concurrent writers (order seed -> run)."""
    if not processes:
        with writers_on(settings, count, embedder) as writers:
            yield lambda seed: _once(
                corpus, lambda: run_corpus(corpus, writers, order_seed=seed), writers[0].runtime
            )
        return
    context = mp.get_context("spawn")
    tasks, done = context.Queue(), context.Queue()
    workers = [
        context.Process(
            target=_worker, args=(settings, corpus.dataset, len(corpus.batches), tasks, done)
        )
        for _ in range(count)
    ]
    for worker in workers:
        worker.start()
    runtime = Runtime(settings)
    try:
        for _ in workers:  # each has loaded its models and stores
            done.get(timeout=600)
        yield lambda seed: _once(
            corpus, lambda: _run_processes(corpus, seed, tasks, done, runtime), runtime
        )
    finally:
        for _ in workers:
            tasks.put(None)
        for worker in workers:
            worker.join(timeout=60)
        runtime.close()


def _run_processes(corpus: Corpus, seed: int, tasks: Any, done: Any, runtime: Runtime) -> RunResult:
    """Both passes through the worker processes, batches in a shuffled order."""
    import random

    started, errors = time.perf_counter(), []
    for rerun in (False, True):
        order = list(range(len(corpus.batches)))
        random.Random(seed).shuffle(order)
        for index in order:
            tasks.put((index, rerun))
        for _ in order:
            errors += done.get(timeout=600)
    elapsed = time.perf_counter() - started
    return RunResult(elapsed, errors, snapshot(runtime.graph, runtime.vectors, corpus.dataset))


def _count_retries() -> None:
    """The driver's retry warnings counted in RETRIES, not printed."""
    driver_log = logging.getLogger("neo4j")
    driver_log.addHandler(RETRIES)
    driver_log.propagate = False


def _worker(settings: Settings, dataset: str, documents: int, tasks: Any, done: Any) -> None:
    """A worker process: its own runtime and models; runs the batches it is sent."""
    _count_retries()
    corpus = make_corpus(dataset, documents=documents)
    reruns = corpus.rerun()
    runtime = Runtime(settings)
    writer = Writer(runtime, MemoEmbedder(runtime.embedder))
    done.put([])
    while (task := tasks.get()) is not None:
        index, rerun = task
        batch = (reruns if rerun else corpus.batches)[index]
        try:
            writer.run(batch)
            done.put([])
        except Exception as err:  # reported by the parent, which counts the run as failed
            done.put([f"{batch.documents[0].name}: {type(err).__name__}: {err}"])
    runtime.close()


if __name__ == "__main__":
    sys.exit(main())
