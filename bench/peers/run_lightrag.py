"""LightRAG's default embedded set-up on the bench passages (runs in .venv-peers/lightrag).

Default storages (JsonKVStorage, NanoVectorDBStorage, NetworkXStorage in a working folder),
default chunking, gleaning, cache and concurrency; the LLM is LightRAG's own
`gpt_4o_mini_complete` and the embeddings its `openai_embed`, both sent to the stand-in.
The one change from the defaults: the tokenizer is tiktoken's cl100k_base (`gpt-4`), as
o200k_base (gpt-4o-mini's) cannot be fetched here and no package ships it.

    python run_lightrag.py --input IN.json --work DIR --standin URL --standin-pid PID --out OUT.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from treecpu import StandIn, TreeCPU, latency, peak_rss_mib, runner_args  # noqa: E402

MODES = ("mix", "naive")


async def run(args: argparse.Namespace) -> dict[str, object]:
    from lightrag import LightRAG, QueryParam
    from lightrag.llm.openai import gpt_4o_mini_complete, openai_embed
    from lightrag.utils import EmbeddingFunc

    data = json.loads(Path(args.input).read_text())
    embed = EmbeddingFunc(
        embedding_dim=data["embedding_dim"],
        max_token_size=8192,
        func=partial(openai_embed.func, model="text-embedding-3-small"),
    )
    rag = LightRAG(
        working_dir=args.work,
        llm_model_func=gpt_4o_mini_complete,
        embedding_func=embed,
        tiktoken_model_name="gpt-4",
    )
    await rag.initialize_storages()
    standin = StandIn(args.standin, args.standin_pid)
    cpu = TreeCPU()
    names = [p["name"] for p in data["passages"]]
    await rag.ainsert([p["text"] for p in data["passages"]], ids=names, file_paths=names)
    ingest = cpu.read()
    served = standin.read()
    graph = await rag.chunk_entity_relation_graph.get_all_labels()
    if not graph:
        raise SystemExit("LightRAG stored no entity: the stand-in's replies no longer parse")
    queries = {}
    for mode in MODES:
        options = {"mode": mode, "only_need_context": True}
        await rag.aquery(data["warmup_question"], param=QueryParam(**options))
        times, empty = [], 0
        for question in data["questions"]:
            started = time.perf_counter()
            context = await rag.aquery(
                question, param=QueryParam(mode=mode, only_need_context=True)
            )
            times.append((time.perf_counter() - started) * 1000)
            empty += not context or "[no-context]" in str(context)
        queries[mode] = {**latency(times), "empty": empty}
    await rag.finalize_storages()
    return {
        "system": "lightrag",
        "ingest": ingest,
        "standin": served,
        "queries": queries,
        "graph": {"entities": len(graph)},
        "peak_rss_mib": peak_rss_mib(),
    }


def main() -> None:
    args = runner_args(__doc__)
    os.environ["OPENAI_API_BASE"] = args.standin  # what LightRAG reads (and the SDK next)
    os.environ["OPENAI_BASE_URL"] = args.standin
    os.environ.setdefault("OPENAI_API_KEY", "stand-in")
    result = asyncio.run(run(args))
    Path(args.out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
