"""Entity resolution and document summaries through real worker threads, on both backends
(embedded, Neo4j + Redis)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.llm.cache import LLMCache
from core.llm.client import LLMClient
from core.models.extraction import KnowledgeGraph
from core.models.graph import Edge, Node, Support, alias_id, entity_id, summary_id
from core.models.jobs import Job
from core.models.vocabulary import ALIAS
from core.stores.sqlite.state import SQLiteStateStore
from pipelines.classify import check_supported
from pipelines.definitions import get_pipeline
from pipelines.models import Chunk, DocumentRef, ExtractedBatch, WriteReport
from pipelines.reconcile_entities import ReconcileEntities, merge_entities
from pipelines.resolve_entities import aliases_of
from pipelines.summarize_documents import SummarizeDocuments, document_summary_id
from runtime import Runtime
from tests.backends import (
    Backend,
    embedded_only,
    succeeded,
)
from tests.llm_server import LLMTestServer
from workers.orchestration import cognify

DOCUMENTS = {
    "a_maria.txt": "Prof. Maria Lopez moved to New York City in 2019. "
    "She teaches physics at Columbia University.",
    "b_nyc.txt": "Maria Lopez and Carlos Lopez met in NYC last spring.",
    "c_carlos.txt": "Carlos Lopez works for Acme Inc. in Boston.",
    "d_long.txt": " ".join(
        f"Chapter {i}. The Hudson River flows past Albany and reaches New York Harbor. "
        f"Dutch traders sailed the river in the year {1609 + i} to trade furs."
        for i in range(8)
    ),
    "e_club.txt": "The Northern Yacht Club races on Sundays.",
    "f_city.txt": "New York City has five boroughs.",
    "g_nyc.txt": "Tourists love NYC in the spring.",
    "h_both.txt": "Tourists love NYC in the spring and New York City in the fall.",
}


@pytest.fixture
def runtime_settings() -> dict[str, object]:
    # One document per batch on two threads: batches resolve and write at the same time.
    # Document summaries embedded (off by default): their vectors' lifecycle is checked here.
    return {"batch_size": 1, "chunk_tokens": 48, "embed_document_summaries": True}


@pytest.fixture
def dataset(backend: Backend) -> str:
    return backend.dataset("people")


def add_documents(rt: Runtime, dataset: str, folder: Path, names: list[str]) -> None:
    rt.catalog.ensure_dataset(dataset)
    from core.catalog import AddReport

    report = AddReport()
    for name in names:
        path = folder / name
        path.write_text(DOCUMENTS[name], encoding="utf-8")
        rt.catalog.add_file(dataset, path, name, report, check_supported)
    assert not report.rejected


def run(rt: Runtime, dataset: str, mode: str = "changed") -> Job:
    return succeeded(rt, cognify(rt, dataset, mode=mode), 180)


def jobs_of(rt: Runtime, dataset: str, folder: Path, *jobs: list[str]) -> None:
    """One job after another, each adding its documents first."""
    for names in jobs:
        add_documents(rt, dataset, folder, names)
        run(rt, dataset)


def entities(rt: Runtime, dataset: str) -> dict[str, Node]:
    return {n.name: n for n in rt.graph.find_nodes(dataset, "Entity", limit=10_000)}


def everything(rt: Runtime, dataset: str) -> tuple[set[str], set[str]]:
    """Ids of every node and edge of the dataset."""
    types = rt.graph.count(dataset)
    nodes = {
        n.id for t in types if t != "edges" for n in rt.graph.find_nodes(dataset, t, limit=100_000)
    }
    edges = {e.id for e in rt.graph.edges_of(sorted(nodes), limit=1_000_000)}
    return nodes, edges


@pytest.mark.slow
def test_aliases_merge_namesakes_stay_apart_and_merges_survive_recognify_and_delete(
    runtime: Runtime, tmp_path: Path, dataset: str
) -> None:
    # Two jobs, so that "NYC" meets a stored "New York City" in one order or the other.
    jobs_of(runtime, dataset, tmp_path, ["a_maria.txt", "c_carlos.txt"], ["b_nyc.txt"])
    found = entities(runtime, dataset)
    assert {n for n in found if "Lopez" in n} == {"Maria Lopez", "Carlos Lopez"}
    assert "NYC" not in found and "New York City" in found
    city = found["New York City"]
    assert aliases_of(runtime.graph, city.id) == ["NYC"]
    assert {s.document_id for s in city.support} == {
        d.id for d in runtime.graph.find_nodes(dataset, "Document") if d.name != "c_carlos.txt"
    }
    # Every entity has its vector, and only the merged-away one lost it.
    assert runtime.vectors.count("Entity_name", dataset=dataset) == len(found)

    before = everything(runtime, dataset)
    run(runtime, dataset, mode="all")
    assert everything(runtime, dataset) == before  # re-cognify resolves the same way: same ids

    runtime.catalog.remove_named(dataset, "b_nyc.txt")
    after = entities(runtime, dataset)
    assert "New York City" in after and after["New York City"].id == city.id
    assert aliases_of(runtime.graph, city.id) == []
    assert {a.name for a in runtime.graph.find_nodes(dataset, ALIAS)} == {"Acme Inc."}  # c's
    assert {n for n in after if "Lopez" in n} == {"Maria Lopez", "Carlos Lopez"}


def test_concurrent_batches_converge_on_one_entity(
    runtime: Runtime, tmp_path: Path, dataset: str
) -> None:
    add_documents(runtime, dataset, tmp_path, ["b_nyc.txt", "a_maria.txt"])  # one job, two threads
    run(runtime, dataset)
    found = entities(runtime, dataset)
    assert "NYC" not in found and "New York City" in found
    assert aliases_of(runtime.graph, found["New York City"].id) == ["NYC"]


def test_a_merge_run_twice_ends_as_one_run(runtime: Runtime, tmp_path: Path, dataset: str) -> None:
    add_documents(runtime, dataset, tmp_path, ["b_nyc.txt"])
    run(runtime, dataset)
    nyc = entities(runtime, dataset)["NYC"]
    city = Node(
        id=entity_id(dataset, "New York City"),
        type="Entity",
        dataset=dataset,
        name="New York City",
        support=nyc.support,
    )
    runtime.graph.upsert_nodes([city])
    args = (runtime.graph, runtime.vectors, runtime.embedder, dataset)
    assert merge_entities(*args, [nyc, city]) == city.id
    once = everything(runtime, dataset)
    merge_entities(*args, [nyc, city])  # as a redelivered task would, with stale records
    assert everything(runtime, dataset) == once
    assert aliases_of(runtime.graph, city.id) == ["NYC"]


@pytest.mark.slow
def test_an_entity_whose_name_later_becomes_an_alias_joins_the_alias_entity(
    runtime: Runtime, tmp_path: Path, dataset: str
) -> None:
    jobs_of(runtime, dataset, tmp_path, ["e_club.txt", "f_city.txt"], ["g_nyc.txt"])
    # "NYC" fits both stored names, so the key index leaves it apart.
    assert {"NYC", "New York City", "Northern Yacht Club"} <= entities(runtime, dataset).keys()
    jobs_of(runtime, dataset, tmp_path, ["h_both.txt"])  # makes "NYC" an alias
    found = entities(runtime, dataset)
    assert "NYC" not in found and "Northern Yacht Club" in found
    city = found["New York City"]
    assert aliases_of(runtime.graph, city.id) == ["NYC"]
    documents = {d.name: d.id for d in runtime.graph.find_nodes(dataset, "Document")}
    assert {s.document_id for s in city.support} == {
        documents[n] for n in ("f_city.txt", "g_nyc.txt", "h_both.txt")
    }
    assert runtime.vectors.count("Entity_name", dataset=dataset) == len(found)


def test_an_entity_written_beside_a_new_alias_of_its_name_joins_the_alias_entity(
    runtime: Runtime, dataset: str
) -> None:
    # Two batches at once: one resolved "NYC" before the other stored the alias "NYC".
    runtime.catalog.ensure_dataset(dataset)
    support = [Support(document_id="d1", chunk_id="c1")]
    city, nyc = (
        Node(id=entity_id(dataset, n), type="Entity", dataset=dataset, name=n, support=support)
        for n in ("New York City", "NYC")
    )
    alias = Node(
        id=alias_id(dataset, "NYC"), type=ALIAS, dataset=dataset, name="NYC", support=support
    )
    runtime.graph.upsert_nodes([city, alias, nyc])
    runtime.graph.upsert_edges(
        [Edge(source=alias.id, target=city.id, name="ALIAS_OF", dataset=dataset, support=support)]
    )
    reconcile = get_pipeline("default").build_step(ReconcileEntities.name, runtime)
    reconcile.run(WriteReport(dataset=dataset, entity_names={nyc.id: "NYC"}))
    assert set(entities(runtime, dataset)) == {"New York City"}
    assert aliases_of(runtime.graph, city.id) == ["NYC"]


@embedded_only  # summaries are written like chunks; the Neo4j variants cover those writes
def test_every_document_gets_a_summary_that_goes_with_it(
    runtime: Runtime, tmp_path: Path, dataset: str
) -> None:
    add_documents(runtime, dataset, tmp_path, ["c_carlos.txt", "d_long.txt"])
    run(runtime, dataset)
    docs = {d.name: d for d in runtime.graph.find_nodes(dataset, "Document")}
    chunks = runtime.graph.find_nodes(dataset, "DocumentChunk", limit=1000)
    long_chunks = [c for c in chunks if c.properties["document_id"] == docs["d_long.txt"].id]
    assert len(long_chunks) > 2
    [summary] = runtime.graph.get_nodes([document_summary_id(docs["d_long.txt"].id)])
    assert summary.type == "TextSummary" and summary.properties["scope"] == "document"
    assert 0 < len(summary.properties["text"]) <= runtime.settings.document_summary_chars
    [edge] = runtime.graph.edges_of([summary.id], names=["SUMMARIZES"])
    assert edge.target == docs["d_long.txt"].id
    query = runtime.embedder.embed(["Dutch fur traders on the Hudson River"])[0].tolist()
    hits = runtime.vectors.search("TextSummary_text", query, datasets=[dataset], limit=50)
    assert summary.id in {h.id for h in hits}
    # A one-chunk document: its chunk's summary summarises it too, and has no copy.
    [carlos_chunk] = [c for c in chunks if c.properties["document_id"] == docs["c_carlos.txt"].id]
    assert runtime.graph.get_nodes([document_summary_id(docs["c_carlos.txt"].id)]) == []
    [edge] = runtime.graph.edges_of([docs["c_carlos.txt"].id], names=["SUMMARIZES"])
    assert edge.source == summary_id(carlos_chunk.id)
    [carlos_summary] = runtime.graph.get_nodes([edge.source])
    texts = [n.properties["text"] for n in runtime.graph.find_nodes(dataset, "TextSummary")]
    assert texts.count(carlos_summary.properties["text"]) == 1  # a search finds it once

    runtime.catalog.remove_named(dataset, "d_long.txt")
    assert runtime.graph.get_nodes([summary.id]) == []
    hits = runtime.vectors.search("TextSummary_text", query, datasets=[dataset], limit=50)
    assert summary.id not in {h.id for h in hits}


@embedded_only
def test_by_default_a_document_summary_is_stored_but_not_embedded(
    backend: Backend, models: dict[str, object], tmp_path: Path, dataset: str
) -> None:
    with backend.runtime(models, batch_size=1, chunk_tokens=48) as runtime:
        add_documents(runtime, dataset, tmp_path, ["d_long.txt"])
        run(runtime, dataset)
        [doc] = runtime.graph.find_nodes(dataset, "Document")
        [summary] = runtime.graph.get_nodes([document_summary_id(doc.id)])
        assert summary.properties["scope"] == "document"
        chunks = runtime.graph.find_nodes(dataset, "DocumentChunk", limit=1000)
        # The chunk summaries are embedded (SUMMARIES needs them); the document's is not.
        assert runtime.vectors.count("TextSummary_text", dataset=dataset) == len(chunks)
        query = runtime.embedder.embed([summary.properties["text"]])[0].tolist()
        hits = runtime.vectors.search("TextSummary_text", query, datasets=[dataset], limit=50)
        assert summary.id not in {h.id for h in hits}


def test_llm_document_summaries_are_one_cached_call_per_document(tmp_path: Path) -> None:
    chunks = [
        Chunk(id=f"c{i}", document_id="d1", document_name="one.txt", index=i, text=t, token_count=5)
        for i, t in enumerate(["Alpha Corp makes robots.", "Beta Labs sells them."])
    ] + [
        Chunk(
            id="c9",
            document_id="d2",
            document_name="two.txt",
            index=0,
            text="Short one.",
            token_count=2,
        )
    ]
    graphs = [KnowledgeGraph(summary=c.text) for c in chunks]
    docs = [DocumentRef(id=d, dataset="ds", name=f"{d}.txt", blob_key=d) for d in ("d1", "d2")]
    batch = ExtractedBatch(dataset="ds", documents=docs, chunks=chunks, graphs=graphs)
    state = SQLiteStateStore(tmp_path / "state.sqlite")
    with LLMTestServer() as server:
        llm = LLMClient(server.base_url, "test-model", cache=LLMCache(state))
        out = SummarizeDocuments(llm, max_chars=200).run(batch)
        again = SummarizeDocuments(llm, max_chars=200).run(batch)
        calls = server.calls()
    state.close()
    by_doc = {s.document_id: s.text for s in out.document_summaries}
    # The test server summarises with the first sentence of what it was sent.
    assert by_doc == {"d1": "Alpha Corp makes robots.", "d2": "Short one."}
    assert calls == 1  # one document of two chunks; the one-chunk document reuses its summary
    assert again.document_summaries == out.document_summaries


class _WriteBeforeRemoval:
    """The graph store, except that another batch's write runs just before a merge removes
    the merged-away entities (after the merge has read them): the window where a write used
    to be dropped with them."""

    def __init__(self, store: object, write: object) -> None:
        self._store, self._write = store, write

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    def _fire(self) -> None:
        write, self._write = self._write, None
        if write is not None:
            write()

    def delete_nodes(self, ids: list[str]) -> object:
        self._fire()
        return self._store.delete_nodes(ids)  # type: ignore[attr-defined]

    def merge_nodes(self, ids: list[str], into: str) -> object:
        self._fire()
        return self._store.merge_nodes(ids, into)  # type: ignore[attr-defined]


def _stored_pair(rt: Runtime, dataset: str) -> tuple[Node, Node, Node]:
    """Entities "NYC" (document d1), "New York City" (d2) and "Boston" (d3)."""
    nyc, city, boston = (
        Node(
            id=entity_id(dataset, name),
            type="Entity",
            dataset=dataset,
            name=name,
            support=[Support(document_id=doc, chunk_id=f"{doc}-c0")],
        )
        for name, doc in (("NYC", "d1"), ("New York City", "d2"), ("Boston", "d3"))
    )
    rt.graph.upsert_nodes([nyc, city, boston])
    return nyc, city, boston


def _support_of(rt: Runtime, node_id: str) -> set[str]:
    return {s.document_id for n in rt.graph.get_nodes([node_id]) for s in n.support}


def test_an_edge_written_after_its_end_was_merged_away_lands_on_the_merged_entity(
    runtime: Runtime, dataset: str
) -> None:
    # Batch A wrote "NYC", batch B merged it into "New York City", then A writes its edges.
    nyc, city, boston = _stored_pair(runtime, dataset)
    merge_entities(runtime.graph, runtime.vectors, runtime.embedder, dataset, [nyc, city])
    late = Edge(
        source=nyc.id,
        target=boston.id,
        name="near",
        dataset=dataset,
        support=[Support(document_id="d1", chunk_id="d1-c0")],
    )
    runtime.graph.upsert_edges([late])
    [edge] = runtime.graph.edges_of([city.id], names=["near"])
    assert (edge.source, edge.target) == (city.id, boston.id)
    assert {s.document_id for s in edge.support} == {"d1"}
    assert runtime.graph.get_nodes([nyc.id]) == []


def test_a_write_between_a_merge_read_and_its_removal_is_kept(
    runtime: Runtime, dataset: str
) -> None:
    nyc, city, boston = _stored_pair(runtime, dataset)
    late_support = Support(document_id="d9", chunk_id="d9-c0")

    def other_batch() -> None:  # an edge and a support link to "NYC", from document d9
        runtime.graph.upsert_nodes([nyc.model_copy(update={"support": [late_support]})])
        edge = Edge(
            source=boston.id, target=nyc.id, name="near", dataset=dataset, support=[late_support]
        )
        runtime.graph.upsert_edges([edge])

    graph = _WriteBeforeRemoval(runtime.graph, other_batch)
    merge_entities(graph, runtime.vectors, runtime.embedder, dataset, [nyc, city])  # type: ignore[arg-type]
    [edge] = runtime.graph.edges_of([city.id], names=["near"])
    assert (edge.source, edge.target) == (boston.id, city.id)
    assert _support_of(runtime, city.id) == {"d1", "d2", "d9"}
    [alias] = runtime.graph.get_nodes([alias_id(dataset, "NYC")])
    assert {s.document_id for s in alias.support} == {"d1", "d9"}
    assert runtime.graph.get_nodes([nyc.id]) == []
