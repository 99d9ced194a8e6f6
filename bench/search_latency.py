"""Search latency as a user sees it: `POST /api/v1/search` of a `cogmill serve` subprocess.

    .venv/bin/python bench/search_latency.py --home /tmp/musique_home            # embedded
    COGMILL_NEO4J_URI=bolt://127.0.0.1:7697 .venv/bin/python bench/search_latency.py \\
        --home DIR --dataset NAME                                                   # Neo4j

The server runs on its defaults (one process, its default threads) with the environment
given (COGMILL_* settings pass through). Timing is the HTTP client's, from request to the
parsed answer, so HTTP, validation, the query embedding, the stores and serialisation are all
in. Phases, each over the bench's questions (MuSiQue's 100 by default), per search type:
1. single client, one request at a time;
2. `--clients` concurrent clients (16), each sending its next request as soon as it has the
   answer (a closed loop), or after a pause drawn around `--think-ms`;
3. the same while a cognify job runs in the server (`--load-docs` fresh passages, tagged so
   nothing is cached, in a dataset of their own that is deleted afterwards).
Each prints p50/p95/max, errors, requests/s, requests/s per core (of the machine's
`os.cpu_count()`), the server's CPU-ms per request (from /proc) and the load average; with
`--neo4j-pid PID` (the Neo4j java process the stores use) Neo4j's CPU-ms per request too.
`--wait-warm-up` starts once `/ready` no longer says "warming" (`cogmill serve` warming a Neo4j
server; COGMILL_SERVE_WARM_UP=0 turns that off). `--dump FILE` writes each question's top-10
chunk ids per type; `--compare FILE` counts the questions whose top 10 differ from an earlier
dump (a ranking check across code changes).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.corpora import corpus, pool  # noqa: E402
from retrieval.evaluation import default_data_dir, load_bench, percentile  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
STARTUP_S = 300.0  # the server answers /health within this (model loads on a loaded machine)
REQUEST_TIMEOUT_S = 120.0
ADD_PER_REQUEST = 500  # documents per POST .../data (the API takes up to 1,000)


@dataclass
class Phase:
    """One phase's latencies (seconds), errors, wall time and the server's CPU seconds."""

    name: str
    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    server_cpu_s: float = 0.0
    neo4j_cpu_s: float | None = None
    load: tuple[float, float, float] = (0.0, 0.0, 0.0)
    note: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, kind: str, seconds: float, error: str | None) -> None:
        with self.lock:
            self.latencies.setdefault(kind, []).append(seconds)
            if error is not None:
                self.errors.append(f"{kind}: {error}")

    def report(self) -> list[str]:
        count = sum(len(v) for v in self.latencies.values())
        rate = count / self.wall_s if self.wall_s else 0.0
        cores = os.cpu_count() or 1
        lines = [
            f"{self.name}: {count} requests in {self.wall_s:.1f} s, {rate:.1f} req/s "
            f"({rate / cores:.1f} per core of {cores}), server "
            f"{1000 * self.server_cpu_s / max(count, 1):.1f} CPU-ms/request, "
            + (
                ""
                if self.neo4j_cpu_s is None
                else f"Neo4j {1000 * self.neo4j_cpu_s / max(count, 1):.1f} CPU-ms/request, "
            )
            + f"errors {len(self.errors)}, load average {self.load[0]:.1f} {self.load[1]:.1f} "
            f"{self.load[2]:.1f}{self.note}"
        ]
        for kind, values in self.latencies.items():
            lines.append(
                f"  {kind:<18} p50 {1000 * percentile(values, 0.5):7.1f} ms  "
                f"p95 {1000 * percentile(values, 0.95):7.1f} ms  "
                f"max {1000 * max(values):7.1f} ms  mean {1000 * statistics.mean(values):7.1f} ms"
            )
        lines += [f"  error: {e}" for e in self.errors[:10]]
        return lines


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_cpu_s(pid: int) -> float:
    """utime + stime of the process (its threads included), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


class Server:
    """`cogmill serve` on a free loopback port, stopped on exit."""

    def __init__(self, home: Path, log: Path) -> None:
        self.port = free_port()
        env = dict(os.environ, COGMILL_HOME=str(home))
        self.log = log.open("w")
        cmd = [str(ROOT / ".venv/bin/cogmill"), "serve", "--port", str(self.port)]
        self.proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=self.log, stderr=self.log)
        self.url = f"http://127.0.0.1:{self.port}"

    def wait_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(
                    f"cogmill serve exited ({self.proc.returncode}); see {self.log.name}"
                )
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise SystemExit(f"cogmill serve did not answer /health in {STARTUP_S:.0f} s")

    def wait_warm(self) -> float:
        """Seconds until /ready no longer says the server is warming up (COGMILL_SERVE_WARM_UP)."""
        started = time.monotonic()
        while time.monotonic() - started < STARTUP_S:
            if httpx.get(f"{self.url}/ready", timeout=30).json().get("warm_up") != "warming":
                return time.monotonic() - started
            time.sleep(0.5)
        raise SystemExit(f"cogmill serve was still warming up after {STARTUP_S:.0f} s")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def search(
    client: httpx.Client, dataset: str, kind: str, query: str
) -> tuple[list[str], str | None]:
    """The top-10 chunk ids of one search, and the error (None when it succeeded)."""
    body = {"query": query, "datasets": [dataset], "search_type": kind, "top_k": 10}
    try:
        answer = client.post("/api/v1/search", json=body)
    except httpx.HTTPError as err:
        return [], f"{type(err).__name__}: {err}"
    if answer.status_code != 200:
        return [], f"{answer.status_code} {answer.text[:200]}"
    results = answer.json()["results"]
    return [r["sources"][0]["chunk_id"] if r["sources"] else r["text"][:40] for r in results], None


def run_phase(
    server: Server,
    phase: Phase,
    jobs: list[tuple[str, str]],
    dataset: str,
    clients: int,
    think_s: float = 0.0,
    neo4j_pid: int | None = None,
) -> dict[tuple[str, str], list[str]]:
    """Every (type, question) once, spread over `clients` threads; returns the top ids. Each
    client waits an exponentially drawn `think_s` on average before each request (0: none,
    the next request leaves as soon as the answer is in)."""
    draw = random.Random(0)
    tops: dict[tuple[str, str], list[str]] = {}
    cursor = iter(range(len(jobs)))
    cursor_lock = threading.Lock()

    def client_loop() -> None:
        with httpx.Client(base_url=server.url, timeout=REQUEST_TIMEOUT_S) as client:
            while True:
                with cursor_lock:
                    index = next(cursor, None)
                if index is None:
                    return
                if think_s:
                    with cursor_lock:
                        pause = draw.expovariate(1 / think_s)
                    time.sleep(pause)
                kind, query = jobs[index]
                started = time.perf_counter()
                ids, error = search(client, dataset, kind, query)
                phase.add(kind, time.perf_counter() - started, error)
                tops[(kind, query)] = ids

    neo4j_cpu = server_cpu_s(neo4j_pid) if neo4j_pid else 0.0
    cpu, started = server_cpu_s(server.proc.pid), time.perf_counter()
    threads = [threading.Thread(target=client_loop) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    phase.wall_s = time.perf_counter() - started
    phase.server_cpu_s = server_cpu_s(server.proc.pid) - cpu
    if neo4j_pid:
        phase.neo4j_cpu_s = server_cpu_s(neo4j_pid) - neo4j_cpu
    phase.load = os.getloadavg()
    return tops


def start_cognify(
    server: Server, dataset: str, count: int, data: Path, tag: str | None = None
) -> str:
    """Add `count` MuSiQue passages to `dataset` and start its cognify; the job id. With a
    `tag` the last passages, made new by it (no cache hits); without, the first ones as
    they are (as `bench/ingest_musique.py --limit` adds them), and past 1,890 the passages
    `bench/ingest_musique.py --scale` adds."""
    bench = load_bench("musique", data)
    if tag is None:
        docs = [
            {"name": bench.file_name(i), "text": f"{p.title}\n{p.text}"}
            for i, p in enumerate(bench.passages[:count])
        ]
        # Past MuSiQue's own: bench/corpora.py's next passages, as `ingest_musique.py --scale`.
        base = len(bench.passages)
        scaled = corpus(-(-count // base), base, pool(data))[base:count] if count > base else []
        docs += [
            {"name": f"scale_{i:05d}.txt", "text": f"{p.title}\n{p.text}"}
            for i, p in enumerate(scaled)
        ]
    else:
        docs = [
            {"name": f"load_{i:05d}.txt", "text": f"{p.title} ({tag})\n{p.text} Batch {tag}."}
            for i, p in enumerate(bench.passages[-count:])
        ]
    with httpx.Client(base_url=server.url, timeout=600) as client:
        for start in range(0, len(docs), ADD_PER_REQUEST):
            page = docs[start : start + ADD_PER_REQUEST]
            added = client.post(f"/api/v1/datasets/{dataset}/data", json={"documents": page})
            if added.status_code != 200:
                raise SystemExit(f"adding to {dataset}: {added.status_code} {added.text[:300]}")
        accepted = client.post(f"/api/v1/datasets/{dataset}/cognify", json={})
        accepted.raise_for_status()
        return str(accepted.json()["job_id"])


def build(server: Server, dataset: str, count: int, data: Path) -> None:
    """Cognify the first `count` MuSiQue passages into `dataset` and wait for the job."""
    started, job_id = time.perf_counter(), start_cognify(server, dataset, count, data)
    while (status := job_status(server, job_id)) in ("queued", "running"):
        time.sleep(2)
    print(
        f"built {dataset}: {count} passages, job {status} in {time.perf_counter() - started:.0f} s"
    )


def job_status(server: Server, job_id: str) -> str:
    return job_state(server, job_id)[0]


def job_state(server: Server, job_id: str) -> tuple[str, int, int]:
    """The job's status, batches done and tokens embedded so far."""
    answer = httpx.get(f"{server.url}/api/v1/jobs/{job_id}", timeout=60).json()
    embedded = (answer.get("embeddings") or {}).get("prompt_tokens", 0)
    batches = (answer.get("counts") or {}).get("batches_done", 0)
    return str(answer.get("status", "?")), batches, embedded


def with_cognify(server: Server, args: argparse.Namespace, run: Callable[[], Phase]) -> Phase:
    """Run a phase while a cognify job runs; says whether the job outlasted the phase."""
    load_dataset = f"latency_load_{uuid.uuid4().hex[:6]}"
    job_id = start_cognify(server, load_dataset, args.load_docs, args.data, uuid.uuid4().hex[:8])
    time.sleep(args.load_lead_s)  # let the job get into its steps
    before, batches, embedded = job_state(server, job_id)
    started = time.monotonic()
    phase = run()
    after, batches_after, embedded_after = job_state(server, job_id)
    rate = (embedded_after - embedded) / (time.monotonic() - started)
    phase.note = (
        f"; cognify job {before} at start, {after} at end, meanwhile "
        f"{batches_after - batches} batches done and {rate:,.0f} tokens embedded/s"
    )
    if after in ("queued", "running"):
        httpx.post(f"{server.url}/api/v1/jobs/{job_id}/cancel", timeout=60)
        deadline = time.monotonic() + 300
        while job_status(server, job_id) in ("queued", "running") and time.monotonic() < deadline:
            time.sleep(1)
    httpx.delete(f"{server.url}/api/v1/datasets/{load_dataset}", timeout=600)
    return phase


def compare(tops: dict[tuple[str, str], list[str]], path: Path) -> str:
    earlier = {(k, q): ids for k, q, ids in json.loads(path.read_text())}
    shared = [key for key in tops if key in earlier]
    differ = [key for key in shared if tops[key] != earlier[key]]
    sets = [key for key in differ if set(tops[key]) != set(earlier[key])]
    return (
        f"ranking vs {path}: {len(shared) - len(differ)} of {len(shared)} top-10 lists identical, "
        f"{len(differ)} differ in order ({len(sets)} in membership)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True, help="the stores (copied first)")
    parser.add_argument("--in-place", action="store_true", help="serve --home itself, no copy")
    parser.add_argument("--dataset", default="musique")
    parser.add_argument("--data", type=Path, default=default_data_dir(), help="bench folder")
    parser.add_argument("--types", default="GRAPH_PPR,CHUNKS")
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--think-ms", type=float, default=0.0, help="mean pause per client")
    parser.add_argument("--repeat", type=int, default=1, help="the questions N times (phases 2-3)")
    parser.add_argument("--load-docs", type=int, default=400, help="passages the cognify adds")
    parser.add_argument("--load-lead-s", type=float, default=5.0)
    parser.add_argument("--phases", default="single,concurrent,cognify")
    parser.add_argument("--build", type=int, default=0, help="first cognify N passages into it")
    parser.add_argument("--dump", type=Path)
    parser.add_argument("--compare", type=Path)
    parser.add_argument("--neo4j-pid", type=int, help="report this process's CPU per request")
    parser.add_argument(
        "--wait-warm-up", action="store_true", help="measure once /ready says the server is warm"
    )
    args = parser.parse_args()

    questions = [q.text for q in load_bench("musique", args.data).questions]
    questions = questions[: args.questions]
    kinds = [k.strip().upper() for k in args.types.split(",")]
    jobs = [(kind, q) for q in questions for kind in kinds]
    work = Path(tempfile.mkdtemp(prefix="search-latency-"))
    home = args.home
    if not args.in_place:
        home = work / "home"
        shutil.copytree(args.home, home)
    server = Server(home, work / "serve.log")
    phases: list[Phase] = []
    try:
        server.wait_ready()
        if args.wait_warm_up:
            print(f"the server's warm-up took {server.wait_warm():.1f} s after /health answered")
        if args.build:
            build(server, args.dataset, args.build, args.data)
        warm = Phase("warm-up")
        run_phase(server, warm, jobs[: 4 * len(kinds)], args.dataset, 1)
        tops = {}
        wanted = args.phases.split(",")
        if "single" in wanted:
            phases.append(Phase("single client"))
            tops = run_phase(server, phases[-1], jobs, args.dataset, 1, 0.0, args.neo4j_pid)
        think_s = args.think_ms / 1000
        clients = f"{args.clients} clients" + (
            f" (think {args.think_ms:.0f} ms)" if think_s else ""
        )
        if "concurrent" in wanted:
            phases.append(Phase(clients))
            many = jobs * args.repeat
            run_phase(server, phases[-1], many, args.dataset, args.clients, think_s, args.neo4j_pid)
        if "cognify" in wanted:

            def loaded() -> Phase:
                phase = Phase(f"{clients} + cognify")
                run_phase(server, phase, jobs * args.repeat, args.dataset, args.clients, think_s)
                return phase

            phases.append(with_cognify(server, args, loaded))
        for phase in phases:
            print("\n".join(phase.report()))
        if tops and args.dump:
            args.dump.write_text(json.dumps([[k, q, ids] for (k, q), ids in tops.items()]))
        if tops and args.compare:
            print(compare(tops, args.compare))
    finally:
        server.stop()
        if any(phase.errors for phase in phases):  # keep the server's side of them
            kept = Path(tempfile.gettempdir()) / f"search-latency-{os.getpid()}.log"
            shutil.copy(work / "serve.log", kept)
            print(f"the server's log: {kept}")
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
