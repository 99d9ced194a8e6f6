"""Search latency as the store grows: the same questions at 1x, 4x, 10x and 40x the corpus.

    .venv/bin/python bench/search_scale.py --backend embedded --scales 1,4,10,40
    .venv/bin/python bench/search_scale.py --backend neo4j --scales 1,4,10,40   # Neo4j + vectors

One `cogmill serve` subprocess (bench/search_latency.py's) on a fresh home, embedded stores
or Neo4j graph + Neo4j vectors (`--neo4j`, default the test services'). For each scale it
first grows one dataset to `scale` x MuSiQue's 1,890 passages (bench/corpora.py: MuSiQue,
2Wiki, then renamed generations) with `POST .../data` and a cognify job in the server's own
worker threads (the local models, no LLM: GRAPH_COMPLETION answers context only), then
asks MuSiQue's questions of each type in `--types` through `POST /api/v1/search` (top 10):
1. one client, one request at a time (after an untimed warm-up of a few questions);
2. open loop: requests arrive at `--rate` per second (Poisson, every type in turn) and go to
   whichever of `--clients` clients is free; a request's latency runs from its arrival, so
   time spent waiting for a free client counts (no coordinated omission). Without `--rate`
   the rate is `--utilisation` of the capacity the first scale's single-client phase
   measured (one core for the server process, whose Python holds the GIL, and the machine's
   cores for the server and Neo4j together, over their CPU-s per request), then kept for
   every scale.
With `--home DIR --dataset NAME` the store is kept, and a later run on them adds only what
is missing (`add` skips unchanged files, cognify processed documents): the 40x store is
built once. Each phase prints per type p50/p95/p99 and R@5 (single client), the requests/s
achieved, the server's and Neo4j's CPU-ms per request (/proc) and the load average; the
offered rate's share of capacity at each scale says whether the open loop stayed below it.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import DEFAULT_NEO4J_URI  # noqa: E402
from bench.corpora import corpus, pool  # noqa: E402
from bench.processes import listening_pid  # noqa: E402
from bench.search_latency import ADD_PER_REQUEST, REQUEST_TIMEOUT_S, Server, server_cpu_s  # noqa: E402
from retrieval.evaluation import Bench, default_data_dir, load_bench, percentile  # noqa: E402

TYPES = "GRAPH_PPR,CHUNKS,GRAPH_COMPLETION"
WARM_UP_QUESTIONS = 5
K = 5  # recall@K of the single-client answers


@dataclass
class Phase:
    """Latencies (s) and top document names per type, errors, and the CPU the phase took."""

    name: str
    latencies: dict[str, list[float]] = field(default_factory=dict)
    recall: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    server_cpu_s: float = 0.0
    neo4j_cpu_s: float = 0.0
    load: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, kind: str, seconds: float, error: str | None, hit: float | None) -> None:
        with self.lock:
            self.latencies.setdefault(kind, []).append(seconds)
            if error is not None:
                self.errors.append(f"{kind}: {error}")
            if hit is not None:
                self.recall.setdefault(kind, []).append(hit)

    @property
    def requests(self) -> int:
        return sum(len(v) for v in self.latencies.values())

    def capacity(self, cores: int) -> float:
        """Requests/s the machine could serve at this CPU per request: the server is one
        Python process (about one core, the GIL), Neo4j has the cores as well."""
        count = max(self.requests, 1)
        server, both = self.server_cpu_s / count, (self.server_cpu_s + self.neo4j_cpu_s) / count
        return min(1 / max(server, 1e-6), cores / max(both, 1e-6))


@dataclass(frozen=True)
class Job:
    kind: str
    question: str
    gold: frozenset[str]


class Asker:
    """Sends one search and scores its answer against the question's gold titles."""

    def __init__(self, url: str, dataset: str, titles: dict[str, str]) -> None:
        self.url, self.dataset, self.titles = url, dataset, titles

    def ask(self, client: httpx.Client, job: Job) -> tuple[str | None, float]:
        body = {"query": job.question, "datasets": [self.dataset], "search_type": job.kind}
        try:
            answer = client.post("/api/v1/search", json={**body, "top_k": 10})
        except httpx.HTTPError as err:
            return f"{type(err).__name__}: {err}", 0.0
        if answer.status_code != 200:
            return f"{answer.status_code} {answer.text[:200]}", 0.0
        ranked: list[str] = []
        for result in answer.json()["results"]:
            for source in result["sources"][:1]:
                title = self.titles.get(source["document_name"], "")
                if title not in ranked:
                    ranked.append(title)
        found = len(job.gold & set(ranked[:K]))
        return None, found / len(job.gold)


def measured(
    phase: Phase, server: Server, neo4j_pid: int | None, run: Callable[[Phase], None]
) -> Phase:
    """`run(phase)` timed, with the server's and Neo4j's CPU over it."""
    cpu, neo4j = server_cpu_s(server.proc.pid), server_cpu_s(neo4j_pid) if neo4j_pid else 0.0
    started = time.perf_counter()
    run(phase)
    phase.wall_s = time.perf_counter() - started
    phase.server_cpu_s = server_cpu_s(server.proc.pid) - cpu
    phase.neo4j_cpu_s = (server_cpu_s(neo4j_pid) - neo4j) if neo4j_pid else 0.0
    phase.load = os.getloadavg()[0]
    return phase


def single(asker: Asker, jobs: list[Job], phase: Phase) -> None:
    with httpx.Client(base_url=asker.url, timeout=REQUEST_TIMEOUT_S) as client:
        for job in jobs:
            started = time.perf_counter()
            error, hit = asker.ask(client, job)
            phase.add(job.kind, time.perf_counter() - started, error, hit)


def open_loop(asker: Asker, jobs: list[Job], rate: float, clients: int, phase: Phase) -> None:
    """Poisson arrivals at `rate`/s for every job in turn, served by `clients` clients."""
    draw, due, arrivals = random.Random(0), 0.0, queue.Queue[tuple[float, Job] | None]()
    for job in jobs:
        due += draw.expovariate(rate)
        arrivals.put((due, job))
    for _ in range(clients):
        arrivals.put(None)
    start = time.perf_counter()

    def client_loop() -> None:
        with httpx.Client(base_url=asker.url, timeout=REQUEST_TIMEOUT_S) as client:
            while (item := arrivals.get()) is not None:
                at, job = item
                time.sleep(max(0.0, start + at - time.perf_counter()))
                error, _hit = asker.ask(client, job)
                phase.add(job.kind, time.perf_counter() - (start + at), error, None)

    threads = [threading.Thread(target=client_loop) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def grow(server: Server, dataset: str, have: int, want: int, bench: Bench, data: Path) -> int:
    """Add passages `have`..`want` of the scale corpus to `dataset` and cognify them."""
    base = len(bench.passages)
    passages = corpus(-(-want // base), base, pool(data))[have:want]
    docs = [
        {
            "name": bench.file_name(i) if i < base else f"scale_{i - base:05d}.txt",
            "text": f"{p.title}\n{p.text}",
        }
        for i, p in enumerate(passages, start=have)
    ]
    started = time.perf_counter()
    with httpx.Client(base_url=server.url, timeout=600) as client:
        for first in range(0, len(docs), ADD_PER_REQUEST):
            page = docs[first : first + ADD_PER_REQUEST]
            added = client.post(f"/api/v1/datasets/{dataset}/data", json={"documents": page})
            if added.status_code != 200:
                raise SystemExit(f"adding to {dataset}: {added.status_code} {added.text[:300]}")
        job_id = client.post(f"/api/v1/datasets/{dataset}/cognify", json={}).json()["job_id"]
        while (status := client.get(f"/api/v1/jobs/{job_id}").json()["status"]) in (
            "queued",
            "running",
        ):
            time.sleep(2)
    if status != "succeeded":
        raise SystemExit(f"cognify of {dataset} ended {status}; see {server.log.name}")
    print(
        f"grew {dataset} to {want:,} passages (+{want - have:,}) in "
        f"{time.perf_counter() - started:.0f} s",
        file=sys.stderr,
    )
    return want


def table(phase: Phase, rate: float | None = None, cores: int = 1) -> list[str]:
    count = phase.requests
    head = (
        f"  {phase.name}: {count} requests in {phase.wall_s:.1f} s ({count / phase.wall_s:.1f}/s)"
        f"; CPU-ms/request server {1000 * phase.server_cpu_s / max(count, 1):.1f}, Neo4j "
        f"{1000 * phase.neo4j_cpu_s / max(count, 1):.1f}; errors {len(phase.errors)}; "
        f"load {phase.load:.1f}"
    )
    if rate:
        head += f"; offered {rate:.2f}/s = {rate / phase.capacity(cores):.0%} of capacity"
    lines = [head]
    for kind, values in phase.latencies.items():
        ms = [1000 * percentile(values, q) for q in (0.5, 0.95, 0.99)]
        hits = phase.recall.get(kind)
        recall = f"  R@{K} {sum(hits) / len(hits):.3f}" if hits else ""
        lines.append(
            f"    {kind:<18} p50 {ms[0]:8.1f}  p95 {ms[1]:8.1f}  p99 {ms[2]:8.1f} ms{recall}"
        )
    lines += [f"    error: {e}" for e in phase.errors[:5]]
    return lines


def start(args: argparse.Namespace, home: Path, log: Path) -> tuple[Server, int | None]:
    """The server on `home` for the backend, ready (and warm on Neo4j); Neo4j's pid."""
    if args.backend == "neo4j":
        os.environ.update(COGMILL_NEO4J_URI=args.neo4j, COGMILL_VECTOR_STORE="neo4j")
    for name in ("COGMILL_LLM_BASE_URL", "COGMILL_EMBEDDING_BASE_URL"):
        os.environ.pop(name, None)  # the local models: no LLM, the local embedder
    server = Server(home, log)
    server.wait_ready()
    if args.backend != "neo4j":
        return server, None
    server.wait_warm()
    port = int(args.neo4j.rsplit(":", 1)[1].split("/")[0])
    return server, listening_pid(port)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("embedded", "neo4j"), default="embedded")
    parser.add_argument("--scales", default="1,4,10,40", help="x MuSiQue's passages, ascending")
    parser.add_argument("--types", default=TYPES)
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--rate", type=float, help="open loop: requests/s (default: derived)")
    parser.add_argument("--utilisation", type=float, default=0.5, help="of capacity, for --rate")
    parser.add_argument("--repeat", type=int, default=2, help="open loop: the jobs N times")
    parser.add_argument("--data", type=Path, default=default_data_dir(), help="bench folder")
    parser.add_argument("--home", type=Path, help="keep the store here (default: a temp dir)")
    parser.add_argument("--dataset", help="with --home: reuse (and grow) this dataset")
    parser.add_argument(
        "--neo4j", default=os.environ.get("COGMILL_TEST_NEO4J_URI", DEFAULT_NEO4J_URI)
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    scales = [int(s) for s in args.scales.split(",")]
    if scales != sorted(set(scales)) or scales[0] < 1:
        parser.error("--scales must be ascending positive integers, e.g. 1,4,10,40")
    bench = load_bench("musique", args.data)
    titles = {bench.file_name(i): p.title for i, p in enumerate(bench.passages)}
    questions = bench.questions[: args.questions]
    kinds = [k.strip().upper() for k in args.types.split(",")]
    jobs = [Job(kind, q.text, q.gold) for q in questions for kind in kinds]
    work = Path(tempfile.mkdtemp(prefix="search-scale-"))
    home = args.home or work / "home"
    dataset = args.dataset or f"scale_{uuid.uuid4().hex[:6]}"
    cores = os.cpu_count() or 1
    server, neo4j_pid = start(args, home, work / "serve.log")
    figures: list[dict[str, object]] = []
    try:
        asker, have, rate = Asker(server.url, dataset, titles), 0, args.rate
        for scale in scales:
            have = grow(server, dataset, have, scale * len(bench.passages), bench, args.data)
            single(asker, jobs[: WARM_UP_QUESTIONS * len(kinds)], Phase("warm-up"))
            one = measured(Phase("1 client"), server, neo4j_pid, partial(single, asker, jobs))
            if rate is None:  # a fraction of the capacity of the first scale, then kept
                rate = args.utilisation * one.capacity(cores)
            loop = partial(open_loop, asker, jobs * args.repeat, rate, args.clients)
            many = measured(Phase(f"{args.clients} clients, open loop"), server, neo4j_pid, loop)
            print(f"\n{scale}x ({have:,} passages, {args.backend}):")
            print("\n".join(table(one) + table(many, rate, cores)), flush=True)
            figures.append({"scale": scale, "passages": have, "rate": rate,
                            "phases": [_summary(p) for p in (one, many)]})  # fmt: skip
    finally:
        if args.backend == "neo4j" and not args.home:
            httpx.delete(f"{server.url}/api/v1/datasets/{dataset}", timeout=3600)
        server.stop()
        if args.json:
            args.json.write_text(json.dumps(figures, indent=1))
        shutil.rmtree(work, ignore_errors=True)
    ratios(figures)


def _summary(phase: Phase) -> dict[str, object]:
    return {
        "name": phase.name,
        "requests": phase.requests,
        "wall_s": round(phase.wall_s, 2),
        "server_cpu_ms_per_request": round(1000 * phase.server_cpu_s / max(phase.requests, 1), 2),
        "neo4j_cpu_ms_per_request": round(1000 * phase.neo4j_cpu_s / max(phase.requests, 1), 2),
        "errors": len(phase.errors),
        "load": phase.load,
        "ms": {
            k: [round(1000 * percentile(v, q), 2) for q in (0.5, 0.95, 0.99)]
            for k, v in phase.latencies.items()
        },  # fmt: skip
        "recall_at_5": {k: round(sum(v) / len(v), 4) for k, v in phase.recall.items()},
    }


def ratios(figures: list[dict[str, object]]) -> None:
    """p95 of each type at every scale over its p95 at the first, per phase."""
    if len(figures) < 2:
        return
    first = figures[0]
    print(f"\np95 / p95 at {first['scale']}x (target for GRAPH_PPR at 40x: at most 1.5):")
    for later in figures[1:]:
        for base, phase in zip(first["phases"], later["phases"], strict=True):  # type: ignore[call-overload]
            cells = ", ".join(
                f"{kind} {phase['ms'][kind][1] / max(base['ms'][kind][1], 1e-9):.2f}"
                for kind in phase["ms"]
            )
            print(f"  {later['scale']}x {phase['name']}: {cells}")


if __name__ == "__main__":
    main()
