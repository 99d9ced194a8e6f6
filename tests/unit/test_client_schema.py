"""The Python client (cogmill_client/) follows the live OpenAPI document of the app: every
operation has a client method on Client and AsyncClient and every client method sends one of
them; every model a route answers with (or takes) has the schema's fields, required ones and
enum values. A route added or changed fails here until the client follows."""

from __future__ import annotations

import inspect
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from api.http.app import create_app
from cogmill_client import AsyncClient, Client, models, requests, schedules
from cogmill_client.calls import ENDPOINTS, datasets, queries, sync
from cogmill_client.events import SseParser

ROOT = Path(__file__).resolve().parents[2]
# Client methods that are no operation of their own.
HELPERS = {"send", "close", "aclose", "wait"}
# Query parameters a method sends without taking them as arguments.
IMPLIED = {("POST", "/api/v1/datasets/{name}/cognify"): {"estimate"}}


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    return create_app().openapi()


def operations(spec: dict[str, Any]) -> Iterator[tuple[tuple[str, str], dict[str, Any]]]:
    for path, methods in spec["paths"].items():
        for method, operation in methods.items():
            yield (method.upper(), path), operation


def public_methods(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")} - HELPERS


@pytest.mark.slow
def test_every_operation_has_a_client_method_and_back(spec: dict[str, Any]) -> None:
    served = {endpoint for endpoint, _ in operations(spec)}
    covered = set(ENDPOINTS.values())
    assert served - covered == set(), "operations without a client method"
    assert covered - served == set(), "client methods of no operation"
    for cls in (Client, AsyncClient):
        assert public_methods(cls) == set(ENDPOINTS), cls.__name__
        for name in ENDPOINTS:
            assert getattr(cls, name).__doc__, f"{cls.__name__}.{name} has no docstring"
    for name in public_methods(AsyncClient):
        method = getattr(AsyncClient(base_url="http://127.0.0.1:9"), name)
        assert inspect.iscoroutinefunction(method) or inspect.isasyncgenfunction(method), name


def builders() -> dict[str, Any]:
    modules = (datasets, queries, sync)
    return {name: next(getattr(m, name) for m in modules if hasattr(m, name)) for name in ENDPOINTS}


def test_every_query_parameter_can_be_sent(spec: dict[str, Any]) -> None:
    taken: dict[tuple[str, str], set[str]] = {}
    for name, build in builders().items():
        taken.setdefault(ENDPOINTS[name], set()).update(inspect.signature(build).parameters)
    for endpoint, operation in operations(spec):
        wanted = {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
        missing = wanted - taken[endpoint] - IMPLIED.get(endpoint, set())
        assert not missing, (endpoint, missing)


def refs(node: Any) -> Iterator[str]:
    """The component names a schema fragment refers to."""
    if isinstance(node, dict):
        if "$ref" in node:
            yield node["$ref"].rsplit("/", 1)[-1]
        for value in node.values():
            yield from refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from refs(value)


def closure(names: set[str], components: dict[str, Any]) -> set[str]:
    """The components and every component they refer to, transitively."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(refs(components[name]))
    return seen


def enums(node: Any, components: dict[str, Any]) -> set[tuple[str, ...]]:
    """Every enum a schema fragment allows, refs followed."""
    found: set[tuple[str, ...]] = set()
    if isinstance(node, dict):
        if "enum" in node:
            found.add(tuple(sorted(node["enum"])))
        if "const" in node:
            found.add((node["const"],))
        if "$ref" in node:
            found |= enums(components[node["$ref"].rsplit("/", 1)[-1]], components)
        for key, value in node.items():
            if key not in ("default", "examples"):
                found |= enums(value, components)
    elif isinstance(node, list):
        for value in node:
            found |= enums(value, components)
    return found


def check_model(name: str, schema: dict[str, Any], components: dict[str, Any], module: Any) -> None:
    model = getattr(module, name, None) or getattr(models, name, None)
    model = model or getattr(schedules, name, None)
    assert model is not None, f"the client has no model {name}"
    if "enum" in schema:
        assert sorted(e.value for e in model) == sorted(schema["enum"]), name
        return
    assert issubclass(model, BaseModel), name
    fields = model.model_fields
    assert set(fields) == set(schema.get("properties", {})), name
    required = {field for field, info in fields.items() if info.is_required()}
    assert required == set(schema.get("required", [])), name
    own = model.model_json_schema()
    for field, prop in schema.get("properties", {}).items():
        mine = own["properties"][field]
        theirs = enums(prop, components)
        assert enums(mine, own.get("$defs", {})) == theirs, (name, field)


def test_every_answer_and_body_model_follows_the_schema(spec: dict[str, Any]) -> None:
    components = spec["components"]["schemas"]
    answers, bodies = set(), set()
    for _, operation in operations(spec):
        for status, answer in operation["responses"].items():
            if status.startswith("2") or status == "503":
                answers.update(refs(answer))
        bodies.update(refs(operation.get("requestBody", {})))
    answers, bodies = closure(answers, components), closure(bodies, components)
    assert {"SearchResponse", "JobReport", "ErrorResponse", "DocumentsAdd"} <= answers | bodies
    for name in sorted(answers):
        check_model(name, components[name], components, models)
    for name in sorted(bodies - answers):
        check_model(name, components[name], components, requests)


def test_the_check_sees_a_changed_model() -> None:
    schema = {
        "properties": {"name": {"type": "string"}, "documents": {"type": "integer"}},
        "required": ["name", "documents"],
    }
    check_model("DatasetPublic", schema, {}, models)
    with pytest.raises(AssertionError):
        check_model("DatasetPublic", {**schema, "required": ["name"]}, {}, models)
    with pytest.raises(AssertionError):
        added = {**schema["properties"], "size": {"type": "integer"}}
        check_model("DatasetPublic", {**schema, "properties": added}, {}, models)
    with pytest.raises(AssertionError):
        check_model("JobStatus", {"enum": ["queued", "running"]}, {}, models)


def test_server_sent_events_parse_with_ids_comments_and_multiline_data() -> None:
    stream = (
        'retry: 2000\n\n: keep-alive\n\nid: 3\nevent: planned\ndata: {"batches": 2}\n\n'
        'event: progress\ndata: {"status": "running",\ndata:  "batches_done": 1}\n\n'
        'id: 9\nevent: finished\ndata: {"status": "succeeded"}\n\n'
    )
    parser = SseParser()
    events = parser.feed(stream.split("\n"))
    assert [(e.id, e.kind) for e in events] == [(3, "planned"), (None, "progress"), (9, "finished")]
    assert events[1].data == {"status": "running", "batches_done": 1}
    assert events[2].status == "succeeded" and parser.last_id == 9


def test_the_client_imports_neither_the_server_nor_its_heavy_dependencies() -> None:
    heavy = [
        "api",
        "core",
        "workers",
        "retrieval",
        "pipelines",
        "fastapi",
        "starlette",
        "celery",
        "neo4j",
        "redis",
        "spacy",
        "openai",
        "numpy",
    ]
    probe = f"import sys, cogmill_client; print([m for m in {heavy!r} if m in sys.modules])"
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=ROOT / "tests",
        check=True,
    )
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
    too_long = [
        p for p in (ROOT / "cogmill_client").rglob("*.py") if len(p.read_text().splitlines()) > 400
    ]
    assert not too_long
