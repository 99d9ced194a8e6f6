"""Which embeddings earn their keep: recall per search type without each kind of vector.

    .venv/bin/python bench/ablate_vectors.py [--split tune] [--home DIR] [--data DIR]

Ingests MuSiQue once with `cogmill eval`'s ingestion (embedded stores, the offline
extractor, every vector computed; `--home` keeps it for the next run), measures recall@k of
each search type on the `--split` questions, then, for each kind of vector below, removes
that kind's vectors from a copy of the home and measures again. Removing a kind's vectors is
what not computing them does to a search: the graph keeps its nodes, no search finds them by
vector. The kinds:
  chunk summaries      the per-chunk TextSummary (the extractor's summary of a chunk)
  document summaries   TextSummary nodes with a scope (summarize_documents: a document's or
                       a segment's summary; none when it equals its one chunk's)
  relation names       EdgeType nodes (one per relationship name per dataset)
Prints, per type, the baseline recall and each ablation's change, and how many vectors of
each kind the store held: a kind without which no type's R@5 falls by `--threshold` is not
worth its embedding and vector-index cost (one whose removal raises a type's recall least).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from api.services.evaluation import Results, run_eval  # noqa: E402
from core.models.graph import Node  # noqa: E402
from core.models.vocabulary import EDGE_TYPE, TEXT_SUMMARY  # noqa: E402
from core.settings import Settings  # noqa: E402
from retrieval.evaluation import AUTO, EvalType, default_data_dir  # noqa: E402
from retrieval.models import SearchType  # noqa: E402
from runtime import Runtime  # noqa: E402

BENCH = "musique"
DATASET = f"eval-{BENCH}"  # run_eval's dataset for the bench
TYPES: tuple[EvalType, ...] = (
    SearchType.CHUNKS,
    SearchType.SUMMARIES,
    SearchType.GRAPH_COMPLETION,
    SearchType.TRIPLET_COMPLETION,
    SearchType.HYBRID_COMPLETION,
    SearchType.GRAPH_PPR,
    AUTO,
)
PAGE = 1000
KINDS = ("chunk-summaries", "document-summaries", "relation-names")


def _all_nodes(runtime: Runtime, node_type: str) -> list[Node]:
    found: list[Node] = []
    while page := runtime.graph.find_nodes(DATASET, node_type, limit=PAGE, offset=len(found)):
        found += page
    return found


def kinds(runtime: Runtime) -> dict[str, list[str]]:
    """The vector ids of each ablated kind in the bench's dataset."""
    summaries = _all_nodes(runtime, TEXT_SUMMARY)
    return {
        "chunk summaries": [n.id for n in summaries if "scope" not in n.properties],
        "document summaries": [n.id for n in summaries if "scope" in n.properties],
        "relation names": [n.id for n in _all_nodes(runtime, EDGE_TYPE)],
    }


def ablated(home: Path, into: Path, ids: list[str]) -> Path:
    """A copy of `home` whose vector store lacks `ids`."""
    shutil.copytree(home, into)
    runtime = Runtime(Settings(home=into, llm_base_url=None))
    try:
        runtime.vectors.delete(ids)
    finally:
        runtime.close()
    return into


def recall(results: Results, k: int) -> dict[str, float]:
    return {str(kind): f.recall[k] for kind, f in results[BENCH].items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=default_data_dir(), help="bench folder")
    parser.add_argument("--home", type=Path, help="keep (or reuse) the full store here")
    parser.add_argument("--split", default="tune", choices=("all", "tune", "test"))
    parser.add_argument("--limit", type=int, default=0, help="only the first N passages")
    parser.add_argument("--threshold", type=float, default=0.01, help="an R@5 change that counts")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument(
        "--kinds", default=",".join(KINDS), help=f"comma-separated, among {','.join(KINDS)}"
    )
    args = parser.parse_args()
    if unknown := set(args.kinds.split(",")) - set(KINDS):
        parser.error(f"unknown kinds {sorted(unknown)}; use {','.join(KINDS)}")
    args.kinds = [k.replace("-", " ") for k in args.kinds.split(",")]
    with tempfile.TemporaryDirectory(prefix="ablate-") as tmp:
        home = args.home or Path(tmp) / "full"

        def measure(where: Path) -> Results:
            return run_eval(where, args.data, [BENCH], TYPES, limit=args.limit, split=args.split)

        base = measure(home)
        runtime = Runtime(Settings(home=home, llm_base_url=None))
        try:
            found = kinds(runtime)
        finally:
            runtime.close()
        figures = {"all vectors": {k: recall(base, k) for k in (2, 5, 10)}}
        found = {kind: ids for kind, ids in found.items() if kind in args.kinds}
        for kind, ids in found.items():
            copy = ablated(home, Path(tmp) / kind.replace(" ", "-"), ids)
            results = measure(copy)
            figures[kind] = {k: recall(results, k) for k in (2, 5, 10)}
            shutil.rmtree(copy)
    report(figures, {kind: len(ids) for kind, ids in found.items()}, args)


def report(figures: dict[str, dict[int, dict[str, float]]], sizes: dict[str, int], args) -> None:
    """The R@5 table: the baseline, then each ablation's change; and the verdict per kind."""
    if args.json:
        args.json.write_text(json.dumps({"figures": figures, "vectors": sizes}, indent=1))
    base = figures["all vectors"][5]
    ablations = [kind for kind in figures if kind != "all vectors"]
    print(f"MuSiQue {args.split}: R@5 with every vector, and its change without each kind")
    print(f"{'type':<22}{'all':>8}" + "".join(f"{'- ' + kind:>22}" for kind in ablations))
    for kind_name, value in base.items():
        cells = "".join(f"{figures[a][5][kind_name] - value:>+22.3f}" for a in ablations)
        print(f"{kind_name:<22}{value:>8.3f}{cells}")
    print(f"{'vectors held':<30}" + "".join(f"{sizes[a]:>22,}" for a in ablations))
    for kind in ablations:
        # A kind earns its keep when some type needs it: R@5 falls without it.
        loss = max(base[t] - figures[kind][5][t] for t in base)
        gain = max(figures[kind][5][t] - base[t] for t in base)
        verdict = (
            "earns its keep" if loss >= args.threshold else "no type needs it: not worth computing"
        )
        print(f"{kind}: R@5 falls at most {loss:.3f}, rises at most {gain:.3f} -> {verdict}")


if __name__ == "__main__":
    main()
