"""GET /api/v1/datasets/{name}/graph/neighbourhood and the /ui files, through the real app.

A node's neighbourhood is the node, its direct neighbours (at most `limit` nodes) and the edges
among them, read by node id or entity name; another tenant's dataset or node is a 404 like an
unknown one. The page's three files are served without a key under a strict CSP.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.http.app import create_app
from api.services.tenants import Tenants
from core.access import Role
from core.models.graph import entity_id
from core.models.vocabulary import CHUNK, ENTITY
from core.settings import Settings
from runtime import Runtime
from tests.backends import http_finished, llm_settings
from tests.llm_server import LLMTestServer

TEXT = (
    "Marie Curie was born in Warsaw. Marie Curie worked with Pierre Curie in Paris. "
    "Warsaw lies in Poland."
)
OTHER = "Alan Turing was born in London. Alan Turing studied at King's College."
HOOD = "/api/v1/datasets/docs/graph/neighbourhood"


def added(client: TestClient, text: str) -> None:
    body = {"documents": [{"name": "note.txt", "text": text}]}
    assert client.post("/api/v1/datasets/docs/data", json=body).status_code == 200
    job = client.post("/api/v1/datasets/docs/cognify", json={}).json()["job_id"]
    assert http_finished(client, job)["status"] == "succeeded"


@pytest.fixture(scope="module")
def clients(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with LLMTestServer() as llm:
        home = tmp_path_factory.mktemp("neighbourhood")
        rt = Runtime(Settings(home=home, **llm_settings(llm)))
        tenants = Tenants(rt.state)
        made: dict[str, Any] = {"runtime": rt}
        with TestClient(create_app(rt)) as anonymous:
            for name, text in (("acme", TEXT), ("beta", OTHER)):
                tenants.create_tenant(name)
                writer, _ = tenants.create_key(name, Role.WRITER)
                added(keyed(anonymous, writer), text)
                # beta reads with a reader key: the route takes a reader's.
                reader, _ = tenants.create_key(name, Role.READER)
                made[name] = keyed(anonymous, writer if name == "acme" else reader)
            made["anonymous"] = anonymous
            yield made


def keyed(client: TestClient, key: str) -> TestClient:
    return TestClient(client.app, headers={"Authorization": f"Bearer {key}"})


def names(body: dict[str, Any]) -> set[str]:
    return {node["name"] for node in body["nodes"]}


def test_an_entity_by_name_and_its_direct_neighbours(clients: dict[str, Any]) -> None:
    acme = clients["acme"]
    got = acme.get(HOOD, params={"entity": "Marie Curie"})
    assert got.status_code == 200, got.text
    body = got.json()
    seed = next(n for n in body["nodes"] if n["id"] == body["node"])
    assert seed["name"] == "Marie Curie" and seed["type"] == ENTITY
    assert body["nodes"][0]["id"] == body["node"]  # the seed first, then its neighbours
    assert body["dataset"] == "docs" and not body["truncated"]
    # Its relations (born in Warsaw, worked with Pierre Curie) and the chunk mentioning it.
    assert {"Warsaw", "Pierre Curie"} <= names(body), names(body)
    assert any(n["type"] == CHUNK for n in body["nodes"])
    ids = {n["id"] for n in body["nodes"]}
    assert body["edges"] and all(e["source"] in ids and e["target"] in ids for e in body["edges"])
    assert all(
        e["source"] == body["node"] or e["target"] == body["node"] or e["name"]
        for e in body["edges"]
    )
    # Depth 1: Poland is two hops away (through Warsaw) and not in the answer.
    assert "Poland" not in names(body)
    seed_support = seed["support"]
    assert seed["support_total"] >= 1 and seed_support[0]["document_id"]


def test_expanding_a_neighbour_by_id_reaches_the_next_hop(clients: dict[str, Any]) -> None:
    acme = clients["acme"]
    first = acme.get(HOOD, params={"entity": "Marie Curie"}).json()
    warsaw = next(n["id"] for n in first["nodes"] if n["name"] == "Warsaw")
    second = acme.get(HOOD, params={"node": warsaw}).json()
    assert second["node"] == warsaw and "Poland" in names(second), names(second)


def test_the_node_cap_truncates_and_says_so(clients: dict[str, Any]) -> None:
    acme = clients["acme"]
    full = acme.get(HOOD, params={"entity": "Marie Curie"}).json()
    assert len(full["nodes"]) > 2
    capped = acme.get(HOOD, params={"entity": "Marie Curie", "limit": 2}).json()
    assert len(capped["nodes"]) == 2 and capped["truncated"]
    assert capped["nodes"][0]["id"] == full["node"]
    for status, params in (
        (422, {"entity": "x", "limit": 0}),
        (422, {"entity": "x", "limit": 201}),
        (422, {}),
        (422, {"node": "a", "entity": "b"}),
        (422, {"node": ""}),
    ):
        answer = acme.get(HOOD, params=params)
        assert answer.status_code == status, (params, answer.text)
        assert set(answer.json()) == {"error"}


def test_other_tenants_datasets_and_nodes_are_not_found(clients: dict[str, Any]) -> None:
    acme, beta, rt = clients["acme"], clients["beta"], clients["runtime"]
    # beta's `docs` holds no Marie Curie; acme's node ids are unknown to beta.
    missing = beta.get(HOOD, params={"entity": "Marie Curie"})
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "node_not_found"
    marie = entity_id("acme:docs", "Marie Curie")
    assert rt.graph.get_nodes([marie]), "the id exists (in acme's dataset)"
    crossing = beta.get(HOOD, params={"node": marie})
    assert crossing.status_code == 404, crossing.text
    assert "Marie" not in crossing.text
    # beta's own entity is there for beta, not for acme.
    assert beta.get(HOOD, params={"entity": "Alan Turing"}).status_code == 200
    assert acme.get(HOOD, params={"entity": "Alan Turing"}).status_code == 404
    unknown = acme.get("/api/v1/datasets/nope/graph/neighbourhood", params={"entity": "x"})
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "dataset_not_found"
    # A key is needed as on every dataset route.
    no_key = clients["anonymous"].get(HOOD, params={"entity": "Marie Curie"})
    assert no_key.status_code == 401


def test_the_page_is_served_without_a_key_under_a_strict_csp(clients: dict[str, Any]) -> None:
    anonymous = clients["anonymous"]
    moved = anonymous.get("/ui", follow_redirects=False)
    assert moved.status_code == 308 and moved.headers["location"] == "/ui/"
    for path, media in (
        ("/ui/", "text/html"),
        ("/ui/app.js", "text/javascript"),
        ("/ui/app.css", "text/css"),
    ):
        answer = anonymous.get(path)
        assert answer.status_code == 200 and answer.headers["content-type"].startswith(media)
        csp = answer.headers["content-security-policy"]
        assert "default-src 'self'" in csp and "script-src 'self'" in csp
        assert "unsafe-inline" not in csp
    page = anonymous.get("/ui/").text
    assert '<script src="app.js"' in page and "<script>" not in page and " style=" not in page
    for path in ("/ui/../app.py", "/ui/routes", "/ui/index.htm"):
        assert anonymous.get(path).status_code == 404, path
