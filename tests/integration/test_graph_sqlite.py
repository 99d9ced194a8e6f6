"""The graph contract on the embedded SQLite store, plus what only a file-backed store shows."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from core.models.graph import Removed
from core.ports import GraphStore, StoreError
from core.stores.sqlite.graph import SQLiteGraphStore
from tests.contracts.graph_store import GraphStoreContract
from tests.factories import make_graph, make_node, support_pairs


@pytest.fixture
def graph_store(tmp_path: Path):
    store = SQLiteGraphStore(tmp_path / "graph.db")
    yield store
    store.close()


class TestSQLiteGraphStore(GraphStoreContract):
    pass


def test_it_is_a_graph_store(graph_store):
    assert isinstance(graph_store, GraphStore)


def test_data_survives_reopening_and_is_seen_by_a_second_store(tmp_path):
    path = tmp_path / "graph.db"
    first = SQLiteGraphStore(path)
    alice = make_node("ds", "Alice", role="cto")
    first.upsert_nodes([alice])
    second = SQLiteGraphStore(path)
    assert second.get_nodes([alice.id])[0].properties == {"role": "cto"}
    first.close()
    second.close()
    reopened = SQLiteGraphStore(path)
    assert reopened.count("ds") == {"Entity": 1, "edges": 0}
    reopened.close()


def test_another_process_writes_while_this_one_has_the_file_open(tmp_path):
    path = tmp_path / "graph.db"
    store = SQLiteGraphStore(path)
    store.upsert_nodes([make_node("ds", "Alice")])
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from core.stores.sqlite.graph import SQLiteGraphStore
        from tests.factories import make_edge, make_node
        store = SQLiteGraphStore(Path({str(path)!r}))
        alice, bob = make_node("ds", "Alice", doc="d2"), make_node("ds", "Bob")
        store.upsert_nodes([alice, bob])
        store.upsert_edges([make_edge(alice, bob)])
        store.close()
        """
    )
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", script], cwd=root, check=True, timeout=60)
    assert store.count("ds") == {"Entity": 2, "edges": 1}
    [alice] = store.get_nodes([make_node("ds", "Alice").id])
    assert support_pairs(alice) == {("d1", "c1"), ("d2", "c1")}
    store.close()


def test_concurrent_writers_leave_a_consistent_graph(graph_store):
    # Four workers write the same graph, each from its own document, in slices, and read.
    graphs = [make_graph("ds", 400, 1_200, doc=f"doc {w}") for w in range(4)]
    start = threading.Barrier(4)
    errors: list[BaseException] = []

    def work(nodes, edges) -> None:
        try:
            start.wait()
            for first in range(0, 400, 50):
                graph_store.upsert_nodes(nodes[first : first + 50])
                graph_store.neighbourhood([nodes[first].id], hops=2)
            for first in range(0, 1_200, 300):
                graph_store.upsert_edges(edges[first : first + 300])
        except BaseException as err:  # re-raised in the main thread by the assert below
            errors.append(err)

    threads = [threading.Thread(target=work, args=graph) for graph in graphs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert graph_store.count("ds") == {"Entity": 400, "edges": 1_200}
    nodes, _ = graphs[0]
    docs = {f"doc {w}" for w in range(4)}
    for item in graph_store.get_nodes([n.id for n in nodes]) + graph_store.edges_of([nodes[0].id]):
        assert {doc for doc, _ in support_pairs(item)} == docs
    assert graph_store.delete_document("ds", "doc 0") == Removed()


def test_a_closed_store_raises_store_error(tmp_path):
    store = SQLiteGraphStore(tmp_path / "graph.db")
    store.close()
    with pytest.raises(StoreError):
        store.count("ds")


def test_a_redirect_is_a_row_of_its_dataset_until_the_dataset_goes(tmp_path):
    store = SQLiteGraphStore(tmp_path / "graph.db")
    alice, al = make_node("ds", "Alice"), make_node("ds", "Al", doc="d2")
    theirs = [make_node("other", "Alice"), make_node("other", "Al")]
    store.upsert_nodes([alice, al, *theirs])
    store.merge_nodes([al.id], alice.id)
    store.merge_nodes([theirs[1].id], theirs[0].id)
    store.delete_dataset("ds")
    store.close()
    with sqlite3.connect(tmp_path / "graph.db") as conn:
        rows = conn.execute("SELECT id, dataset, target FROM redirects").fetchall()
    assert rows == [(theirs[1].id, "other", theirs[0].id)]
