"""The HTTP API end to end: real app, embedded stores in tmp, real Celery worker threads."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.http.app import create_app
from api.services.demo import SAMPLE_CORPUS
from api.services.tenants import Tenants
from core.access import Caller, Role
from core.settings import Settings
from retrieval.models import SearchType
from retrieval.search import search as run_search
from runtime import Runtime
from tests.backends import http_finished, with_models

LIMIT = 64 * 1024  # max_file_bytes of the module's runtime
DATA = "/api/v1/datasets/sample/data"
NOTE = {"name": "notes.txt", "text": "Ada Lovelace wrote the first algorithm for a machine."}
SAMPLE_NAMES = sorted(p.name for p in SAMPLE_CORPUS.iterdir())
TENANT = Caller("tests", Role.WRITER)


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory, models: dict[str, object]) -> Runtime:
    home = tmp_path_factory.mktemp("api-home")
    return with_models(Runtime(Settings(home=home, max_file_bytes=LIMIT, batch_size=3)), models)


@pytest.fixture(scope="module")
def client(runtime: Runtime) -> Iterator[TestClient]:
    # Every call carries a writer's key of tenant `tests`, so the API requires keys; its
    # datasets are stored under the tenant (the CLI comparison below reads them there).
    tenants = Tenants(runtime.state)
    tenants.create_tenant(TENANT.tenant or "")
    key, _ = tenants.create_key(TENANT.tenant or "", TENANT.role)
    headers = {"Authorization": f"Bearer {key}"}
    with TestClient(create_app(runtime), headers=headers) as client:  # runs the lifespan
        yield client


def sample_files() -> list[tuple[str, tuple[str, bytes, str]]]:
    files = [
        ("files", (name, (SAMPLE_CORPUS / name).read_bytes(), "text/plain"))
        for name in SAMPLE_NAMES
    ]
    return [*files, ("files", ("empty.txt", b"", "text/plain"))]


@pytest.fixture(scope="module")
def uploaded(client: TestClient) -> list[dict[str, Any]]:
    bodies = []
    for kwargs in ({"files": sample_files()}, {"json": {"documents": [NOTE]}}):
        response = client.post(DATA, **kwargs)
        assert response.status_code == 200, response.text
        bodies.append(response.json())
    return bodies


@pytest.fixture(scope="module")
def cognified(client: TestClient, uploaded: list[dict[str, Any]]) -> tuple[Any, dict[str, Any]]:
    accepted = client.post("/api/v1/datasets/sample/cognify", json={"all": False})
    return accepted, http_finished(client, accepted.json()["job_id"])


def assert_error(response: Any, status: int, code: str, *words: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    assert all(word in body["error"]["message"] for word in words), body


def test_upload_files_and_json_documents(uploaded: list[dict[str, Any]]) -> None:
    files, texts = uploaded
    assert files["added"] == SAMPLE_NAMES and files["replaced"] == files["unchanged"] == []
    [rejected] = files["rejected"]
    assert rejected["name"] == "empty.txt" and "empty" in rejected["reason"]
    assert texts == {"added": ["notes.txt"], "replaced": [], "unchanged": [], "rejected": []}


def test_reupload_is_unchanged(client: TestClient, uploaded: list[dict[str, Any]]) -> None:
    body = client.post(DATA, files=sample_files()[:-1]).json()
    assert body["unchanged"] == SAMPLE_NAMES and body["added"] == []


def test_oversize_file_is_413_and_nothing_is_stored(client: TestClient, uploaded: Any) -> None:
    files = [
        ("files", ("small.txt", b"fits", "text/plain")),
        ("files", ("big.txt", b"a" * (LIMIT + 1), "text/plain")),
    ]
    assert_error(
        client.post(DATA, files=files), 413, "file_too_large", "big.txt", "COGMILL_MAX_FILE_BYTES"
    )
    big_json = {"documents": [{"name": "big.txt", "text": "a" * (LIMIT + 1)}]}
    assert_error(client.post(DATA, json=big_json), 413, "file_too_large", "COGMILL_MAX_FILE_BYTES")
    names = {doc["name"] for doc in client.get(DATA).json()}
    assert names == {*SAMPLE_NAMES, "notes.txt"}


def test_json_document_names_are_labels_not_paths(client: TestClient) -> None:
    url = "/api/v1/datasets/names/data"
    docs = [
        {"name": "../../etc/passwd.txt", "text": "Up two folders."},
        {"name": "/abs/path/report.md", "text": "# An absolute path"},
        {"name": "nul\u0000byte.txt", "text": "A NUL in the name."},
        {"name": "../..", "text": "Nothing but folders."},
    ]
    added = client.post(url, json={"documents": docs})
    assert added.status_code == 200, added.text
    assert {r["name"] for r in added.json()["rejected"]} == {"../.."}
    assert {doc["name"] for doc in client.get(url).json()} == {
        "passwd.txt",
        "report.md",
        "nulbyte.txt",
    }
    assert client.delete("/api/v1/datasets/names").status_code == 200  # later tests list all


def test_bad_requests_get_the_error_schema(client: TestClient) -> None:
    bad = client.post("/api/v1/datasets/my data!/data", files=sample_files()[:1])
    assert_error(bad, 400, "invalid_request", "invalid dataset name")
    assert_error(client.get("/api/v1/datasets/my data!/data"), 400, "invalid_request")
    assert_error(
        client.post(DATA, content=b"x", headers={"content-type": "text/plain"}),
        415,
        "unsupported_media_type",
    )
    assert_error(client.post(DATA, json={"documents": []}), 422, "validation_error", "documents")
    assert_error(client.get("/api/v1/nowhere"), 404, "not_found")


def test_cognify_accepts_and_the_job_succeeds(cognified: tuple[Any, dict[str, Any]]) -> None:
    accepted, job = cognified
    assert accepted.status_code == 202, accepted.text
    assert accepted.headers["location"] == f"/api/v1/jobs/{accepted.json()['job_id']}"
    assert job["status"] == "succeeded" and job["errors"] == []
    assert job["counts"]["documents"] == len(SAMPLE_NAMES) + 1 and job["counts"]["entities"] > 20


def test_documents_and_datasets_are_listed(client: TestClient, cognified: Any) -> None:
    docs = client.get(DATA).json()
    assert {d["name"]: d["status"] for d in docs} == dict.fromkeys(
        [*SAMPLE_NAMES, "notes.txt"], "processed"
    )
    assert client.get("/api/v1/datasets").json() == [{"name": "sample", "documents": len(docs)}]
    assert_error(client.get("/api/v1/datasets/never/data"), 404, "dataset_not_found")


def test_jobs_list_and_recognify_with_nothing_to_do(client: TestClient, cognified: Any) -> None:
    accepted, job = cognified
    assert [j["id"] for j in client.get("/api/v1/jobs").json()] == [job["id"]]
    again = client.post("/api/v1/datasets/sample/cognify")
    assert again.status_code == 202 and again.json()["status"] == "succeeded"
    assert "nothing to do" in again.json()["message"]
    assert client.post(f"/api/v1/jobs/{job['id']}/cancel").json()["status"] == "succeeded"
    newest_first = [again.json()["job_id"], job["id"]]
    assert [j["id"] for j in client.get("/api/v1/jobs").json()] == newest_first
    for window, ids in (("limit=1", newest_first[:1]), ("offset=1&limit=5", newest_first[1:])):
        assert [j["id"] for j in client.get(f"/api/v1/jobs?{window}").json()] == ids
    for bad in ("limit=0", "limit=1001", "offset=-1"):
        assert_error(client.get(f"/api/v1/jobs?{bad}"), 422, "validation_error", "query.")


@pytest.mark.parametrize("search_type", ["CHUNKS", "GRAPH_COMPLETION"])
def test_search_matches_the_cli_json(
    client: TestClient, runtime: Runtime, cognified: Any, search_type: str
) -> None:
    query = "Where was Marie Curie born?"
    request = {"query": query, "datasets": ["sample"], "search_type": search_type, "top_k": 5}
    response = client.post("/api/v1/search", json=request)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["results"][0]["sources"][0]["document_name"] == "marie_curie.txt"
    # `cogmill search --json` prints exactly this serialisation of the same call.
    cli = run_search(
        runtime.retrieval(),
        query,
        [TENANT.scoped("sample")],
        SearchType(search_type),
        5,
    )
    assert body == json.loads(cli.model_dump_json())
    assert body["answer"] is None and body["route"] is None  # every key, null when unset


def test_search_validation(client: TestClient) -> None:
    request = {"query": "x", "datasets": ["sample"], "top_k": 0}
    assert_error(client.post("/api/v1/search", json=request), 422, "validation_error", "top_k")
    request = {"query": "x", "datasets": ["a b"]}
    assert_error(client.post("/api/v1/search", json=request), 400, "invalid_request", "a b")


def test_unknown_job_and_dataset_are_404(client: TestClient) -> None:
    assert_error(
        client.get("/api/v1/jobs/0123456789abcdef"), 404, "job_not_found", "GET /api/v1/jobs"
    )
    assert_error(client.post("/api/v1/jobs/job:x/cancel"), 404, "job_not_found")
    missing = client.post("/api/v1/datasets/never-added/cognify", json={})
    assert_error(missing, 404, "dataset_not_found", "POST /api/v1/datasets/never-added/data")


def test_unknown_pipeline_is_422(client: TestClient, uploaded: Any) -> None:
    response = client.post("/api/v1/datasets/sample/cognify", json={"pipeline": "nope"})
    assert_error(response, 422, "unknown_pipeline", "unknown pipeline", "default")


def test_health_and_ready(client: TestClient, runtime: Runtime, tmp_path: Any) -> None:
    assert client.get("/health").json() == {"status": "ok"}
    ready = client.get("/ready")
    assert ready.status_code == 200 and ready.json()["ready"] is True
    assert ready.json()["warm_up"] == "off"  # nothing to warm: no Neo4j (and no `serve`)
    broken = Runtime(Settings(home=tmp_path, neo4j_uri="bolt://127.0.0.1:1"))
    broken.__dict__["embedder"] = runtime.embedder  # share the loaded model
    client.app.state.runtime = broken  # type: ignore[attr-defined]
    try:
        response = client.get("/ready")
    finally:
        client.app.state.runtime = runtime  # type: ignore[attr-defined]
        broken.close()
    assert response.status_code == 503
    stores = response.json()["stores"]
    # Nothing listens on port 1: the graph store cannot answer (whichever adapter is built).
    # The answer names neither the host nor the error (a probe would learn them): the log has.
    assert stores["graph"].startswith("unavailable") and "127.0.0.1" not in response.text, stores
    assert stores["vectors"] == stores["state"] == stores["embedder"] == "ok"


def test_openapi_lists_every_route(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    assert spec["info"]["title"] == "cogmill"
    routes = {(path, method) for path, ops in spec["paths"].items() for method in ops}
    assert routes == {
        ("/api/v1/datasets", "get"),
        ("/api/v1/datasets/{name}/data", "post"),
        ("/api/v1/datasets/{name}/data", "get"),
        ("/api/v1/datasets/{name}/cognify", "post"),
        ("/api/v1/jobs", "get"),
        ("/api/v1/jobs/{job_id}", "get"),
        ("/api/v1/jobs/{job_id}/cancel", "post"),
        ("/api/v1/jobs/{job_id}/resume", "post"),
        ("/api/v1/jobs/{job_id}/events", "get"),
        ("/api/v1/datasets/{name}", "delete"),
        ("/api/v1/datasets/{name}/data/{document_name}", "delete"),
        ("/api/v1/datasets/{name}/graph", "get"),
        ("/api/v1/datasets/{name}/graph/neighbourhood", "get"),
        ("/api/v1/datasets/{name}/facts", "get"),
        ("/api/v1/me", "get"),
        ("/api/v1/search", "post"),
        ("/api/v1/route", "post"),
        ("/api/v1/datasets/{name}/sync", "post"),
        ("/api/v1/schedules", "post"),
        ("/api/v1/schedules", "get"),
        ("/api/v1/schedules/{schedule_id}", "delete"),
        ("/api/v1/schedules/{schedule_id}/pause", "post"),
        ("/api/v1/schedules/{schedule_id}/resume", "post"),
        ("/api/v1/remember", "post"),
        ("/api/v1/recall", "post"),
        ("/api/v1/improve", "post"),
        ("/api/v1/forget", "post"),
        ("/api/v1/sessions", "get"),
        ("/api/v1/sessions/{session}", "get"),
        ("/api/v1/sessions/{session}", "delete"),
        ("/api/v1/webhooks", "post"),
        ("/api/v1/webhooks", "get"),
        ("/api/v1/webhooks/{webhook_id}", "delete"),
        ("/api/v1/jobs/{job_id}/webhooks", "get"),
        ("/metrics", "get"),
        ("/health", "get"),
        ("/ready", "get"),
    }
    upload = spec["paths"]["/api/v1/datasets/{name}/data"]["post"]
    assert set(upload["requestBody"]["content"]) == {"multipart/form-data", "application/json"}
    assert "DocumentsAdd" in spec["components"]["schemas"]
    assert "HTTPValidationError" not in spec["components"]["schemas"]
    error_ref = {"$ref": "#/components/schemas/ErrorResponse"}
    assert upload["responses"]["413"]["content"]["application/json"]["schema"] == error_ref
