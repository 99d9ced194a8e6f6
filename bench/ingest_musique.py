"""Embedded-mode ingestion benchmark on the MuSiQue corpus (run on demand; prints figures).

    .venv/bin/python bench/ingest_musique.py [--limit N | --scale K] [--data DIR] [--home DIR]
        [--top10 FILE]

Adds each passage as its own document (the same files `cogmill eval` writes), cognifies them
through the Celery pipeline with the embedded stores, then times CHUNKS, GRAPH_COMPLETION and
GRAPH_PPR searches (top 10) over the 100 questions. `--scale 4` adds the distinct passages that
follow MuSiQue's in `bench/corpora.py`'s pool (2Wiki, then HotpotQA) up to 4 x 1,890, so the
questions are asked of a corpus four times larger (past the pool's 9,003 passages there would be
repeats; refused).
Finally it times the embedder alone and the extractor alone on the same texts: together
they are the floor the whole ingestion is compared with. Wall and CPU seconds (of this whole
process, every thread) are printed for both, with the load average: on a shared machine the
CPU ratio moves less than the wall ratio. Searches run as after `cogmill cognify`: the vector
indexes are not built (`optimize()` is not called; it is not part of cognify).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from corpora import pool  # noqa: E402

from core.catalog import AddReport  # noqa: E402
from core.models.vocabulary import (  # noqa: E402
    CHUNK_COLLECTION,
    EDGE_TYPE_COLLECTION,
    ENTITY_COLLECTION,
    SUMMARY_COLLECTION,
)
from core.settings import Settings  # noqa: E402
from pipelines.classify import check_supported  # noqa: E402
from retrieval.evaluation import default_data_dir, load_bench, percentile, write_documents  # noqa: E402
from retrieval.models import SearchType  # noqa: E402
from retrieval.search import search  # noqa: E402
from runtime import Runtime, use_runtime  # noqa: E402
from workers.celery_app import configure  # noqa: E402
from workers.embedded import EmbeddedWorker  # noqa: E402
from workers.jobs import JobTracker  # noqa: E402
from workers.orchestration import cognify  # noqa: E402

SEARCH_TYPES = (SearchType.CHUNKS, SearchType.GRAPH_COMPLETION, SearchType.GRAPH_PPR)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def ingest(runtime: Runtime, files: list[tuple[Path, str]]) -> dict[str, float]:
    started, cpu_started = time.perf_counter(), time.process_time()
    runtime.catalog.ensure_dataset("musique")
    report = AddReport()
    for path, name in files:
        runtime.catalog.add_file("musique", path, name, report, check_supported)
    added = time.perf_counter()
    with EmbeddedWorker(configure(runtime.settings), threads=runtime.settings.worker_threads):
        job = cognify(runtime, "musique")
        tracker = JobTracker(runtime.state)
        while not job.status.finished:
            time.sleep(0.1)
            job = tracker.get(job.id)
    done = time.perf_counter()
    return {
        "add_s": added - started,
        "cognify_s": done - added,
        "cpu_s": time.process_time() - cpu_started,
        "status": job.status.value,
        "errors": len(job.errors),
        **job.counts,
    }


def search_latency(
    runtime: Runtime, questions: list[str], top10: dict[str, list[list[str]]]
) -> dict[str, dict[str, float]]:
    """p50/p95 per search type; the first 20 questions' top-10 texts go into `top10`."""
    figures = {}
    for kind in SEARCH_TYPES:
        ctx = runtime.retrieval()
        search(ctx, questions[0], ["musique"], kind, 10)
        times, tops = [], top10.setdefault(kind.value, [])
        for i, question in enumerate(questions):
            started = time.perf_counter()
            response = search(ctx, question, ["musique"], kind, 10)
            times.append((time.perf_counter() - started) * 1000)
            if i < 20:
                tops.append([r.text[:80] for r in response.results])
        figures[kind.value] = {
            "p50_ms": statistics.median(times),
            "p95_ms": percentile(times, 0.95),
        }
    return figures


def floor(runtime: Runtime, texts: list[str]) -> dict[str, float]:
    """The models alone on the texts, run as the worker threads run them.

    The texts are split among `worker_threads` threads, one BLAS thread each. An all-cores
    BLAS call waits for its sibling threads: on a loaded machine that made the floor slower
    and CPU-hungrier than the ingestion it measures (embed 930 s wall, 190 CPU-s at load 11-24,
    against 33 s on a quiet machine).
    """
    threads = runtime.settings.worker_threads
    parts = [texts[i::threads] for i in range(threads)]
    with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(threads) as pool:
        started, cpu_started = time.perf_counter(), time.process_time()
        list(pool.map(runtime.embedder.embed, parts))
        embedded, cpu_embedded = time.perf_counter(), time.process_time()
        list(pool.map(runtime.extractor.extract, parts))
        extracted, cpu_extracted = time.perf_counter(), time.process_time()
    return {
        "embed_s": embedded - started,
        "extract_s": extracted - embedded,
        "embed_cpu_s": cpu_embedded - cpu_started,
        "extract_cpu_s": cpu_extracted - cpu_embedded,
    }


def scaled_extra(scale: int, base: int, data: Path, folder: Path) -> list[tuple[Path, str]]:
    """The files past MuSiQue's own for a `scale` x run: the pool's next distinct passages."""
    if scale <= 1:
        return []
    passages = pool(data)[base : scale * base]
    if len(passages) < (scale - 1) * base:
        raise SystemExit(
            f"--scale {scale} needs {scale * base:,} distinct passages; the pool has "
            f"{base + len(passages):,}"
        )
    files = []
    for index, passage in enumerate(passages):
        name = f"scale_{index:05d}.txt"
        (folder / name).write_text(f"{passage.title}\n{passage.text}", encoding="utf-8")
        files.append((folder / name, name))
    return files


def vector_counts(runtime: Runtime) -> dict[str, int]:
    """Points per vector collection of the dataset."""
    names = (CHUNK_COLLECTION, ENTITY_COLLECTION, SUMMARY_COLLECTION, EDGE_TYPE_COLLECTION)
    return {name: runtime.vectors.count(name, dataset="musique") for name in names}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=default_data_dir(), help="bench folder")
    parser.add_argument("--limit", type=int, default=0, help="only the first N passages")
    parser.add_argument("--scale", type=int, default=1, help="K x 1,890 distinct passages")
    parser.add_argument("--home", type=Path, help="keep the stores here (default: a temp dir)")
    parser.add_argument("--top10", type=Path, help="write 20 questions' top-10 per type here")
    args = parser.parse_args()
    bench = load_bench("musique", args.data)
    passages = bench.limited(args.limit).passages if args.limit else bench.passages
    questions = [q.text for q in bench.questions]
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(home=args.home or Path(tmp) / "home")
        runtime = Runtime(settings)
        use_runtime(runtime)
        files = write_documents(bench, Path(tmp) / "docs")[: len(passages)]
        extra = scaled_extra(args.scale, len(bench.passages), args.data, Path(tmp) / "docs")
        files += extra
        # Load the models first: their start-up is not ingestion throughput.
        runtime.embedder.embed(["warm up"])
        runtime.extractor.extract(["Warm up the parser."])
        load_before = os.getloadavg()[0]
        result = ingest(runtime, files)
        result["load_1min"] = [load_before, os.getloadavg()[0]]
        result["graph"] = runtime.graph.count("musique")
        result["vectors"] = vector_counts(runtime)
        top10: dict[str, list[list[str]]] = {}
        result["search"] = search_latency(runtime, questions, top10)
        if args.top10:
            args.top10.write_text(json.dumps(top10, indent=1))
        result["peak_rss_mib"] = peak_rss_mib()
        texts = [f"{p.title}\n{p.text}" for p in passages]
        texts += [path.read_text(encoding="utf-8") for path, _ in extra]
        result["floor"] = floor(runtime, texts)
        runtime.close()
    total = result["add_s"] + result["cognify_s"]
    embed_s, extract_s = result["floor"]["embed_s"], result["floor"]["extract_s"]
    print(json.dumps(result, indent=2))
    print(
        f"\n{len(files)} documents: add {result['add_s']:.1f} s + cognify "
        f"{result['cognify_s']:.1f} s = {total:.1f} s ({len(passages) / total:.1f} docs/s); "
        f"peak RSS {result['peak_rss_mib']:.0f} MiB"
    )
    print(
        f"floor: embed {embed_s:.1f} s + extract {extract_s:.1f} s = {embed_s + extract_s:.1f} s; "
        f"ingestion / floor = {total / (embed_s + extract_s):.2f}x"
    )
    floor_cpu = result["floor"]["embed_cpu_s"] + result["floor"]["extract_cpu_s"]
    print(
        f"CPU: ingestion {result['cpu_s']:.1f} s, floor {floor_cpu:.1f} s "
        f"(embed {result['floor']['embed_cpu_s']:.1f} + extract "
        f"{result['floor']['extract_cpu_s']:.1f}); ingestion / floor = "
        f"{result['cpu_s'] / floor_cpu:.2f}x; load {result['load_1min'][0]:.1f}"
        f"-{result['load_1min'][1]:.1f}"
    )
    graph = result["graph"]
    print(
        f"graph: {graph.get('Entity', 0)} entities, {result.get('relationships', 0)} relationships "
        f"written, {graph.get('edges', 0)} edges in all"
    )
    for kind, figures in result["search"].items():
        print(f"{kind}: p50 {figures['p50_ms']:.1f} ms, p95 {figures['p95_ms']:.1f} ms")


if __name__ == "__main__":
    main()
