"""Facts over time, as every GraphStore adapter must keep them (mixed into GraphStoreContract).

The store keeps each edge's claims and derives, inside the transaction that changed them, the
validity of every fact of the subjects touched (core/stores/fact_intervals.py): the same
spans whatever order the facts came in, concurrently or not, and again after a deletion.
"""

from __future__ import annotations

import random
import threading

from core.models.facts import DERIVED, ENDS_GROUP, FACT_GROUP, FACT_SIDE
from core.models.graph import Edge, FactClaim, Node
from core.ports import GraphStore
from core.temporal import days_from_civil
from tests.factories import make_node


def year(y: int) -> int:
    return days_from_civil(y, 1, 1)


def fact(
    source: Node,
    target: Node,
    name: str,
    doc: str,
    start: int | None = None,
    end: int | None = None,
    *,
    group: str = "ceo",
    side: str = "target",
) -> Edge:
    """A relationship edge claimed by one document's chunk, in a functional group."""
    props = {FACT_GROUP: group, FACT_SIDE: side} if group else {}
    return Edge(
        source=source.id,
        target=target.id,
        name=name,
        dataset=source.dataset,
        properties={"description": f"{name} ({doc})", **props},
        support=[{"document_id": doc, "chunk_id": f"{doc}-c1"}],  # type: ignore[list-item]
        claims=[FactClaim(document_id=doc, chunk_id=f"{doc}-c1", start=start, end=end)],
    )


def validity(store: GraphStore, nodes: list[Node]) -> dict[tuple[str, str, str], tuple]:
    """World-time validity of the edges touching the nodes, by (source name, relation, target
    name); system times left out (they differ from run to run)."""
    names = {n.id: n.name for n in nodes}
    found = {}
    for e in store.edges_of([n.id for n in nodes]):
        p = e.properties
        spans = tuple(tuple(s) for s in p.get("valid_spans") or ())
        ender = p.get("superseded_by")
        found[(names.get(e.source), e.name, names.get(e.target))] = (
            p.get("valid_from"),
            p.get("valid_to"),
            spans,
            ender,
        )
    return found


class FactStoreContract:
    """Contract tests for facts over time (claims, derived validity) of a GraphStore."""

    def people(self, store: GraphStore, dataset: str, *names: str) -> list[Node]:
        nodes = [make_node(dataset, name, doc="d0") for name in names]  # outlive the facts
        store.upsert_nodes(nodes)
        return nodes

    def history(self, nodes: list[Node]) -> list[Edge]:
        """Holbeck's CEOs: Mara from 2019, Teo from 2023, Lena from 2021 until 2022."""
        mara, teo, lena, holbeck = nodes
        return [
            fact(mara, holbeck, "ceo_of", "d1", year(2019)),
            fact(teo, holbeck, "ceo_of", "d2", year(2023)),
            fact(lena, holbeck, "executive_of", "d3", year(2021), year(2022)),
            fact(mara, holbeck, "ceo_of", "d4", year(2020)),  # Mara again, in another doc
        ]

    def test_a_later_fact_supersedes_an_earlier_one(self, graph_store, dataset):
        nodes = self.people(graph_store, dataset, "Mara", "Teo", "Lena", "Holbeck")
        graph_store.upsert_edges(self.history(nodes))
        found = validity(graph_store, nodes)
        lena_fact = self.history(nodes)[2]
        mara = found[("Mara", "ceo_of", "Holbeck")]
        assert mara[:2] == ("2019-01-01", "2021-01-01")
        assert found[("Lena", "executive_of", "Holbeck")][:2] == ("2021-01-01", "2022-01-01")
        assert found[("Teo", "ceo_of", "Holbeck")][:2] == ("2023-01-01", None)
        assert mara[3] == lena_fact.id  # Lena, not Teo, ended Mara's span

    def test_any_order_of_writes_ends_in_the_same_validity(
        self, graph_store, dataset, other_dataset
    ):
        runs = []
        for n, ds in enumerate((dataset, other_dataset)):
            nodes = self.people(graph_store, ds, "Mara", "Teo", "Lena", "Holbeck")
            edges = self.history(nodes)
            random.Random(n).shuffle(edges)
            for edge in edges if n else [edges]:  # one batch, then one edge per write
                graph_store.upsert_edges(edge if isinstance(edge, list) else [edge])
            runs.append({k: v[:3] for k, v in validity(graph_store, nodes).items()})
        assert runs[0] == runs[1]

    def test_deleting_the_document_that_ended_a_fact_restores_it(self, graph_store, dataset):
        nodes = self.people(graph_store, dataset, "Mara", "Teo", "Lena", "Holbeck")
        graph_store.upsert_edges(self.history(nodes))
        graph_store.delete_document(dataset, "d3")  # Lena's
        found = validity(graph_store, nodes)
        assert ("Lena", "executive_of", "Holbeck") not in found
        assert found[("Mara", "ceo_of", "Holbeck")][:2] == ("2019-01-01", "2023-01-01")
        graph_store.delete_document(dataset, "d2")  # Teo's
        assert validity(graph_store, nodes)[("Mara", "ceo_of", "Holbeck")][:2] == (
            "2019-01-01",
            None,
        )

    def test_a_fact_losing_one_documents_claim_keeps_the_others(self, graph_store, dataset):
        nodes = self.people(graph_store, dataset, "Mara", "Teo", "Lena", "Holbeck")
        graph_store.upsert_edges(self.history(nodes))
        graph_store.delete_document(dataset, "d1")  # Mara's 2019 claim; d4 says 2020
        [mara] = graph_store.edges_of([nodes[0].id], claims=True)
        assert [c.document_id for c in mara.claims] == ["d4"]
        assert mara.properties["valid_from"] == "2020-01-01"

    def test_claims_are_read_back_when_asked_and_keep_when_first_recorded(
        self, graph_store, dataset
    ):
        mara, holbeck = self.people(graph_store, dataset, "Mara", "Holbeck")
        edge = fact(mara, holbeck, "ceo_of", "d1", year(2019))
        graph_store.upsert_edges([edge])
        [first] = graph_store.edges_of([mara.id], claims=True)
        [claim] = first.claims
        assert (claim.document_id, claim.chunk_id, claim.start, claim.end) == (
            "d1",
            "d1-c1",
            year(2019),
            None,
        )
        assert claim.recorded_at is not None and first.properties["recorded_at"] > 0
        graph_store.upsert_edges([edge])
        [again] = graph_store.edges_of([mara.id], claims=True)
        assert again.claims == first.claims and again.properties == first.properties
        assert graph_store.edges_of([mara.id])[0].claims == []

    def test_a_restatement_dated_by_its_document_keeps_its_kind(self, graph_store, dataset):
        mara, teo, holbeck = self.people(graph_store, dataset, "Mara", "Teo", "Holbeck")
        later = fact(mara, holbeck, "ceo_of", "d3", year(2024))
        later.claims[0].from_document = True  # "Mara is the CEO", in a 2024 document
        graph_store.upsert_edges([fact(mara, holbeck, "ceo_of", "d1", year(2019)), later])
        graph_store.upsert_edges([fact(teo, holbeck, "ceo_of", "d2", year(2023))])
        [edge] = graph_store.edges_of([mara.id], claims=True)
        assert sorted((c.document_id, c.from_document) for c in edge.claims) == [
            ("d1", False),
            ("d3", True),
        ]
        assert edge.properties["valid_to"] == "2023-01-01"  # the restatement restarts nothing

    def test_an_ends_fact_closes_the_same_pairs_fact(self, graph_store, dataset):
        jon, altamira = self.people(graph_store, dataset, "Jon", "Altamira")
        job = fact(jon, altamira, "works_for", "d1", year(2015), group="employer", side="source")
        left = fact(jon, altamira, "left", "d2", year(2018), group=ENDS_GROUP, side="both")
        graph_store.upsert_edges([left])
        graph_store.upsert_edges([job])
        found = validity(graph_store, [jon, altamira])
        assert found[("Jon", "works_for", "Altamira")][:2] == ("2015-01-01", "2018-01-01")

    def test_facts_keyed_on_both_ends_hold_where_both_do(self, graph_store, dataset):
        ann, bob, cy = self.people(graph_store, dataset, "Ann", "Bob", "Cy")
        first = fact(ann, bob, "married", "d1", year(2010), group="spouse", side="both")
        second = fact(cy, ann, "married", "d2", year(2020), group="spouse", side="both")
        graph_store.upsert_edges([second])
        graph_store.upsert_edges([first])
        found = validity(graph_store, [ann, bob, cy])
        assert found[("Ann", "married", "Bob")][:2] == ("2010-01-01", "2020-01-01")
        assert found[("Cy", "married", "Ann")][:2] == ("2020-01-01", None)

    def test_merging_two_subjects_joins_their_facts(self, graph_store, dataset):
        mara, teo, holbeck, foods = self.people(
            graph_store, dataset, "Mara", "Teo", "Holbeck", "Holbeck Foods"
        )
        graph_store.upsert_edges([fact(mara, holbeck, "ceo_of", "d1", year(2019))])
        graph_store.upsert_edges([fact(teo, foods, "ceo_of", "d2", year(2023))])
        assert validity(graph_store, [mara])[("Mara", "ceo_of", None)][1] is None
        graph_store.merge_nodes([foods.id], into=holbeck.id)
        found = validity(graph_store, [mara, teo, holbeck])
        assert found[("Mara", "ceo_of", "Holbeck")][:2] == ("2019-01-01", "2023-01-01")
        [moved] = graph_store.edges_of([teo.id], claims=True)
        assert [c.document_id for c in moved.claims] == ["d2"]

    def test_deleting_a_node_derives_its_neighbours_facts_again(self, graph_store, dataset):
        mara, teo, holbeck = self.people(graph_store, dataset, "Mara", "Teo", "Holbeck")
        graph_store.upsert_edges(
            [
                fact(mara, holbeck, "ceo_of", "d1", year(2019)),
                fact(teo, holbeck, "ceo_of", "d2", year(2023)),
            ]
        )
        graph_store.delete_nodes([teo.id])
        assert validity(graph_store, [mara])[("Mara", "ceo_of", None)][:2] == ("2019-01-01", None)

    def test_a_fact_in_no_group_holds_from_its_earliest_claim(self, graph_store, dataset):
        a, b = self.people(graph_store, dataset, "A", "B")
        graph_store.upsert_edges([fact(a, b, "founded", "d2", year(2001), group="")])
        graph_store.upsert_edges([fact(a, b, "founded", "d1", year(1999), group="")])
        assert validity(graph_store, [a, b])[("A", "founded", "B")][:2] == ("1999-01-01", None)
        graph_store.delete_document(dataset, "d1")
        assert validity(graph_store, [a, b])[("A", "founded", "B")][:2] == ("2001-01-01", None)

    def test_edges_without_claims_get_no_validity(self, graph_store, dataset):
        a, b = self.people(graph_store, dataset, "A", "B")
        graph_store.upsert_edges([Edge(source=a.id, target=b.id, name="knows", dataset=dataset)])
        [edge] = graph_store.edges_of([a.id])
        assert not set(DERIVED) & edge.properties.keys()

    def test_concurrent_writers_of_one_subject_end_in_the_serial_result(
        self, graph_store, dataset, other_dataset
    ):
        people = [f"P{i}" for i in range(8)]
        serial = self.people(graph_store, other_dataset, *people, "Holbeck")
        edges = [
            fact(p, serial[-1], "ceo_of", f"d{i}", year(2000 + i))
            for i, p in enumerate(serial[:-1])
        ]
        graph_store.upsert_edges(edges)
        expected = {k: v[:3] for k, v in validity(graph_store, serial).items()}
        nodes = self.people(graph_store, dataset, *people, "Holbeck")
        batches = [
            [fact(p, nodes[-1], "ceo_of", f"d{i}", year(2000 + i))]
            for i, p in enumerate(nodes[:-1])
        ]
        errors: list[BaseException] = []

        def write(batch: list[Edge]) -> None:
            try:
                graph_store.upsert_edges(batch)
            except BaseException as err:  # noqa: BLE001 - reported by the assertion below
                errors.append(err)

        threads = [threading.Thread(target=write, args=(b,)) for b in reversed(batches)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors
        assert {k: v[:3] for k, v in validity(graph_store, nodes).items()} == expected
