"""The API's outside edges: bounded inputs, no leaks in error bodies, Host and Origin
checks. The real app over embedded stores; unreachable stores are closed local ports."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.http.app import create_app
from api.services.tenants import Tenants
from core.access import Caller, Role
from core.settings import Settings
from runtime import Runtime
from tests.backends import http_finished

pytestmark = pytest.mark.e2e

TENANT = Caller("bounds", Role.WRITER)
DATA = "/api/v1/datasets/docs/data"
BOUNDS = {
    "max_file_bytes": 200_000,
    "max_upload_bytes": 500_000,
    "api_max_body_bytes": 64 * 1024,
    "api_max_query_chars": 1000,
    "api_max_datasets": 5,
}
# What an error body must never carry: an absolute path, a URL or host:port, an exception class.
LEAKS = re.compile(r"/(tmp|work|home|usr|var)/|://|127\.0\.0\.1|localhost|:\d{2,5}\b|[A-Z]\w+Error")


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Runtime:
    return Runtime(Settings(home=tmp_path_factory.mktemp("bounds-home"), **BOUNDS))


@pytest.fixture(scope="module")
def client(runtime: Runtime) -> Iterator[TestClient]:
    tenants = Tenants(runtime.state)
    tenants.create_tenant(TENANT.tenant or "")
    key, _ = tenants.create_key(TENANT.tenant or "", TENANT.role)
    with TestClient(create_app(runtime), headers={"Authorization": f"Bearer {key}"}) as client:
        yield client


def assert_error(response: Any, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    return str(body["error"]["message"])


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when the block ends


# -- fault 4: unbounded inputs -----------------------------------------------------------------


def test_body_over_the_cap_is_413_by_content_length(client: TestClient) -> None:
    body = b'{"query": "' + b"a" * 100_000 + b'", "datasets": ["docs"]}'
    response = client.post(
        "/api/v1/search", content=body, headers={"Content-Type": "application/json"}
    )
    assert "COGMILL_API_MAX_BODY_BYTES" in assert_error(response, 413, "body_too_large")


def test_body_over_the_cap_is_413_when_streamed_without_length(client: TestClient) -> None:
    def chunks() -> Iterator[bytes]:  # chunked transfer: no Content-Length to trust
        yield b'{"query": "'
        for _ in range(20):
            yield b"a" * 10_000
        yield b'", "datasets": ["docs"]}'

    response = client.post(
        "/api/v1/search", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert_error(response, 413, "body_too_large")


@pytest.mark.parametrize("path", ["/api/v1/search", "/api/v1/route", "/api/v1/recall"])
def test_query_over_the_cap_is_422(client: TestClient, path: str) -> None:
    body = {"query": "who wrote it " * 100, "datasets": ["docs"]}
    body = {"query": body["query"]} if path.endswith("route") else body
    message = assert_error(client.post(path, json=body), 422, "query_too_long")
    assert "COGMILL_API_MAX_QUERY_CHARS" in message


def test_query_at_the_cap_is_routed(client: TestClient) -> None:
    response = client.post("/api/v1/route", json={"query": "x" * 1000})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("path", ["/api/v1/search", "/api/v1/recall"])
def test_too_many_datasets_is_422(client: TestClient, path: str) -> None:
    body = {"query": "q", "datasets": [f"d{i}" for i in range(6)], "search_type": "GRAPH_PPR"}
    assert "COGMILL_API_MAX_DATASETS" in assert_error(
        client.post(path, json=body), 422, "too_many_datasets"
    )


def test_upload_total_over_the_cap_is_413(client: TestClient) -> None:
    # Each file is under max_file_bytes; together they are over max_upload_bytes.
    files = [("files", (f"f{i}.txt", b"word " * 30_000, "text/plain")) for i in range(4)]
    message = assert_error(client.post(DATA, files=files), 413, "body_too_large")
    assert "COGMILL_MAX_UPLOAD_BYTES" in message
    assert client.get(DATA).status_code == 404  # nothing was stored


def test_streamed_upload_over_the_total_cap_is_413(client: TestClient) -> None:
    def parts() -> Iterator[bytes]:  # chunked multipart: the bytes are counted as they come
        for i in range(4):
            disposition = f"Content-Disposition: form-data; name=files; filename=f{i}.txt"
            yield f"--xyz\r\n{disposition}\r\n\r\n".encode()
            yield b"w" * 150_000 + b"\r\n"
        yield b"--xyz--\r\n"

    headers = {"Content-Type": "multipart/form-data; boundary=xyz"}
    response = client.post(DATA, content=parts(), headers=headers)
    assert "COGMILL_MAX_UPLOAD_BYTES" in assert_error(response, 413, "body_too_large")
    assert client.get(DATA).status_code == 404  # nothing was stored


def test_upload_under_the_total_cap_is_taken(client: TestClient) -> None:
    files = [("files", (f"f{i}.txt", b"word " * 30_000, "text/plain")) for i in range(2)]
    response = client.post(DATA, files=files)
    assert response.status_code == 200, response.text
    client.delete("/api/v1/datasets/docs")


# -- fault 11: no leaks ------------------------------------------------------------------------


@contextmanager
def runtime_of(client: TestClient, settings: Settings) -> Iterator[Runtime]:
    """The app serving a second runtime for a while. Only one app's lifespan may run at a time
    (it installs the process' Celery runtime), so swap the runtime rather than start an app."""
    served = client.app.state.runtime  # type: ignore[attr-defined]
    other = Runtime(settings)
    other.__dict__["embedder"] = served.embedder  # share the loaded model
    client.app.state.runtime = other  # type: ignore[attr-defined]
    try:
        yield other
    finally:
        client.app.state.runtime = served  # type: ignore[attr-defined]
        other.close()


def test_ready_with_unreachable_stores_names_no_host(client: TestClient, tmp_path: Path) -> None:
    port = closed_port()
    settings = Settings(
        home=tmp_path, neo4j_uri=f"bolt://127.0.0.1:{port}", qdrant_url=f"http://127.0.0.1:{port}"
    )
    with runtime_of(client, settings):  # no key was made in it: the local tenant
        response = client.get("/ready")
        assert response.status_code == 503, response.text
        stores = response.json()["stores"]
        assert stores["graph"] != "ok" and stores["vectors"] != "ok", stores
        assert stores["state"] == "ok", stores
        assert not LEAKS.search(response.text), response.text
        # A route that needs the graph answers 503 in the error schema, also without the host.
        search = client.post(
            "/api/v1/search", json={"query": "q", "datasets": ["d"], "search_type": "CHUNKS"}
        )
        assert search.status_code == 503, search.text
        assert search.json()["error"]["code"] in {"store_unavailable", "backend_not_available"}
        assert not LEAKS.search(search.text), search.text


def test_corrupt_multipart_names_no_library_text(client: TestClient) -> None:
    part = b"--xyz\r\nContent-Disposition: form-data; name=files; filename=a.txt\r\n\r\nab\r\n"
    for body in (part + b"--xyz\r\nbad header line\r\n\r\n", b"garbage--xyzzzz\r\n\x00"):
        response = client.post(
            DATA, content=body, headers={"Content-Type": "multipart/form-data; boundary=xyz"}
        )
        message = assert_error(response, 400, "bad_multipart")
        # python-multipart's own text ("Found invalid character 32 in header at 83") stays out.
        assert "character" not in message and " at " not in message, message
        assert not LEAKS.search(response.text), response.text
    assert client.get(DATA).status_code == 404  # nothing was stored


def test_corrupt_files_fail_without_paths_or_library_classes(client: TestClient) -> None:
    files = [
        ("files", ("broken.pdf", b"%PDF-1.7\n1 0 obj <<>> garbage", "application/pdf")),
        ("files", ("broken.docx", b"PK\x03\x04 not a zip", "application/octet-stream")),
        ("files", ("rows.jsonl", b"{bad json\n", "application/json")),
    ]
    assert client.post(DATA, files=files).status_code == 200
    accepted = client.post("/api/v1/datasets/docs/cognify")
    job = http_finished(client, accepted.json()["job_id"])
    assert job["status"] == "failed" and len(job["errors"]) == 3, job
    documents = client.get(DATA)
    assert {d["status"] for d in documents.json()} == {"failed"}, documents.text
    for text in [e["message"] for e in job["errors"]] + [d["error"] for d in documents.json()]:
        assert not LEAKS.search(text), text
    client.delete("/api/v1/datasets/docs")


# -- fault 12: Host and Origin -----------------------------------------------------------------


def test_foreign_host_is_400(client: TestClient) -> None:
    response = client.get("/api/v1/datasets", headers={"Host": "attacker.example"})
    assert "COGMILL_API_TRUSTED_HOSTS" in assert_error(response, 400, "untrusted_host")
    for host in ("localhost:8000", "127.0.0.1", "[::1]:8000"):
        assert client.get("/health", headers={"Host": host}).status_code == 200, host


def test_foreign_origin_is_403_on_state_changing_routes(client: TestClient) -> None:
    files = [("files", ("a.txt", b"hello", "text/plain"))]
    evil = {"Origin": "https://attacker.example"}
    response = client.post(DATA, files=files, headers=evil)
    assert "COGMILL_API_ALLOWED_ORIGINS" in assert_error(response, 403, "foreign_origin")
    assert_error(client.delete("/api/v1/datasets/docs", headers=evil), 403, "foreign_origin")
    assert client.get(DATA).status_code == 404  # nothing was stored
    # Reads may carry any Origin (the browser's same-origin policy keeps their answers).
    assert client.get("/api/v1/datasets", headers=evil).status_code == 200
    # The API's own origin may change data.
    own = {"Origin": "http://testserver"}
    assert client.post(DATA, files=files, headers=own).status_code == 200
    client.delete("/api/v1/datasets/docs")


def test_allowed_origin_may_post(client: TestClient, tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, api_allowed_origins=["https://app.example"])
    with runtime_of(client, settings):
        files = [("files", ("a.txt", b"hello", "text/plain"))]
        ok = client.post(DATA, files=files, headers={"Origin": "https://app.example"})
        assert ok.status_code == 200, ok.text
        other = client.post(DATA, files=files, headers={"Origin": "https://other.example"})
        assert_error(other, 403, "foreign_origin")


@pytest.mark.parametrize(
    "content_type", ["application/x-www-form-urlencoded", "text/plain", "multipart/form-data"]
)
def test_empty_form_post_to_cognify_is_refused(client: TestClient, content_type: str) -> None:
    client.post(DATA, json={"documents": [{"name": "a.txt", "text": "hello"}]})
    jobs = len(client.get("/api/v1/jobs").json())
    response = client.post(
        "/api/v1/datasets/docs/cognify", content=b"", headers={"Content-Type": content_type}
    )
    assert_error(response, 415, "unsupported_media_type")
    assert len(client.get("/api/v1/jobs").json()) == jobs  # no job was started
