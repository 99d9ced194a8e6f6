"""The CypherRunner contract: each adapter's tests inherit it and provide `cypher_runner` (the
runner under test), `graph` (a GraphStore writing to the same database) and `dataset` (a
dataset of the test's own, deleted afterwards).

Rows come back as plain values: what a user of CYPHER sees as JSON and what NATURAL_LANGUAGE
reads node ids from. Nothing written through the runner ever reaches the database.
"""

from __future__ import annotations

import json

import pytest

from core.models.graph import Edge, Node, Support
from core.ports import CypherError, CypherRunner, GraphStore, StoreError
from tests.contracts.state_store import _run_threads


def _seed(graph: GraphStore, dataset: str) -> tuple[Node, Node]:
    """Two entities, one supported by a chunk, and a WORKS_AT edge between them."""
    support = [Support(document_id=f"doc-{dataset}", chunk_id=f"chunk-{dataset}")]
    marie = Node(
        id=f"marie-{dataset}",
        type="Entity",
        dataset=dataset,
        name="Marie Curie",
        properties={"born": 1867, "fields": ["physics", "chemistry"], "note": {"prize": 2}},
        support=support,
    )
    sorbonne = Node(id=f"sorbonne-{dataset}", type="Entity", dataset=dataset, name="Sorbonne")
    graph.upsert_nodes([marie, sorbonne])
    graph.upsert_edges(
        [Edge(source=marie.id, target=sorbonne.id, name="WORKS_AT", dataset=dataset)]
    )
    return marie, sorbonne


class CypherRunnerContract:
    """Behaviour every CypherRunner adapter must show."""

    def test_is_a_cypher_runner(self, cypher_runner: CypherRunner) -> None:
        assert isinstance(cypher_runner, CypherRunner)

    def test_values_and_parameters_come_back_plain(self, cypher_runner: CypherRunner) -> None:
        rows = cypher_runner.run_read(
            "RETURN $text AS text, $n + 1 AS n, [1.5, 2.5] AS list, {a: [true, null]} AS map, "
            "date('2024-05-01') AS day",
            {"text": "héllo", "n": 41},
            10,
        )
        assert rows == [
            {
                "text": "héllo",
                "n": 42,
                "list": [1.5, 2.5],
                "map": {"a": [True, None]},
                "day": "2024-05-01",
            }
        ]
        json.dumps(rows)  # JSON-ready as they are

    def test_at_most_limit_rows_in_the_querys_order(self, cypher_runner: CypherRunner) -> None:
        query = "UNWIND range(1, 1000) AS i RETURN i ORDER BY i DESC"
        assert cypher_runner.run_read(query, {}, 3) == [{"i": 1000}, {"i": 999}, {"i": 998}]
        assert cypher_runner.run_read("UNWIND [] AS i RETURN i", {}, 3) == []

    def test_nodes_relationships_and_paths_are_plain_maps(
        self, cypher_runner: CypherRunner, graph: GraphStore, dataset: str
    ) -> None:
        marie, sorbonne = _seed(graph, dataset)
        [row] = cypher_runner.run_read(
            "MATCH p = (a:Entity {dataset: $d})-[r]->(b) RETURN a, r, p", {"d": dataset}, 10
        )
        node = row["a"]
        assert node["id"] == marie.id and node["name"] == "Marie Curie"
        assert "Entity" in node["labels"] and node["dataset"] == dataset
        assert node["born"] == 1867 and node["fields"] == ["physics", "chemistry"]
        assert not [key for key in node if key.startswith("_")]  # the store's bookkeeping
        edge = row["r"]
        assert (edge["start"], edge["end"], edge["name"]) == (marie.id, sorbonne.id, "WORKS_AT")
        assert not [key for key in edge if key.startswith("_")]
        assert [n["id"] for n in row["p"]["nodes"]] == [marie.id, sorbonne.id]

    def test_writes_are_refused_and_change_nothing(
        self, cypher_runner: CypherRunner, graph: GraphStore, dataset: str
    ) -> None:
        marie, _ = _seed(graph, dataset)
        before = graph.count(dataset)
        writes = [
            ("CREATE (n:Node {id: 'x', dataset: $d}) RETURN n", {"d": dataset}),
            ("MATCH (n:Node {id: $id}) SET n.name = 'changed' RETURN n", {"id": marie.id}),
            ("MATCH (n:Node {id: $id}) DETACH DELETE n", {"id": marie.id}),
        ]
        for query, params in writes:
            with pytest.raises(CypherError):
                cypher_runner.run_read(query, params, 10)
        assert graph.count(dataset) == before
        [stored] = graph.get_nodes([marie.id])
        assert stored.name == "Marie Curie"

    def test_a_refused_query_says_what_is_wrong(self, cypher_runner: CypherRunner) -> None:
        with pytest.raises(CypherError, match="not valid Cypher") as caught:
            cypher_runner.run_read("MATCH (n RETURN n", {}, 10)
        assert isinstance(caught.value, ValueError)  # the caller's mistake, not the store's
        assert "Invalid input" in (caught.value.detail or "")  # the database's words, kept
        with pytest.raises(CypherError, match="(?i)procedure"):
            cypher_runner.run_read("CALL no.such.procedure()", {}, 10)

    def test_threads_share_one_runner(self, cypher_runner: CypherRunner) -> None:
        # The runtime keeps one runner per process: API requests and worker threads share it.
        seen: dict[int, list[list[dict[str, int]]]] = {}

        def work(worker: int) -> None:
            seen[worker] = [
                cypher_runner.run_read("UNWIND range($w, $w + 2) AS i RETURN i", {"w": w}, 5)
                for w in range(worker * 100, worker * 100 + 10)
            ]

        _run_threads(6, work)
        for worker, rows in seen.items():
            starts = range(worker * 100, worker * 100 + 10)
            assert rows == [[{"i": w}, {"i": w + 1}, {"i": w + 2}] for w in starts]

    def test_the_runner_serves_many_queries_and_fails_once_closed(
        self, cypher_runner: CypherRunner
    ) -> None:
        for i in range(20):  # one connection set-up serves every query
            assert cypher_runner.run_read("RETURN $i AS i", {"i": i}, 1) == [{"i": i}]
        cypher_runner.close()
        with pytest.raises(StoreError, match="closed"):
            cypher_runner.run_read("RETURN 1 AS one", {}, 1)
