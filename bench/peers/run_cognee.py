"""cognee's default embedded set-up on the bench passages (runs in .venv-peers/cognee).

Default stores (SQLite, LanceDB, the Ladybug graph; their subprocesses included in the CPU
figure), default pipeline (`cognee.add` then `cognee.cognify`), default structured-output
framework; the LLM (gpt-4o-mini) and the embeddings (text-embedding-3-small at the bench's
dimension) are sent to the stand-in through cognee's own OpenAI/litellm clients. Telemetry
off. Search: `cognee.search(only_context=True)` for GRAPH_COMPLETION (the type compared)
and CHUNKS.

    python run_cognee.py --input IN.json --work DIR --standin URL --standin-pid PID --out OUT.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from treecpu import StandIn, TreeCPU, latency, peak_rss_mib, runner_args  # noqa: E402

DATASET = "musique"
MODES = ("GRAPH_COMPLETION", "CHUNKS")


def configure(args: argparse.Namespace, dim: int) -> None:
    """cognee reads its settings from the environment at import: set them first."""
    work = Path(args.work)
    os.environ.update(
        {
            "LLM_PROVIDER": "openai",
            "LLM_MODEL": "openai/gpt-4o-mini",
            "LLM_ENDPOINT": args.standin,
            "LLM_API_KEY": "stand-in",
            "EMBEDDING_PROVIDER": "openai",
            "EMBEDDING_MODEL": "openai/text-embedding-3-small",
            "EMBEDDING_ENDPOINT": args.standin,
            "EMBEDDING_API_KEY": "stand-in",
            "EMBEDDING_DIMENSIONS": str(dim),
            "DATA_ROOT_DIRECTORY": str(work / "data"),
            "SYSTEM_ROOT_DIRECTORY": str(work / "system"),
            "COGNEE_LOGS_DIR": str(work / "logs"),
            "TELEMETRY_DISABLED": "1",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }
    )


async def run(args: argparse.Namespace) -> dict[str, object]:
    data = json.loads(Path(args.input).read_text())
    configure(args, data["embedding_dim"])
    import cognee
    from cognee.modules.search.types import SearchType

    cognee.config.data_root_directory(str(Path(args.work) / "data"))
    cognee.config.system_root_directory(str(Path(args.work) / "system"))
    await cognee.prune.prune_data()
    await cognee.prune.prune_system(metadata=True)
    standin = StandIn(args.standin, args.standin_pid)
    cpu = TreeCPU()
    await cognee.add([p["text"] for p in data["passages"]], dataset_name=DATASET)
    added = cpu.read()["wall_s"]
    await cognee.cognify([DATASET])
    ingest = {**cpu.read(), "add_s": added}
    served = standin.read()
    queries = {}
    for mode in MODES:
        kind = SearchType[mode]
        await cognee.search(data["warmup_question"], query_type=kind, only_context=True)
        times, empty = [], 0
        for question in data["questions"]:
            started = time.perf_counter()
            found = await cognee.search(question, query_type=kind, only_context=True)
            times.append((time.perf_counter() - started) * 1000)
            empty += not found
        queries[mode] = {**latency(times), "empty": empty}
    entities = await count_entities()
    if entities == 0:
        raise SystemExit("cognee stored no entity: the stand-in's replies no longer validate")
    return {
        "system": "cognee",
        "ingest": ingest,
        "standin": served,
        "queries": queries,
        "graph": {"entities": entities},
        "peak_rss_mib": peak_rss_mib(),
    }


async def count_entities() -> int:
    """Entity nodes in cognee's graph (-1 if its graph engine cannot say)."""
    try:
        from cognee.infrastructure.databases.graph import get_graph_engine

        engine = await get_graph_engine()
        nodes, _edges = await engine.get_graph_data()
        return sum(1 for _id, props in nodes if props.get("type") == "Entity")
    except Exception:  # noqa: BLE001 - a count for the table only
        return -1


def main() -> None:
    args = runner_args(__doc__)
    result = asyncio.run(run(args))
    Path(args.out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
