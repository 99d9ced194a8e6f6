"""The same search and forget use cases through the CLI and through HTTP, compared.

Two fresh embedded homes get the same corpus, one through `cogmill add` + `cognify`, the other
through the HTTP upload + cognify routes. Each face then searches its own home (the same
queries and types, AUTO too) and must return the same results, ids and scores; each forgets
the same document and then the dataset, and the two homes must hold the same nodes, edges and
vectors afterwards. A running cognify job makes both faces refuse to forget. The LLM and the
embeddings are the local test server (deterministic), so two homes built alike are alike.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from api.cli import app as cli_app
from api.http.app import create_app
from core.models.jobs import Job, JobStatus
from core.settings import Settings
from runtime import Runtime
from tests.backends import http_finished, llm_settings, write_files
from tests.llm_server import LLMTestServer
from tests.merge_stress import differences, snapshot
from workers.jobs import JobTracker

DATASET = "faces"
CORPUS = {
    "curie.txt": "Marie Curie was born in Warsaw. Marie Curie discovered Polonium with Pierre "
    "Curie. Marie Curie won two Nobel prizes.",
    "turing.txt": "Alan Turing was born in London. Alan Turing designed the Bombe at Bletchley "
    "Park. Alan Turing proposed the imitation game.",
    "danube.txt": "The Danube flows through Vienna. The Danube ends in the Black Sea. Vienna "
    "hosts the Danube Island festival.",
}
# (query, type); None is AUTO: the router picks, and the response says what it picked.
SEARCHES = [
    ("Where was Marie Curie born?", "CHUNKS"),
    ("Where was Marie Curie born?", "GRAPH_COMPLETION"),
    ("Who designed the Bombe?", "GRAPH_PPR"),
    ("Which river flows through Vienna?", "SUMMARIES"),
    ("Which river flows through Vienna?", None),
    ('"Bletchley Park"', None),
]


def run_cli(home: Path, settings: dict[str, Any], *args: str) -> tuple[int, str]:
    """`cogmill ARGS` on a home: exit code and output."""
    env = {f"COGMILL_{k.upper()}": str(v) for k, v in settings.items()}
    env["COGMILL_HOME"] = str(home)
    result = CliRunner().invoke(cli_app, list(args), env=env)
    return result.exit_code, result.output


@dataclass
class Faces:
    """One home driven through the CLI, another through HTTP, both holding the corpus."""

    cli_home: Path
    settings: dict[str, Any]
    client: TestClient

    def cli(self, *args: str) -> tuple[int, str]:
        return run_cli(self.cli_home, self.settings, *args)

    def http_runtime(self) -> Runtime:
        return self.client.app.state.runtime  # type: ignore[attr-defined]

    def cli_snapshot(self) -> dict[str, Any]:
        """The CLI home's stores, read while no command runs (the embedded stores have one
        owner at a time)."""
        rt = Runtime(Settings(home=self.cli_home, **self.settings))
        try:
            return snapshot(rt.graph, rt.vectors, DATASET)
        finally:
            rt.close()

    def http_snapshot(self) -> dict[str, Any]:
        rt = self.http_runtime()
        return snapshot(rt.graph, rt.vectors, DATASET)


@pytest.fixture(scope="module")
def faces(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Faces]:
    folder = tmp_path_factory.mktemp("faces-corpus")
    write_files(folder, CORPUS)
    with LLMTestServer() as llm:
        settings = llm_settings(llm)
        # The CLI first: a command's runtime is the process' current one while it runs, so
        # its jobs must not overlap the app's (the app's requests use the app's runtime).
        cli_home = tmp_path_factory.mktemp("faces-cli")
        code, out = run_cli(cli_home, settings, "add", str(folder), "--dataset", DATASET)
        assert code == 0 and "3 added" in out, out
        code, out = run_cli(cli_home, settings, "cognify", DATASET)
        assert code == 0 and "succeeded" in out, out
        http_runtime = Runtime(Settings(home=tmp_path_factory.mktemp("faces-http"), **settings))
        with TestClient(create_app(http_runtime)) as client:
            faces = Faces(cli_home, settings, client)
            docs = [{"name": name, "text": text} for name, text in CORPUS.items()]
            added = client.post(f"/api/v1/datasets/{DATASET}/data", json={"documents": docs})
            assert added.status_code == 200 and len(added.json()["added"]) == 3, added.text
            started = client.post(f"/api/v1/datasets/{DATASET}/cognify")
            assert started.status_code == 202, started.text
            assert http_finished(client, started.json()["job_id"], 180)["status"] == "succeeded"
            yield faces


def cli_search(faces: Faces, query: str, search_type: str | None) -> dict[str, Any]:
    args = ["search", query, "--dataset", DATASET, "--top-k", "5", "--json"]
    code, out = faces.cli(*args, *(["--type", search_type] if search_type else []))
    assert code == 0, out
    return json.loads(out)


def http_search(faces: Faces, query: str, search_type: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"query": query, "datasets": [DATASET], "top_k": 5}
    if search_type:
        body["search_type"] = search_type
    response = faces.client.post("/api/v1/search", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def ranked(body: dict[str, Any]) -> list[tuple[float, list[str]]]:
    return [(r["score"], [s["chunk_id"] for s in r["sources"]]) for r in body["results"]]


def test_both_faces_built_the_same_stores(faces: Faces) -> None:
    cli, http = faces.cli_snapshot(), faces.http_snapshot()
    assert cli["nodes"] and cli["vectors"], cli
    assert differences(cli, http) == []


@pytest.mark.parametrize(("query", "search_type"), SEARCHES)
def test_search_returns_the_same_on_both_faces(
    faces: Faces, query: str, search_type: str | None
) -> None:
    by_cli, by_http = cli_search(faces, query, search_type), http_search(faces, query, search_type)
    assert by_cli["results"], by_cli
    assert ranked(by_cli) == ranked(by_http)
    assert by_cli == by_http  # texts, answer, note and (AUTO) the route too
    if search_type is None:
        assert by_cli["route"]["search_type"] == by_cli["search_type"], by_cli
    else:
        assert by_cli["search_type"] == search_type and by_cli["route"] is None


def unfinished_job(rt: Runtime) -> Job:
    """A job record on the dataset, as the planner records it, that no worker takes up: it
    stays unfinished for as long as the test needs (a real job could end before the CLI runs)."""
    job = Job(
        id=f"busy{time.time_ns()}", dataset=DATASET, pipeline="default", pipeline_version="test"
    )
    JobTracker(rt.state).save(job)
    return job


def end_job(rt: Runtime, job: Job) -> None:
    JobTracker(rt.state).save(job.model_copy(update={"status": JobStatus.CANCELLED}))


def test_forget_is_refused_on_both_faces_while_a_job_runs(faces: Faces) -> None:
    before = faces.http_snapshot()
    cli_rt = Runtime(Settings(home=faces.cli_home, **faces.settings))
    try:
        cli_job = unfinished_job(cli_rt)
    finally:
        cli_rt.close()
    http_job = unfinished_job(faces.http_runtime())
    for target in (["--document", "curie.txt"], []):
        code, out = faces.cli("forget", "--dataset", DATASET, *target, "--yes")
        assert code == 1 and cli_job.id in out and "cancel" in out, out
        body = {"dataset": DATASET, **({"document": target[1]} if target else {})}
        refused = faces.client.post("/api/v1/forget", json=body)
        assert refused.status_code == 409, refused.text
        error = refused.json()["error"]
        assert error["code"] == "job_running" and http_job.id in error["message"], error
    code, out = faces.cli("forget", "--all", "--yes")
    assert code == 1 and cli_job.id in out, out
    refused = faces.client.post("/api/v1/forget", json={"everything": True, "confirm": True})
    assert refused.status_code == 409 and http_job.id in refused.text, refused.text
    assert differences(before, faces.http_snapshot()) == []
    assert differences(before, faces.cli_snapshot()) == []
    cli_rt = Runtime(Settings(home=faces.cli_home, **faces.settings))
    try:
        end_job(cli_rt, cli_job)
    finally:
        cli_rt.close()
    end_job(faces.http_runtime(), http_job)


def test_forget_a_document_removes_the_same_on_both_faces(faces: Faces) -> None:
    code, out = faces.cli("forget", "--dataset", DATASET, "--document", "curie.txt")
    assert code == 0 and "1 document(s)" in out, out
    done = faces.client.post("/api/v1/forget", json={"dataset": DATASET, "document": "curie.txt"})
    assert done.status_code == 200, done.text
    assert done.json()["documents"] == ["curie.txt"]
    assert f"; {done.json()['graph_items']} graph items removed" in out, out
    cli, http = faces.cli_snapshot(), faces.http_snapshot()
    assert differences(cli, http) == []
    assert not any("Curie" in str(node) for node in cli["nodes"].values())
    query = "Where was Marie Curie born?"
    by_cli, by_http = cli_search(faces, query, "CHUNKS"), http_search(faces, query, "CHUNKS")
    assert by_cli == by_http
    names = {s["document_name"] for r in by_cli["results"] for s in r["sources"]}
    assert names and "curie.txt" not in names, names


def test_forget_the_dataset_empties_both_faces_alike(faces: Faces) -> None:
    code, out = faces.cli("forget", "--dataset", DATASET, "--yes")
    assert code == 0 and "1 dataset(s)" in out, out
    done = faces.client.post("/api/v1/forget", json={"dataset": DATASET})
    assert done.status_code == 200 and done.json()["datasets"] == [DATASET], done.text
    assert f"; {done.json()['graph_items']} graph items removed" in out, out
    empty = {"nodes": {}, "edges": {}, "vectors": {}}
    assert faces.cli_snapshot() == empty and faces.http_snapshot() == empty
    assert faces.client.get("/api/v1/datasets").json() == []
    code, out = faces.cli("forget", "--dataset", DATASET, "--yes")
    missing = faces.client.post("/api/v1/forget", json={"dataset": DATASET})
    assert code == 2 and "does not exist" in out, out
    assert missing.status_code == 404 and "does not exist" in missing.text, missing.text
