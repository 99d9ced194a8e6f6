"""Key inference and declarations on small tables read from real files (CSV, JSON, SQLite)."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

import pytest

from core.catalog import record_pipeline
from core.stores.blob_fs import FileBlobStore
from pipelines.models import DocumentBatch, DocumentRef
from pipelines.structured.foreign_keys import KeyPlan, infer_primary_key, plan_keys, profile_rows
from pipelines.structured.key_declarations import (
    KeyDeclarationError,
    KeyDeclarations,
    parse_key_flags,
    parse_keys_yaml,
)
from pipelines.structured.read_tables import ReadTables, TableInfo
from pipelines.structured.tables import TableProblem, check_source, open_tables

pytestmark = pytest.mark.unit

CUSTOMERS = """customer_id,name,city
C001,Alice Martin,Lisbon
C002,Bruno Costa,Porto
C003,Chen Wei,Madrid
"""
ORDERS = """order_id;customer_id;product_sku;quantity;buyer_email
1001;C002;SKU-RB1;1;bruno@example.com
1002;C001;SKU-TT2;2;alice@example.com
1003;C003;SKU-RB1;3;chen@example.com
1004;C001;SKU-GL3;1;alice@example.com
"""
PRODUCTS = [
    {"sku": "SKU-RB1", "title": "Red bicycle", "price": 399.0},
    {"sku": "SKU-TT2", "title": "Tea kettle", "price": 35},
    {"sku": "SKU-GL3", "title": "Garden lantern", "price": 20, "tags": ["garden", "light"]},
]
# Integer ids 1..3 everywhere: quantities must not be taken for references to them.
STORES = "id,label\n1,North\n2,South\n3,East\n"


@pytest.fixture
def blobs(tmp_path: Path) -> FileBlobStore:
    return FileBlobStore(tmp_path / "blobs")


def stored(blobs: FileBlobStore, name: str, data: bytes) -> DocumentRef:
    key = f"shop/{name}"
    size = blobs.put(key, io.BytesIO(data))
    return DocumentRef(
        id=f"doc-{name}", dataset="shop", name=name, blob_key=key,
        extension=Path(name).suffix.lstrip("."), size=size,
    )  # fmt: skip


def shop(blobs: FileBlobStore, *extra: DocumentRef) -> list[DocumentRef]:
    return [
        stored(blobs, "customers.csv", CUSTOMERS.encode()),
        stored(blobs, "orders.csv", ORDERS.encode()),
        stored(blobs, "products.json", json.dumps(PRODUCTS).encode()),
        *extra,
    ]


def read(blobs: FileBlobStore, docs: list[DocumentRef]) -> tuple[list[TableInfo], list]:
    batch = ReadTables(blobs, 10_000_000).run(DocumentBatch(dataset="shop", documents=docs))
    return batch.tables, batch.errors


def plan(
    blobs: FileBlobStore, tables: list[TableInfo], declared: KeyDeclarations | None = None
) -> KeyPlan:
    """plan_keys with lookups read from the stored files, keyed by the value tuples."""
    by_name = {t.name: t for t in tables}

    def lookup(name: str, columns: list[str]) -> tuple[dict, int]:
        found: dict = {}
        repeats = 0
        with open_tables(blobs, by_name[name].document) as sources:
            source = next(s for s in sources if s.name == name)
            for row in source.rows():
                key = tuple(row.get(c, "") for c in columns)
                repeats += key in found
                found[key] = f"{name}:{'/'.join(key)}"
        return found, repeats

    return plan_keys(tables, declared or KeyDeclarations(), lookup)


def refs(p: KeyPlan) -> set[str]:
    return {f"{t}.{r.describe()} ({r.origin})" for t, rs in p.references.items() for r in rs}


def test_three_tables_keys_and_references_are_inferred(blobs: FileBlobStore) -> None:
    stores = stored(blobs, "stores.csv", STORES.encode())
    tables, errors = read(blobs, shop(blobs, stores))
    assert errors == []
    p = plan(blobs, tables)
    assert p.primary_keys == {
        "customers": ["customer_id"], "orders": ["order_id"], "products": ["sku"],
        "stores": ["id"],
    }  # fmt: skip
    assert refs(p) == {
        "orders.customer_id -> customers.customer_id (inferred)",
        "orders.product_sku -> products.sku (inferred)",
    }
    assert p.lookups[("customers", ("customer_id",))][("C002",)] == "customers:C002"
    assert p.problems == {}


def test_a_column_named_after_a_table_with_mostly_missing_keys_is_no_reference(
    blobs: FileBlobStore,
) -> None:
    orders = ORDERS.replace("C002", "C902").replace("C003", "C903")  # 2 of 3 ids unknown
    docs = shop(blobs)
    docs[1] = stored(blobs, "orders.csv", orders.encode())
    tables, _ = read(blobs, docs)
    assert refs(plan(blobs, tables)) == {"orders.product_sku -> products.sku (inferred)"}


def test_declared_keys_win_over_inference_and_bad_ones_are_explained(
    blobs: FileBlobStore,
) -> None:
    customers = CUSTOMERS.replace("customer_id,name,city", "customer_id,name,city,email")
    customers = "\n".join(
        f"{line},{line.split(',')[1].split()[0].lower()}@example.com" if i else line
        for i, line in enumerate(customers.strip().splitlines())
    )
    docs = shop(blobs)
    docs[0] = stored(blobs, "customers.csv", (customers + "\n").encode())
    tables, _ = read(blobs, docs)
    declared = parse_key_flags(["customers=email"], ["orders.buyer_email=customers.email"])
    p = plan(blobs, tables, declared)
    assert p.primary_keys["customers"] == ["email"]
    assert refs(p) == {"orders.buyer_email -> customers.email (declared)"}
    bad = parse_key_flags([], ["orders.buyer=customers.email"])
    p = plan(blobs, tables, bad)
    assert "has no column 'buyer'" in p.problems["orders"]
    assert "customer_id" in p.problems["orders"]  # lists the columns there are
    p = plan(blobs, tables, parse_key_flags([], ["orders.buyer_email=clients.email"]))
    assert "no table 'clients'" in p.problems["orders"] and "customers" in p.problems["orders"]
    p = plan(blobs, tables, parse_key_flags(["orders=customer_id"], []))
    assert "repeats 1 value" in p.problems["orders"]


def test_sqlite_schema_keys_are_used(blobs: FileBlobStore, tmp_path: Path) -> None:
    path = tmp_path / "school.db"
    with sqlite3.connect(path) as db:
        db.executescript(
            """CREATE TABLE teachers (tid INTEGER PRIMARY KEY, name TEXT);
            CREATE TABLE classes (code TEXT PRIMARY KEY, teacher INTEGER REFERENCES teachers);
            CREATE TABLE enrolments (student TEXT, class TEXT REFERENCES classes (code),
                                     PRIMARY KEY (student, class));
            INSERT INTO teachers VALUES (1, 'Ada'), (2, 'Grace');
            INSERT INTO classes VALUES ('MATH1', 1), ('CS101', 2);
            INSERT INTO enrolments VALUES ('Eve', 'MATH1'), ('Eve', 'CS101'), ('Sam', 'CS101');"""
        )
    data = path.read_bytes()
    assert record_pipeline("school.db", data[:100]) == "structured"
    assert check_source("school.db", data[:100]) is None
    tables, errors = read(blobs, [stored(blobs, "school.db", data)])
    assert errors == [] and [t.name for t in tables] == ["classes", "enrolments", "teachers"]
    p = plan(blobs, tables)
    assert p.primary_keys == {
        "classes": ["code"], "enrolments": ["student", "class"], "teachers": ["tid"]
    }  # fmt: skip
    assert refs(p) == {
        "classes.teacher -> teachers.tid (schema)",
        "enrolments.class -> classes.code (schema)",
    }


def test_unreadable_documents_get_clear_errors(blobs: FileBlobStore) -> None:
    docs = [
        stored(blobs, "ragged.csv", b"a,b\n1,2\n3,4,5\n"),
        stored(blobs, "nested.json", b'{"title": "not records"}'),
        stored(blobs, "notes.txt", b"just text"),
        stored(blobs, "broken.db", b"SQLite format 3\x00" + b"\x00" * 200),
        stored(blobs, "customers.jsonl", b'{"customer_id": "C9"}\n'),  # clashes with the csv
        stored(blobs, "customers.csv", CUSTOMERS.encode()),
    ]
    tables, errors = read(blobs, docs)
    messages = {e.document_name: e.message for e in errors}
    assert [t.name for t in tables] == ["customers"]
    assert "3 cells but the header names 2 columns" in messages["ragged.csv"]
    assert "not a list of records" in messages["nested.json"]
    assert "--pipeline default" in messages["notes.txt"]
    assert "not a readable SQLite database" in messages["broken.db"]
    assert "also comes from customers.csv" in messages["customers.jsonl"]


def test_record_files_choose_the_structured_pipeline() -> None:
    assert record_pipeline("a.csv", b"x,y\n") == "structured"
    assert record_pipeline("a.jsonl", b"{}") == "structured"
    assert record_pipeline("a.json", b' \n[ {"a": 1}]') == "structured"
    assert record_pipeline("a.json", b'{"a": [1]}') is None
    assert record_pipeline("a.json", b"[1, 2]") is None
    assert record_pipeline("a.md", b"# title") is None


def test_declarations_parse_merge_and_reject_bad_input() -> None:
    declared = parse_keys_yaml(
        "orders:\n  primary_key: order_id\n"
        "  foreign_keys:\n    customer_id: customers.customer_id\n"
    )
    assert declared.tables["orders"].foreign_keys == {"customer_id": "customers.customer_id"}
    merged = declared.merged(parse_key_flags(["orders=ref"], ["orders.sku=products.sku"]))
    assert merged.tables["orders"].primary_key == "ref"
    assert set(merged.tables["orders"].foreign_keys) == {"customer_id", "sku"}
    with pytest.raises(KeyDeclarationError, match="TABLE.COLUMN"):
        parse_keys_yaml("tables:\n  orders:\n    foreign_keys:\n      customer_id: customers\n")
    with pytest.raises(KeyDeclarationError, match="not valid YAML near line 1") as caught:
        parse_keys_yaml("tables: [unclosed")
    assert "<unicode string>" not in str(caught.value)  # the parser's words stay out
    with pytest.raises(KeyDeclarationError, match="TABLE=COLUMN"):
        parse_key_flags(["orders"], [])
    with pytest.raises(KeyDeclarationError, match="TABLE.COLUMN=TABLE.COLUMN"):
        parse_key_flags([], ["orders.customer_id"])


def test_primary_key_inference_rules() -> None:
    def key(table: str, rows: list[dict[str, str]]) -> list[str]:
        columns, profile = profile_rows([], iter(rows))
        return infer_primary_key(table, profile)

    assert key("people", [{"name": "Ann", "person_id": "7"}, {"name": "Bo", "person_id": "8"}]) == [
        "person_id"
    ]
    assert key("cities", [{"city": "Oslo", "pop": "1"}, {"city": "Rome", "pop": "2"}]) == ["city"]
    assert key("events", [{"id": "1", "x": "a"}, {"id": "1", "x": "b"}]) == []  # repeated id
    assert key("scores", [{"score": "1"}, {"score": "2"}]) == []  # a number is no name
    # An id column with a blank is no key; the first column then is, if unique and not a number.
    assert key("tags", [{"t": "a", "tag_id": ""}, {"t": "b", "tag_id": "2"}]) == ["t"]


def test_table_problem_is_a_value_error() -> None:
    assert issubclass(TableProblem, ValueError)
