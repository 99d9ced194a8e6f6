"""A mixed dataset through every pipeline at once in distributed mode: Celery worker processes
on Redis, Neo4j graph + Neo4j vectors, Redis state, the LLM behind the test server.

One cognify sends each document through its own pipeline: a CSV trio with foreign keys goes
`structured`, a text with dates was added with `--pipeline temporal`, texts naming people and
places by aliases go `default` (with entity resolution). The same dataset, run embedded in this
process (SQLite + Qdrant Edge, worker threads), is the reference: ids are deterministic, so
both backends must hold exactly the same node and edge ids, and keep doing so as documents are
deleted, down to an empty dataset. Explicit expectations pin what the graph must show.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from core.models.graph import entity_id
from core.models.jobs import JobStatus
from core.models.vocabulary import ALIAS, AT, INDEX_FIELDS, INVOLVES
from pipelines.resolve_entities import aliases_of
from runtime import Runtime
from tests.backends import EMBEDDED, LOCAL_DIM, Backend, add_files, finished
from tests.distributed import distributed_runtime, running_workers, worker_env
from tests.llm_server import LLMTestServer
from tests.services import neo4j_uri, redis_database_url
from workers.orchestration import cognify

pytestmark = [pytest.mark.services, pytest.mark.slow]  # worker processes

TEXTS = {
    "customers.csv": "customer_id,name,city\nC001,Alice Martin,Lisbon\nC002,Bruno Costa,Porto\n"
    "C003,Chen Wei,Madrid\nC004,Dana Smith,Berlin\n",
    "products.csv": "sku,title,price\nSKU-RB1,Red bicycle,399\nSKU-TT2,Tea kettle,35\n",
    # 4 of 5 customer ids name a customer: enough for the inferred key (80% containment).
    "orders.csv": "order_id,customer_id,product_sku,quantity\n1001,C002,SKU-RB1,1\n"
    "1002,C001,SKU-TT2,2\n1003,C003,SKU-RB1,1\n1004,C004,SKU-TT2,1\n1005,C009,SKU-TT2,1\n",
    # The test server dates a sentence by its first "[Month] year" and names its capitalised
    # word runs; "Prof." would split there, so the title is written out.
    "history.txt": "Acme Corp was founded by Alice Smith in March 2019. "
    "In 2016, Bob Jones opened a bakery in Lisbon. "
    "In the 1990s, Bob Jones worked for Globex in Berlin.",
    "maria.txt": "Professor Maria Lopez moved to New York City in 2019.",
    "nyc.txt": "Maria Lopez and Carlos Lopez met in NYC last spring.",
    "carlos.txt": "Carlos Lopez works for Acme Inc in Boston.",
}
PIPELINE = {"history.txt": "temporal"}  # as `cogmill add history.txt --pipeline temporal`
ROWS, REFERENCES = 11, 9  # 5 orders -> a product each, 4 -> a known customer (C009 is none)
VECTOR_COLLECTIONS = [f"{t}_{f}" for t, fields in INDEX_FIELDS.items() for f in fields]


@pytest.fixture(scope="module")
def llm() -> Iterator[LLMTestServer]:
    with LLMTestServer() as server:
        yield server


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("mixed")
    for name, text in TEXTS.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def add_corpus(rt: Runtime, dataset: str, folder: Path) -> None:
    for name in TEXTS:
        report = add_files(rt, dataset, [folder / name], pipeline=PIPELINE.get(name))
        assert not report.rejected and report.added == [name], report


def snapshot(rt: Runtime, dataset: str) -> dict[str, Any]:
    """Every node id by type with the documents supporting it, every edge id, and the points of
    every vector collection."""
    counts = rt.graph.count(dataset)
    nodes = {
        t: sorted(
            (n.id, sorted({s.document_id for s in n.support}))
            for n in rt.graph.find_nodes(dataset, t, limit=100_000)
        )
        for t in counts
        if t != "edges"
    }
    everything = [i for found in nodes.values() for i, _ in found]
    edges = sorted(e.id for e in rt.graph.edges_of(everything, limit=1_000_000))
    vectors = {c: rt.vectors.count(c, dataset=dataset) for c in VECTOR_COLLECTIONS}
    return {"counts": counts, "nodes": nodes, "edges": edges, "vectors": vectors}


def ingest_and_delete(rt: Runtime, dataset: str, folder: Path) -> list[dict[str, Any]]:
    """Add the corpus, cognify once, then delete documents one pipeline at a time and at last
    all of them; the snapshots after each stage, each checked against explicit expectations."""
    add_corpus(rt, dataset, folder)
    job = finished(rt, cognify(rt, dataset), 300, interval=0.25)
    assert job.status is JobStatus.SUCCEEDED and not job.errors, job
    assert job.counts["documents"] == len(TEXTS)
    assert job.pipeline == "default+structured+temporal"
    stages = [snapshot(rt, dataset)]
    check_full_graph(rt, dataset)
    for name in ("customers.csv", "history.txt", "nyc.txt"):
        rt.catalog.remove_named(dataset, name)
        stages.append(snapshot(rt, dataset))
    check_after_deletes(rt, dataset)
    for name in TEXTS.keys() - {"customers.csv", "history.txt", "nyc.txt"}:
        rt.catalog.remove_named(dataset, name)
    stages.append(snapshot(rt, dataset))
    return stages


def references(rt: Runtime, dataset: str) -> set[tuple[str, str]]:
    rows = {r.id: r.name for r in rt.graph.find_nodes(dataset, "TableRow", limit=1000)}
    edges = rt.graph.edges_of(list(rows), names=["REFERENCES"], limit=1000)
    return {(rows[e.source], rows[e.target]) for e in edges}


def check_full_graph(rt: Runtime, dataset: str) -> None:
    counts = rt.graph.count(dataset)
    assert counts["Table"] == 3 and counts["TableRow"] == ROWS, counts
    found = references(rt, dataset)
    assert len(found) == REFERENCES and ("orders 1001", "customers C002") in found, found
    assert ("orders 1004", "products SKU-TT2") in found
    # Events: one per dated sentence, each AT its own Timestamp and INVOLVING who it names.
    events = {e.properties["text"]: e for e in rt.graph.find_nodes(dataset, "Event")}
    assert {e.properties["label"] for e in events.values()} == {"2019-03", "2016", "1990s"}
    founded = events["Acme Corp was founded by Alice Smith in March 2019."]
    [at] = rt.graph.edges_of([founded.id], names=[AT])
    [stamp] = rt.graph.get_nodes([at.target])
    assert stamp.type == "Timestamp" and stamp.name == "2019-03"
    targets = [e.target for e in rt.graph.edges_of([founded.id], names=[INVOLVES])]
    assert {n.name for n in rt.graph.get_nodes(targets)} >= {"Alice Smith"}
    # Aliases: one entity each for Maria Lopez (alias with the title) and New York City (NYC),
    # Carlos Lopez apart; every name the documents used is an Alias node of its entity.
    entities = {n.name: n for n in rt.graph.find_nodes(dataset, "Entity", limit=1000)}
    assert {n for n in entities if "Lopez" in n} == {"Maria Lopez", "Carlos Lopez"}
    assert "NYC" not in entities and "Professor Maria Lopez" not in entities
    assert aliases_of(rt.graph, entity_id(dataset, "New York City")) == ["NYC"]
    assert aliases_of(rt.graph, entity_id(dataset, "Maria Lopez")) == ["Professor Maria Lopez"]
    assert rt.vectors.count("Entity_name", dataset=dataset) == len(entities)
    # One EdgeType node per relation name, each behind the name's vector (same id).
    relation_names = rt.graph.find_nodes(dataset, "EdgeType", limit=1000)
    assert rt.vectors.count("EdgeType_relationship_name", dataset=dataset) == len(relation_names)
    assert {n.name for n in relation_names} >= {"works_for", "moved_to"}, relation_names


def check_after_deletes(rt: Runtime, dataset: str) -> None:
    counts = rt.graph.count(dataset)
    assert counts["TableRow"] == ROWS - 4 and "Event" not in counts and "Timestamp" not in counts
    assert {t for _, t in references(rt, dataset)} == {"products SKU-RB1", "products SKU-TT2"}
    assert aliases_of(rt.graph, entity_id(dataset, "New York City")) == []
    assert "Professor Maria Lopez" in {a.name for a in rt.graph.find_nodes(dataset, ALIAS)}
    assert rt.vectors.count("Event_text", dataset=dataset) == 0


def check_empty(stage: dict[str, Any]) -> None:
    """No orphans: with every document deleted only the Dataset node is left and no vector at
    all, the relation-name vocabulary (`EdgeType_relationship_name`, whose EdgeType nodes the
    chunks using a name support) included, on either backend."""
    assert stage["counts"] == {"Dataset": 1, "edges": 0}, stage["counts"]
    assert stage["vectors"]["EdgeType_relationship_name"] == 0, stage["vectors"]
    left = {name: n for name, n in stage["vectors"].items() if n}
    assert not left, left


@pytest.fixture(scope="module")
def embedded_stages(
    tmp_path_factory: pytest.TempPathFactory, llm: LLMTestServer, corpus: Path
) -> tuple[str, list[dict[str, Any]]]:
    """The reference: the corpus run embedded in this process, under the dataset name the
    distributed run uses too (ids derive from it)."""
    dataset = f"mixed-{uuid.uuid4().hex[:8]}"
    backend = Backend(EMBEDDED, tmp_path_factory.mktemp("embedded"))
    # Relation names on (off by default): their nodes' lifecycle is checked on both backends.
    with backend.runtime(llm_base_url=llm.base_url, batch_size=2, embed_relation_names=True) as rt:
        stages = ingest_and_delete(rt, dataset, corpus)
    return dataset, stages


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, llm: LLMTestServer) -> dict[str, str]:
    """Settings shared by the test process and the worker processes (through the environment)."""
    broker = redis_database_url("distributed_pipelines")
    redis.Redis.from_url(broker).flushdb()  # no stale queues from an interrupted run
    return worker_env(
        tmp_path_factory.mktemp("shared-home"),
        broker,
        neo4j_uri(),
        llm.base_url,
        embedding_dim=str(LOCAL_DIM),
        embed_relation_names="true",
    )


def test_mixed_pipelines_on_worker_processes_match_the_embedded_run(
    embedded_stages: tuple[str, list[dict[str, Any]]],
    env: dict[str, str],
    corpus: Path,
    tmp_path: Path,
) -> None:
    dataset, expected = embedded_stages
    check_empty(expected[-1])
    with distributed_runtime(env) as rt:
        try:
            with running_workers(env, tmp_path) as workers:
                stages = ingest_and_delete(rt, dataset, corpus)
                assert all(w.alive() for w in workers.workers), "a worker process exited"
        finally:
            rt.catalog.remove_dataset(dataset)
            redis.Redis.from_url(env["COGMILL_BROKER_URL"]).flushdb()  # jobs, cache, queues
    for stage, (got, want) in enumerate(zip(stages, expected, strict=True)):
        assert got == want, f"stage {stage}: Neo4j differs from the embedded run"
    check_empty(stages[-1])
