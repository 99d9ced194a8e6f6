"""Where a search's CPU goes, in process: CPU-ms per query by part, store calls per query.

    .venv/bin/python bench/search_profile.py --home DIR                      # embedded
    COGMILL_NEO4J_URI=bolt://127.0.0.1:7697 COGMILL_VECTOR_STORE=neo4j \\
        .venv/bin/python bench/search_profile.py --home DIR --dataset NAME   # Neo4j

Opens the stores of `--home` (a copy, unless `--in-place`) as `cogmill serve` does (one BLAS
thread), warms up on a few questions, then runs each search type over the MuSiQue questions
(100 by default) one at a time: first timed by this thread's CPU clock (no profiler), then
again under cProfile. Prints CPU-ms per query (p50 and mean), the profile's cumulative
CPU-ms per query for the parts of a search (query embedding, vector queries, graph reads,
PageRank, ...) with their calls per query, and the top functions by own time.
`--dump FILE` writes each question's top-10 chunk ids per type; `--compare FILE` counts the
lists that differ from an earlier dump (rankings must not move with a speed-up).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.models.graph import dataset_id  # noqa: E402
from core.settings import Settings  # noqa: E402
from retrieval.evaluation import default_data_dir, load_bench, percentile  # noqa: E402
from retrieval.models import SearchType  # noqa: E402
from retrieval.search import search  # noqa: E402
from runtime import Runtime  # noqa: E402

WARM_UP = 8
# Parts of a search, as (label, file suffix, function name) of the profile's entries.
PARTS = (
    ("whole search", "retrieval/search.py", "search"),
    ("query embedding", "core/embeddings/local.py", "embed"),
    ("  tokenizer", "~", "<method 'encode_batch' of 'tokenizers.Tokenizer' objects>"),
    ("vector query (edge)", "core/stores/qdrant/edge.py", "search"),
    ("vector query (neo4j)", "core/stores/neo4j/vectors.py", "search"),
    ("graph get_nodes (sqlite)", "core/stores/sqlite/graph.py", "get_nodes"),
    ("graph edges_of (sqlite)", "core/stores/sqlite/graph.py", "edges_of"),
    ("graph get_nodes (neo4j)", "core/stores/neo4j/graph.py", "get_nodes"),
    ("graph edges_of (neo4j)", "core/stores/neo4j/graph.py", "edges_of"),
    ("entity chunks (sqlite)", "core/stores/sqlite/graph.py", "chunks_of_entities"),
    ("entity chunks (neo4j)", "core/stores/neo4j/graph.py", "chunks_of_entities"),
    ("neo4j round trips", "neo4j/_sync/work/transaction.py", "run"),
    ("PPR seeds", "retrieval/ppr/retriever.py", "_seeds"),
    ("  exact entities", "retrieval/ppr/retriever.py", "exact_entities"),
    ("  linked names", "retrieval/ppr/retriever.py", "_linked"),
    ("neighbourhood expand", "retrieval/ppr/neighbourhood.py", "expand"),
    ("  load entities", "retrieval/ppr/neighbourhood.py", "_load_entities"),
    ("  entities of chunks", "retrieval/ppr/neighbourhood.py", "_entities_of"),
    ("  link", "retrieval/ppr/neighbourhood.py", "_link"),
    ("pagerank", "retrieval/ppr/pagerank.py", "personalised_pagerank"),
    ("ranked + evidence", "retrieval/ppr/retriever.py", "_ranked"),
    ("  mass flows", "retrieval/ppr/paths.py", "__init__"),
    ("  provenance", "retrieval/ppr/paths.py", "provenance"),
    ("pydantic Node init", "pydantic/main.py", "__init__"),
)


def run(runtime: Runtime, kind: SearchType, questions: list[str], dataset: str) -> dict:
    """CPU-ms per query unprofiled, then a profile of the same queries; and the top-10 ids."""
    ctx = runtime.retrieval()
    cpu_ms, tops = [], {}
    process_started = time.process_time()
    for question in questions:
        started = time.thread_time()
        response = search(ctx, question, [dataset], kind, 10)
        cpu_ms.append(1000 * (time.thread_time() - started))
        ids = [r.sources[0].chunk_id if r.sources else r.text for r in response.results]
        tops[question] = [
            ids,
            [r.score for r in response.results],
            [r.evidence for r in response.results],
        ]
    process_ms = 1000 * (time.process_time() - process_started) / len(questions)
    profile = cProfile.Profile(time.thread_time)
    profile.enable()
    for question in questions:
        search(ctx, question, [dataset], kind, 10)
    profile.disable()
    return {
        "cpu_ms": cpu_ms,
        "process_ms": process_ms,
        "tops": tops,
        "stats": pstats.Stats(profile),
    }


def parts(stats: pstats.Stats, count: int) -> list[str]:
    """Cumulative CPU-ms and calls per query of each part found in the profile."""
    found: dict[str, tuple[float, float]] = {}
    for (path, _line, name), (_cc, calls, _tt, cumulative, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        for label, suffix, function in PARTS:
            if name == function and path.endswith(suffix):
                old = found.get(label, (0.0, 0.0))
                found[label] = (old[0] + cumulative, old[1] + calls)
    return [
        f"  {label:<26} {1000 * found[label][0] / count:7.2f} CPU-ms  "
        f"{found[label][1] / count:6.1f} calls per query"
        for label, _s, _f in PARTS
        if label in found
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--in-place", action="store_true", help="open --home itself, no copy")
    parser.add_argument("--dataset", default="musique")
    parser.add_argument("--types", default="GRAPH_PPR,CHUNKS")
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--top", type=int, default=25, help="functions listed by own time")
    parser.add_argument("--dump", type=Path)
    parser.add_argument("--compare", type=Path)
    args = parser.parse_args()
    questions = [q.text for q in load_bench("musique", default_data_dir()).questions]
    questions = questions[: args.questions]
    kinds = [SearchType(k.strip().upper()) for k in args.types.split(",")]
    work = Path(tempfile.mkdtemp(prefix="search-profile-"))
    home = args.home
    if not args.in_place:
        home = work / "home"
        shutil.copytree(args.home, home)
    runtime = Runtime(Settings(home=home))
    if not runtime.graph.get_nodes([dataset_id(args.dataset)]):  # else it times empty searches
        runtime.close()
        shutil.rmtree(work, ignore_errors=True)
        sys.exit(f"no dataset {args.dataset!r} in {args.home} (an eval home's is 'eval-musique')")
    dumped: list[list] = []
    try:
        with threadpool_limits(limits=1, user_api="blas"):
            ctx = runtime.retrieval()
            for kind in kinds:
                for question in questions[:WARM_UP]:
                    search(ctx, question, [args.dataset], kind, 10)
            for kind in kinds:
                result = run(runtime, kind, questions, args.dataset)
                cpu = result["cpu_ms"]
                print(
                    f"{kind.value}: {len(cpu)} queries, CPU-ms per query p50 "
                    f"{statistics.median(cpu):.1f}  p95 {percentile(cpu, 0.95):.1f}  "
                    f"mean {statistics.mean(cpu):.1f} (every thread of the process: mean "
                    f"{result['process_ms']:.1f})"
                )
                print("\n".join(parts(result["stats"], len(questions))))
                result["stats"].sort_stats("tottime").print_stats(args.top)
                dumped += [[kind.value, q, ids] for q, ids in result["tops"].items()]
    finally:
        runtime.close()
        shutil.rmtree(work, ignore_errors=True)
    if args.dump:
        args.dump.write_text(json.dumps(dumped))
    if args.compare:
        earlier = {(k, q): ids for k, q, ids in json.loads(args.compare.read_text())}
        now = {(k, q): ids for k, q, ids in dumped}
        shared = [key for key in now if key in earlier]
        differ = [key for key in shared if now[key][0] != earlier[key][0]]
        scores = [key for key in shared if now[key][1:] != earlier[key][1:]]
        print(
            f"ranking vs {args.compare}: {len(shared) - len(differ)} of {len(shared)} top-10 "
            f"lists identical; {len(scores)} differ in scores or evidence"
        )
        for key in differ[:10]:
            print(f"  differs: {key[0]} {key[1][:70]!r}")


if __name__ == "__main__":
    main()
