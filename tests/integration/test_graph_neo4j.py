"""The graph contract on a real Neo4j server (COGMILL_TEST_NEO4J_URI), plus what only it shows.

The server is shared: every test writes only to datasets of its own and deletes them after.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from neo4j import GraphDatabase

from core.models.graph import Support
from core.ports import GraphStore, StoreError
from core.stores.neo4j.graph import Neo4jGraphStore
from tests.contracts.graph_store import GraphStoreContract
from tests.factories import make_edge, make_graph, make_node, support_pairs
from tests.services import neo4j_uri

pytestmark = pytest.mark.services


@pytest.fixture(scope="module")
def uri() -> str:
    return neo4j_uri()


@pytest.fixture
def graph_store(uri: str, request: pytest.FixtureRequest) -> Iterator[Neo4jGraphStore]:
    store = Neo4jGraphStore(uri)
    # Whatever the test wrote to its datasets leaves the shared server afterwards.
    used = [
        request.getfixturevalue(n)
        for n in ("dataset", "other_dataset")
        if n in request.fixturenames
    ]
    yield store
    for dataset in used:
        store.delete_dataset(dataset)
    store.close()


@pytest.fixture
def dataset() -> str:
    """A dataset of the test's own (the graph_store fixture deletes it afterwards)."""
    return f"ds-{uuid.uuid4().hex[:10]}"


class TestNeo4jGraphStore(GraphStoreContract):
    pass


def _cypher(uri: str, query: str, **params) -> list[dict]:
    """Records of a plain Cypher query, as a user of the database would run it."""
    with GraphDatabase.driver(uri, auth=None) as driver:
        records, _, _ = driver.execute_query(query, params, database_="neo4j")
    return [record.data() for record in records]


def test_it_is_a_graph_store(graph_store):
    assert isinstance(graph_store, GraphStore)


def test_concurrent_upserts_of_the_same_edges_create_each_once(uri, graph_store, dataset):
    nodes, edges = make_graph(dataset, 100, 500)
    graph_store.upsert_nodes(nodes)
    # Separate drivers (as separate processes would have), small batches so the writers'
    # transactions interleave, each writer's own document so every MERGE also updates.
    writers = [Neo4jGraphStore(uri, batch_size=25) for _ in range(4)]
    start = threading.Barrier(len(writers))
    errors: list[BaseException] = []

    def write(store: Neo4jGraphStore, doc: str) -> None:
        try:
            start.wait()
            store.upsert_edges([e.model_copy(update={"support": []}) for e in edges])
            support = [Support(document_id=doc)]
            store.upsert_edges([e.model_copy(update={"support": support}) for e in edges])
        except BaseException as err:  # re-raised in the main thread by the assert below
            errors.append(err)

    threads = [
        threading.Thread(target=write, args=(store, f"doc {i}")) for i, store in enumerate(writers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for store in writers:
        store.close()

    assert errors == []
    [row] = _cypher(
        uri,
        "MATCH (:Node {dataset: $ds})-[r:REL]->() "
        "RETURN count(r) AS edges, count(DISTINCT [startNode(r), r.name, endNode(r)]) AS keys",
        ds=dataset,
    )
    assert row == {"edges": 500, "keys": 500}
    assert graph_store.count(dataset)["edges"] == 500
    [edge] = graph_store.edges_of([nodes[0].id], limit=1)
    assert {doc for doc, _ in support_pairs(edge)} == {f"doc {i}" for i in range(4)}


def test_creating_the_schema_again_or_at_once_is_harmless(uri, graph_store, dataset):
    errors: list[BaseException] = []

    def open_store() -> None:
        try:
            Neo4jGraphStore(uri).close()
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=open_store) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    names = {r["name"] for r in _cypher(uri, "SHOW INDEXES YIELD name RETURN name")}
    assert {"cogmill_node_id", "cogmill_node_name", "cogmill_node_type"} <= names
    unique_ids = _cypher(
        uri,
        "SHOW CONSTRAINTS YIELD labelsOrTypes AS on, properties AS keys "
        "WHERE on = ['Node'] AND keys = ['id'] RETURN on",
    )
    assert len(unique_ids) == 1
    graph_store.upsert_nodes([make_node(dataset, "Alice")])
    assert graph_store.count(dataset) == {"Entity": 1, "edges": 0}


def test_an_unreachable_server_raises_store_error_naming_it():
    started = time.monotonic()
    with pytest.raises(StoreError) as caught:
        Neo4jGraphStore("bolt://127.0.0.1:1", password="s3cret-pw")
    message = str(caught.value)
    assert "bolt://127.0.0.1:1" in message and "s3cret-pw" not in message
    assert time.monotonic() - started < 10  # no 30 s of retries before saying so


def test_a_closed_store_raises_store_error(uri):
    store = Neo4jGraphStore(uri)
    store.close()
    with pytest.raises(StoreError):
        store.count("ds")


def test_the_graph_is_plain_cypher_by_label_and_property(uri, graph_store, dataset):
    alice = make_node(dataset, "Alice", role="cto", tags=["x", "y"], address={"city": "Oslo"})
    bob = make_node(dataset, "Bob", "Person")
    odd = make_node(dataset, "Odd", "my type")  # not an identifier: no label of its own
    graph_store.upsert_nodes([alice, bob, odd])
    graph_store.upsert_edges([make_edge(alice, bob, "KNOWS", since=2020)])

    rows = _cypher(
        uri,
        "MATCH (a:Entity {dataset: $ds})-[r:REL {name: 'KNOWS'}]->(b:Person) "
        "RETURN a.name AS a, a.role AS role, a.tags AS tags, r.since AS since, b.name AS b",
        ds=dataset,
    )
    assert rows == [{"a": "Alice", "role": "cto", "tags": ["x", "y"], "since": 2020, "b": "Bob"}]
    [labels] = _cypher(uri, "MATCH (n:Node {id: $id}) RETURN labels(n) AS l", id=odd.id)
    assert labels == {"l": ["Node"]}
    assert [n.id for n in graph_store.find_nodes(dataset, "my type")] == [odd.id]


def test_any_property_value_round_trips_and_merges_per_key(graph_store, dataset):
    values = {
        "nested": {"a": [1, {"b": None}]},
        "mixed": [1, 2.5, "x"],
        "ints": [1, 2],
        "floats": [1.0, 2.0],
        "flags": [True, False],
        "empty": [],
        "none": None,
        "huge": 2**70,
        "id": "not the node id",
        "name": "not the node name",
        "_private": 1,
        "_j_x": "looks like ours",
        "with space": "ok",
    }
    node = make_node(dataset, "Alice").model_copy(update={"properties": values})
    graph_store.upsert_nodes([node])
    assert graph_store.get_nodes([node.id])[0].properties == values
    # A key changing form (stored value <-> JSON) leaves only the new one behind.
    changed = {"nested": "now a string", "ints": {"now": "a map"}}
    graph_store.upsert_nodes([node.model_copy(update={"properties": changed})])
    [stored] = graph_store.get_nodes([node.id])
    assert stored.properties == {**values, **changed}
    assert stored.name == "Alice"


def test_delete_document_matches_the_exact_document_id(graph_store, dataset):
    docs = ["d1", "d1x", 'd"1', "d1,", "d|1"]
    nodes = [make_node(dataset, f"only {doc}", "Thing", doc=doc) for doc in docs]
    graph_store.upsert_nodes(nodes)
    for doc, node in zip(docs, nodes, strict=True):
        assert graph_store.delete_document(dataset, doc).node_ids == [node.id]
    assert graph_store.count(dataset) == {"edges": 0}


def test_deleting_a_dataset_in_several_batches(uri, dataset):
    store = Neo4jGraphStore(uri, batch_size=70)
    try:
        nodes, edges = make_graph(dataset, 200, 450)
        store.upsert_nodes(nodes)
        store.upsert_edges(edges)
        removed = store.delete_dataset(dataset)
        assert (len(removed.node_ids), len(removed.edge_ids)) == (200, 450)
        assert store.count(dataset) == {"edges": 0}
    finally:
        store.delete_dataset(dataset)
        store.close()


def test_a_missing_end_in_a_later_batch_writes_no_batch(uri, graph_store, dataset):
    small = Neo4jGraphStore(uri, batch_size=2)
    try:
        alice, bob, ghost = (make_node(dataset, n) for n in ("Alice", "Bob", "Ghost"))
        small.upsert_nodes([alice, bob])
        edges = [make_edge(alice, bob, f"E{i}") for i in range(5)] + [make_edge(bob, ghost)]
        with pytest.raises(ValueError, match="upsert the nodes before their edges"):
            small.upsert_edges(edges)
        assert small.count(dataset)["edges"] == 0
    finally:
        small.close()


def _support_nodes(uri: str, dataset: str) -> set[tuple[str, str]]:
    """(document, chunk) of every _Support node the dataset has in the database."""
    rows = _cypher(uri, "MATCH (p:_Support {dataset: $ds}) RETURN p.pair AS pair", ds=dataset)
    return {tuple(json.loads(r["pair"])) for r in rows}


def test_support_lives_in_one_node_per_chunk_and_goes_with_what_it_supports(
    uri, graph_store, dataset
):
    alice = make_node(dataset, "Alice", chunk="c1", also=[("d1", "c2")])
    bob = make_node(dataset, "Bob", chunk="c2")
    carol = make_node(dataset, "Carol", doc="d2", chunk="c9")
    graph_store.upsert_nodes([alice, bob, carol])
    graph_store.upsert_nodes([bob])  # the same support again adds nothing
    assert _support_nodes(uri, dataset) == {("d1", "c1"), ("d1", "c2"), ("d2", "c9")}
    [row] = _cypher(
        uri, "MATCH (:_Support {dataset: $ds})-[s:SUPPORTS]->() RETURN count(s) AS n", ds=dataset
    )
    assert row == {"n": 4}

    # c1 supported Alice alone; c2 also supports Bob, who stays.
    graph_store.delete_nodes([alice.id])
    assert _support_nodes(uri, dataset) == {("d1", "c2"), ("d2", "c9")}
    assert graph_store.delete_document(dataset, "d1").node_ids == [bob.id]
    assert _support_nodes(uri, dataset) == {("d2", "c9")}
    graph_store.delete_dataset(dataset)
    assert _support_nodes(uri, dataset) == set()


@pytest.mark.exclusive  # removes the schema marker: any store opened meanwhile migrates too
def test_support_stored_in_node_lists_by_earlier_versions_moves_at_start(uri, dataset):
    old = [("old-1", "Alice", ['["d1","c1"]', '["d2",""]'], ["d1", "d2"]), ("old-2", "Bob", [], [])]
    for id_, name, pairs, docs in old:
        _cypher(
            uri,
            "CREATE (:Node:Entity {id: $id, type: 'Entity', dataset: $ds, name: $name,"
            " _support: $pairs, _docs: $docs})",
            id=f"{id_}-{dataset}",
            ds=dataset,
            name=name,
            pairs=pairs,
            docs=docs,
        )
    _cypher(uri, "MATCH (s:_Schema) DELETE s")  # as a database from before the move has none
    store = Neo4jGraphStore(uri, batch_size=1)  # one node per transaction
    try:
        alice, bob = store.get_nodes([f"old-1-{dataset}", f"old-2-{dataset}"])
        assert support_pairs(alice) == {("d1", "c1"), ("d2", "")} and bob.support == []
        left = _cypher(uri, "MATCH (n:Node) WHERE n._support IS NOT NULL RETURN count(n) AS n")
        assert left == [{"n": 0}]
        assert store.delete_document(dataset, "d1").node_ids == []
        assert store.delete_document(dataset, "d2").node_ids == [alice.id]
    finally:
        store.delete_dataset(dataset)
        store.close()
    assert _cypher(uri, "MATCH (s:_Schema) RETURN count(s) AS n") == [{"n": 1}]


def test_a_merge_keeps_the_support_nodes_and_leaves_a_redirect_until_the_dataset_goes(
    uri, graph_store, dataset
):
    alice, al = make_node(dataset, "Alice"), make_node(dataset, "Al", doc="d2", chunk="c5")
    graph_store.upsert_nodes([alice, al])
    graph_store.merge_nodes([al.id], alice.id)
    # Al's chunk node now supports Alice: one _Support node per chunk, none copied or lost.
    assert _support_nodes(uri, dataset) == {("d1", "c1"), ("d2", "c5")}
    redirects = "MATCH (r:_Redirect {dataset: $ds}) RETURN r.id AS id, r.to AS to"
    assert _cypher(uri, redirects, ds=dataset) == [{"id": al.id, "to": alice.id}]
    assert graph_store.count(dataset) == {"Entity": 1, "edges": 0}  # a redirect is no node
    graph_store.delete_dataset(dataset)
    assert _cypher(uri, redirects, ds=dataset) == []
    assert _support_nodes(uri, dataset) == set()


def test_a_node_deleted_while_its_upsert_waits_for_the_lock_is_written_anyway(
    uri, graph_store, dataset
):
    # A purge or a merge deletes a node while another batch upserts it: Neo4j's MERGE then
    # matches the deleted node and writes nowhere, and the batch's edges found no end.
    alice = make_node(dataset, "Alice")
    graph_store.upsert_nodes([alice])
    again = make_node(dataset, "Alice", doc="d2", role="cto")
    with (
        GraphDatabase.driver(uri, auth=None) as driver,
        driver.session(database="neo4j") as session,
    ):
        deleting = session.begin_transaction()
        deleting.run("MATCH (n:Node {id: $id}) DETACH DELETE n", id=alice.id).consume()
        writer = threading.Thread(target=graph_store.upsert_nodes, args=([again],))
        writer.start()
        blocked = "SHOW TRANSACTIONS YIELD status WHERE status STARTS WITH 'Blocked' RETURN 1"
        deadline = time.monotonic() + 60
        while not driver.execute_query(blocked, database_="neo4j").records:
            assert time.monotonic() < deadline, "the upsert never waited for the lock"
            time.sleep(0.05)
        deleting.commit()
        writer.join(timeout=60)
    [stored] = graph_store.get_nodes([alice.id])
    assert stored.properties == {"role": "cto"} and support_pairs(stored) == {("d2", "c1")}


@pytest.mark.exclusive  # a failed index of another application's in the shared server
def test_opening_waits_for_its_own_indexes_not_another_applications(uri: str) -> None:
    """A store opens beside another application's index that never comes online (here: its
    population failed on a value too large to index). Waiting for every index in the database,
    it failed or hung on indexes that are not cogmill's."""
    _cypher(uri, "CREATE (:OtherApp {x: $big})", big="x" * 40_000)
    _cypher(uri, "CREATE INDEX other_app IF NOT EXISTS FOR (n:OtherApp) ON (n.x)")
    try:
        state, deadline = "POPULATING", time.monotonic() + 60
        while state == "POPULATING" and time.monotonic() < deadline:
            [row] = _cypher(uri, "SHOW INDEXES YIELD name, state WHERE name = 'other_app'")
            state = row["state"]
        assert state == "FAILED", state  # as the other application left it
        Neo4jGraphStore(uri).close()
    finally:
        _cypher(uri, "DROP INDEX other_app IF EXISTS")
        _cypher(uri, "MATCH (n:OtherApp) DELETE n")
