"""The behaviour every GraphStore adapter must show, through the port methods only.

An adapter's test module subclasses `GraphStoreContract` and provides a `graph_store`
fixture (a fresh or shared store). Every test works in datasets of its own, so a store
shared between tests (a Neo4j server) does not make them interfere.
"""

from __future__ import annotations

import threading
import uuid

import pytest

from core.models.graph import Edge, Merged, Node, RelationRead, frontier_ids
from core.ports import GraphStore
from core.temporal import days_from_civil
from tests.contracts.fact_store import FactStoreContract
from tests.factories import ids, make_edge, make_graph, make_node, support_pairs


def _triples(edges: list[Edge]) -> set[tuple[str, str, str]]:
    """Edges as (source, name, target) keys."""
    return {(e.source, e.name, e.target) for e in edges}


def _by_id(items: list[Node]) -> dict[str, Node]:
    """Nodes keyed by id."""
    return {item.id: item for item in items}


def _snapshot(store: GraphStore, dataset: str, node_ids: set[str]) -> tuple:
    """Everything a reader can see of these nodes and their edges, order-insensitive."""
    nodes = {
        n.id: (n.type, n.dataset, n.name, n.properties, support_pairs(n))
        for n in store.get_nodes(sorted(node_ids))
    }
    edges = {
        e.id: (e.source, e.name, e.target, e.dataset, e.properties, support_pairs(e))
        for e in store.edges_of(sorted(node_ids))
    }
    return store.count(dataset), nodes, edges


class GraphStoreContract(FactStoreContract):
    """Contract tests for `core.ports.GraphStore` (facts over time: FactStoreContract)."""

    @pytest.fixture
    def dataset(self) -> str:
        return f"ds-{uuid.uuid4().hex[:10]}"

    @pytest.fixture
    def other_dataset(self) -> str:
        return f"ds-{uuid.uuid4().hex[:10]}"

    @pytest.fixture
    def triangle(self, graph_store: GraphStore, dataset: str) -> tuple[list[Node], list[Edge]]:
        """Alice -> Bob -> Carol -> Alice, all from document d1."""
        nodes = [make_node(dataset, name) for name in ("Alice", "Bob", "Carol")]
        edges = [make_edge(nodes[i], nodes[(i + 1) % 3], "KNOWS") for i in range(3)]
        graph_store.upsert_nodes(nodes)
        graph_store.upsert_edges(edges)
        return nodes, edges

    # -- writing and reading back ------------------------------------------------------------

    def test_nodes_round_trip_with_properties_and_support(self, graph_store, dataset):
        alice = make_node(dataset, "Alice", "Person", also=[("d2", "c7")], age=42, tags=["x", "y"])
        graph_store.upsert_nodes([alice])
        [stored] = graph_store.get_nodes([alice.id])
        assert (stored.id, stored.type, stored.dataset, stored.name) == (
            alice.id,
            "Person",
            dataset,
            "Alice",
        )
        assert stored.properties == {"age": 42, "tags": ["x", "y"]}
        assert support_pairs(stored) == {("d1", "c1"), ("d2", "c7")}

    def test_get_nodes_skips_missing_ids(self, graph_store, dataset):
        alice = make_node(dataset, "Alice")
        graph_store.upsert_nodes([alice])
        assert [n.id for n in graph_store.get_nodes(["no-such-id", alice.id])] == [alice.id]
        assert graph_store.get_nodes([]) == []

    def test_existing_names_the_stored_ids_only(self, graph_store, dataset):
        alice, bob = make_node(dataset, "Alice"), make_node(dataset, "Bob")
        graph_store.upsert_nodes([alice, bob])
        assert graph_store.existing([bob.id, "no-such-id", alice.id, bob.id]) == {alice.id, bob.id}
        assert graph_store.existing([]) == set()
        graph_store.delete_nodes([bob.id])
        assert graph_store.existing([alice.id, bob.id]) == {alice.id}

    def test_edges_round_trip_with_properties_and_support(self, graph_store, dataset):
        alice, bob = make_node(dataset, "Alice"), make_node(dataset, "Bob")
        edge = make_edge(alice, bob, "WORKS_WITH", chunk="c3", since=2020)
        graph_store.upsert_nodes([alice, bob])
        graph_store.upsert_edges([edge])
        [stored] = graph_store.edges_of([alice.id])
        assert (stored.source, stored.name, stored.target) == (alice.id, "WORKS_WITH", bob.id)
        assert stored.id == edge.id and stored.dataset == dataset
        assert stored.properties == {"since": 2020}
        assert support_pairs(stored) == {("d1", "c3")}

    def test_writing_twice_leaves_the_same_state(self, graph_store, dataset, triangle):
        nodes, edges = triangle
        before = _snapshot(graph_store, dataset, ids(nodes))
        graph_store.upsert_nodes(nodes)
        graph_store.upsert_edges(edges)
        assert _snapshot(graph_store, dataset, ids(nodes)) == before
        assert all(len(n.support) == 1 for n in graph_store.get_nodes(list(ids(nodes))))

    def test_properties_merge_and_support_unions(self, graph_store, dataset):
        graph_store.upsert_nodes([make_node(dataset, "Alice", role="cto", city="Oslo")])
        graph_store.upsert_nodes([make_node(dataset, "Alice", doc="d2", role="ceo", age=50)])
        [alice] = graph_store.get_nodes([make_node(dataset, "Alice").id])
        assert alice.properties == {"role": "ceo", "city": "Oslo", "age": 50}
        assert support_pairs(alice) == {("d1", "c1"), ("d2", "c1")}

    def test_edge_properties_merge(self, graph_store, dataset):
        alice, bob = make_node(dataset, "Alice"), make_node(dataset, "Bob")
        graph_store.upsert_nodes([alice, bob])
        graph_store.upsert_edges([make_edge(alice, bob, weight=1, note="first")])
        graph_store.upsert_edges([make_edge(alice, bob, doc="d2", weight=2)])
        [edge] = graph_store.edges_of([alice.id])
        assert edge.properties == {"weight": 2, "note": "first"}
        assert support_pairs(edge) == {("d1", "c1"), ("d2", "c1")}

    def test_an_empty_name_keeps_the_stored_name(self, graph_store, dataset):
        alice = make_node(dataset, "Alice")
        graph_store.upsert_nodes([alice])
        graph_store.upsert_nodes([alice.model_copy(update={"name": ""})])
        assert graph_store.get_nodes([alice.id])[0].name == "Alice"

    def test_edge_with_a_missing_end_raises_and_writes_nothing(self, graph_store, dataset):
        alice, bob, ghost = (make_node(dataset, n) for n in ("Alice", "Bob", "Ghost"))
        graph_store.upsert_nodes([alice, bob])
        with pytest.raises(ValueError):
            graph_store.upsert_edges([make_edge(alice, bob), make_edge(bob, ghost)])
        assert graph_store.edges_of([alice.id, bob.id, ghost.id]) == []
        assert graph_store.count(dataset)["edges"] == 0

    # -- queries -----------------------------------------------------------------------------

    def test_edges_of_returns_edges_touching_the_nodes(self, graph_store, dataset, triangle):
        (alice, bob, carol), _ = triangle
        assert _triples(graph_store.edges_of([bob.id])) == {
            (alice.id, "KNOWS", bob.id),
            (bob.id, "KNOWS", carol.id),
        }
        assert len(graph_store.edges_of([alice.id, bob.id, carol.id])) == 3
        assert len(graph_store.edges_of([alice.id, bob.id, carol.id], limit=2)) == 2
        assert graph_store.edges_of(["no-such-id"]) == []

    def test_edges_of_filters_by_name(self, graph_store, dataset):
        alice, bob, carol = (make_node(dataset, name) for name in ("Alice", "Bob", "Carol"))
        graph_store.upsert_nodes([alice, bob, carol])
        graph_store.upsert_edges(
            [
                make_edge(alice, bob, "KNOWS"),
                make_edge(alice, carol, "LIKES"),
                make_edge(bob, carol, "KNOWS"),
            ]
        )
        assert _triples(graph_store.edges_of([alice.id], names=["LIKES"])) == {
            (alice.id, "LIKES", carol.id)
        }
        knows = graph_store.edges_of([alice.id, carol.id], names=["KNOWS"])
        assert {e.name for e in knows} == {"KNOWS"} and len(knows) == 2
        rest = graph_store.edges_of([alice.id], exclude=["KNOWS"])
        assert [e.name for e in rest] == ["LIKES"]
        assert graph_store.edges_of([alice.id], names=[]) == []

    def test_edge_ends_are_the_ends_of_edges_of_in_its_order(self, graph_store, dataset):
        alice, bob, carol = (make_node(dataset, name) for name in ("Alice", "Bob", "Carol"))
        graph_store.upsert_nodes([alice, bob, carol])
        graph_store.upsert_edges(
            [
                make_edge(alice, bob, "KNOWS"),
                make_edge(alice, carol, "LIKES"),
                make_edge(carol, bob, "KNOWS", since=2020),
            ]
        )
        for names, limit, count in (
            (["KNOWS"], 10, 2),
            (["KNOWS", "LIKES"], 10, 3),
            (["KNOWS"], 1, 1),
        ):
            full = graph_store.edges_of([alice.id, bob.id], names=names, limit=limit)
            ends = graph_store.edge_ends([alice.id, bob.id], names=names, limit=limit)
            assert ends == [(e.source, e.target) for e in full] and len(ends) == count
        assert graph_store.edge_ends([carol.id], names=["LIKES"]) == [(alice.id, carol.id)]
        assert graph_store.edge_ends([alice.id], names=[]) == []
        assert graph_store.edge_ends(["no-such-id"], names=["KNOWS"]) == []

    def test_relation_ends_name_the_edges_edges_of_finds(self, graph_store, dataset):
        alice, bob, carol = (make_node(dataset, name) for name in ("Alice", "Bob", "Carol"))
        graph_store.upsert_nodes([alice, bob, carol])
        graph_store.upsert_edges(
            [
                make_edge(alice, bob, "officer_of"),
                make_edge(alice, carol, "MENTIONS"),
                make_edge(carol, bob, "founded", since=2020),
            ]
        )
        for exclude, count in ((["MENTIONS"], 2), ([], 3)):
            full = graph_store.edges_of([alice.id, bob.id], exclude=exclude)
            ends = graph_store.relation_ends([alice.id, bob.id], exclude=exclude)
            assert sorted(ends) == sorted((e.source, e.name, e.target) for e in full)
            assert len(ends) == count  # an edge between two of the ids comes once
        [one] = graph_store.relation_ends([alice.id, bob.id], exclude=["MENTIONS"], limit=1)
        assert one in {(alice.id, "officer_of", bob.id), (carol.id, "founded", bob.id)}
        assert graph_store.relation_ends([carol.id], exclude=["MENTIONS"]) == [
            (carol.id, "founded", bob.id)
        ]
        assert graph_store.relation_ends(["no-such-id"], exclude=[]) == []
        # Only names holding one of the lower-case parts ("Founded" holds "found").
        graph_store.upsert_edges([make_edge(bob, carol, "Founded")])
        ids = [alice.id, bob.id]
        parts = ["offic", "found"]
        assert sorted(graph_store.relation_ends(ids, exclude=[], containing=parts)) == sorted(
            [
                (alice.id, "officer_of", bob.id),
                (bob.id, "Founded", carol.id),
                (carol.id, "founded", bob.id),
            ]
        )
        assert graph_store.relation_ends(ids, exclude=[], containing=["owner"]) == []
        assert graph_store.relation_ends(ids, exclude=[], containing=[]) == []

    def test_node_chunks_name_each_nodes_chunks_in_the_order_asked(self, graph_store, dataset):
        odd = 'c"3\\'  # a quote and a backslash survive the store's encoding
        alice = make_node(
            dataset, "Alice", chunk="c2", also=[("d1", "c1"), ("d2", "c1"), ("d3", odd)]
        )
        bob = make_node(dataset, "Bob", chunk="c9", age=3)
        paris = make_node(dataset, "Paris", "Place")
        graph_store.upsert_nodes([alice, bob, paris])
        found = graph_store.node_chunks([bob.id, "no-such-id", paris.id, alice.id], type="Entity")
        assert list(found) == [bob.id, alice.id]
        assert found[bob.id] == ("Bob", ["c9"], 1)
        name, chunks, count = found[alice.id]
        assert name == "Alice" and sorted(chunks) == sorted(["c1", "c2", odd])  # distinct
        assert count == 3
        [stored] = graph_store.get_nodes([alice.id])
        assert chunks == list(dict.fromkeys(s.chunk_id for s in stored.support))
        assert graph_store.node_chunks([], type="Entity") == {}

    def test_node_chunks_past_most_count_a_hubs_support_instead_of_listing_it(
        self, graph_store, dataset
    ):
        hub = make_node(dataset, "Hub", chunk="c1", also=[("d2", "c2"), ("d3", "c3")])
        leaf = make_node(dataset, "Leaf", chunk="c9")
        c1 = make_node(dataset, "c1", "Chunk")
        graph_store.upsert_nodes([hub, leaf, c1])
        graph_store.upsert_edges([make_edge(c1, hub, "MENTIONS")])
        ids = [leaf.id, hub.id]
        assert graph_store.node_chunks(ids, type="Entity", most=2) == {
            leaf.id: ("Leaf", ["c9"], 1),
            hub.id: ("Hub", [], 3),  # 3 support records, more than 2: counted, not listed
        }
        listed = graph_store.node_chunks(ids, type="Entity", most=3)
        assert listed == graph_store.node_chunks(ids, type="Entity")  # at most: all listed
        assert sorted(listed[hub.id].chunks) == ["c1", "c2", "c3"]
        _, nodes, _ = graph_store.frontier(
            [c1.id], [leaf.id], names=["MENTIONS"], type="Entity", most=2
        )
        assert nodes == graph_store.node_chunks([leaf.id, hub.id], type="Entity", most=2)

    def test_frontier_reads_edge_ends_and_the_node_chunks_they_reach(self, graph_store, dataset):
        odd = 'c"3\\'  # a quote and a backslash survive the store's encoding
        alice = make_node(dataset, "Alice", chunk="c1", also=[("d2", "c2"), ("d3", odd)])
        bob = make_node(dataset, "Bob", chunk="c2")
        carol, dan = make_node(dataset, "Carol", chunk="c3"), make_node(dataset, "Dan", "Place")
        c1, c2 = make_node(dataset, "c1", "Chunk"), make_node(dataset, "c2", "Chunk")
        graph_store.upsert_nodes([alice, bob, carol, dan, c1, c2])
        graph_store.upsert_edges(
            [
                make_edge(c1, alice, "MENTIONS"),
                make_edge(c1, dan, "MENTIONS"),
                make_edge(c2, alice, "MENTIONS"),
                make_edge(c2, bob, "MENTIONS"),
                make_edge(alice, c2, "MENTIONS"),
                make_edge(c1, bob, "KNOWS"),
            ]
        )
        asked = [c1.id, c2.id]
        for limit, skip in ((100, []), (2, []), (100, [alice.id]), (3, [bob.id, carol.id])):
            ends, nodes, relations = graph_store.frontier(
                asked,
                [carol.id, "no-such-id"],
                names=["MENTIONS"],
                type="Entity",
                limit=limit,
                skip=skip,
            )
            assert relations == []  # none asked
            assert ends == graph_store.edge_ends(asked, names=["MENTIONS"], limit=limit)
            reached = frontier_ids(asked, [carol.id, "no-such-id"], ends, skip)
            assert nodes == graph_store.node_chunks(reached, type="Entity")
            assert list(nodes) == [i for i in reached if i in nodes]  # in frontier_ids' order
        ends, nodes, _ = graph_store.frontier(asked, [carol.id], names=["MENTIONS"], type="Entity")
        assert len(ends) == 5 and set(nodes) == {carol.id, alice.id, bob.id}  # not Dan, a Place
        assert nodes[alice.id][0] == "Alice" and set(nodes[alice.id][1]) == {"c1", "c2", odd}
        assert graph_store.frontier([], [bob.id], names=["MENTIONS"], type="Entity") == (
            [],
            {bob.id: ("Bob", ["c2"], 1)},
            [],
        )
        assert graph_store.frontier([], [], names=["MENTIONS"], type="Entity") == ([], {}, [])

    def test_frontier_reads_relations_and_their_far_ends_with_the_hop(self, graph_store, dataset):
        alice, bob = make_node(dataset, "Alice", chunk="c1"), make_node(dataset, "Bob", chunk="c2")
        carol, dan = make_node(dataset, "Carol", chunk="c3"), make_node(dataset, "Dan", chunk="c4")
        c1 = make_node(dataset, "c1", "Chunk")
        graph_store.upsert_nodes([alice, bob, carol, dan, c1])
        graph_store.upsert_edges(
            [
                make_edge(alice, bob, "Officer_of"),
                make_edge(carol, alice, "founded"),
                make_edge(alice, dan, "knows"),
                make_edge(c1, alice, "MENTIONS"),
            ]
        )
        exclude = ["MENTIONS"]
        cases = [(["offic", "found"], ["offic"]), (None, []), (None, ["found"]), (["z"], ["z"])]
        for containing, far in cases:
            read = RelationRead([alice.id, "no-such-id"], exclude, containing, far, 10)
            ends, nodes, relations = graph_store.frontier(
                [c1.id], [], names=["MENTIONS"], type="Entity", relations=read
            )
            assert ends == [(c1.id, alice.id)]
            expected = graph_store.relation_ends(
                [alice.id, "no-such-id"], exclude=exclude, containing=containing
            )
            assert sorted(relations) == sorted(expected)
            reached = frontier_ids([c1.id], [], ends, (), read.far_ends(relations))
            assert nodes == graph_store.node_chunks(reached, type="Entity")
        read = RelationRead([alice.id], exclude, ["offic", "found"], ["offic"], 10)
        _, nodes, relations = graph_store.frontier([], [], names=[], type="Entity", relations=read)
        assert sorted(relations) == sorted(
            [(alice.id, "Officer_of", bob.id), (carol.id, "founded", alice.id)]
        )
        assert set(nodes) == {alice.id, bob.id}  # the ends of the relation named by a far word
        read = RelationRead([alice.id], exclude, None, [], 2)
        _, _, relations = graph_store.frontier([], [], names=[], type="Entity", relations=read)
        assert len(relations) == 2  # at most `limit`

    def test_neighbourhood_follows_hops(self, graph_store, dataset):
        chain = [make_node(dataset, f"n{i}") for i in range(5)]
        graph_store.upsert_nodes(chain)
        graph_store.upsert_edges([make_edge(chain[i], chain[i + 1]) for i in range(4)])
        one = graph_store.neighbourhood([chain[2].id], hops=1)
        assert ids(one.nodes) == ids(chain[1:4])
        assert _triples(one.edges) == _triples(graph_store.edges_of([chain[2].id]))
        two = graph_store.neighbourhood([chain[0].id], hops=2)
        assert ids(two.nodes) == ids(chain[:3])
        assert len(two.edges) == 2
        assert ids(graph_store.neighbourhood([chain[0].id], hops=0).nodes) == {chain[0].id}

    def test_neighbourhood_returns_only_edges_among_its_nodes(self, graph_store, dataset):
        chain = [make_node(dataset, f"n{i}") for i in range(3)]
        graph_store.upsert_nodes(chain)
        graph_store.upsert_edges([make_edge(chain[0], chain[1]), make_edge(chain[1], chain[2])])
        sub = graph_store.neighbourhood([chain[0].id], hops=1)
        assert _triples(sub.edges) == {(chain[0].id, "RELATES_TO", chain[1].id)}

    def test_neighbourhood_is_bounded_by_limit(self, graph_store, dataset):
        hub = make_node(dataset, "hub")
        leaves = [make_node(dataset, f"leaf {i}") for i in range(60)]
        far = [make_node(dataset, f"far {i}") for i in range(60)]
        graph_store.upsert_nodes([hub, *leaves, *far])
        graph_store.upsert_edges(
            [make_edge(hub, leaf) for leaf in leaves]
            + [make_edge(leaf, f) for leaf, f in zip(leaves, far, strict=True)]
        )
        sub = graph_store.neighbourhood([hub.id], hops=2, limit=10)
        # Nearest first: the seed and nine of its direct neighbours, nothing two hops away.
        assert len(sub.nodes) == 10 and ids(sub.nodes) - ids(leaves) == {hub.id}
        assert {(e.source, e.target) for e in sub.edges} <= {
            (a, b) for a in ids(sub.nodes) for b in ids(sub.nodes)
        }
        full = graph_store.neighbourhood([hub.id], hops=2, limit=1000)
        assert len(full.nodes) == 121 and len(full.edges) == 120

    def test_neighbourhood_of_unknown_seeds_is_empty(self, graph_store, dataset):
        sub = graph_store.neighbourhood(["no-such-id"], hops=2)
        assert sub.nodes == [] and sub.edges == []

    def test_find_nodes_by_type_name_and_pages(self, graph_store, dataset):
        people = [make_node(dataset, f"person {i}", "Person") for i in range(7)]
        graph_store.upsert_nodes([*people, make_node(dataset, "Oslo", "City")])
        found = graph_store.find_nodes(dataset, "Person")
        assert [n.id for n in found] == sorted(ids(people))
        pages = [graph_store.find_nodes(dataset, "Person", limit=3, offset=o) for o in (0, 3, 6)]
        assert [len(p) for p in pages] == [3, 3, 1]
        assert [n.id for page in pages for n in page] == [n.id for n in found]
        [match] = graph_store.find_nodes(dataset, "Person", name="person 4")
        assert match.id == people[4].id and support_pairs(match) == {("d1", "c1")}
        assert graph_store.find_nodes(dataset, "City", name="person 4") == []
        assert graph_store.find_nodes(dataset, "Nothing") == []

    def test_count_per_type_and_edges(self, graph_store, dataset, other_dataset, triangle):
        graph_store.upsert_nodes([make_node(dataset, "Oslo", "City")])
        assert graph_store.count(dataset) == {"Entity": 3, "City": 1, "edges": 3}
        assert graph_store.count(other_dataset) == {"edges": 0}
        graph_store.upsert_edges([make_edge(triangle[0][0], triangle[0][1], "MENTIONS")])
        by_name = {"Entity": 3, "City": 1, "edges": 4, "edges:KNOWS": 3, "edges:MENTIONS": 1}
        assert graph_store.count(dataset, edge_names=True) == by_name
        assert graph_store.count(other_dataset, edge_names=True) == {"edges": 0}
        # What documents support: d2 only the Oslo node and one edge, d1 the triangle too.
        alice, bob = triangle[0][0], triangle[0][1]
        graph_store.upsert_nodes([make_node(dataset, "Oslo", "City", doc="d2")])
        graph_store.upsert_edges([make_edge(alice, bob, "VISITED", doc="d2")])
        by_d2 = {"City": 1, "edges": 1, "edges:VISITED": 1}
        assert graph_store.count(dataset, edge_names=True, documents=["d2"]) == by_d2
        assert graph_store.count(dataset, documents=["d2", "d9"]) == {"City": 1, "edges": 1}
        both = graph_store.count(dataset, documents=["d1", "d2"])
        assert both == {"Entity": 3, "City": 1, "edges": 5}, both
        assert graph_store.count(other_dataset, documents=["d1"]) == {"edges": 0}

    def test_total_sums_an_integer_property_of_a_type_over_datasets(
        self, graph_store, dataset, other_dataset
    ):
        graph_store.upsert_nodes(
            [make_node(dataset, f"f{i}", "Document", size=1000 + i) for i in range(3)]
            + [make_node(other_dataset, "g", "Document", size=7)]
            + [make_node(other_dataset, "h", "Document")]  # no size: counts nothing
            + [make_node(dataset, "e", "Entity", size=50)]  # another type
        )
        assert graph_store.total([dataset], "Document", "size") == 3003
        assert graph_store.total([dataset, other_dataset, dataset], "Document", "size") == 3010
        assert graph_store.total([dataset], "Entity", "size") == 50
        assert graph_store.total([dataset], "Document", "pages") == 0
        assert graph_store.total([], "Document", "size") == 0
        assert graph_store.total(["no-such"], "Document", "size") == 0

    # -- deleting ----------------------------------------------------------------------------

    def test_delete_document_removes_only_what_only_it_supported(self, graph_store, dataset):
        shared = make_node(dataset, "Shared", also=["d2"])
        only_d1, only_d2 = make_node(dataset, "OnlyD1"), make_node(dataset, "OnlyD2", doc="d2")
        gone_edge = make_edge(shared, only_d2, "D1_SAYS")
        kept_edge = make_edge(shared, only_d2, "BOTH_SAY", also=["d2"])
        graph_store.upsert_nodes([shared, only_d1, only_d2])
        graph_store.upsert_edges([gone_edge, kept_edge])

        removed = graph_store.delete_document(dataset, "d1")

        assert set(removed.node_ids) == {only_d1.id}
        assert set(removed.edge_ids) == {gone_edge.id}
        survivors = _by_id(graph_store.get_nodes([shared.id, only_d1.id, only_d2.id]))
        assert set(survivors) == {shared.id, only_d2.id}
        assert support_pairs(survivors[shared.id]) == {("d2", "")}
        [edge] = graph_store.edges_of([shared.id])
        assert edge.id == kept_edge.id and support_pairs(edge) == {("d2", "")}
        assert graph_store.count(dataset) == {"Entity": 2, "edges": 1}

    def test_delete_document_removes_edges_of_removed_nodes(self, graph_store, dataset):
        only_d1, other = make_node(dataset, "OnlyD1"), make_node(dataset, "Other", doc="d2")
        edge = make_edge(other, only_d1, doc="d2")
        graph_store.upsert_nodes([only_d1, other])
        graph_store.upsert_edges([edge])
        removed = graph_store.delete_document(dataset, "d1")
        assert (removed.node_ids, removed.edge_ids) == ([only_d1.id], [edge.id])
        assert graph_store.edges_of([other.id]) == []

    def test_delete_document_stays_in_its_dataset(self, graph_store, dataset, other_dataset):
        mine, theirs = make_node(dataset, "Alice"), make_node(other_dataset, "Alice")
        graph_store.upsert_nodes([mine, theirs])
        removed = graph_store.delete_document(dataset, "d1")
        assert removed.node_ids == [mine.id]
        assert [n.id for n in graph_store.get_nodes([mine.id, theirs.id])] == [theirs.id]

    def test_delete_document_twice_or_unknown_removes_nothing(self, graph_store, dataset, triangle):
        graph_store.delete_document(dataset, "d1")
        again = graph_store.delete_document(dataset, "d1")
        unknown = graph_store.delete_document(dataset, "no-such-doc")
        assert again.node_ids == again.edge_ids == unknown.node_ids == unknown.edge_ids == []

    def test_items_without_support_survive_delete_document_not_delete_dataset(
        self, graph_store, dataset
    ):
        bare, alice = make_node(dataset, "Bare", doc=None), make_node(dataset, "Alice")
        graph_store.upsert_nodes([bare, alice])
        assert graph_store.delete_document(dataset, "d1").node_ids == [alice.id]
        assert [n.id for n in graph_store.get_nodes([bare.id])] == [bare.id]
        assert graph_store.delete_dataset(dataset).node_ids == [bare.id]
        assert graph_store.get_nodes([bare.id]) == []

    def test_delete_dataset_leaves_other_datasets_alone(
        self, graph_store, dataset, other_dataset, triangle
    ):
        nodes, edges = triangle
        theirs = [make_node(other_dataset, name) for name in ("Alice", "Bob", "Carol")]
        their_edge = make_edge(theirs[0], theirs[1], "KNOWS")
        graph_store.upsert_nodes(theirs)
        graph_store.upsert_edges([their_edge])

        removed = graph_store.delete_dataset(dataset)

        assert set(removed.node_ids) == ids(nodes) and set(removed.edge_ids) == ids(edges)
        assert graph_store.count(dataset) == {"edges": 0}
        assert graph_store.count(other_dataset) == {"Entity": 3, "edges": 1}
        assert ids(graph_store.find_nodes(other_dataset, "Entity")) == ids(theirs)
        assert ids(graph_store.edges_of(list(ids(theirs)))) == {their_edge.id}

    def test_delete_nodes_removes_them_and_their_edges_whatever_their_support(
        self, graph_store, dataset, triangle
    ):
        (alice, bob, carol), edges = triangle
        removed = graph_store.delete_nodes([alice.id, "no-such-id"])
        assert removed.node_ids == [alice.id]
        assert set(removed.edge_ids) == {e.id for e in edges if alice.id in (e.source, e.target)}
        assert ids(graph_store.get_nodes([alice.id, bob.id, carol.id])) == {bob.id, carol.id}
        assert graph_store.count(dataset) == {"Entity": 2, "edges": 1}
        assert graph_store.delete_nodes([alice.id]).node_ids == []

    # -- merging (entity resolution) ---------------------------------------------------------

    @pytest.fixture
    def namesakes(self, graph_store: GraphStore, dataset: str) -> tuple[Node, ...]:
        """Al (d2) to be merged into Alice (d1); Bob and Carol around them, all linked."""
        alice, al = (
            make_node(dataset, "Alice", also=[("d1", "c2")]),
            make_node(dataset, "Al", doc="d2"),
        )
        bob, carol = make_node(dataset, "Bob"), make_node(dataset, "Carol", doc="d3")
        graph_store.upsert_nodes([alice, al, bob, carol])
        graph_store.upsert_edges(
            [
                make_edge(alice, bob, "KNOWS", weight=1, note="alice's"),
                make_edge(al, bob, "KNOWS", doc="d2", weight=2),
                make_edge(carol, al, "LIKES", doc="d3"),
                make_edge(al, alice, "SAME_AS", doc="d2"),
            ]
        )
        return alice, al, bob, carol

    def test_merge_nodes_moves_support_and_edges_and_removes_the_members(
        self, graph_store, dataset, namesakes
    ):
        alice, al, bob, carol = namesakes
        al_edges = ids(graph_store.edges_of([al.id]))
        merged = graph_store.merge_nodes([al.id, alice.id], alice.id)
        assert merged.node_ids == [al.id] and set(merged.edge_ids) == al_edges
        assert {
            m: {(s.document_id, s.chunk_id) for s in ss} for m, ss in merged.support.items()
        } == {al.id: {("d2", "c1")}}
        [stored] = graph_store.get_nodes([alice.id])
        assert support_pairs(stored) == {("d1", "c1"), ("d1", "c2"), ("d2", "c1")}
        assert graph_store.get_nodes([al.id]) == []
        edges = {(e.source, e.name, e.target): e for e in graph_store.edges_of([alice.id])}
        # Al -SAME_AS-> Alice joined Alice to herself: dropped, not a self-loop.
        assert set(edges) == {(alice.id, "KNOWS", bob.id), (carol.id, "LIKES", alice.id)}
        knows = edges[(alice.id, "KNOWS", bob.id)]
        assert support_pairs(knows) == {("d1", "c1"), ("d2", "c1")}
        assert knows.properties == {"weight": 2, "note": "alice's"}
        assert support_pairs(edges[(carol.id, "LIKES", alice.id)]) == {("d3", "c1")}
        assert graph_store.count(dataset) == {"Entity": 3, "edges": 2}
        # Deleting a merged-away node's document removes only that support from the target.
        graph_store.delete_document(dataset, "d2")
        assert support_pairs(graph_store.get_nodes([alice.id])[0]) == {("d1", "c1"), ("d1", "c2")}
        assert _triples(graph_store.edges_of([alice.id])) == set(edges)

    def test_merging_again_or_merging_missing_nodes_changes_nothing(
        self, graph_store, dataset, namesakes
    ):
        alice, al, _, _ = namesakes
        graph_store.merge_nodes([al.id], alice.id)
        before = _snapshot(graph_store, dataset, ids(namesakes))
        assert graph_store.merge_nodes([al.id, "no-such-id"], alice.id) == Merged()
        assert graph_store.merge_nodes([], alice.id) == Merged()
        assert _snapshot(graph_store, dataset, ids(namesakes)) == before

    def test_merge_into_a_node_not_stored_raises_and_changes_nothing(
        self, graph_store, dataset, namesakes
    ):
        before = _snapshot(graph_store, dataset, ids(namesakes))
        with pytest.raises(ValueError, match="not a stored node"):
            graph_store.merge_nodes([namesakes[1].id], make_node(dataset, "Ghost").id)
        assert _snapshot(graph_store, dataset, ids(namesakes)) == before

    def test_an_edge_naming_a_merged_away_node_lands_on_the_node_it_went_into(
        self, graph_store, dataset, namesakes
    ):
        alice, al, bob, carol = namesakes
        alicia = make_node(dataset, "Alicia", doc="d4")
        graph_store.upsert_nodes([alicia])
        graph_store.merge_nodes([al.id], alice.id)
        graph_store.merge_nodes([alice.id], alicia.id)  # a chain: Al -> Alice -> Alicia
        late = [
            make_edge(al, carol, "WROTE_TO", doc="d5", since=2020),
            make_edge(carol, al, "LIKES", doc="d5"),  # joins an edge Al's merge moved
            make_edge(al, alicia, "SAME_AS", doc="d5"),  # Alicia to herself: dropped
        ]
        graph_store.upsert_edges(late)
        edges = {(e.source, e.name, e.target): e for e in graph_store.edges_of([alicia.id])}
        assert set(edges) == {
            (alicia.id, "KNOWS", bob.id),
            (alicia.id, "WROTE_TO", carol.id),
            (carol.id, "LIKES", alicia.id),
        }
        wrote = edges[(alicia.id, "WROTE_TO", carol.id)]
        assert wrote.properties == {"since": 2020} and support_pairs(wrote) == {("d5", "c1")}
        assert support_pairs(edges[(carol.id, "LIKES", alicia.id)]) == {("d3", "c1"), ("d5", "c1")}
        assert graph_store.get_nodes([al.id, alice.id]) == []
        with pytest.raises(ValueError, match="not stored nodes"):  # a redirect is no licence
            graph_store.upsert_edges([make_edge(al, make_node(dataset, "Ghost"))])

    def test_a_node_written_again_after_its_merge_keeps_its_own_edges(
        self, graph_store, dataset, namesakes
    ):
        alice, al, _, carol = namesakes
        graph_store.merge_nodes([al.id], alice.id)
        graph_store.upsert_nodes([al])
        graph_store.upsert_edges([make_edge(al, carol, "WROTE_TO")])
        assert _triples(graph_store.edges_of([al.id])) == {(al.id, "WROTE_TO", carol.id)}

    def test_redirects_go_with_their_dataset(self, graph_store, dataset, namesakes):
        alice, al, bob, _ = namesakes
        graph_store.merge_nodes([al.id], alice.id)
        graph_store.delete_dataset(dataset)
        graph_store.upsert_nodes([alice, bob])
        with pytest.raises(ValueError, match="not stored nodes"):
            graph_store.upsert_edges([make_edge(al, bob)])

    def test_edges_written_while_their_ends_are_merged_all_land(self, graph_store, dataset):
        # Writers name entities another thread is merging away: none fails, none is lost.
        people = [make_node(dataset, f"person {i}") for i in range(40)]
        twins = [make_node(dataset, f"twin {i}", doc="d2") for i in range(40)]
        places = [make_node(dataset, f"place {j}", doc="d3") for j in range(4)]
        graph_store.upsert_nodes(people + twins + places)
        errors: list[BaseException] = []
        start = threading.Barrier(3)

        def write(doc: str) -> None:
            try:
                start.wait()
                for i, person in enumerate(people):
                    edges = [make_edge(person, place, "VISITED", doc=doc) for place in places]
                    graph_store.upsert_edges(edges + [make_edge(places[i % 4], person, doc=doc)])
            except BaseException as err:  # re-raised by the assert below
                errors.append(err)

        def merge() -> None:
            try:
                start.wait()
                for person, twin in zip(people, twins, strict=True):
                    graph_store.merge_nodes([person.id], twin.id)
            except BaseException as err:
                errors.append(err)

        threads = [
            threading.Thread(target=f, args=a)
            for f, a in ((write, ("w1",)), (write, ("w2",)), (merge, ()))
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert graph_store.get_nodes(list(ids(people))) == []
        edges = graph_store.edges_of(list(ids(twins)), limit=10_000)
        assert len(edges) == 40 * 5
        assert all({doc for doc, _ in support_pairs(e)} == {"w1", "w2"} for e in edges)

    # -- volume ------------------------------------------------------------------------------

    def test_a_large_batch_is_written(self, graph_store, dataset):
        nodes, edges = make_graph(dataset, 5_000, 10_000)
        graph_store.upsert_nodes(nodes)
        graph_store.upsert_edges(edges)
        assert graph_store.count(dataset) == {"Entity": 5_000, "edges": 10_000}
        sub = graph_store.neighbourhood([nodes[0].id], hops=2, limit=50)
        assert nodes[0].id in ids(sub.nodes) and 1 < len(sub.nodes) <= 50
        removed = graph_store.delete_document(dataset, "d1")
        assert (len(removed.node_ids), len(removed.edge_ids)) == (5_000, 10_000)

    # -- time ranges (find_in_time) ------------------------------------------------------------

    @pytest.fixture
    def march_2019(self, graph_store: GraphStore, dataset: str) -> dict[str, Node]:
        """Time nodes around March 2019 (the window of the tests), and two that are not time."""
        nodes = _time_nodes(dataset)
        graph_store.upsert_nodes(list(nodes.values()))
        return nodes

    def test_find_in_time_returns_what_overlaps_the_range_earliest_first(
        self, graph_store, dataset, march_2019
    ):
        found = graph_store.find_in_time([dataset], TIME_TYPES, start=MARCH[0], end=MARCH[1])
        # Overlap, not containment: the 2018-2020 interval and the 21st century reach into
        # March; the start bound is inclusive and the end bound exclusive, like the spans.
        assert [n.name for n in found] == [
            "before 2019-03-02",
            "1900 - 2100",
            "21st century",
            "2018 - 2020",
            "2019",
            "2019-03-01",
            "2019-03-11",
            "from 2019-03-31",
        ]
        assert found[1].properties == march_2019["1900 - 2100"].properties
        assert support_pairs(found[0]) == {("d1", "c1")}

    def test_find_in_time_with_open_ranges_and_types(self, graph_store, dataset, march_2019):
        after = graph_store.find_in_time([dataset], TIME_TYPES, start=_at(2019, 4, 1))
        assert [n.name for n in after] == [
            "1900 - 2100",
            "21st century",
            "2018 - 2020",
            "2019",
            "from 2019-03-31",
            "2019-04-01",
            "from 2019-04-01",
        ]
        before = graph_store.find_in_time([dataset], ["Interval"], end=_at(2000, 1, 1))
        assert [n.name for n in before] == ["before 2000", "before 2019-03-02", "1900 - 2100"]
        every = graph_store.find_in_time([dataset], [*TIME_TYPES, "Event", "Entity"])
        timed = [n for name, n in march_2019.items() if name not in UNTIMED]
        assert sorted(n.id for n in every) == sorted(n.id for n in timed)
        assert every[0].name == "before 2000" and every[-1].name == "from 2019-04-01"
        assert graph_store.find_in_time([dataset], ["Nothing"]) == []

    def test_find_in_time_keeps_to_its_datasets_and_limit(
        self, graph_store, dataset, other_dataset, march_2019
    ):
        days = [
            make_node(other_dataset, f"day {d}", "Timestamp", **_span((2019, 3, d), 1))
            for d in range(2, 29)
        ]
        graph_store.upsert_nodes(days)
        window = {"start": MARCH[0], "end": MARCH[1]}
        mine = graph_store.find_in_time([dataset], TIME_TYPES, **window)
        assert all(n.dataset == dataset for n in mine) and len(mine) == 8
        theirs = graph_store.find_in_time([other_dataset], TIME_TYPES, limit=5, **window)
        assert [n.name for n in theirs] == [f"day {d}" for d in range(2, 7)]
        both = graph_store.find_in_time([dataset, other_dataset], TIME_TYPES, limit=7, **window)
        assert [n.name for n in both] == [n.name for n in mine[:6]] + ["day 2"]
        assert graph_store.find_in_time([dataset], TIME_TYPES, limit=0, **window) == []
        with pytest.raises(ValueError, match="empty"):
            graph_store.find_in_time([dataset], TIME_TYPES, start=MARCH[1], end=MARCH[0])
        with pytest.raises(ValueError, match="limit"):
            graph_store.find_in_time([dataset], TIME_TYPES, limit=-1)

    def test_find_in_time_follows_rewrites_and_deletes(self, graph_store, dataset, march_2019):
        window = {"start": MARCH[0], "end": MARCH[1]}

        def names() -> set[str]:
            return {n.name for n in graph_store.find_in_time([dataset], TIME_TYPES, **window)}

        moved = march_2019["2019-03-11"].model_copy(update={"properties": _span((2020, 1, 1), 1)})
        graph_store.upsert_nodes([moved])  # its time changes: it leaves the window
        assert "2019-03-11" not in names()
        graph_store.upsert_nodes([march_2019["2019-03-11"]])
        assert "2019-03-11" in names()
        graph_store.delete_nodes([march_2019["2019"].id])
        assert "2019" not in names() and "2019-03-11" in names()
        graph_store.delete_document(dataset, "d2")  # supported "2018 - 2020" alone
        assert "2018 - 2020" not in names() and "21st century" in names()
        graph_store.delete_dataset(dataset)
        assert names() == set()


TIME_TYPES = ["Timestamp", "Interval"]
UNTIMED = ("no time", "a number, not a time")
DAY = 86_400


def _at(year: int, month: int, day: int) -> int:
    """Seconds since 1970 of a day's start (the unit of start_epoch / end_epoch)."""
    return days_from_civil(year, month, day) * DAY


MARCH = (_at(2019, 3, 1), _at(2019, 4, 1))


def _span(first: tuple[int, int, int] | None, days: int | None = None, *, until=None) -> dict:
    """start_epoch / end_epoch properties: `days` from `first`, or up to `until`; None is open."""
    props = {}
    if first is not None:
        props["start_epoch"] = _at(*first)
    if until is not None:
        props["end_epoch"] = _at(*until)
    elif days is not None and first is not None:
        props["end_epoch"] = _at(*first) + days * DAY
    return props


def _time_nodes(dataset: str) -> dict[str, Node]:
    """Spans of every kind around March 2019, by name."""
    spans = {
        "2019-03-11": ("Timestamp", _span((2019, 3, 11), 1)),
        "2019-03-01": ("Timestamp", _span((2019, 3, 1), 1)),
        "2019-02": ("Timestamp", _span((2019, 2, 1), until=(2019, 3, 1))),  # ends where it starts
        "2019-04-01": ("Timestamp", _span((2019, 4, 1), 1)),  # starts where the window ends
        "2019": ("Timestamp", _span((2019, 1, 1), until=(2020, 1, 1))),
        "20th century": ("Timestamp", _span((1901, 1, 1), until=(2001, 1, 1))),
        "21st century": ("Timestamp", _span((2001, 1, 1), until=(2101, 1, 1))),
        "2018 - 2020": ("Interval", _span((2018, 1, 1), until=(2021, 1, 1))),
        "1900 - 2100": ("Interval", _span((1900, 1, 1), until=(2101, 1, 1))),
        "before 2000": ("Interval", _span(None, until=(2000, 1, 1))),
        "before 2019-03-02": ("Interval", _span(None, until=(2019, 3, 2))),
        "from 2019-03-31": ("Interval", _span((2019, 3, 31))),
        "from 2019-04-01": ("Interval", _span((2019, 4, 1))),
        "an event in March": ("Event", _span((2019, 3, 5), 1)),  # a type not asked for
    }
    nodes = {
        name: make_node(dataset, name, kind, doc="d2" if name == "2018 - 2020" else "d1", **props)
        for name, (kind, props) in spans.items()
    }
    nodes["no time"] = make_node(dataset, "no time", "Timestamp", label="2019-03-11")
    nodes["a number, not a time"] = make_node(dataset, "Ann", "Timestamp", start_epoch="2019")
    return nodes
