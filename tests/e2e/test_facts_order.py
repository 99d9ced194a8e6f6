"""Facts over time end in the same intervals whatever happens on the way: one dated corpus of
changing facts (bench/changing_facts_corpus.py) added in 5 shuffled orders, cognified in
concurrent batches (2 worker processes on Neo4j + Redis; 2 worker threads on SQLite), cognified
again whole, and then a document that ended a fact deleted. Every order must end in the same
validity of every fact, both after the re-cognify and after the deletion (which restores the
fact the document ended). Offline: spaCy and the local embedder, no LLM.
"""

from __future__ import annotations

import random
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from api.services.add import AddOptions, add_files
from core.models.facts import SUPERSEDED_BY, VALID_FROM, VALID_SPANS, VALID_TO
from core.models.vocabulary import ENTITY, STRUCTURAL_EDGES
from core.settings import Settings
from runtime import Runtime
from tests.backends import succeeded, threaded_runtime
from tests.distributed import distributed_runtime, running_workers, worker_env
from tests.services import neo4j_uri, redis_url
from workers.orchestration import cognify

sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))  # last: shadows nothing
from changing_facts_corpus import Corpus, generate  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ORDERS = 5
CORPUS = generate(seed=7, per_kind=1)
Snapshot = dict[tuple[str, str, str], tuple]


def ended_by(corpus: Corpus) -> tuple[str, str]:
    """The document telling the second CEO of the first company's start, and that CEO's
    predecessor (whose fact it ended)."""
    history = next(h for h in corpus.histories if h.kind == "ceo")
    first, second = history.changes[:2]
    doc = next(
        d for d in corpus.documents if second.value in d.text and str(second.day.year) in d.text
    )
    return doc.name, first.value


def ingest_in(rt: Runtime, dataset: str, folder: Path, seed: int) -> None:
    """Add the corpus in a shuffled order, each document with its date, and cognify it."""
    docs = list(CORPUS.documents)
    random.Random(seed).shuffle(docs)
    folder.mkdir(parents=True, exist_ok=True)
    for doc in docs:
        path = folder / doc.name
        path.write_text(doc.text, encoding="utf-8")
        added = add_files(rt, dataset, [(doc.name, path)], AddOptions(document_date=str(doc.day)))
        assert not added.report.rejected
    succeeded(rt, cognify(rt, dataset), timeout=900)


def intervals(rt: Runtime, dataset: str) -> Snapshot:
    """The validity of every fact of the dataset, keyed by names (ids are the same anyway)."""
    nodes = {n.id: n.name for n in rt.graph.find_nodes(dataset, ENTITY, limit=10_000)}
    edges = rt.graph.edges_of(sorted(nodes), exclude=sorted(STRUCTURAL_EDGES), limit=100_000)
    keys = {e.id: (nodes.get(e.source, "?"), e.name, nodes.get(e.target, "?")) for e in edges}
    return {
        keys[e.id]: (
            e.properties.get(VALID_FROM),
            e.properties.get(VALID_TO),
            [tuple(s) for s in e.properties.get(VALID_SPANS)],
            keys.get(e.properties.get(SUPERSEDED_BY), e.properties.get(SUPERSEDED_BY)),
        )
        for e in edges
        if VALID_SPANS in e.properties
    }


def run_orders(rt: Runtime, folder: Path) -> None:
    """Every order: ingest, re-cognify, delete; the same intervals each time."""
    doc, predecessor = ended_by(CORPUS)
    seen: list[tuple[Snapshot, Snapshot]] = []
    for seed in range(ORDERS):
        dataset = f"order-{seed}-{uuid.uuid4().hex[:6]}"
        try:
            ingest_in(rt, dataset, folder / dataset, seed)
            succeeded(rt, cognify(rt, dataset, None, "all"), timeout=900)
            before = intervals(rt, dataset)
            rt.catalog.remove_named(dataset, doc)
            seen.append((before, intervals(rt, dataset)))
        finally:
            rt.catalog.remove_dataset(dataset)
    first_before, first_after = seen[0]
    assert sum(1 for v in first_before.values() if v[1] is not None) >= 3  # facts did change
    for before, after in seen[1:]:
        assert before == first_before
        assert after == first_after
    ended = {k: v for k, v in first_before.items() if k[0] == predecessor and v[3]}
    assert ended and all(first_after.get(k) != v for k, v in ended.items())  # restored


def test_any_order_on_sqlite_with_worker_threads_ends_alike(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", batch_size=2)
    with threaded_runtime(settings, threads=2) as rt:
        run_orders(rt, tmp_path / "docs")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    broker = f"{redis_url().rsplit('/', 1)[0]}/9"
    redis.Redis.from_url(broker).flushdb()  # this module's own Redis database: no stale queues
    return worker_env(tmp_path / "home", broker, neo4j_uri(), "")


@pytest.fixture
def distributed(env: dict[str, str], tmp_path: Path) -> Iterator[Runtime]:
    with running_workers(env, tmp_path, count=2), distributed_runtime(env) as rt:
        yield rt


@pytest.mark.services
def test_any_order_on_neo4j_with_two_worker_processes_ends_alike(distributed, tmp_path):
    run_orders(distributed, tmp_path / "docs")
