"""The eval use case (`cogmill eval`): ingest each bench into a home (once), then measure
every type.

The home is reused between runs: `add` skips unchanged files and `cognify` skips processed
documents, so a second run over the same `--home` goes straight to the questions. Ingestion
always uses the offline extractor and searches never call an LLM, whatever is configured:
the figures compare retrieval alone.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from api.services.add import add_files
from api.services.cognify import cognify
from api.services.jobs import tracker
from core.errors import CogmillError, InvalidInput
from core.models.jobs import Job
from core.settings import Settings
from retrieval.evaluation import (
    AUTO,
    EVAL_TYPES,
    Bench,
    EvalType,
    Progress,
    TypeFigures,
    evaluate,
    load_bench,
    write_documents,
)
from retrieval.registry import RETRIEVERS
from runtime import Runtime
from workers.embedded import open_runtime

Results = dict[str, dict[EvalType, TypeFigures]]


class EvalError(CogmillError, RuntimeError):
    """Ingesting a bench failed (the job did not succeed or rejected documents)."""

    code = "eval_failed"


def default_types() -> list[EvalType]:
    """The compared types that exist: the dense baseline, the graph searches, AUTO."""
    return [kind for kind in EVAL_TYPES if kind == AUTO or kind in RETRIEVERS]


def _quiet(_: str) -> None:
    """Progress sink when nobody listens."""


def ingest_bench(runtime: Runtime, bench: Bench, dataset: str, progress: Progress) -> Job:
    """Add the bench's passages as documents and cognify what is new. Raises EvalError."""
    with tempfile.TemporaryDirectory() as tmp:
        documents = [(name, path) for path, name in write_documents(bench, Path(tmp))]
        rejected = add_files(runtime, dataset, documents).report.rejected
    if rejected:
        raise EvalError(f"{len(rejected)} passages rejected, first: {rejected[0]}")
    started = time.perf_counter()
    job = cognify(runtime, dataset)
    jobs = tracker(runtime)
    progress(f"{bench.name}: cognify {job.total_documents} new documents into {dataset!r}")
    while not job.status.finished:
        time.sleep(0.2)
        job = jobs.get(job.id)
    if job.status.value != "succeeded" or job.errors:
        raise EvalError(
            f"cognify of {dataset!r} ended {job.status.value} with {len(job.errors)} errors; "
            f"see `cogmill jobs show {job.id}`"
        )
    if job.total_documents:
        optimize = getattr(runtime.vectors, "optimize", None)
        if optimize is not None:
            optimize()  # build the vector indexes once, after the bulk load
        progress(f"{bench.name}: ingested in {time.perf_counter() - started:.0f} s")
    return job


def run_eval(
    home: Path | None,
    data_dir: Path,
    benches: Sequence[str],
    types: Sequence[EvalType],
    *,
    dataset_prefix: str = "eval-",
    limit: int = 0,
    split: str = "all",
    progress: Progress = _quiet,
) -> Results:
    """Ingest (when needed) and evaluate each bench (its `split` of questions: all, tune or
    test); a temporary home when `home` is None."""
    missing = [str(kind) for kind in types if kind != AUTO and kind not in RETRIEVERS]
    if missing:
        available = ", ".join([*(kind.value for kind in RETRIEVERS), AUTO])
        raise InvalidInput(f"search type(s) {', '.join(missing)} not available; use {available}")
    loaded = [load_bench(name, data_dir).limited(limit) for name in benches]
    loaded = [bench.split(split) for bench in loaded]
    with tempfile.TemporaryDirectory() as tmp:
        # No LLM: the offline extractor builds the graph and no search type answers.
        settings = Settings(home=home or Path(tmp) / "home", llm_base_url=None)
        results: Results = {}
        with open_runtime(settings) as runtime:
            for bench in loaded:
                dataset = f"{dataset_prefix}{bench.name}"
                ingest_bench(runtime, bench, dataset, progress)
                ctx = runtime.retrieval()
                ctx.llm = None
                progress(f"{bench.name}: {len(bench.questions)} questions x {len(types)} types")
                results[bench.name] = evaluate(ctx, bench, dataset, types)
        return results


def results_json(results: Results) -> dict[str, dict[str, dict[str, float]]]:
    """`{bench: {type: {"recall@k": fraction}}}`."""
    return {
        bench: {str(kind): figures.as_json() for kind, figures in by_type.items()}
        for bench, by_type in results.items()
    }


def results_table(results: Results) -> str:
    """A Markdown table: one row per (bench, type), recall@k and context latency."""
    ks = sorted({k for by_type in results.values() for f in by_type.values() for k in f.recall})
    head = ["bench", "type", *(f"R@{k}" for k in ks), "p50 ms", "p95 ms"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for bench, by_type in results.items():
        for kind, figures in by_type.items():
            cells = [bench, str(kind), *(f"{figures.recall[k]:.3f}" for k in ks)]
            cells += [f"{figures.p50_ms:.0f}", f"{figures.p95_ms:.0f}"]
            lines.append("| " + " | ".join(cells) + " |")
    routed = [
        f"{bench} AUTO routed: " + ", ".join(f"{t} {n}" for t, n in sorted(f.routed.items()))
        for bench, by_type in results.items()
        for kind, f in by_type.items()
        if f.routed
    ]
    return "\n".join(lines + routed)
