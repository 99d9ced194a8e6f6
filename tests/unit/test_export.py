"""Streaming writers: graph export pages (real SQLite graph), job progress (real SQLite state)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path

import anyio
import pytest

from api.http.routes.jobs import sse_lines
from api.services.export import export_lines, graph_pages, graphml_lines
from api.services.jobs import JobEvent, follow_job
from core.models.graph import Edge, Node
from core.models.jobs import Job, JobStatus
from core.stores.sqlite.graph import SQLiteGraphStore
from core.stores.sqlite.state import SQLiteStateStore
from pipelines.models import WriteReport
from tests.factories import make_edge, make_graph, make_node
from workers.jobs import JobTracker

DS = "exp"


@pytest.fixture
def graph(tmp_path: Path) -> Iterator[SQLiteGraphStore]:
    store = SQLiteGraphStore(tmp_path / "graph.db")
    yield store
    store.close()


@pytest.fixture
def stored(graph: SQLiteGraphStore) -> tuple[list[Node], list[Edge]]:
    """Entities in a ring, a hub entity with many edges, documents, and another dataset."""
    nodes, edges = make_graph(DS, 11, 30)
    hub = make_node(DS, 'hub <&> "q" \x01', note="a & b < c")
    docs = [make_node(DS, f"doc{i}.txt", "Document", doc=None) for i in range(3)]
    edges += [make_edge(hub, target, "MENTIONS") for target in nodes[:9]]
    edges += [make_edge(doc, hub, "HAS") for doc in docs]
    other_nodes, other_edges = make_graph("other", 4, 6)
    graph.upsert_nodes([*nodes, hub, *docs, *other_nodes])
    graph.upsert_edges([*edges, *other_edges])
    return [*nodes, hub, *docs], edges


def flatten(pages: Iterator) -> tuple[list[Node], list[Edge]]:
    nodes: list[Node] = []
    edges: list[Edge] = []
    for page in pages:
        nodes += page.nodes
        edges += page.edges
    return nodes, edges


def test_every_node_and_edge_once_with_tiny_pages(graph: SQLiteGraphStore, stored: tuple) -> None:
    want_nodes, want_edges = stored
    # Pages of 3 nodes and edge reads cut at 2: forces the split and the larger limit (hub).
    nodes, edges = flatten(graph_pages(graph, DS, page=3, edge_limit=2))
    assert sorted(n.id for n in nodes) == sorted(n.id for n in want_nodes)
    assert len(edges) == len({e.id for e in edges}) == len(want_edges) == 42
    assert {e.id for e in edges} == {e.id for e in want_edges}
    assert all(n.dataset == DS for n in nodes) and all(e.dataset == DS for e in edges)
    # Types in name order, ids in order within a type.
    assert [n.type for n in nodes] == ["Document"] * 3 + ["Entity"] * 12
    assert [n.id for n in nodes[3:]] == sorted(n.id for n in nodes[3:])


def test_windows_partition_the_nodes_and_hold_their_outgoing_edges(
    graph: SQLiteGraphStore, stored: tuple
) -> None:
    every, _ = flatten(graph_pages(graph, DS))
    seen: list[str] = []
    for offset in range(0, 16, 4):
        nodes, edges = flatten(graph_pages(graph, DS, offset=offset, limit=4, page=3))
        assert len(nodes) == min(4, 15 - offset)
        ids = {n.id for n in nodes}
        assert all(e.source in ids for e in edges)
        assert {e.id for e in edges} == {
            e.id for e in graph.edges_of(list(ids), limit=1000) if e.source in ids
        }
        seen += [n.id for n in nodes]
    assert seen == [n.id for n in every]
    assert flatten(graph_pages(graph, DS, offset=99)) == ([], [])
    assert flatten(graph_pages(graph, "nothing-here")) == ([], [])


def test_jsonl_round_trips(graph: SQLiteGraphStore, stored: tuple) -> None:
    want_nodes, want_edges = stored
    text = "".join(export_lines(graph, DS, "jsonl", page=4))
    records = [json.loads(line) for line in text.splitlines()]
    nodes = [Node.model_validate(r) for r in records if r.pop("kind") == "node"]
    edges = [r for r in records if "source" in r]
    assert {n.id: n.name for n in nodes} == {n.id: n.name for n in want_nodes}
    hub = next(n for n in nodes if n.name.startswith("hub"))
    assert hub.properties == {"note": "a & b < c"} and hub.support[0].document_id == "d1"
    assert {e["id"] for e in edges} == {e.id for e in want_edges}
    assert all(Edge.model_validate(e).id == e["id"] for e in edges)


G = "{http://graphml.graphdrawing.org/xmlns}"


def read_graphml(path: Path) -> tuple[dict[str, dict], dict[str, dict]]:
    """Nodes and edges of a GraphML file by id, each as {attr.name: text} (plus the ends)."""
    root = ET.parse(path).getroot()
    names = {key.get("id"): key.get("attr.name") for key in root.iter(f"{G}key")}
    [graph] = root.findall(f"{G}graph")
    assert graph.get("edgedefault") == "directed"

    def data(element: ET.Element) -> dict:
        return {names[d.get("key")]: d.text or "" for d in element.findall(f"{G}data")}

    nodes = {n.get("id"): data(n) for n in graph.findall(f"{G}node")}
    edges = {
        e.get("id"): {**data(e), "source": e.get("source"), "target": e.get("target")}
        for e in graph.findall(f"{G}edge")
    }
    return nodes, edges


def test_graphml_is_valid_and_complete(
    graph: SQLiteGraphStore, stored: tuple, tmp_path: Path
) -> None:
    want_nodes, want_edges = stored
    path = tmp_path / "g.graphml"
    path.write_text("".join(graphml_lines(graph_pages(graph, DS, page=5), DS)), "utf-8")
    nodes, edges = read_graphml(path)
    assert set(nodes) == {n.id for n in want_nodes}
    assert set(edges) == {e.id for e in want_edges}
    hub = next(n for n in want_nodes if n.name.startswith("hub"))
    # The control character XML cannot carry is dropped; markup characters survive.
    assert nodes[hub.id]["name"] == 'hub <&> "q" ' and nodes[hub.id]["type"] == "Entity"
    assert json.loads(nodes[hub.id]["properties"]) == {"note": "a & b < c"}
    assert json.loads(nodes[hub.id]["support"]) == [{"document_id": "d1", "chunk_id": "c1"}]
    for edge in want_edges:
        got = edges[edge.id]
        assert (got["source"], got["name"], got["target"]) == (edge.source, edge.name, edge.target)


def test_bad_format_and_window_say_what_to_use(graph: SQLiteGraphStore) -> None:
    with pytest.raises(ValueError, match="jsonl, graphml"):
        export_lines(graph, DS, "csv")
    with pytest.raises(ValueError, match="offset and limit must be >= 0"):
        next(graph_pages(graph, DS, offset=-1))


# -- job progress ---------------------------------------------------------------------------------


@pytest.fixture
def jobs(tmp_path: Path) -> Iterator[JobTracker]:
    state = SQLiteStateStore(tmp_path / "state.db")
    yield JobTracker(state)
    state.close()


def start_job(jobs: JobTracker, batches: int = 2) -> Job:
    job = Job(
        id="j1",
        dataset=DS,
        pipeline="default",
        pipeline_version="1",
        status=JobStatus.RUNNING,
        total_documents=batches,
        total_batches=batches,
    )
    jobs.save(job)
    jobs.event(job.id, "planned", documents=batches, batches=batches)
    return job


def test_follow_job_streams_until_finished(jobs: JobTracker) -> None:
    job = start_job(jobs)
    # Each idle wait of the follower lets the "workers" do one more thing.
    work = iter(
        [
            lambda: None,
            lambda: jobs.finish_batch(job.id, 0, WriteReport(dataset=DS, documents=["a"])),
            lambda: jobs.finish_batch(job.id, 1, WriteReport(dataset=DS, documents=["b"])),
            lambda: jobs.finalise(job.id),
        ]
    )
    stream = list(follow_job(jobs, job.id, poll=0.0, sleep=lambda _: next(work)()))
    kinds = [e.kind if e else None for e in stream]
    assert kinds == [
        "planned",
        "progress",
        None,
        "batch_done",
        "progress",
        "batch_done",
        "progress",
        "finished",
    ]
    stored = [e.seq for e in stream if e and e.kind != "progress"]
    assert stored == [1, 2, 3, 4]
    assert [e.data["batches_done"] for e in stream if e and e.kind == "progress"] == [0, 1, 2]
    assert stream[-1].data["status"] == "succeeded"
    # Replaying after the second event gives the rest, the final counts, and still ends.
    replay = [e for e in follow_job(jobs, job.id, after=2, poll=0.0) if e]
    assert [e.kind for e in replay] == ["batch_done", "progress", "finished"]
    assert replay[1].data["documents"] == 2 and replay[1].data["status"] == "succeeded"


def test_finished_job_without_a_finished_event_still_ends(jobs: JobTracker) -> None:
    job = start_job(jobs, batches=0)
    jobs.save(job.model_copy(update={"status": JobStatus.SUCCEEDED, "message": "nothing to do"}))
    stream = list(follow_job(jobs, job.id, poll=0.0, sleep=pytest.fail))
    kinds = [(e.seq, e.kind) for e in stream if e]
    assert kinds == [(1, "planned"), (None, "progress"), (None, "finished")]
    assert stream[-1].data["message"] == "nothing to do"


def test_sse_format_and_keepalive() -> None:
    events = [JobEvent(1, "planned", {"event": "planned"}), None, None, None]
    events.append(JobEvent(None, "progress", {"batches_done": 1}))
    ticks = iter([0.0, 0.0, 0.5, 1.0, 1.5, 2.0])  # the clock at the start, then at each event

    async def source() -> AsyncGenerator[JobEvent | None, None]:
        for event in events:
            yield event

    async def read() -> str:
        lines = sse_lines(source(), heartbeat=1.0, lifetime=60.0, clock=lambda: next(ticks))
        return "".join([line async for line in lines])

    text = anyio.run(read)
    assert text == (
        "retry: 2000\n\n"
        'id: 1\nevent: planned\ndata: {"event": "planned"}\n\n'
        ": keep-alive\n\n"
        'event: progress\ndata: {"batches_done": 1}\n\n'
    )
