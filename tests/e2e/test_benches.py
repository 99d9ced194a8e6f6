"""Every bench in bench/ run through its own command line at a tiny size: a bench no test runs
rots (one broke silently when the bench modules moved). Each must exit 0 and print its
figures; what the figures are is the benches' business, not asserted here.

The data is tests/bench_data.py's tiny folder in the real files' formats; the services are
the test Redis and Neo4j where a bench needs them. The peers' own venvs are not built here:
`bench.peers` runs cogmill alone.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench_data import write_bench_data
from tests.services import neo4j_uri, redis_url

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 600  # each run; a tiny run takes seconds to a minute on a quiet machine


def bench(line: str, env: dict[str, str] | None = None, module: bool = False) -> str:
    """Run `bench/NAME.py ARGS...` (`line` is "NAME ARGS...", split on spaces; or
    `-m bench.NAME`) from the repository; its output (stdout and stderr), once it exited 0."""
    name, *args = line.split()
    target = ["-m", f"bench.{name}"] if module else [str(ROOT / "bench" / f"{name}.py")]
    done = subprocess.run(
        [sys.executable, *target, *args],
        cwd=ROOT,
        env={**os.environ, "COGMILL_LOG_LEVEL": "WARNING", **(env or {})},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{name} exited {done.returncode}:\n{output[-3000:]}"
    return output


def has(output: str, *patterns: str) -> None:
    missing = [p for p in patterns if not re.search(p, output)]
    assert not missing, f"missing {missing} in:\n{output[-3000:]}"


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_bench_data(tmp_path_factory.mktemp("bench") / "data")


@pytest.fixture(scope="module")
def ingested(data: Path) -> tuple[Path, str]:
    """An embedded home holding 2x the tiny MuSiQue (the rest: 2Wiki, then renamed passages),
    written by bench/ingest_musique.py, and what that printed."""
    home = data.parent / "home"
    return home, bench(f"ingest_musique --data {data} --home {home} --scale 2")


@pytest.fixture(scope="module")
def home(ingested: tuple[Path, str]) -> Path:
    return ingested[0]


@pytest.fixture(scope="module")
def services() -> dict[str, str]:
    return {"COGMILL_TEST_REDIS_URL": redis_url(), "COGMILL_TEST_NEO4J_URI": neo4j_uri()}


def test_ingest_musique(ingested: tuple[Path, str]) -> None:
    has(ingested[1], r"48 documents: add", r"ingestion / floor = ", r"GRAPH_PPR: p50")


def test_search_latency(home: Path, data: Path) -> None:
    out = bench(
        f"search_latency --home {home} --data {data} --questions 3 --clients 2 "
        "--phases single,concurrent"
    )
    has(out, r"single client: 6 requests", r"2 clients: 6 requests", r"GRAPH_PPR +p50 .* p95 ")


def test_search_profile(home: Path, data: Path) -> None:
    out = bench(f"search_profile --home {home} --data {data} --questions 3 --top 3")
    has(out, r"GRAPH_PPR: 3 queries, CPU-ms per query", r"CHUNKS: 3 queries", r"pagerank")


def test_ingest_marginal(home: Path, data: Path) -> None:
    out = bench(f"ingest_marginal --base {home} --data {data} --new 3 --skip 40")
    has(out, r"empty: process CPU", r"full: process CPU .* entities before \d+")


def test_search_scale_embedded(data: Path) -> None:
    out = bench(f"search_scale --data {data} --scales 1,2 --questions 3 --clients 2 --repeat 1")
    has(
        out,
        r"1x \(24 passages, embedded\)",
        r"2x \(48 passages, embedded\)",
        r"GRAPH_COMPLETION +p50 .* p99 .* R@5",
        r"offered .* of capacity",
        r"2x 1 client: GRAPH_PPR \d",
    )


@pytest.mark.services
def test_search_scale_neo4j(data: Path, services: dict[str, str]) -> None:
    out = bench(
        f"search_scale --backend neo4j --data {data} --scales 1 --questions 2 --clients 2 "
        "--repeat 1",
        env={**services, "COGMILL_SERVE_WARM_UP": "5"},
    )
    has(out, r"1x \(24 passages, neo4j\)", r"CPU-ms/request server [\d.]+, Neo4j [\d.]*[1-9]")


def test_ablate_vectors(data: Path) -> None:
    out = bench(f"ablate_vectors --data {data} --kinds relation-names")
    has(
        out,
        r"GRAPH_COMPLETION +\d\.\d+ +[+-]\d\.\d+",
        r"relation names: R@5 falls at most \d\.\d+, rises at most",
    )


def test_resync(data: Path) -> None:
    # As a module: bench.resync imports bench.corpora and bench.common, not bare siblings.
    out = bench(f"resync --data {data} --limit 6", module=True)
    has(out, r"6 files, embedded stores", r"unchanged re-sync / first sync \(wall\): ")


def test_tokens(data: Path) -> None:
    has(bench(f"tokens --data {data} --limit 4"), r"HippoRAG 2")


def test_vector_memory() -> None:
    has(bench("vector_memory --sizes 300,600"), r'"points": 600', r'"recall_at_10"')


def test_large_file() -> None:
    has(bench("large_file --mb 0.1"), r'"peak_above_baseline_mib"')


def test_peers_cogmill(data: Path) -> None:
    out = bench(f"peers --systems cogmill --passages 10 --questions 2 --data {data}", module=True)
    has(out, r"cogmill +[\d.]+ +[\d.]+ +1\.0x", r"cogmill +GRAPH_PPR +[\d.]+")


@pytest.mark.services
def test_distributed(data: Path, services: dict[str, str]) -> None:
    # 2x of 20 passages from a pool of 36: the last 4 are renamed (generation 1).
    out = bench(
        f"distributed throughput --data {data} --limit 20 --scales 1,2 --warmup-scale 0 "
        "--warmup 2 --idle 0.5",
        env=services,
    )
    has(
        out,
        r"2x: 40 passages: 24 musique \+ 12 2wiki; 4 renamed",
        r"created: [\d,]+ nodes",
        r"Redis used_memory:",
        r"Neo4j files:",
        r"ratio to floor",
        r"2x / 1x add\+cognify time",
    )


@pytest.mark.services
def test_neo4j_vectors(services: dict[str, str]) -> None:
    out = bench("neo4j_vectors --points 200 --base 400 --small 20", env=services)
    has(out, r"indexed new +\d+ CPU-ms", r"the HNSW insert itself")


@pytest.mark.services
def test_merge_stress(services: dict[str, str]) -> None:
    out = bench("merge_stress --backend both --runs 1 --documents 6 --writers 2", env=services)
    has(out, r"embedded: 1/1 identical", r"neo4j: 1/1 identical")


@pytest.mark.services
@pytest.mark.timeout(1200)  # an undisturbed job and a faulted one, each on worker processes
def test_faults(services: dict[str, str]) -> None:
    out = bench("faults --documents 4 --only delete", env=services)
    has(out, r"fault harness: 4 documents", r"SIGKILL during a dataset delete .* ok")


@pytest.mark.services
def test_load(services: dict[str, str]) -> None:
    redis = services["COGMILL_TEST_REDIS_URL"].rsplit("/", 1)[0] + "/8"
    out = bench(
        "load --pool threads --clients 1 --duration 3 --warmup 1 --documents 4 --batch-size 2 "
        f"--llm-latency-ms 0 --redis {redis} --neo4j {services['COGMILL_TEST_NEO4J_URI']}",
        module=True,  # bench.load and its package bench.loadtest, as modules
    )
    has(out, r"job undisturbed:")
