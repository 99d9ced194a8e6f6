"""A tenant's key never sees the stored `tenant:name` form, nor any tenant's id.

Walks every answer a tenant's key can get (lists, job records and event streams, exports in
both formats and their file names, search notes and route reasons of every type, recall and
session history, document errors, error bodies) and looks for either tenant's id anywhere in
the body or headers. The tenant ids are strings found in no text or name of the test, so
any hit is the stored form leaking. Real app, embedded stores, real Celery worker threads."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.http.app import create_app
from api.services.tenants import Tenants
from core.access import Role
from core.settings import Settings
from retrieval.models import SearchType
from runtime import Runtime
from tests.backends import http_finished, with_models

TENANT, OTHER = "zq7tenant", "yx4other"
TEXT = "Zanzibar the aardvark digs burrows near Mombasa every monsoon season of 2019."
DOCS = "/api/v1/datasets/docs"
QUOTA = 4000
# Every type a writer key may run (CYPHER and NATURAL_LANGUAGE are admin-only).
TYPES = [t.value for t in SearchType if t not in (SearchType.CYPHER, SearchType.NATURAL_LANGUAGE)]


class Walk:
    """A tenant's client that keeps every answer it got, to be searched afterwards."""

    def __init__(self, client: TestClient) -> None:
        self.client, self.seen = client, []

    def __call__(self, method: str, url: str, **kw: Any) -> Any:
        response = self.client.request(method, url, **kw)
        assert response.status_code < 500, (method, url, response.text)
        self.seen.append((method, url, response.status_code, dict(response.headers), response.text))
        return response

    def leaks(self) -> list[tuple[str, str, int, str]]:
        found = []
        for method, url, status, headers, body in self.seen:
            text = json.dumps(headers) + body
            for name in (TENANT, OTHER):
                if name in text:
                    at = text.index(name)
                    found.append((method, url, status, text[max(0, at - 80) : at + 60]))
        return found


@pytest.fixture(scope="module")
def walked(tmp_path_factory: pytest.TempPathFactory, models: dict[str, object]) -> Iterator[Walk]:
    # A quota the walk's small texts stay under, and one upload goes over.
    home = tmp_path_factory.mktemp("names-home")
    rt = with_models(Runtime(Settings(home=home, tenant_storage_bytes=QUOTA)), models)
    app = create_app(rt)
    with TestClient(app):
        tenants = Tenants(rt.state)
        keys = {}
        for name in (TENANT, OTHER):
            tenants.create_tenant(name)
            keys[name], _ = tenants.create_key(name, Role.WRITER)
        other = TestClient(app, headers={"Authorization": f"Bearer {keys[OTHER]}"})
        added = other.post(f"{DOCS}/data", json={"documents": [{"name": "o.txt", "text": TEXT}]})
        assert added.status_code == 200, added.text
        http_finished(other, other.post(f"{DOCS}/cognify", json={}).json()["job_id"])
        walk = Walk(TestClient(app, headers={"Authorization": f"Bearer {keys[TENANT]}"}))
        _ingest(walk, rt)
        _read(walk)
        _search(walk)
        _remember_and_recall(walk)
        _errors_and_deletes(walk)
        yield walk


def _ingest(walk: Walk, rt: Runtime) -> None:
    walk("POST", f"{DOCS}/data", json={"documents": [{"name": "note.txt", "text": TEXT}]})
    walk("POST", f"{DOCS}/cognify?estimate=true", json={})
    job = walk("POST", f"{DOCS}/cognify", json={}).json()["job_id"]
    http_finished(walk.client, job)
    # A document whose stored bytes went missing: its error names the blob it could not read.
    walk(
        "POST",
        "/api/v1/datasets/broken/data",
        json={"documents": [{"name": "b.txt", "text": TEXT}]},
    )
    for doc in rt.catalog.documents(f"{TENANT}:broken"):
        rt.blobs.delete(doc.properties["blob_key"])
    broken = walk("POST", "/api/v1/datasets/broken/cognify", json={}).json()["job_id"]
    assert http_finished(walk.client, broken)["errors"], "the missing blob did not fail"
    for job_id in (job, broken):
        walk("GET", f"/api/v1/jobs/{job_id}")
        walk("GET", f"/api/v1/jobs/{job_id}/events")
        walk("POST", f"/api/v1/jobs/{job_id}/cancel")


def _read(walk: Walk) -> None:
    walk("GET", "/api/v1/jobs")
    walk("GET", "/api/v1/datasets")
    for name in ("docs", "broken"):
        documents = walk("GET", f"/api/v1/datasets/{name}/data").json()
        # The explorer's neighbourhood of a document: the document node itself and its chunks.
        around = walk(
            "GET", f"/api/v1/datasets/{name}/graph/neighbourhood?node={documents[0]['id']}"
        )
        assert around.status_code == 200 and around.json()["nodes"], around.text
        for fmt in ("jsonl", "graphml"):
            exported = walk("GET", f"/api/v1/datasets/{name}/graph?format={fmt}")
            assert (
                exported.status_code == 200
                and "aardvark" in exported.text.lower()
                or (name == "broken")
            )


def _search(walk: Walk) -> None:
    for search_type in TYPES:
        body = {
            "query": "Where does Zanzibar dig?",
            "datasets": ["docs"],
            "search_type": search_type,
        }
        walk("POST", "/api/v1/search", json=body)
    # No type: the router's reason names what the datasets lack (events, summaries...).
    for query in ("What happened in 2019?", "Summarise everything", "coding rules for tests"):
        walk("POST", "/api/v1/search", json={"query": query, "datasets": ["docs", "broken"]})
        walk("POST", "/api/v1/route", json={"query": query})


def _remember_and_recall(walk: Walk) -> None:
    walk("POST", "/api/v1/remember", json={"text": "The aardvark likes 2019.", "session": "chat-1"})
    kept = walk("POST", "/api/v1/remember", json={"text": TEXT + " Again.", "dataset": "mem"})
    http_finished(walk.client, kept.json()["job_id"])
    recall = {"query": "Where does Zanzibar dig?", "session": "chat-1", "search_type": "CHUNKS"}
    answered = walk("POST", "/api/v1/recall", json={**recall, "datasets": ["docs", "mem"]})
    # With only the session: its datasets are searched, and the note names them.
    walk("POST", "/api/v1/recall", json={**recall, "query": "burrows near Mombasa in monsoon"})
    qa_id = answered.json()["qa_id"]
    walk("POST", "/api/v1/improve", json={"session": "chat-1", "qa_id": qa_id, "feedback": "up"})
    walk("GET", "/api/v1/sessions")
    walk("GET", "/api/v1/sessions/chat-1")


def _errors_and_deletes(walk: Walk) -> None:
    big = {"documents": [{"name": "big.txt", "text": "aardvark " * (QUOTA // 9)}]}
    assert walk("POST", f"{DOCS}/data", json=big).status_code == 413
    walk("GET", "/api/v1/datasets/nope/data")
    walk("POST", "/api/v1/datasets/nope/cognify", json={})
    walk("GET", "/api/v1/datasets/nope/graph")
    walk("POST", "/api/v1/search", json={"query": "x", "datasets": ["nope"]})
    walk("POST", "/api/v1/recall", json={"query": "x", "datasets": ["nope"]})
    walk("GET", "/api/v1/datasets/a:b/data")
    walk("GET", "/api/v1/sessions/nope")
    walk("DELETE", f"{DOCS}/data/nope.txt")
    walk("DELETE", f"{DOCS}/data/note.txt")
    walk("POST", "/api/v1/forget", json={"dataset": "mem"})
    walk("DELETE", "/api/v1/sessions/chat-1")
    walk("DELETE", DOCS)


def test_no_answer_shows_a_tenant_id(walked: Walk) -> None:
    leaks = walked.leaks()
    assert not leaks, "\n".join(map(repr, leaks))


def test_the_walk_reached_what_names_a_dataset(walked: Walk) -> None:
    # The walk is no empty one: the answers that carry a dataset name carry the caller's.
    bodies = {(m, u): (s, b) for m, u, s, _, b in walked.seen}
    assert json.loads(bodies[("GET", "/api/v1/datasets")][1]) == [
        {"name": "broken", "documents": 1},
        {"name": "docs", "documents": 1},
    ]
    jobs = json.loads(bodies[("GET", "/api/v1/jobs")][1])
    assert {job["dataset"] for job in jobs} == {"docs", "broken"}
    broken = [job for job in jobs if job["dataset"] == "broken"][0]
    assert "broken/" in broken["errors"][0]["message"], broken  # the blob key, as the caller's
    graphml = bodies[("GET", "/api/v1/datasets/docs/graph?format=graphml")][1]
    assert '<data key="n_type">Dataset</data><data key="n_name">docs</data>' in graphml
    assert '"blob_key": "docs/' in bodies[("GET", "/api/v1/datasets/docs/graph?format=jsonl")][1]
    history = json.loads(bodies[("GET", "/api/v1/sessions/chat-1")][1])
    assert ["docs", "mem"] in [q["datasets"] for q in history["questions"]]
    recalls = [
        b for _, url, status, _, b in walked.seen if url.endswith("/recall") and status == 200
    ]
    noted = [json.loads(body).get("note") or "" for body in recalls]
    assert any("docs" in note for note in noted), noted
    assert bodies[("GET", "/api/v1/datasets/nope/data")][0] == 404
