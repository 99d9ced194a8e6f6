"""The ingestion use cases through the CLI and through HTTP, compared store by store.

One corpus holds a file of every supported kind (text, Markdown, HTML, PDF, Word, e-mail,
CSV, TSV, JSON records, Python and JavaScript code, a SQLite database) and a Markdown file
for the coding_rules node set. One fresh embedded home gets it through `cogmill add` and
`cognify`, another through the HTTP upload (multipart, with the `node_set` field) and the
cognify route. The two homes must then hold the same documents, chunks, nodes, edges and
vectors, id by id, after the add, after cognify, after deleting a document and after deleting
the dataset; both faces must list the dataset as soon as it is added. The LLM and the
embeddings are the local test server (deterministic), so two homes built alike are alike.
A smaller corpus runs the same comparison on Neo4j + Redis, one face after the other.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from api.cli import app as cli_app
from api.http.app import create_app
from core.models.vocabulary import INDEX_FIELDS, collection
from core.settings import Settings
from runtime import Runtime
from tests.backends import NEO4J, Backend, http_finished, llm_settings
from tests.llm_server import LLMTestServer
from tests.merge_stress import differences, snapshot
from tests.sample_files import JS_SOURCE, PYTHON_SOURCE, docx_bytes, eml_bytes, pdf_bytes
from tests.services import neo4j_uri, redis_url

DATASET = "kinds"
RULES = "coding_rules"
TEXTS = {
    "notes.txt": "Ada Lovelace wrote the first algorithm. Ada Lovelace worked with Charles "
    "Babbage on the Analytical Engine.",
    "guide.md": "# Rivers\n\nThe Danube flows through Vienna.\n\n## Cities\n\nVienna hosts the "
    "Danube Island festival.\n",
    "page.html": "<!doctype html><html><body><h1>Paris</h1><p>The Seine flows through Paris. "
    "Paris hosts the Louvre.</p></body></html>",
    "people.csv": "person_id,name,city\n1,Marie Curie,Warsaw\n2,Alan Turing,London\n",
    "cities.tsv": "city\tcountry\nWarsaw\tPoland\nLondon\tUnited Kingdom\n",
    "records.json": '[{"id": 1, "title": "Radium", "author": "Marie Curie"}, '
    '{"id": 2, "title": "Computing Machinery", "author": "Alan Turing"}]',
    "graph.py": PYTHON_SOURCE,
    "app.js": JS_SOURCE,
}
RULES_TEXT = (
    "# Style\n\nAlways name functions after what they return.\n\nNever catch a bare "
    "exception; catch the types you can handle.\n"
)


def write_corpus(folder: Path) -> list[Path]:
    """The corpus of every kind, written to `folder`; returns the files."""
    for name, text in TEXTS.items():
        (folder / name).write_text(text, encoding="utf-8")
    (folder / "report.pdf").write_bytes(pdf_bytes())
    (folder / "memo.docx").write_bytes(docx_bytes())
    (folder / "mail.eml").write_bytes(eml_bytes())
    with sqlite3.connect(folder / "shop.sqlite") as db:
        db.executescript(
            "CREATE TABLE customers (customer_id INTEGER PRIMARY KEY, name TEXT);"
            "CREATE TABLE orders (order_id INTEGER PRIMARY KEY, item TEXT, customer_id "
            "INTEGER REFERENCES customers(customer_id));"
            "INSERT INTO customers VALUES (1, 'Grace Hopper'), (2, 'Edsger Dijkstra');"
            "INSERT INTO orders VALUES (10, 'compiler', 1), (11, 'semaphore', 2);"
        )
    db.close()
    return sorted(path for path in folder.iterdir() if path.is_file())


def vector_ids(rt: Runtime, dataset: str) -> dict[str, list[str]]:
    """The ids of every vector of the dataset, per collection (a search as wide as the count)."""
    probe = [1.0] * rt.settings.embedding_dim
    found = {}
    for node_type, fields in INDEX_FIELDS.items():
        for name in (collection(node_type, f) for f in fields):
            count = rt.vectors.count(name, dataset=dataset)
            if count:
                hits = rt.vectors.search(name, probe, datasets=[dataset], limit=count + 10)
                found[name] = sorted(hit.id for hit in hits)
                assert len(found[name]) == count, (name, count, found[name])
    return found


def stored(rt: Runtime, dataset: str) -> dict[str, Any]:
    """Nodes, edges and vector counts (tests/merge_stress.py) and the vectors' ids."""
    return {**snapshot(rt.graph, rt.vectors, dataset), "vector_ids": vector_ids(rt, dataset)}


def mismatch(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    lines = differences(a, b)
    if a["vector_ids"] != b["vector_ids"]:
        lines.append(f"vector ids: {a['vector_ids']} vs {b['vector_ids']}")
    return lines


def added_names(output: str) -> list[str]:
    """The names `cogmill add` printed as added."""
    return sorted(re.findall(r"^added +(\S+)$", output, flags=re.MULTILINE))


def upload(
    client: TestClient, dataset: str, files: list[Path], node_set: str | None = None
) -> dict[str, Any]:
    parts = [
        ("files", (path.name, path.read_bytes(), "application/octet-stream")) for path in files
    ]
    data = {"node_set": node_set} if node_set else None
    response = client.post(f"/api/v1/datasets/{dataset}/data", files=parts, data=data)
    assert response.status_code == 200, response.text
    return response.json()


def listed(rt: Runtime) -> list[dict[str, Any]]:
    """GET /api/v1/datasets on a home (its own app; no command may hold the home meanwhile)."""
    with TestClient(create_app(rt)) as client:
        response = client.get("/api/v1/datasets")
        assert response.status_code == 200, response.text
        return response.json()


@dataclass
class Cli:
    """`cogmill` on a home with settings, as a user runs it (env), in this process."""

    home: Path
    settings: dict[str, Any]
    env: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.env = {"COGMILL_HOME": str(self.home)}
        self.env |= {f"COGMILL_{k.upper()}": str(v) for k, v in self.settings.items()}

    def __call__(self, *args: str) -> str:
        result = CliRunner().invoke(cli_app, list(args), env=self.env)
        assert result.exit_code == 0, (args, result.output)
        return result.output

    def runtime(self) -> Runtime:
        return Runtime(Settings(home=self.home, **self.settings))


@dataclass
class Homes:
    """The corpus added and cognified on both faces; what each stored after the add."""

    cli: Cli
    client: TestClient
    cli_added: list[str]
    http_added: list[str]
    after_add: tuple[dict[str, Any], dict[str, Any]]
    listed: tuple[list[dict[str, Any]], list[dict[str, Any]]]
    jobs: tuple[str, dict[str, Any]]

    def cli_stored(self) -> dict[str, Any]:
        rt = self.cli.runtime()
        try:
            return stored(rt, DATASET)
        finally:
            rt.close()

    def http_stored(self) -> dict[str, Any]:
        return stored(self.client.app.state.runtime, DATASET)  # type: ignore[attr-defined]


def ingest_by_cli(cli: Cli, dataset: str, corpus: list[Path], rules: Path) -> list[str]:
    """add (every kind, then the node set), as a user would; the names added."""
    added = added_names(cli("add", *map(str, corpus), "--dataset", dataset))
    added += added_names(cli("add", str(rules), "--dataset", dataset, "--node-set", RULES))
    return sorted(added)


def ingest_by_http(client: TestClient, dataset: str, corpus: list[Path], rules: Path) -> list[str]:
    first = upload(client, dataset, corpus)
    second = upload(client, dataset, [rules], node_set=RULES)
    assert first["rejected"] == second["rejected"] == [], (first, second)
    return sorted(first["added"] + second["added"])


@pytest.fixture(scope="module")
def homes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Homes]:
    folder = tmp_path_factory.mktemp("kinds")
    corpus = write_corpus(folder)
    rules_folder = tmp_path_factory.mktemp("rules")
    rules = rules_folder / "style.md"
    rules.write_text(RULES_TEXT, encoding="utf-8")
    with LLMTestServer() as llm:
        settings = llm_settings(llm)
        # The CLI face first, whole: an embedded command owns its home (and the process's
        # current runtime) while it runs.
        cli = Cli(tmp_path_factory.mktemp("cli-home"), settings)
        cli_added = ingest_by_cli(cli, DATASET, corpus, rules)
        rt = cli.runtime()
        try:
            cli_listed, cli_after_add = listed(rt), stored(rt, DATASET)
        finally:
            rt.close()
        cli_job = cli("cognify", DATASET)
        http_rt = Runtime(Settings(home=tmp_path_factory.mktemp("http-home"), **settings))
        with TestClient(create_app(http_rt)) as client:
            http_added = ingest_by_http(client, DATASET, corpus, rules)
            http_listed = client.get("/api/v1/datasets").json()
            http_after_add = stored(http_rt, DATASET)
            started = client.post(f"/api/v1/datasets/{DATASET}/cognify")
            assert started.status_code == 202, started.text
            http_job = http_finished(client, started.json()["job_id"], timeout=300)
            yield Homes(
                cli,
                client,
                cli_added,
                http_added,
                (cli_after_add, http_after_add),
                (cli_listed, http_listed),
                (cli_job, http_job),
            )


def test_add_accepts_every_kind_and_the_node_set_on_both_faces(homes: Homes) -> None:
    everything = sorted(
        [*(p for p in TEXTS), "report.pdf", "memo.docx", "mail.eml", "shop.sqlite", "style.md"]
    )
    assert homes.cli_added == everything
    assert homes.http_added == everything  # SQLite too, which HTTP once refused


def test_add_stores_the_same_documents_on_both_faces(homes: Homes) -> None:
    by_cli, by_http = homes.after_add
    assert sum(1 for kind, *_ in by_cli["nodes"].values() if kind == "Document") == 13
    assert mismatch(by_cli, by_http) == []
    rules = [props for kind, name, props, _ in by_cli["nodes"].values() if name == "style.md"]
    assert [p.get("node_set") for p in rules] == [RULES]


def test_both_faces_list_the_dataset_once_added(homes: Homes) -> None:
    by_cli, by_http = homes.listed
    assert by_cli == by_http == [{"name": DATASET, "documents": 13}]


def test_cognify_stores_the_same_graph_and_vectors_on_both_faces(homes: Homes) -> None:
    cli_output, http_job = homes.jobs
    assert "succeeded" in cli_output and http_job["status"] == "succeeded", http_job
    assert http_job["errors"] == [] and "errors 0," in cli_output, (cli_output, http_job)
    by_cli, by_http = homes.cli_stored(), homes.http_stored()
    assert mismatch(by_cli, by_http) == []
    kinds = {kind for kind, *_ in by_cli["nodes"].values()}
    assert {"DocumentChunk", "Entity", "Table", "TableRow"} <= kinds, kinds
    tables = {name for kind, name, *_ in by_cli["nodes"].values() if kind == "Table"}
    assert {"customers", "orders", "people"} <= tables, tables
    rule_chunks = [
        props
        for kind, _, props, _ in by_cli["nodes"].values()
        if kind == "DocumentChunk" and props.get("node_set") == RULES
    ]
    assert rule_chunks, "no chunk of style.md carries its node set"
    assert by_cli["vector_ids"].keys() >= {"DocumentChunk_text", "Entity_name", "TableRow_text"}


def test_delete_a_document_removes_the_same_on_both_faces(homes: Homes) -> None:
    output = homes.cli("delete", "--dataset", DATASET, "--document", "shop.sqlite")
    response = homes.client.delete(f"/api/v1/datasets/{DATASET}/data/shop.sqlite")
    assert response.status_code == 200, response.text
    removed = response.json()["nodes_removed"] + response.json()["edges_removed"]
    assert removed > 0 and f": {removed} nodes and edges removed" in output, (output, removed)
    by_cli, by_http = homes.cli_stored(), homes.http_stored()
    assert mismatch(by_cli, by_http) == []
    tables = {name for kind, name, *_ in by_cli["nodes"].values() if kind == "Table"}
    assert "customers" not in tables and "people" in tables, tables


def test_delete_the_dataset_empties_both_faces_alike(homes: Homes) -> None:
    output = homes.cli("delete", "--dataset", DATASET, "--yes")
    response = homes.client.delete(f"/api/v1/datasets/{DATASET}")
    assert response.status_code == 200, response.text
    removed = response.json()["nodes_removed"] + response.json()["edges_removed"]
    assert f": {removed} nodes and edges removed" in output, (output, removed)
    empty = {"nodes": {}, "edges": {}, "vectors": {}, "vector_ids": {}}
    assert homes.cli_stored() == empty and homes.http_stored() == empty
    rt = homes.cli.runtime()
    try:
        assert listed(rt) == []
    finally:
        rt.close()
    assert homes.client.get("/api/v1/datasets").json() == []


def test_http_takes_a_node_set_with_json_texts_and_checks_its_name(homes: Homes) -> None:
    url = "/api/v1/datasets/json-rules/data"
    rt = homes.client.app.state.runtime  # type: ignore[attr-defined]
    text = {"name": "style.md", "text": RULES_TEXT}
    for bad in (
        {"json": {"documents": [text], "node_set": "no spaces"}},
        {
            "files": [("files", ("style.md", RULES_TEXT.encode(), "text/markdown"))],
            "data": {"node_set": "no spaces"},
        },
    ):
        refused = homes.client.post(url, **bad)
        assert refused.status_code == 400 and "invalid node set name" in refused.text, bad
    assert homes.client.get(url).status_code == 404  # nothing stored, not even the dataset
    response = homes.client.post(url, json={"documents": [text], "node_set": RULES})
    assert response.status_code == 200 and response.json()["added"] == ["style.md"]
    [doc] = rt.graph.find_nodes("json-rules", "Document", limit=10)
    assert doc.properties["node_set"] == RULES
    assert homes.client.delete("/api/v1/datasets/json-rules").status_code == 200


@pytest.mark.services
def test_both_faces_store_the_same_on_neo4j_and_redis(tmp_path: Path) -> None:
    """One face after the other on the shared servers (the same dataset name, so the same
    ids), each deleting what it stored before the other starts."""
    backend = Backend(NEO4J, tmp_path, neo4j=neo4j_uri(), redis=redis_url())
    dataset = backend.dataset("faces")
    folder = tmp_path / "corpus"
    folder.mkdir()
    corpus = [p for p in write_corpus(folder) if p.suffix in (".txt", ".csv", ".sqlite")]
    rules = folder / "style.md"
    rules.write_text(RULES_TEXT, encoding="utf-8")
    with LLMTestServer() as llm:
        # The local embedder: the shared Neo4j vector indexes hold its dimension.
        base = backend.settings(llm_base_url=llm.base_url, llm_model="test")
        fields = {"neo4j_uri", "vector_store", "redis_url", "redis_prefix", "llm_base_url"}
        settings = base.model_dump(include=fields | {"llm_model"})
        cli = Cli(tmp_path / "cli-home", settings)
        try:
            assert len(ingest_by_cli(cli, dataset, corpus, rules)) == 4
            assert "succeeded" in cli("cognify", dataset)
            rt = cli.runtime()
            try:
                assert type(rt.graph).__name__ == "Neo4jGraphStore"
                by_cli = stored(rt, dataset)
            finally:
                rt.close()
            cli("delete", "--dataset", dataset, "--yes")
            http_rt = Runtime(Settings(home=tmp_path / "http-home", **settings))
            with TestClient(create_app(http_rt)) as client:
                assert len(ingest_by_http(client, dataset, corpus, rules)) == 4
                started = client.post(f"/api/v1/datasets/{dataset}/cognify")
                assert http_finished(client, started.json()["job_id"], 300)["status"] == "succeeded"
                by_http = stored(http_rt, dataset)
                assert client.delete(f"/api/v1/datasets/{dataset}").status_code == 200
        finally:
            rt = cli.runtime()
            try:
                backend.clean(rt)
            finally:
                rt.close()
    assert by_cli["nodes"] and by_cli["vector_ids"], by_cli
    assert mismatch(by_cli, by_http) == []
