"""Delete, job events (SSE) and graph export through the real app, stores and worker threads."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from api.cli import app as cli_app
from api.http.app import create_app
from api.services.demo import SAMPLE_CORPUS
from core.models.jobs import Job
from core.settings import Settings
from runtime import Runtime, use_runtime
from tests.backends import with_models
from tests.e2e.test_api import assert_error
from workers.jobs import JobTracker

DOCS = {
    "ada.txt": "Ada Lovelace worked with Charles Babbage on the Analytical Engine in London.",
    "alan.txt": "Alan Turing studied at Cambridge and worked at Bletchley Park during the war.",
    "grace.txt": "Grace Hopper wrote the first compiler for the Harvard Mark I computer.",
    "linus.txt": "Linus Torvalds created Linux in Helsinki and later wrote Git.",
}
TERMINAL = ("succeeded", "failed", "cancelled")


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory, models: dict[str, object]) -> Runtime:
    home = tmp_path_factory.mktemp("api-delete-home")
    return with_models(Runtime(Settings(home=home, batch_size=2)), models)


@pytest.fixture(scope="module")
def client(runtime: Runtime) -> Iterator[TestClient]:
    with TestClient(create_app(runtime)) as client:  # runs the lifespan: worker threads
        yield client


def add(client: TestClient, dataset: str, docs: dict[str, str]) -> None:
    documents = [{"name": name, "text": text} for name, text in docs.items()]
    response = client.post(f"/api/v1/datasets/{dataset}/data", json={"documents": documents})
    assert response.status_code == 200, response.text


def read_sse(client: TestClient, url: str, **headers: str) -> list[dict[str, Any]]:
    """The whole event stream (it ends when the job does) as [{id, event, data}]."""
    with client.stream("GET", url, headers=headers) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        text = response.read().decode()
    events = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            seq = int(fields["id"]) if "id" in fields else None
            events.append({"id": seq, "event": fields["event"], "data": json.loads(fields["data"])})
    return events


@pytest.fixture(scope="module")
def streamed(client: TestClient) -> tuple[str, list[dict[str, Any]]]:
    """A real cognify job of dataset `people`, followed through its event stream."""
    add(client, "people", DOCS)
    accepted = client.post("/api/v1/datasets/people/cognify")
    assert accepted.status_code == 202, accepted.text
    job_id = accepted.json()["job_id"]
    return job_id, read_sse(client, f"/api/v1/jobs/{job_id}/events")


def test_event_stream_replays_then_follows_until_finished(
    client: TestClient, streamed: tuple[str, list[dict[str, Any]]]
) -> None:
    job_id, events = streamed
    kinds = [e["event"] for e in events]
    assert kinds[0] == "planned" and kinds[-1] == "finished", kinds
    assert kinds.count("finished") == 1 and kinds.count("batch_done") == 2  # 4 docs, batches of 2
    assert events[-1]["data"]["status"] == "succeeded"
    stored = [e["id"] for e in events if e["id"] is not None]
    assert stored == sorted(stored) and len(stored) == len(set(stored))
    progress = [e["data"] for e in events if e["event"] == "progress"]
    assert kinds[-2] == "progress" and progress[-1]["batches_done"] == 2
    assert progress[-1]["documents"] == len(DOCS)
    assert client.get(f"/api/v1/jobs/{job_id}").json()["status"] == "succeeded"
    # Reconnecting with Last-Event-ID (or ?after=) replays only what came later, then ends.
    planned = events[0]["id"]
    later = read_sse(client, f"/api/v1/jobs/{job_id}/events", **{"Last-Event-ID": str(planned)})
    assert [e["id"] for e in later if e["id"] is not None] == stored[1:]
    last = read_sse(client, f"/api/v1/jobs/{job_id}/events?after={stored[-1]}")
    assert [e["event"] for e in last] == ["progress", "finished"]  # final counts, then the end


def test_event_stream_errors(client: TestClient) -> None:
    assert_error(client.get("/api/v1/jobs/0123abcd/events"), 404, "job_not_found")
    bad = client.get("/api/v1/jobs/0123abcd/events?after=-1")
    assert_error(bad, 422, "validation_error", "after")
    for huge in ("1e23", str(2**64)):  # past the stores' integers: refused before streaming
        bad = client.get(f"/api/v1/jobs/0123abcd/events?after={huge}")
        assert_error(bad, 422, "validation_error", "after")
    bad = client.get("/api/v1/jobs/0123abcd/events", headers={"Last-Event-ID": str(2**64)})
    assert_error(bad, 422, "validation_error")


def test_export_jsonl_and_graphml(
    client: TestClient, runtime: Runtime, streamed: tuple[str, Any]
) -> None:
    counts = runtime.graph.count("people")
    total_nodes = sum(v for k, v in counts.items() if k != "edges")
    response = client.get("/api/v1/datasets/people/graph")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    assert 'filename="people.jsonl"' in response.headers["content-disposition"]
    records = [json.loads(line) for line in response.text.splitlines()]
    nodes = [r for r in records if r["kind"] == "node"]
    edges = [r for r in records if r["kind"] == "edge"]
    assert len(nodes) == total_nodes and len(edges) == counts["edges"] > 0
    assert {"Ada Lovelace", "ada.txt"} <= {n["name"] for n in nodes}
    assert len({e["id"] for e in edges}) == len(edges)

    graphml = client.get("/api/v1/datasets/people/graph?format=graphml")
    assert graphml.headers["content-type"].startswith("application/graphml+xml")
    root = ET.fromstring(graphml.content)
    ns = "{http://graphml.graphdrawing.org/xmlns}"
    assert len(root.findall(f"{ns}graph/{ns}node")) == total_nodes
    assert len(root.findall(f"{ns}graph/{ns}edge")) == counts["edges"]

    window = client.get("/api/v1/datasets/people/graph?offset=2&limit=3").text.splitlines()
    window_nodes = [json.loads(line)["id"] for line in window if '"kind": "node"' in line]
    assert window_nodes == [n["id"] for n in nodes[2:5]]

    bad = client.get("/api/v1/datasets/people/graph?format=csv")
    assert_error(bad, 422, "validation_error", "format")
    assert_error(client.get("/api/v1/datasets/nope/graph"), 404, "dataset_not_found")


def test_delete_document_removes_what_only_it_supported(
    client: TestClient, runtime: Runtime, streamed: tuple[str, Any]
) -> None:
    before = runtime.graph.count("people")
    lexical_before = runtime.lexical.count("people")
    response = client.delete("/api/v1/datasets/people/data/grace.txt")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["dataset"] == "people" and body["document"] == "grace.txt"
    assert body["nodes_removed"] >= 3 and body["edges_removed"] >= 1  # doc, chunk, entities
    after = runtime.graph.count("people")
    removed = body["nodes_removed"] + body["edges_removed"]
    assert sum(before.values()) - sum(after.values()) == removed
    assert runtime.lexical.count("people") < lexical_before
    names = {d["name"] for d in client.get("/api/v1/datasets/people/data").json()}
    assert names == set(DOCS) - {"grace.txt"}
    hits = client.post(
        "/api/v1/search",
        json={"query": "Grace Hopper compiler", "datasets": ["people"], "search_type": "CHUNKS"},
    ).json()["results"]
    assert all(s["document_name"] != "grace.txt" for r in hits for s in r["sources"])
    again = client.delete("/api/v1/datasets/people/data/grace.txt")
    assert_error(again, 404, "document_not_found", "grace.txt", "GET /api/v1/datasets/people/data")
    assert_error(client.delete("/api/v1/datasets/nope/data/x.txt"), 404, "dataset_not_found")


@pytest.mark.slow
def test_delete_dataset_is_refused_while_a_job_runs(client: TestClient, runtime: Runtime) -> None:
    add(client, "busy", {p.name: p.read_text() for p in sorted(SAMPLE_CORPUS.iterdir())})
    first = client.post("/api/v1/datasets/busy/cognify").json()["job_id"]
    assert read_sse(client, f"/api/v1/jobs/{first}/events")[-1]["event"] == "finished"
    # A second job, as the planner records it, that no worker takes up: it stays unfinished
    # for as long as the refusals below take, however slow the machine (a real job of this
    # corpus could finish before the CLI has started).
    tracker = JobTracker(runtime.state)
    job_id = "busy-job"
    tracker.save(Job(id=job_id, dataset="busy", pipeline="default", pipeline_version="test"))
    refused = client.delete("/api/v1/datasets/busy")
    assert_error(refused, 409, "job_running", job_id, "cancel", "wait")
    refused = client.delete("/api/v1/datasets/busy/data/marie_curie.txt")
    assert_error(refused, 409, "job_running", job_id)
    try:  # the CLI refuses too, reading the same job records
        env = {"COGMILL_HOME": str(runtime.settings.home)}
        cli = CliRunner().invoke(cli_app, ["delete", "-d", "busy", "--yes"], env=env)
    finally:
        use_runtime(runtime)  # the CLI resets the process's runtime; the app's tasks need it
    assert cli.exit_code == 1 and job_id in cli.output and "jobs watch" in cli.output
    assert tracker.finalise(job_id).status.finished  # the job ends: deleting is allowed again

    response = client.delete("/api/v1/datasets/busy")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["document"] is None and body["nodes_removed"] > 10 and body["edges_removed"] > 10
    assert runtime.graph.count("busy") == {"edges": 0}
    assert runtime.lexical.count("busy") == 0
    assert runtime.vectors.count("DocumentChunk_text", dataset="busy") == 0
    assert runtime.vectors.count("DocumentChunk_text", dataset="people") > 0  # untouched
    assert_error(client.get("/api/v1/datasets/busy/data"), 404, "dataset_not_found")
    assert "busy" not in {d["name"] for d in client.get("/api/v1/datasets").json()}
    assert_error(client.delete("/api/v1/datasets/busy"), 404, "dataset_not_found")


def test_cli_watch_and_export(runtime: Runtime, streamed: tuple[str, Any], tmp_path: Path) -> None:
    job_id, events = streamed
    env = {"COGMILL_HOME": str(runtime.settings.home)}
    runner = CliRunner()
    try:
        watched = runner.invoke(cli_app, ["jobs", "watch", job_id], env=env)
        target = tmp_path / "people.graphml"
        args = ["export", "-d", "people", "--format", "graphml", "-o", str(target)]
        exported = runner.invoke(cli_app, args, env=env)
        missing = runner.invoke(cli_app, ["jobs", "watch", "no-such-job"], env=env)
        bad = runner.invoke(cli_app, ["export", "-d", "people", "--format", "csv"], env=env)
    finally:
        use_runtime(runtime)  # the CLI resets the process's runtime; the app's tasks need it
    assert watched.exit_code == 0, watched.output
    lines = watched.output.splitlines()
    assert lines[0].startswith("#1 planned") and "finished status=succeeded" in lines[-1]
    assert sum("batch_done" in line for line in lines) == 2
    assert exported.exit_code == 0, exported.output
    root = ET.parse(target).getroot()
    ns = "{http://graphml.graphdrawing.org/xmlns}"
    counts = runtime.graph.count("people")
    assert len(root.findall(f"{ns}graph/{ns}node")) == sum(counts.values()) - counts["edges"]
    assert missing.exit_code == 2 and "no job 'no-such-job'" in missing.output
    assert bad.exit_code == 2 and "jsonl, graphml" in bad.output


def test_cli_watch_exits_1_when_the_job_failed(client: TestClient, runtime: Runtime) -> None:
    add(client, "broken", {"rows.json": '[{"a": 1}, {"a": '})  # truncated records
    job_id = client.post("/api/v1/datasets/broken/cognify").json()["job_id"]
    assert read_sse(client, f"/api/v1/jobs/{job_id}/events")[-1]["data"]["status"] == "failed"
    try:
        env = {"COGMILL_HOME": str(runtime.settings.home)}
        watched = CliRunner().invoke(cli_app, ["jobs", "watch", job_id], env=env)
    finally:
        use_runtime(runtime)
    assert watched.exit_code == 1 and "finished status=failed" in watched.output
