"""The structured pipeline end to end on both backends (embedded, Neo4j + Redis): record files
and a database become Table/TableRow nodes with REFERENCES edges, written by real Celery worker
threads, and graph search follows a reference from a row to the row it names."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from api.cli import app
from core.catalog import AddReport
from core.models.jobs import Job, JobStatus
from core.models.vocabulary import ROW_COLLECTION
from pipelines.structured.key_declarations import declare_keys, parse_key_flags
from pipelines.structured.link_rows import row_id, table_id
from pipelines.structured.snapshot import snapshot_sql
from pipelines.structured.tables import check_source
from retrieval.models import SearchType
from retrieval.search import search
from runtime import Runtime
from tests.backends import (
    Backend,
    embedded_only,
    finished,
)
from workers.orchestration import cognify

CUSTOMERS = """customer_id,name,city,email
C001,Alice Martin,Lisbon,alice@example.com
C002,Bruno Costa,Porto,bruno@example.com
C003,Chen Wei,Madrid,chen@example.com
C004,Dana Smith,Berlin,dana@example.com
C005,Emil Novak,Prague,emil@example.com
"""
ORDERS = """order_id,customer_id,product_sku,quantity,gift_message
1001,C002,SKU-RB1,1,Happy birthday Grandma Rosa
1002,C001,SKU-TT2,2,
1003,C003,SKU-GL3,1,Congratulations on the new house
1004,C004,SKU-RB1,3,
1005,C005,SKU-TT2,1,
1006,C009,SKU-GL3,1,
"""
PRODUCTS = [
    {"sku": "SKU-RB1", "title": "Red bicycle", "price": 399.0},
    {"sku": "SKU-TT2", "title": "Tea kettle", "price": 35},
    {"sku": "SKU-GL3", "title": "Garden lantern", "price": 20},
]


@pytest.fixture
def runtime_settings() -> dict[str, object]:
    return {"write_batch_size": 4}  # several row batches


@pytest.fixture
def dataset(backend: Backend) -> str:
    return backend.dataset("shop")


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    folder = tmp_path / "shop"
    folder.mkdir()
    (folder / "customers.csv").write_text(CUSTOMERS)
    (folder / "orders.csv").write_text(ORDERS)
    (folder / "products.json").write_text(json.dumps(PRODUCTS))
    return folder


def add(rt: Runtime, folder: Path, dataset: str) -> AddReport:
    rt.catalog.ensure_dataset(dataset)
    report = AddReport()
    for path in sorted(folder.iterdir()):
        rt.catalog.add_file(dataset, path, path.name, report, check_source)
    return report


def run(rt: Runtime, dataset: str, mode: str = "changed") -> Job:
    return finished(rt, cognify(rt, dataset, mode=mode))


def row(dataset: str, table: str, key: str) -> str:
    return row_id(table_id(dataset, table), (key,), 0)


def references(rt: Runtime, dataset: str) -> set[tuple[str, str]]:
    rows = rt.graph.find_nodes(dataset, "TableRow", limit=1000)
    names = {r.id: r.name for r in rows}
    edges = rt.graph.edges_of(list(names), names=["REFERENCES"], limit=1000)
    return {(names[e.source], names[e.target]) for e in edges}


def snapshot(rt: Runtime, dataset: str) -> dict[str, int]:
    counts = rt.graph.count(dataset)
    counts["row_vectors"] = rt.vectors.count(ROW_COLLECTION, dataset=dataset)
    return counts


def test_tables_become_rows_and_references_that_graph_search_follows(
    runtime: Runtime, shop: Path, dataset: str
) -> None:
    add(runtime, shop, dataset)
    docs = runtime.graph.find_nodes(dataset, "Document")
    assert {d.properties["pipeline"] for d in docs} == {"structured"}
    job = run(runtime, dataset)
    assert job.status is JobStatus.SUCCEEDED and job.errors == []
    assert job.counts["documents"] == 3 and job.counts["chunks"] == 14  # rows
    assert job.counts["relationships"] == 11  # 6 orders -> product, 5 -> a known customer
    counts = snapshot(runtime, dataset)
    assert counts["Table"] == 3 and counts["TableRow"] == 14 and counts["row_vectors"] == 14
    found = references(runtime, dataset)
    assert ("orders 1001", "customers C002") in found
    assert ("orders 1001", "products SKU-RB1") in found
    assert not any(source == "orders 1006" and "customers" in t for source, t in found)
    [orders] = runtime.graph.find_nodes(dataset, "Table", name="orders")
    assert orders.properties["primary_key"] == ["order_id"]
    assert orders.properties["dangling_references"] == 1  # C009 is no customer
    assert set(orders.properties["foreign_keys"]) == {
        "customer_id -> customers.customer_id",
        "product_sku -> products.sku",
    }

    query = "Which city does the customer live in who sent a birthday message to Grandma Rosa?"
    response = search(runtime.retrieval(), query, [dataset], SearchType.GRAPH_COMPLETION, 5)
    hit = next(r for r in response.results if "REFERENCES" in r.text.split("\n")[0])
    assert hit.text.startswith("orders 1001 —REFERENCES→ customers C002"), hit.text
    assert "Grandma Rosa" in hit.text and "city: Porto" in hit.text
    cited = {(s.document_name, s.chunk_id) for s in hit.sources}
    assert cited == {
        ("orders.csv", row(dataset, "orders", "1001")),
        ("customers.csv", row(dataset, "customers", "C002")),
    }


def test_rerun_is_idempotent_and_deleting_a_table_removes_its_references(
    runtime: Runtime, shop: Path, dataset: str
) -> None:
    add(runtime, shop, dataset)
    assert run(runtime, dataset).status is JobStatus.SUCCEEDED
    before = snapshot(runtime, dataset)
    again = run(runtime, dataset, mode="all")
    assert again.status is JobStatus.SUCCEEDED and snapshot(runtime, dataset) == before
    assert run(runtime, dataset).message.startswith("nothing to do")

    runtime.catalog.remove_named(dataset, "customers.csv")
    after = snapshot(runtime, dataset)
    assert after["TableRow"] == 9 and after["row_vectors"] == 9
    assert {t for _, t in references(runtime, dataset)} == {
        "products SKU-RB1",
        "products SKU-TT2",
        "products SKU-GL3",
    }


@pytest.mark.slow
def test_switching_a_table_to_the_structured_pipeline_drops_its_old_chunk_postings(
    runtime: Runtime, shop: Path, dataset: str
) -> None:
    add(runtime, shop, dataset)
    assert run_with(runtime, dataset, "default").status is JobStatus.SUCCEEDED
    chunks = {c.id for c in runtime.graph.find_nodes(dataset, "DocumentChunk", limit=1000)}
    assert chunks and lexical_ids(runtime, dataset) >= chunks
    assert run_with(runtime, dataset, "structured").status is JobStatus.SUCCEEDED
    # The chunks went with the default pipeline's output, and so did their postings.
    assert not runtime.graph.find_nodes(dataset, "DocumentChunk", limit=10)
    assert not lexical_ids(runtime, dataset) & chunks


def run_with(rt: Runtime, dataset: str, pipeline: str) -> Job:
    return finished(rt, cognify(rt, dataset, pipeline, mode="all"))


def lexical_ids(rt: Runtime, dataset: str) -> set[str]:
    terms = ["alice", "bruno", "grandma", "kettle", "lantern", "bicycle", "c001", "sku"]
    return {p.chunk_id for p in rt.lexical.postings([dataset], terms)}


def test_declared_keys_relink_the_tables_on_the_next_plain_cognify(
    runtime: Runtime, shop: Path, dataset: str
) -> None:
    (shop / "reviews.csv").write_text(
        "review,by,stars\nLovely bike,bruno@example.com,5\nLeaky kettle,alice@example.com,2\n"
    )
    add(runtime, shop, dataset)
    assert run(runtime, dataset).status is JobStatus.SUCCEEDED
    assert not any(s.startswith("reviews") for s, _ in references(runtime, dataset))
    declared = parse_key_flags(["customers=email"], ["reviews.by=customers.email"])
    assert declare_keys(runtime.graph, dataset, declared)
    assert not declare_keys(runtime.graph, dataset, declared)  # nothing new
    job = run(runtime, dataset)
    assert job.status is JobStatus.SUCCEEDED and job.counts["documents"] == 4
    found = references(runtime, dataset)
    assert ("reviews Lovely bike", "customers bruno@example.com") in found
    # Customers are now keyed by email: orders' customer_id values (C00x) name no row.
    assert not any(t.startswith("customers C") for _, t in found)


@embedded_only  # a source format: the same rows and keys as the CSVs, on the same stores
def test_a_sqlite_file_and_a_sql_url_use_the_schema_keys(
    runtime: Runtime, backend: Backend, tmp_path: Path
) -> None:
    school, url = backend.dataset("school"), backend.dataset("url")
    source = tmp_path / "school.db"
    with sqlite3.connect(source) as db:
        db.executescript(
            """CREATE TABLE teachers (tid INTEGER PRIMARY KEY, name TEXT);
            CREATE TABLE classes (code TEXT PRIMARY KEY, title TEXT,
                                  teacher INTEGER REFERENCES teachers (tid));
            INSERT INTO teachers VALUES (1, 'Ada Lovelace'), (2, 'Grace Hopper');
            INSERT INTO classes VALUES ('MATH1', 'Analytical engines', 1),
                                       ('CS101', 'Compilers', 2);"""
        )
    folder = tmp_path / "files"
    folder.mkdir()
    (folder / "school.db").write_bytes(source.read_bytes())
    add(runtime, folder, school)
    job = run(runtime, school)
    assert job.status is JobStatus.SUCCEEDED and job.counts["relationships"] == 2
    assert references(runtime, school) == {
        ("classes CS101", "teachers 2"),
        ("classes MATH1", "teachers 1"),
    }
    # The same database through a SQLAlchemy URL: a snapshot with the keys, one table chosen.
    snap = tmp_path / "snap" / "snapshot.sqlite"
    snap.parent.mkdir()
    assert snapshot_sql(f"sqlite:///{source}", snap, ["teachers"]) == ["teachers"]
    runtime.catalog.ensure_dataset(url)
    report = AddReport()
    runtime.catalog.add_file(url, snap, f"sqlite:///{source}", report, check_source)
    assert report.added == [f"sqlite:///{source}"]
    job = run(runtime, url)
    assert job.status is JobStatus.SUCCEEDED and snapshot(runtime, url)["TableRow"] == 2


def test_cli_add_sql_and_key_flags(tmp_path: Path) -> None:
    source = tmp_path / "tiny.db"
    with sqlite3.connect(source) as db:
        db.executescript(
            "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t VALUES (1, 'a');"
        )
    runner = CliRunner()
    env = {"COGMILL_HOME": str(tmp_path / "home")}
    result = runner.invoke(
        app, ["add-sql", f"sqlite:///{source}", "-d", "db", "--primary-key", "t=v"], env=env
    )
    assert result.exit_code == 0, result.output
    assert "copied tables t" in result.output and "1 added" in result.output
    assert "keys declared for t" in result.output
    result = runner.invoke(app, ["add-sql", f"sqlite:///{source}", "-d", "db", "-t", "x"], env=env)
    assert result.exit_code == 2 and "no table x in the database; its tables: t" in result.output
    result = runner.invoke(app, ["add", str(source), "-d", "db", "--foreign-key", "t.v"], env=env)
    assert result.exit_code == 2 and "TABLE.COLUMN=TABLE.COLUMN" in result.output
    result = runner.invoke(app, ["add", str(source), "-d", "db", "--pipeline", "nope"], env=env)
    assert result.exit_code == 2 and "unknown pipeline 'nope'" in result.output
