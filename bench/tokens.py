"""LLM tokens per passage: what cogmill's extraction and summaries send and receive.

    .venv/bin/python bench/tokens.py [--limit N] [--data DIR]

Ingests the first N MuSiQue passages (all 1,890 with `--limit 0`), one document each, through
the default pipeline in embedded mode, with the test LLM server as the LLM and the embedder.
The server counts tokens with the local word-piece tokenizer over what a real endpoint counts:
the messages and the JSON schema sent in `response_format`. The job's own counters (the same
ones `cogmill jobs show` prints) give the tokens per step; the prompt's parts are counted
apart, so the figures can be explained. The stand-in's replies are its own deterministic
extraction, so the completion side is indicative only: a real model's graph is larger.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import common  # noqa: F401 - puts the repository on sys.path

from core.llm.extractor import PROMPT_PATH
from core.llm.schemas import schema_of
from core.llm.usage import count_tokens
from core.models.extraction import KnowledgeGraph
from core.settings import Settings
from pipelines.summarize_documents import PROMPT as SUMMARY_PROMPT
from retrieval.evaluation import default_data_dir, load_bench, write_documents
from tests.backends import add_files, llm_settings, succeeded, threaded_runtime
from tests.llm_server import LLMTestServer
from workers.orchestration import cognify
from workers.usage import job_usage

STEPS = ("extract_graph", "summarize_documents")
# Input tokens per passage of indexing, as published (extraction and any summaries).
PUBLISHED = (
    ("HippoRAG 2 (OpenIE)", "about 790"),
    ("LightRAG", "7-12x HippoRAG 2's"),
    ("Microsoft GraphRAG", "7-12x HippoRAG 2's"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, default=300, help="passages (0: all)")
    parser.add_argument("--data", type=Path, default=default_data_dir())
    args = parser.parse_args()
    bench = load_bench("musique", args.data)
    if args.limit:
        bench.passages = bench.passages[: args.limit]
    with tempfile.TemporaryDirectory() as tmp, LLMTestServer(usage="wordpiece") as server:
        files = write_documents(bench, Path(tmp) / "docs")
        settings = Settings(home=Path(tmp) / "home", **llm_settings(server))
        with threaded_runtime(settings, threads=settings.worker_threads) as rt:
            started = time.perf_counter()
            report = add_files(rt, "musique", [path for path, _ in files])
            job = succeeded(rt, cognify(rt, "musique"), 3600)
            seconds = time.perf_counter() - started
            steps = {step: job_usage(rt.state, job.id, step)["llm"] for step in STEPS}
    passages = len(files) - len(report.rejected)
    print(f"{passages} MuSiQue passages, {job.counts['chunks']} chunks, {seconds:.0f} s")
    print(f"{'step':<22}{'calls/passage':>14}{'input/passage':>15}{'output/passage':>16}")
    for step, used in (*steps.items(), ("total", _sum(steps.values()))):
        print(
            f"{step:<22}{used['calls'] / passages:>14.2f}"
            f"{used['prompt_tokens'] / passages:>15.0f}"
            f"{used['completion_tokens'] / passages:>16.0f}"
        )
    texts = [f"{p.title}\n{p.text}" for p in bench.passages]
    system, schema, summary = count_tokens(
        [
            PROMPT_PATH.read_text(encoding="utf-8"),
            json.dumps(schema_of(KnowledgeGraph)),
            SUMMARY_PROMPT,
        ]
    )
    text = sum(count_tokens(texts)) / len(texts)
    print("\nWhat an extraction prompt is made of (word pieces):")
    print(f"  system prompt {system}, JSON schema {schema}, passage {text:.0f} on average")
    print(f"  the summary prompt's instructions: {summary} (a one-chunk document's summary")
    print("  repeats its chunk's and is not asked for)")
    print("\nPublished input tokens per passage for indexing:")
    for name, figure in PUBLISHED:
        print(f"  {name:<22}{figure}")


def _sum(usages: object) -> dict[str, int]:
    total: dict[str, int] = {}
    for used in usages:  # type: ignore[attr-defined]
        for name, value in used.items():
            total[name] = total.get(name, 0) + value
    return total


if __name__ == "__main__":
    main()
