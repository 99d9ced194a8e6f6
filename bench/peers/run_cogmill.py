"""cogmill's embedded run on the bench passages (cogmill's venv), with bench/ingest_musique.py's
ingestion: `add` of one file per passage, cognify through the in-process Celery worker, then
the vector index build (`optimize()`), all inside the measured window. The LLM and the
embeddings are the stand-in's. Search is in-process (`retrieval.search.search`, top 10).

    python -m bench.peers.run_cogmill --input IN.json --work DIR --standin URL \
        --standin-pid PID --out OUT.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.ingest_musique import ingest  # noqa: E402
from bench.peers.treecpu import StandIn, TreeCPU, latency, peak_rss_mib, runner_args  # noqa: E402
from core.settings import Settings  # noqa: E402
from retrieval.models import SearchType  # noqa: E402
from retrieval.search import search  # noqa: E402
from runtime import Runtime, use_runtime  # noqa: E402

SEARCH_TYPES = (SearchType.GRAPH_PPR, SearchType.CHUNKS)
DATASET = "musique"  # bench/ingest_musique.py's


def run(args: argparse.Namespace) -> dict[str, object]:
    data = json.loads(Path(args.input).read_text())
    work = Path(args.work)
    settings = Settings(
        home=work / "home",
        llm_base_url=args.standin,
        llm_api_key="stand-in",
        embedding_base_url=args.standin,
        embedding_api_key="stand-in",
        embedding_dim=data["embedding_dim"],
    )
    runtime = Runtime(settings)
    use_runtime(runtime)
    files = []
    for passage in data["passages"]:
        path = work / "docs" / passage["name"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(passage["text"], encoding="utf-8")
        files.append((path, passage["name"]))
    standin = StandIn(args.standin, args.standin_pid)
    cpu = TreeCPU()
    steps = ingest(runtime, files)
    started = time.perf_counter()
    optimize = getattr(runtime.vectors, "optimize", None)
    if optimize is not None:  # the embedded vector store builds its indexes once, as eval does
        optimize()
    steps["optimize_s"] = time.perf_counter() - started
    measured = cpu.read()
    served = standin.read()
    if steps["status"] != "succeeded" or steps["errors"]:
        raise SystemExit(f"cogmill's cognify ended {steps['status']} with {steps['errors']} errors")
    queries = {}
    for kind in SEARCH_TYPES:
        ctx = runtime.retrieval()
        search(ctx, data["warmup_question"], [DATASET], kind, 10)
        times, empty = [], 0
        for question in data["questions"]:
            started = time.perf_counter()
            found = search(ctx, question, [DATASET], kind, 10)
            times.append((time.perf_counter() - started) * 1000)
            empty += not found.results
        queries[kind.value] = {**latency(times), "empty": empty}
    graph = runtime.graph.count(DATASET)
    if not graph.get("Entity"):
        raise SystemExit("cogmill stored no entity: check the stand-in's log")
    runtime.close()
    use_runtime(None)
    return {
        "system": "cogmill",
        "ingest": {**measured, **{k: steps[k] for k in ("add_s", "cognify_s", "optimize_s")}},
        "standin": served,
        "queries": queries,
        "graph": {"entities": graph.get("Entity", 0), "edges": graph.get("edges", 0)},
        "peak_rss_mib": peak_rss_mib(),
    }


def main() -> None:
    args = runner_args(__doc__)
    Path(args.out).write_text(json.dumps(run(args), indent=2))


if __name__ == "__main__":
    main()
