"""A dataset that follows SQL tables, on both backends: rows updated, inserted and deleted
between syncs (a deleted customer's orders lose their REFERENCES edge, a new order gains
one), read from the declared updated column, end equal to a fresh sync of the final rows."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from core.models.vocabulary import REFERENCES
from pipelines.sources.spec import parse_source
from pipelines.structured.key_declarations import parse_key_flags
from pipelines.structured.link_rows import row_id, table_id
from runtime import Runtime
from tests.backends import Backend
from tests.sync_support import report, same_as_fresh, synced

SCHEMA = """
CREATE TABLE customers (customer_id INTEGER PRIMARY KEY, name TEXT, city TEXT, updated_at INT);
CREATE TABLE orders (order_id INTEGER PRIMARY KEY,
    customer_id INTEGER REFERENCES customers (customer_id), item TEXT, updated_at INT);
CREATE TABLE regions (code TEXT, label TEXT);
INSERT INTO customers VALUES (1, 'Alice Martin', 'Lisbon', 1), (2, 'Bruno Costa', 'Faro', 1),
    (3, 'Chen Wei', 'Madrid', 1);
INSERT INTO orders VALUES (10, 1, 'bicycle', 1), (11, 2, 'kettle', 1), (12, 3, 'lantern', 1);
INSERT INTO regions VALUES ('PT', 'Portugal'), ('ES', 'Spain');
"""
EDITS = """
UPDATE customers SET city = 'Porto', updated_at = 2 WHERE customer_id = 2;
DELETE FROM orders WHERE order_id = 11;
DELETE FROM customers WHERE customer_id = 3;
INSERT INTO orders VALUES (13, 1, 'tea set', 2);
INSERT INTO orders VALUES (14, 2, 'lamp', NULL);
"""


def run(db: Path, script: str) -> None:
    with closing(sqlite3.connect(db)) as conn:
        conn.executescript(script)
        conn.commit()


def references(rt: Runtime, dataset: str) -> set[tuple[str, str]]:
    """(order id, customer id) of every REFERENCES edge from an order row."""
    orders, customers = table_id(dataset, "orders"), table_id(dataset, "customers")
    rows = {row_id(orders, (str(k),), 0): str(k) for k in range(10, 15)}
    names = {row_id(customers, (str(k),), 0): str(k) for k in range(1, 4)}
    edges = rt.graph.edges_of(sorted(rows), names=[REFERENCES])
    return {(rows[e.source], names[e.target]) for e in edges if e.source in rows}


@pytest.mark.slow
def test_sql_rows_updated_inserted_and_deleted_end_as_a_fresh_sync(
    backend: Backend, embedder: object, tmp_path: Path
) -> None:
    db = tmp_path / "shop.db"
    run(db, SCHEMA)
    dataset = backend.dataset("sql")
    keys = parse_key_flags(["regions=code"], [])  # no primary key in its schema
    spec = parse_source(f"sqlite:///{db}", keys=keys, updated={"*": "updated_at"})
    with backend.runtime({"embedder": embedder}) as rt:
        first = report(rt, synced(rt, dataset, spec))
        assert first["counts"]["added"] == 3
        assert references(rt, dataset) == {("10", "1"), ("11", "2"), ("12", "3")}

        run(db, EDITS)
        second = report(rt, synced(rt, dataset, spec))
        name = f"sqlite:///{db}#"
        assert sorted(second["replaced"]) == [name + "customers", name + "orders"]
        assert second["unchanged"] == [name + "regions"]
        # Order 12's customer is gone (its edge with it); 13 and 14 (a null updated value,
        # found by its new key) reference theirs.
        assert references(rt, dataset) == {("10", "1"), ("13", "1"), ("14", "2")}
        rows = rt.graph.find_nodes(dataset, "TableRow")
        customers = [r for r in rows if r.properties["table"] == "customers"]
        assert {r.properties["values"]["city"] for r in customers} == {"Lisbon", "Porto"}
        same_as_fresh(backend, rt, dataset, spec)
