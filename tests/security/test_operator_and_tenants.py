"""An operator is not a tenant: what only an operator key may do, that only the CLI makes one,
and what a tenant's admin now sees of the deployment (its own metrics only)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from api.cli import app as cli
from api.http.app import create_app
from api.services.datasets import register
from api.services.tenants import TenantError, Tenants
from core.access import Role
from core.models.jobs import Job, JobStatus
from core.settings import Settings
from runtime import Runtime
from workers.jobs import JobTracker

pytestmark = pytest.mark.e2e

EVERYTHING = {"everything": True, "confirm": True}


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    rt = Runtime(Settings(home=tmp_path_factory.mktemp("operator")))
    register(rt, "beta:docs")  # searched by beta's keys: it must exist
    yield rt
    rt.close()


@pytest.fixture(scope="module")
def client(runtime: Runtime) -> Iterator[TestClient]:
    with TestClient(create_app(runtime)) as client:
        yield client


@pytest.fixture(scope="module")
def keys(runtime: Runtime) -> dict[str, str]:
    tenants = Tenants(runtime.state)
    made = {}
    for tenant in ("alpha", "beta"):
        tenants.create_tenant(tenant)
        for role in (Role.WRITER, Role.ADMIN):
            made[f"{tenant}-{role.value}"] = tenants.create_key(tenant, role)[0]
    made["operator"] = tenants.create_operator_key()[0]
    # Finished jobs of each tenant: alpha processed 7 documents, beta 3.
    tracker = JobTracker(runtime.state)
    for tenant, documents in (("alpha", 7), ("beta", 3)):
        job = Job(
            id=f"{tenant}0000000000000"[:16],
            dataset=f"{tenant}:docs",
            pipeline="default",
            pipeline_version="1",
            status=JobStatus.SUCCEEDED,
            counts={"documents": documents},
        )
        tracker.save(job)
    return made


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def processed(text: str) -> float:
    line = next(
        x for x in text.splitlines() if x.startswith('cogmill_documents_total{outcome="processed"}')
    )
    return float(line.rsplit(" ", 1)[1])


def test_a_tenants_admin_sees_only_its_tenants_metrics(
    client: TestClient, keys: dict[str, str]
) -> None:
    beta = client.get("/metrics", headers=bearer(keys["beta-admin"]))
    assert beta.status_code == 200, beta.text
    assert processed(beta.text) == 3
    # The deployment's own series (queues, durations, LLM retries) are the operator's.
    assert "cogmill_queue_depth" not in beta.text and "cogmill_llm_retries" not in beta.text
    everyone = client.get("/metrics", headers=bearer(keys["operator"]))
    assert everyone.status_code == 200 and processed(everyone.text) == 10
    assert "cogmill_queue_depth" in everyone.text
    refused = client.get("/metrics", headers=bearer(keys["beta-writer"]))
    assert refused.status_code == 403


def test_only_an_operator_forgets_everything(client: TestClient, keys: dict[str, str]) -> None:
    for role in ("beta-writer", "beta-admin"):
        response = client.post("/api/v1/forget", json=EVERYTHING, headers=bearer(keys[role]))
        assert response.status_code == 403 and "operator" in response.json()["error"]["message"]
    response = client.post("/api/v1/forget", json=EVERYTHING, headers=bearer(keys["operator"]))
    assert response.status_code == 200, response.text


def test_operator_keys_are_made_by_the_cli_only(
    client: TestClient, runtime: Runtime, keys: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # No route or MCP tool makes keys: nothing in the API's schema names them.
    paths = client.get("/openapi.json").json()["paths"]
    assert not [p for p in paths if "key" in p.lower() or "tenant" in p.lower()]
    with pytest.raises(TenantError, match="--operator"):
        Tenants(runtime.state).create_key("beta", Role.OPERATOR)
    monkeypatch.setenv("COGMILL_HOME", str(runtime.settings.home))
    made = CliRunner().invoke(cli, ["keys", "create", "--operator"])
    assert made.exit_code == 0, made.output
    key = made.stdout.strip().splitlines()[0]
    record = Tenants(runtime.state).authenticate(key)
    assert record is not None and record.tenant is None and record.role is Role.OPERATOR
    both = CliRunner().invoke(cli, ["keys", "create", "--operator", "--tenant", "beta"])
    assert both.exit_code == 2 and "--operator" in both.output
    listed = CliRunner().invoke(cli, ["keys", "list"])
    assert "(operator)\toperator" in listed.stdout


def test_a_tenants_admin_runs_cypher_confined_not_refused(
    client: TestClient, keys: dict[str, str]
) -> None:
    query = {"query": "MATCH (n) RETURN n", "datasets": ["docs"], "search_type": "CYPHER"}
    # Past the role check (the embedded graph has no Cypher to run it on): a 4xx that says so.
    response = client.post("/api/v1/search", json=query, headers=bearer(keys["beta-admin"]))
    assert response.status_code in (400, 422) and "Neo4j" in response.text, response.text
    response = client.post("/api/v1/search", json=query, headers=bearer(keys["beta-writer"]))
    assert response.status_code == 403
