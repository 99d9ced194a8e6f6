"""Two tenants each with a dataset named `docs`: neither key ever reaches the other's data.

Real app, embedded stores, real Celery worker threads; each tenant's text has words the other's
has not, so any crossing shows in search results, listings or job reads."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.http.app import create_app
from api.services import memory
from api.services.tenants import Tenants
from core.access import Role
from core.settings import Settings
from retrieval.models import SearchType
from runtime import Runtime
from tests.backends import http_finished, with_models

TEXTS = {
    "acme": "Zanzibar the aardvark digs burrows near Mombasa every monsoon season.",
    "beta": "Quentin the quokka hops around Rottnest Island eating saltbush leaves.",
    None: "Ludmila the lemur sleeps in the local default tenant's baobab tree.",
}
MARKERS = {"acme": ("zanzibar", "aardvark"), "beta": ("quentin", "quokka"), None: ("ludmila",)}
QUERIES = {"acme": "Where does Zanzibar the aardvark dig?", "beta": "Where does Quentin hop?"}
DOCS = "/api/v1/datasets/docs"
# Every type that reads only the datasets it is given (CYPHER and NATURAL_LANGUAGE are
# admin-only, tests/e2e/test_api_auth.py).
TYPES = [t for t in SearchType if t not in (SearchType.CYPHER, SearchType.NATURAL_LANGUAGE)]


def note(tenant: str | None) -> dict[str, Any]:
    return {"documents": [{"name": "note.txt", "text": TEXTS[tenant]}]}


@pytest.fixture(scope="module")
def app_clients(
    tmp_path_factory: pytest.TempPathFactory, models: dict[str, object]
) -> Iterator[dict[str | None, Any]]:
    rt = with_models(Runtime(Settings(home=tmp_path_factory.mktemp("tenants-home"))), models)
    app = create_app(rt)
    with TestClient(app) as local:
        # The local default tenant's `docs`, added before any key exists (bare name).
        assert local.post(f"{DOCS}/data", json=note(None)).status_code == 200
        local_job = local.post(f"{DOCS}/cognify", json={}).json()["job_id"]
        http_finished(local, local_job)
        tenants = Tenants(rt.state)
        clients: dict[str | None, Any] = {None: local}
        for name in ("acme", "beta"):
            tenants.create_tenant(name)
            key, _ = tenants.create_key(name, Role.WRITER)
            clients[name] = TestClient(app, headers={"Authorization": f"Bearer {key}"})
        yield clients


@pytest.fixture(scope="module")
def jobs(app_clients: dict[str | None, Any]) -> dict[str, dict[str, Any]]:
    done = {}
    for tenant in ("acme", "beta"):
        client = app_clients[tenant]
        added = client.post(f"{DOCS}/data", json=note(tenant))
        assert added.status_code == 200 and added.json()["added"] == ["note.txt"], added.text
        accepted = client.post(f"{DOCS}/cognify", json={})
        assert accepted.status_code == 202, accepted.text
        done[tenant] = http_finished(client, accepted.json()["job_id"])
        assert done[tenant]["status"] == "succeeded", done[tenant]
    return done


def texts_of(body: dict[str, Any]) -> str:
    """What a search answered (not the query it echoes), lowercased."""
    return json.dumps([body.get("results"), body.get("answer"), body.get("answer_json")]).lower()


@pytest.mark.parametrize("search_type", [t.value for t in TYPES])
def test_no_search_type_crosses_tenants(
    app_clients: dict[str | None, Any], jobs: Any, search_type: str
) -> None:
    found: dict[str, set[str]] = {}
    for tenant, other in (("acme", "beta"), ("beta", "acme")):
        request = {"query": QUERIES[other], "datasets": ["docs"], "search_type": search_type}
        response = app_clients[tenant].post("/api/v1/search", json=request)
        assert response.status_code == 200, response.text
        text = texts_of(response.json())
        for word in MARKERS[other] + MARKERS[None]:
            assert word not in text, (tenant, search_type, word)
        ids = {s["document_id"] for r in response.json()["results"] for s in r["sources"]}
        found[tenant] = ids
    assert not found["acme"] & found["beta"]


def test_each_tenant_finds_its_own_text(app_clients: dict[str | None, Any], jobs: Any) -> None:
    # The isolation above is no empty answer: the same search finds the tenant's own text.
    for tenant in ("acme", "beta"):
        request = {"query": QUERIES[tenant], "datasets": ["docs"], "search_type": "CHUNKS"}
        body = app_clients[tenant].post("/api/v1/search", json=request).json()
        assert MARKERS[tenant][0] in texts_of(body)


def test_listings_show_only_the_callers_own(app_clients: dict[str | None, Any], jobs: Any) -> None:
    for tenant in ("acme", "beta"):
        client = app_clients[tenant]
        assert client.get("/api/v1/datasets").json() == [{"name": "docs", "documents": 1}]
        assert [d["name"] for d in client.get(f"{DOCS}/data").json()] == ["note.txt"]
        listed = client.get("/api/v1/jobs").json()
        assert [job["id"] for job in listed] == [jobs[tenant]["id"]]
        assert listed[0]["dataset"] == "docs"
        exported = client.get(f"{DOCS}/graph").text.lower()
        records = [json.loads(line) for line in exported.splitlines()]
        assert records and {r["dataset"] for r in records} == {"docs"}
        graphml = client.get(f"{DOCS}/graph?format=graphml").text
        assert '<data key="n_dataset">docs</data>' in graphml
        assert f'dataset">{tenant}:' not in graphml
        assert MARKERS[tenant][0] in exported
        other = "beta" if tenant == "acme" else "acme"
        assert all(word not in exported for word in MARKERS[other] + MARKERS[None])


def test_estimate_reads_the_callers_dataset(app_clients: dict[str | None, Any], jobs: Any) -> None:
    # `solo` exists only as acme's: an estimate that read the bare name would answer 404.
    acme, beta = app_clients["acme"], app_clients["beta"]
    assert acme.post("/api/v1/datasets/solo/data", json=note("acme")).status_code == 200
    estimate = acme.post("/api/v1/datasets/solo/cognify?estimate=true", json={})
    assert estimate.status_code == 200, estimate.text
    assert beta.post("/api/v1/datasets/solo/cognify?estimate=true", json={}).status_code == 404


def test_memory_over_datasets_stays_per_tenant(
    app_clients: dict[str | None, Any], jobs: Any
) -> None:
    acme, beta = app_clients["acme"], app_clients["beta"]
    text = "Ottoline the okapi grazes in the Ituri forest."
    kept = acme.post("/api/v1/remember", json={"text": text, "dataset": "mem"})
    assert kept.status_code == 202 and kept.json()["dataset"] == "mem", kept.text
    http_finished(acme, kept.json()["job_id"])
    query = {"query": "Where does Ottoline the okapi graze?", "datasets": ["mem"]}
    own = acme.post("/api/v1/recall", json={**query, "search_type": "CHUNKS"})
    assert own.status_code == 200 and "okapi" in texts_of(own.json()), own.text
    # beta has no `mem`: acme's is invisible to its recall and untouchable by its forget.
    other = beta.post("/api/v1/recall", json={**query, "search_type": "CHUNKS"})
    assert other.status_code == 404 or "okapi" not in texts_of(other.json()), other.text
    assert beta.post("/api/v1/forget", json={"dataset": "mem"}).status_code == 404
    docs = {"query": QUERIES["acme"], "datasets": ["docs"], "search_type": "CHUNKS"}
    assert "aardvark" not in texts_of(beta.post("/api/v1/recall", json=docs).json())
    assert acme.post("/api/v1/forget", json={"dataset": "mem"}).status_code == 200
    assert acme.get("/api/v1/datasets/mem/data").status_code == 404


NOTES = {
    "acme": "The vault code of the aardvark burrow is 7431.",
    "beta": "The quokka keeps its saltbush stash under the jetty.",
}


def test_two_tenants_each_have_their_own_session_chat_1(
    app_clients: dict[str | None, Any], jobs: Any
) -> None:
    for tenant in ("acme", "beta"):
        kept = app_clients[tenant].post(
            "/api/v1/remember", json={"text": NOTES[tenant], "session": "chat-1"}
        )
        assert kept.status_code == 200 and kept.json()["session"] == "chat-1", kept.text
    query = {"query": "Where is the vault code or the stash kept?", "session": "chat-1"}
    for tenant, other in (("acme", "beta"), ("beta", "acme")):
        client = app_clients[tenant]
        own = client.post("/api/v1/recall", json={**query, "scope": "session"})
        assert own.status_code == 200, own.text
        assert [r["text"] for r in own.json()["results"]] == [NOTES[tenant]]
        # Both lanes over the tenant's `docs`: recorded in its session, named as it names it.
        both = client.post(
            "/api/v1/recall",
            json={
                "query": QUERIES[tenant],
                "session": "chat-1",
                "datasets": ["docs"],
                "search_type": "CHUNKS",
            },
        )
        assert both.status_code == 200 and both.json()["qa_id"], both.text
        assert all(word not in texts_of(both.json()) for word in MARKERS[other])
        listed = client.get("/api/v1/sessions").json()
        # Both recalls found something, so both are recorded questions of the session.
        assert listed == [{"session": "chat-1", "notes": 1, "questions": 2}], listed
        history = client.get("/api/v1/sessions/chat-1").json()
        assert [n["text"] for n in history["notes"]] == [NOTES[tenant]]
        assert [q["datasets"] for q in history["questions"]] == [[], ["docs"]]
        assert NOTES[other] not in json.dumps(history)
    # The local default tenant (no key, read through its runtime) has no chat-1 at all.
    rt = app_clients[None].app.state.runtime
    assert memory.list_sessions(rt) == []


def test_another_tenants_session_is_404(app_clients: dict[str | None, Any], jobs: Any) -> None:
    acme, beta = app_clients["acme"], app_clients["beta"]
    kept = acme.post("/api/v1/remember", json={"text": NOTES["acme"], "session": "acme-only"})
    assert kept.status_code == 200, kept.text
    recalled = acme.post(
        "/api/v1/recall",
        json={
            "query": QUERIES["acme"],
            "session": "acme-only",
            "datasets": ["docs"],
            "search_type": "CHUNKS",
        },
    )
    qa_id = recalled.json()["qa_id"]
    assert qa_id, recalled.text
    for method, url, body in (
        ("GET", "/api/v1/sessions/acme-only", None),
        ("DELETE", "/api/v1/sessions/acme-only", None),
        ("POST", "/api/v1/forget", {"session": "acme-only"}),
        ("POST", "/api/v1/improve", {"session": "acme-only", "qa_id": qa_id, "feedback": "up"}),
    ):
        response = beta.request(method, url, json=body)
        assert response.status_code == 404, (method, url, response.text)
        assert "acme" not in response.json()["error"]["message"].replace("acme-only", "")
    empty = beta.post("/api/v1/recall", json={"query": "vault code", "session": "acme-only"})
    assert empty.status_code == 200 and empty.json()["results"] == [], empty.text
    assert "acme-only" not in [s["session"] for s in beta.get("/api/v1/sessions").json()]
    # Still whole for its owner, whose improve and delete work.
    improved = acme.post(
        "/api/v1/improve", json={"session": "acme-only", "qa_id": qa_id, "feedback": "up"}
    )
    assert improved.status_code == 200, improved.text
    assert [n["text"] for n in acme.get("/api/v1/sessions/acme-only").json()["notes"]] == [
        NOTES["acme"]
    ]
    deleted = acme.delete("/api/v1/sessions/acme-only")
    assert deleted.status_code == 200 and deleted.json()["sessions"] == ["acme-only"]
    assert deleted.json()["session_keys"] >= 3, deleted.text  # note, qa, trace (and vectors)
    assert acme.get("/api/v1/sessions/acme-only").status_code == 404


def test_a_reader_key_recalls_a_session_but_may_not_change_it(
    app_clients: dict[str | None, Any], jobs: Any
) -> None:
    rt = app_clients[None].app.state.runtime
    key, _ = Tenants(rt.state).create_key("acme", Role.READER)
    reader = TestClient(app_clients[None].app, headers={"Authorization": f"Bearer {key}"})
    acme = app_clients["acme"]
    assert acme.post("/api/v1/remember", json={"text": NOTES["acme"], "session": "read-me"})
    recalled = reader.post(
        "/api/v1/recall", json={"query": "vault code", "session": "read-me", "scope": "session"}
    )
    assert recalled.status_code == 200, recalled.text
    assert [r["text"] for r in recalled.json()["results"]] == [NOTES["acme"]]
    assert reader.get("/api/v1/sessions/read-me").status_code == 200
    for method, url, body in (
        ("POST", "/api/v1/remember", {"text": "more", "session": "read-me"}),
        ("POST", "/api/v1/forget", {"session": "read-me"}),
        ("DELETE", "/api/v1/sessions/read-me", None),
    ):
        response = reader.request(method, url, json=body)
        assert response.status_code == 403, (method, url, response.text)
    assert len(acme.get("/api/v1/sessions/read-me").json()["notes"]) == 1


def test_another_tenants_jobs_are_404(app_clients: dict[str | None, Any], jobs: Any) -> None:
    beta, acme_job = app_clients["beta"], jobs["acme"]["id"]
    for method, url in (
        ("GET", f"/api/v1/jobs/{acme_job}"),
        ("POST", f"/api/v1/jobs/{acme_job}/cancel"),
        ("GET", f"/api/v1/jobs/{acme_job}/events"),
    ):
        response = beta.request(method, url)
        assert response.status_code == 404, (url, response.text)
        assert response.json()["error"]["code"] == "job_not_found"
    own = app_clients["acme"].get(f"/api/v1/jobs/{acme_job}")
    assert own.status_code == 200 and own.json()["dataset"] == "docs", own.text
    cancelled = app_clients["acme"].post(f"/api/v1/jobs/{acme_job}/cancel")
    assert cancelled.status_code == 202 and cancelled.json()["dataset"] == "docs"


def test_reserved_and_unknown_names(app_clients: dict[str | None, Any], jobs: Any) -> None:
    acme = app_clients["acme"]
    for name in ("beta:docs", "acme:docs"):
        response = acme.get(f"/api/v1/datasets/{name}/data")
        assert response.status_code == 400 and "':' is not allowed" in response.text
    missing = acme.post("/api/v1/datasets/other/cognify", json={})
    assert missing.status_code == 404 and "acme" not in missing.json()["error"]["message"]


def test_deletes_by_one_tenant_leave_the_other_intact(
    app_clients: dict[str | None, Any], jobs: Any
) -> None:
    acme, beta = app_clients["acme"], app_clients["beta"]
    deleted = beta.delete(f"{DOCS}/data/note.txt")
    assert deleted.status_code == 200 and deleted.json()["dataset"] == "docs", deleted.text
    assert beta.delete(DOCS).status_code == 200
    assert beta.get(f"{DOCS}/data").status_code == 404
    assert [d["name"] for d in acme.get(f"{DOCS}/data").json()] == ["note.txt"]
    request = {"query": QUERIES["acme"], "datasets": ["docs"], "search_type": "CHUNKS"}
    assert "aardvark" in texts_of(acme.post("/api/v1/search", json=request).json())
    # The local default tenant's bare `docs` is untouched too (read through the runtime).
    local_docs = app_clients[None].app.state.runtime.catalog.documents("docs")
    assert [doc.name for doc in local_docs] == ["note.txt"]
