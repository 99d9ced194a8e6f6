"""The distributed bench's printout: one table per run, each figure with what it includes."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from bench.processes import Window

PROCESSES = ("workers", "neo4j", "redis", "stand-in", "driver")
STORES = ("Neo4j files", "Neo4j indexes", "Redis used_memory")
KEY_KINDS = 12  # the largest kinds of Redis key listed

INCLUDES = """What each figure includes:
  wall s        add (the catalog's batched add, from the driver) + cognify (job start to its
                status finished); chunks/s = the job's chunks / that wall time.
  CPU-ms/chunk  utime+stime from /proc over the same window, per process tree, / chunks:
                workers (both worker processes and any children), neo4j (its JVM), redis,
                stand-in (tests/llm_server.py: every LLM and embedding answer), driver (this
                process: the adds, job polling). Other users' processes are not counted.
  created/s     nodes and relationships in the whole Neo4j database after the run minus
                before (graph :Node/:REL, vector nodes, support nodes: everything), / wall s.
  sampled       every 2 s over add + cognify: RSS of each process; Neo4j's files on disk (the
                database folder + transaction logs; "indexes": its schema/ folder, every
                index); Redis used_memory (the stores', the broker's and the results').
  floor         same run, after it: the run's :Node/:REL graph rewritten by the neo4j driver
                alone (UNWIND MERGE on a unique id, as many statements as the job's batches)
                + the embedder alone over the run's passages (32 per call) against the
                stand-in. Excludes vector writes, summary/entity-name embeddings, the LLM,
                all bookkeeping. ratio = run / floor, CPU-ms per chunk summed over processes.
  idle          each process's CPU over a few seconds with no work, just before the run
                (Neo4j's JIT and GC go on in the background, in the run and its floor too).
  load          1-minute load average at the window's start -> end (2 cores, shared)."""


def _ms_per_chunk(window: Window, chunks: int) -> dict[str, float]:
    per = {name: window.cpu.get(name, 0.0) * 1000 / max(chunks, 1) for name in PROCESSES}
    per["all"] = sum(per.values())
    return per


def _row(label: str, window: Window, chunks: int) -> str:
    per = _ms_per_chunk(window, chunks)
    cells = " ".join(f"{per[name]:8.2f}" for name in (*PROCESSES, "all"))
    load = f"{window.load[0]:.1f}->{window.load[1]:.1f}"
    return f"  {label:<13}{window.wall_s:8.1f}{cells}   {load}"


def render(results: list[dict[str, Any]], args: argparse.Namespace, latency_ms: int) -> None:
    print(INCLUDES)
    header = "".join(f"{name:>9}" for name in (*PROCESSES, "all"))
    for r in results:
        chunks = int(r["chunks"])
        total: Window = r["total"]
        created = r["created"]
        print(
            f"\n{r['scale']}x: {r['corpus']}; {chunks:,} chunks; LLM {latency_ms} ms; "
            f"status {r['status']}, {r['errors']} errors; {r['llm_calls']:,} LLM calls"
        )
        idle: Window = r["idle"]
        busy = ", ".join(f"{n} {idle.cpu[n] / idle.wall_s:.0%}" for n in PROCESSES)
        print(f"  idle {idle.wall_s:.0f} s just before (share of a core): {busy}")
        print(f"  {'window':<13}{'wall s':>8}{header}   load (CPU-ms per chunk)")
        print(_row("add", r["add"], chunks))
        print(_row("cognify", r["cognify"], chunks))
        print(_row("add+cognify", total, chunks))
        print(
            f"  chunks/s: {chunks / total.wall_s:.1f} add+cognify, "
            f"{chunks / r['cognify'].wall_s:.1f} cognify alone; add = "
            f"{r['add'].wall_s / r['cognify'].wall_s:.0%} of cognify's wall time"
        )
        print(
            f"  created: {created['nodes']:,} nodes ({created['nodes'] / total.wall_s:.0f}/s), "
            f"{created['relationships']:,} relationships "
            f"({created['relationships'] / total.wall_s:.0f}/s); of them graph "
            f"{created['graph_nodes']:,} :Node, {created['graph_edges']:,} :REL. The job's "
            f"own count of MERGEs: {r['merges_written']}"
        )
        print(f"  worker peak RSS so far: {r['worker_peak_rss_mib']} MiB")
        for name, trend in r.get("sampled_mib", {}).items():
            print(
                f"  {name + ':':<19} {trend['first']:>6} → peak {trend['peak']:>6} → "
                f"{trend['last']:>6} MiB; second half {trend['slope_mib_per_min']:+7.1f} MiB/min"
            )
        sampled = r.get("sampled_mib", {})
        if "Neo4j files" in sampled and chunks:
            grown = {k: sampled[k]["last"] - sampled[k]["first"] for k in STORES if k in sampled}
            print(
                "  grown per 1,000 chunks: "
                + ", ".join(f"{k} {1000 * v / chunks:.1f} MiB" for k, v in grown.items())
            )
        if files := r.get("neo4j_files_mib"):
            print(f"  Neo4j files after the run (MiB, the whole database): {files}")
        if nodes := r.get("vector_nodes_created"):
            per = ", ".join(f"{k} {v / max(chunks, 1):.2f}" for k, v in nodes.items())
            print(f"  vector nodes created per chunk: {per}")
        if keys := r.get("redis_keys"):
            print("  Redis keys after the run, by kind (MEMORY USAGE; keys with no expiry):")
            for kind, held in list(keys.items())[:KEY_KINDS]:
                print(
                    f"    {kind:<48} {held['keys']:>9,} keys {held['bytes'] / (1 << 20):9.1f} MiB"
                    f" {held['no_ttl']:>9,} no TTL"
                )
        if "redis_commands" in r:  # the stores' and the broker's, add + cognify
            commands = int(r["redis_commands"])
            print(f"  Redis commands: {commands:,}, {commands / max(chunks, 1):.1f} per chunk")
        if "floor_graph" in r:
            graph, embed = r["floor_graph"], r["floor_embed"]
            print(
                f"  floor: graph {graph['nodes']:,} nodes + {graph['edges']:,} edges "
                f"({graph['rows_per_write']} rows per statement); embed {embed['texts']:,} texts"
            )
            print(_row("floor graph", graph["window"], chunks))
            print(_row("floor embed", embed["window"], chunks))
            floor_cpu = sum(_ms_per_chunk(w["window"], chunks)["all"] for w in (graph, embed))
            floor_wall = graph["window"].wall_s + embed["window"].wall_s
            run_cpu = _ms_per_chunk(total, chunks)["all"]
            print(
                f"  ratio to floor: CPU {run_cpu:.1f} / {floor_cpu:.1f} ms per chunk = "
                f"{run_cpu / floor_cpu:.1f}x; wall {total.wall_s:.1f} / {floor_wall:.1f} s = "
                f"{total.wall_s / floor_wall:.1f}x"
            )
    if args.mode == "throughput" and len(results) > 1:
        base = results[0]
        for r in results[1:]:
            ratio = r["total"].wall_s / base["total"].wall_s
            scale = r["scale"] / base["scale"]
            print(
                f"\n{r['scale']}x / {base['scale']}x add+cognify time: {ratio:.2f} "
                f"(linear: {scale:.1f}; target at most {scale * 1.05:.1f})"
            )
    if args.mode == "latency":
        ideal = args.in_flight  # one call per chunk, one second each
        share = results[0]["chunks"] / results[0]["cognify"].wall_s / ideal
        print(f"\nideal {ideal} chunks/s; cognify reached {share:.0%} of it")
    if args.json:
        for r in results:
            print(json.dumps(r, default=lambda o: asdict(o)))
