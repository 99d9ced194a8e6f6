"""The OpenAPI document tells the truth about the answers (the first two found by the fuzz run,
test_api_fuzz.py): every error in the one error schema, the estimate's 200 and remember's 202
declared with their bodies, and real answers valid against it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient

from api.http.app import create_app
from api.services.tenants import Tenants
from core.access import Role
from core.settings import Settings
from runtime import Runtime
from tests.backends import llm_settings
from tests.llm_server import LLMTestServer

ERROR_REF = "#/components/schemas/ErrorResponse"
NOTE = {"documents": [{"name": "note.txt", "text": "Ada Lovelace wrote the first algorithm."}]}


@pytest.fixture(scope="module")
def client(
    tmp_path_factory: pytest.TempPathFactory, llm_server: LLMTestServer
) -> Iterator[TestClient]:
    home = tmp_path_factory.mktemp("openapi-home")
    runtime = Runtime(Settings(home=home, **llm_settings(llm_server)))
    tenants = Tenants(runtime.state)
    tenants.create_tenant("docs")
    key, _ = tenants.create_key("docs", Role.WRITER)
    with TestClient(create_app(runtime), headers={"Authorization": f"Bearer {key}"}) as client:
        assert client.post("/api/v1/datasets/docs/data", json=NOTE).status_code == 200
        yield client


@pytest.fixture(scope="module")
def spec(client: TestClient) -> dict[str, Any]:
    return dict(client.get("/openapi.json").json())


def operations(spec: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for path, methods in spec["paths"].items():
        for method, operation in methods.items():
            yield f"{method.upper()} {path}", operation


def test_every_error_answer_is_documented_with_the_error_schema(spec: dict[str, Any]) -> None:
    # FastAPI documents its own 422 body (HTTPValidationError), which the app never sends.
    assert "HTTPValidationError" not in json.dumps(spec)
    for label, operation in operations(spec):
        responses = operation["responses"]
        for status, answer in responses.items():
            if status[0] in "45" and label != "GET /ready":  # /ready's 503 is a Readiness
                assert ERROR_REF in json.dumps(answer), (label, status, answer)
        if operation.get("parameters") or "requestBody" in operation:
            assert "422" in responses, label
        if label.split()[1].startswith("/api/v1/"):
            assert {"401", "403", "429"} <= set(responses), label


def validated(client: TestClient, spec: dict[str, Any], path: str, method: str, **kw: Any) -> Any:
    """Call the operation and check the answer against the document (status, body schema)."""
    operation = schemathesis.openapi.from_dict(spec)[path][method]
    case = operation.Case(**kw)
    url = path.format(**kw.get("path_parameters", {}))
    response = client.request(method, url, params=kw.get("query"), json=kw.get("body"))
    case.validate_response(response)
    return response


@pytest.mark.slow
def test_cognify_estimate_200_is_documented(client: TestClient, spec: dict[str, Any]) -> None:
    answers = spec["paths"]["/api/v1/datasets/{name}/cognify"]["post"]["responses"]
    assert "CognifyEstimate" in json.dumps(answers["200"])
    path = "/api/v1/datasets/{name}/cognify"
    response = validated(
        client,
        spec,
        path,
        "POST",
        path_parameters={"name": "docs"},
        query={"estimate": "true"},
        body={},
    )
    assert response.status_code == 200 and "calls" in response.json(), response.text


def test_remember_into_a_dataset_202_is_documented(
    client: TestClient, spec: dict[str, Any]
) -> None:
    answers = spec["paths"]["/api/v1/remember"]["post"]["responses"]
    assert "RememberResult" in json.dumps(answers["202"])
    body = {"text": "Grace Hopper wrote the first compiler.", "dataset": "docs"}
    response = validated(client, spec, "/api/v1/remember", "POST", body=body)
    assert response.status_code == 202 and response.json()["stored_in"] == "dataset"


def test_a_validation_error_matches_its_documented_schema(
    client: TestClient, spec: dict[str, Any]
) -> None:
    path = "/api/v1/datasets/{name}/data"
    response = validated(
        client, spec, path, "GET", path_parameters={"name": "docs"}, query={"limit": 0}
    )
    assert response.status_code == 422 and response.json()["error"]["code"] == "validation_error"
