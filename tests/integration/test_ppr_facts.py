"""GRAPH_PPR's passages seen through the search's time (retrieval/ppr/facts.py), on the
embedded graph store: the passage holding the fact the question asks about, as it holds then,
ranks first; passages whose facts were superseded are demoted, not dropped."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from core.stores.sqlite.graph import SQLiteGraphStore
from retrieval.fact_view import FactView
from retrieval.ppr.facts import held_facts
from tests.contracts.fact_store import fact, year
from tests.factories import make_node

pytestmark = pytest.mark.integration


@dataclass
class Read:
    """What GRAPH_PPR's neighbourhood read (retrieval/ppr/facts.py `Read`)."""

    names: dict[str, str]
    named: set[str]
    pairs: list[tuple[str, str]] = field(default_factory=list)

    def mentioned(self) -> list[tuple[str, str]]:
        return self.pairs


@pytest.fixture
def store(tmp_path: Path):
    graph = SQLiteGraphStore(tmp_path / "graph.db")
    mara, teo, holbeck = (make_node("ds", n, doc="d0") for n in ("Mara", "Teo", "Holbeck"))
    graph.upsert_nodes([mara, teo, holbeck])
    # d1's chunk says Mara became CEO in 2019; d2's that Teo did in 2023.
    graph.upsert_edges(
        [
            fact(mara, holbeck, "ceo_of", "d1", year(2019)),
            fact(teo, holbeck, "ceo_of", "d2", year(2023)),
        ]
    )
    yield (
        graph,
        Read(
            {n.id: n.name for n in (mara, teo, holbeck)},
            {holbeck.id},
            [
                (c, e.id)
                for c, e in (
                    ("d1-c1", mara),
                    ("d2-c1", teo),
                    ("d1-c1", holbeck),
                    ("d2-c1", holbeck),
                )
            ],
        ),
    )
    graph.close()


def test_the_passage_of_the_fact_that_holds_now_ranks_first(store):
    graph, read = store
    scores = {"d1-c1": 0.9, "d2-c1": 0.3, "other": 0.5}
    lines = held_facts(graph, FactView(focus=frozenset({"ceo"})), scores, read, pool=10)
    assert scores["d2-c1"] > 1.0 > scores["other"] == 0.5 > scores["d1-c1"] > 0
    assert lines["d2-c1"] == ["Teo —ceo of [since 2023-01-01]→ Holbeck"]
    assert lines["d1-c1"] == ["Mara —ceo of [2019-01-01 – 2023-01-01, superseded]→ Holbeck"]


def test_as_of_a_past_year_the_then_current_fact_ranks_first(store):
    graph, read = store
    scores = {"d1-c1": 0.3, "d2-c1": 0.9}
    view = FactView.parse(as_of="2020")
    held_facts(graph, FactView(view.as_of, focus=frozenset({"ceo"})), scores, read, pool=10)
    assert scores["d1-c1"] > 1.0 > scores["d2-c1"]


def test_without_a_named_subject_of_the_facts_nothing_moves(store):
    graph, read = store
    scores = {"d1-c1": 0.9, "d2-c1": 0.3}
    read.named = {"someone-else"}
    assert held_facts(graph, FactView(focus=frozenset({"ceo"})), scores, read, pool=10) == {}
    assert scores == {"d1-c1": 0.9, "d2-c1": 0.3}
