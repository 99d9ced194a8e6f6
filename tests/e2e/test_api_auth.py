"""API keys over HTTP: 401 without a usable key, 403 for a role that may not, open probes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from api.cli import app as cli
from api.http.app import create_app
from api.services.tenants import Tenants
from core.access import Role
from core.settings import Settings
from runtime import Runtime
from tests.backends import with_models

DATA = "/api/v1/datasets/docs/data"
NOTE = {"documents": [{"name": "note.txt", "text": "Ada Lovelace wrote the first algorithm."}]}


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory, models: dict[str, object]) -> Runtime:
    return with_models(Runtime(Settings(home=tmp_path_factory.mktemp("auth-home"))), models)


@pytest.fixture(scope="module")
def client(runtime: Runtime) -> Iterator[TestClient]:
    with TestClient(create_app(runtime)) as client:
        yield client


@pytest.fixture(scope="module")
def keys(runtime: Runtime, client: TestClient) -> dict[str, str]:
    # Before any key exists the API is open (the local default tenant): the same call that
    # needs a key afterwards answers 200 here, so the 401s below come from the keys.
    assert client.get("/api/v1/datasets").status_code == 200
    tenants = Tenants(runtime.state)
    tenants.create_tenant("acme")
    made = {
        role.value: tenants.create_key("acme", role)[0]
        for role in Role
        if role is not Role.OPERATOR
    }
    made["operator"] = tenants.create_operator_key()[0]
    revoked, record = tenants.create_key("acme", Role.ADMIN)
    tenants.revoke(record.id)
    expired, _ = tenants.create_key("acme", Role.ADMIN, expires_days=0.05 / 86_400)
    time.sleep(0.1)
    return {**made, "revoked": revoked, "expired": expired}


def call(client: TestClient, key: str | None, method: str, url: str, **kw: Any) -> Any:
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    return client.request(method, url, headers=headers, **kw)


def assert_error(response: Any, status: int, code: str, *words: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    assert all(word in body["error"]["message"] for word in words), body


def test_no_or_bad_key_is_401_on_every_route_but_the_probes(
    client: TestClient, keys: dict[str, str]
) -> None:
    routes = [
        ("GET", "/api/v1/datasets", {}),
        ("GET", DATA, {}),
        ("POST", DATA, {"json": NOTE}),
        ("DELETE", "/api/v1/datasets/docs", {}),
        ("POST", "/api/v1/datasets/docs/cognify", {"json": {}}),
        ("GET", "/api/v1/jobs", {}),
        ("GET", "/api/v1/jobs/0123456789abcdef/events", {}),
        ("POST", "/api/v1/search", {"json": {"query": "x", "datasets": ["docs"]}}),
        ("POST", "/api/v1/route", {"json": {"query": "x"}}),
        ("POST", "/api/v1/recall", {"json": {"query": "x", "session": "s"}}),
        ("POST", "/api/v1/forget", {"json": {"session": "s"}}),
        ("GET", "/api/v1/datasets/docs/graph", {}),
    ]
    for key in (None, "", "cm_nope", keys["reader"] + "x", keys["revoked"], keys["expired"]):
        for method, url, kw in routes:
            response = call(client, key, method, url, **kw)
            assert_error(response, 401, "unauthorized", "key")
            assert response.headers["WWW-Authenticate"] == "Bearer", (method, url)
    assert client.get("/health").status_code == 200
    assert client.get("/ready").status_code == 200


def test_a_reader_reads_and_may_not_write(client: TestClient, keys: dict[str, str]) -> None:
    reader = keys["reader"]
    assert call(client, reader, "GET", "/api/v1/datasets").status_code == 200
    assert call(client, reader, "POST", "/api/v1/route", json={"query": "who"}).status_code == 200
    writes = [
        ("POST", DATA, {"json": NOTE}),
        ("DELETE", "/api/v1/datasets/docs", {}),
        ("DELETE", DATA + "/note.txt", {}),
        ("POST", "/api/v1/datasets/docs/cognify", {"json": {}}),
        ("POST", "/api/v1/jobs/0123456789abcdef/cancel", {}),
    ]
    for method, url, kw in writes:
        assert_error(call(client, reader, method, url, **kw), 403, "forbidden", "writer")
    assert call(client, reader, "GET", DATA).status_code == 404  # nothing written


def test_a_writer_writes(client: TestClient, keys: dict[str, str]) -> None:
    writer = keys["writer"]
    added = call(client, writer, "POST", DATA, json=NOTE)
    assert added.status_code == 200 and added.json()["added"] == ["note.txt"], added.text
    listed = call(client, keys["reader"], "GET", DATA).json()
    assert [doc["name"] for doc in listed] == ["note.txt"]
    # Past the role check: an unknown job is 404, not 403.
    cancel = call(client, writer, "POST", "/api/v1/jobs/0123456789abcdef/cancel")
    assert_error(cancel, 404, "job_not_found")
    assert call(client, writer, "GET", DATA).status_code == 200  # still there


def test_session_memory_takes_the_roles_of_datasets(
    client: TestClient, keys: dict[str, str]
) -> None:
    # A reader may recall from a session but not change one; no key forgets everything.
    writes = [
        ("/api/v1/remember", {"text": "x", "session": "s"}),
        ("/api/v1/improve", {"session": "s", "qa_id": "q", "feedback": "up"}),
        ("/api/v1/forget", {"session": "s"}),
    ]
    for url, body in writes:
        response = call(client, keys["reader"], "POST", url, json=body)
        assert_error(response, 403, "forbidden", "writer")
    assert_error(call(client, keys["reader"], "DELETE", "/api/v1/sessions/s"), 403, "forbidden")
    for role in ("writer", "admin"):
        everything = {"everything": True, "confirm": True}
        response = call(client, keys[role], "POST", "/api/v1/forget", json=everything)
        assert_error(response, 403, "forbidden", "every tenant")
    recall = call(
        client, keys["reader"], "POST", "/api/v1/recall", json={"query": "x", "session": "s"}
    )
    assert recall.status_code == 200 and recall.json()["results"] == [], recall.text
    assert call(client, keys["reader"], "GET", "/api/v1/sessions").json() == []
    remember = call(
        client, keys["reader"], "POST", "/api/v1/remember", json={"text": "x", "dataset": "d"}
    )
    assert_error(remember, 403, "forbidden", "writer")


@pytest.mark.parametrize("search_type", ["CYPHER", "NATURAL_LANGUAGE", None])
def test_cypher_and_natural_language_are_admin_only(
    client: TestClient, keys: dict[str, str], search_type: str | None
) -> None:
    # With no type, the router picks CYPHER for a query written in Cypher.
    query = {"query": "MATCH (n) RETURN n LIMIT 1", "datasets": ["docs"]}
    if search_type is not None:
        query["search_type"] = search_type
    for role in ("reader", "writer"):
        response = call(client, keys[role], "POST", "/api/v1/search", json=query)
        assert_error(response, 403, "forbidden", "take an admin key")
    # An admin gets past the rule (the embedded graph then has no Cypher to run it on).
    response = call(client, keys["admin"], "POST", "/api/v1/search", json=query)
    assert response.status_code != 403 and response.status_code < 500, response.text


def test_auth_required_closes_the_api_before_any_key(tmp_path: Path) -> None:
    rt = Runtime(Settings(home=tmp_path, auth="required"))
    with TestClient(create_app(rt)) as client:
        assert_error(client.get("/api/v1/datasets"), 401, "unauthorized")
        assert client.get("/health").status_code == 200


def test_requests_over_the_per_minute_limit_are_429(tmp_path: Path) -> None:
    rt = Runtime(Settings(home=tmp_path, api_requests_per_minute=3))
    with TestClient(create_app(rt)) as client:
        tenants = Tenants(rt.state)
        tenants.create_tenant("acme")
        first, _ = tenants.create_key("acme", Role.READER)
        second, _ = tenants.create_key("acme", Role.READER)
        if time.time() % 60 > 50:  # stay inside one minute's window
            time.sleep(61 - time.time() % 60)
        for _ in range(3):
            assert call(client, first, "GET", "/api/v1/datasets").status_code == 200
        over = call(client, first, "GET", "/api/v1/datasets")
        assert_error(over, 429, "rate_limited", "COGMILL_API_REQUESTS_PER_MINUTE")
        assert 1 <= int(over.headers["Retry-After"]) <= 60
        assert call(client, second, "GET", "/api/v1/datasets").status_code == 200
        assert client.get("/health").status_code == 200  # probes are not counted


def test_a_tenants_storage_quota_is_413(tmp_path: Path) -> None:
    rt = Runtime(Settings(home=tmp_path, tenant_storage_bytes=100))
    with TestClient(create_app(rt)) as client:
        tenants = Tenants(rt.state)
        for name in ("acme", "beta"):
            tenants.create_tenant(name)
        acme, _ = tenants.create_key("acme", Role.WRITER)
        beta, _ = tenants.create_key("beta", Role.WRITER)

        def add(key: str, dataset: str, name: str, size: int) -> Any:
            body = {"documents": [{"name": name, "text": "x" * size}]}
            return call(client, key, "POST", f"/api/v1/datasets/{dataset}/data", json=body)

        assert add(acme, "one", "a.txt", 60).status_code == 200
        # The quota spans the tenant's datasets: 60 stored + 60 > 100, refused, nothing stored.
        over = add(acme, "two", "b.txt", 60)
        assert_error(over, 413, "quota_exceeded", "COGMILL_TENANT_STORAGE_BYTES")
        assert call(client, acme, "GET", "/api/v1/datasets/two/data").status_code == 404
        assert add(acme, "two", "c.txt", 40).status_code == 200  # 100: exactly the quota
        assert add(beta, "one", "a.txt", 100).status_code == 200  # beta's own quota


def test_openapi_documents_401_and_403(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    search = spec["paths"]["/api/v1/search"]["post"]["responses"]
    assert {"401", "403"} <= set(search)
    assert "401" not in spec["paths"]["/health"]["get"]["responses"]


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.1", "example.org"])
def test_serve_refuses_a_non_loopback_host_without_auth(tmp_path: Path, host: str) -> None:
    result = CliRunner().invoke(
        cli, ["serve", "--host", host], env={"COGMILL_HOME": str(tmp_path), "COGMILL_AUTH": "auto"}
    )
    assert result.exit_code == 2 and "COGMILL_AUTH=required" in result.output, result.output
