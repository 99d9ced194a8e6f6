"""Embedded-mode ingestion benchmark on the MuSiQue corpus (run on demand; prints figures).

    .venv/bin/python bench/ingest_musique.py [--limit N] [--data DIR] [--home DIR]

Adds each passage as its own document (the same files `cogmill eval` writes), cognifies them
through the Celery pipeline with the embedded stores, then times CHUNKS, GRAPH_COMPLETION and
GRAPH_PPR searches (top 10) over the 100 questions.
Finally it times the embedder alone and the extractor alone on the same texts: together
they are the floor the whole ingestion is compared with.
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
from pathlib import Path

from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.catalog import AddReport  # noqa: E402
from core.settings import Settings  # noqa: E402
from pipelines.classify import check_supported  # noqa: E402
from retrieval.evaluation import default_data_dir, load_bench, percentile, write_documents  # noqa: E402
from retrieval.models import SearchType  # noqa: E402
from retrieval.search import search  # noqa: E402
from workers.celery_app import configure  # noqa: E402
from workers.embedded import EmbeddedWorker  # noqa: E402
from workers.jobs import JobTracker  # noqa: E402
from workers.orchestration import cognify  # noqa: E402
from workers.runtime import Runtime, use_runtime  # noqa: E402

SEARCH_TYPES = (SearchType.CHUNKS, SearchType.GRAPH_COMPLETION, SearchType.GRAPH_PPR)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def ingest(runtime: Runtime, files: list[tuple[Path, str]]) -> dict[str, float]:
    started = time.perf_counter()
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
    optimize = getattr(runtime.vectors, "optimize", None)
    if optimize:
        optimize()
    return {
        "add_s": added - started,
        "cognify_s": done - added,
        "optimize_s": time.perf_counter() - done,
        "status": job.status.value,
        "errors": len(job.errors),
        **job.counts,
    }


def search_latency(runtime: Runtime, questions: list[str]) -> dict[str, dict[str, float]]:
    figures = {}
    for kind in SEARCH_TYPES:
        ctx = runtime.retrieval()
        search(ctx, questions[0], ["musique"], kind, 10)
        times = []
        for question in questions:
            started = time.perf_counter()
            search(ctx, question, ["musique"], kind, 10)
            times.append((time.perf_counter() - started) * 1000)
        figures[kind.value] = {
            "p50_ms": statistics.median(times),
            "p95_ms": percentile(times, 0.95),
        }
    return figures


def floor(runtime: Runtime, texts: list[str]) -> dict[str, float]:
    """The models alone, one call each over all texts, with every core for BLAS."""
    with threadpool_limits(limits=os.cpu_count(), user_api="blas"):
        started = time.perf_counter()
        runtime.embedder.embed(texts)
        embedded = time.perf_counter()
        runtime.extractor.extract(texts)
        extracted = time.perf_counter()
    return {"embed_s": embedded - started, "extract_s": extracted - embedded}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=default_data_dir(), help="bench folder")
    parser.add_argument("--limit", type=int, default=0, help="only the first N passages")
    parser.add_argument("--home", type=Path, help="keep the stores here (default: a temp dir)")
    args = parser.parse_args()
    bench = load_bench("musique", args.data)
    passages = bench.limited(args.limit).passages if args.limit else bench.passages
    questions = [q.text for q in bench.questions]
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(home=args.home or Path(tmp) / "home")
        runtime = Runtime(settings)
        use_runtime(runtime)
        files = write_documents(bench, Path(tmp) / "docs")[: len(passages)]
        # Load the models first: their start-up is not ingestion throughput.
        runtime.embedder.embed(["warm up"])
        runtime.extractor.extract(["Warm up the parser."])
        result = ingest(runtime, files)
        result["graph"] = runtime.graph.count("musique")
        result["search"] = search_latency(runtime, questions)
        result["peak_rss_mib"] = peak_rss_mib()
        texts = [f"{p.title}\n{p.text}" for p in passages]
        result["floor"] = floor(runtime, texts)
        runtime.close()
    total = result["add_s"] + result["cognify_s"]
    embed_s, extract_s = result["floor"]["embed_s"], result["floor"]["extract_s"]
    print(json.dumps(result, indent=2))
    print(
        f"\n{len(passages)} documents: add {result['add_s']:.1f} s + cognify "
        f"{result['cognify_s']:.1f} s = {total:.1f} s ({len(passages) / total:.1f} docs/s); "
        f"peak RSS {result['peak_rss_mib']:.0f} MiB"
    )
    print(
        f"floor: embed {embed_s:.1f} s + extract {extract_s:.1f} s = {embed_s + extract_s:.1f} s; "
        f"ingestion / floor = {total / (embed_s + extract_s):.2f}x"
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
