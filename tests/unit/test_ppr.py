"""Personalised PageRank on hand-made graphs, and the bounded neighbourhood GRAPH_PPR reads."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from core.models.graph import Edge, Node, Support, alias_id, entity_id, stable_id
from core.models.vocabulary import ALIAS, ALIAS_OF, MENTIONS
from core.stores.sqlite.graph import SQLiteGraphStore
from retrieval.ppr.neighbourhood import Neighbourhood
from retrieval.ppr.pagerank import WeightedGraph, personalised_pagerank
from retrieval.ppr.params import PPRParams
from retrieval.ppr.retriever import PPRRetriever
from retrieval.query_names import query_ngrams

pytestmark = pytest.mark.unit


def path_graph(names: str) -> WeightedGraph:
    graph = WeightedGraph()
    for a, b in zip(names, names[1:], strict=False):
        graph.link(a, b, 1.0, 1.0)
    return graph


def test_scores_fall_with_distance_from_the_seed() -> None:
    scores = personalised_pagerank(path_graph("ABCDE"), {"A": 1.0}, damping=0.5)
    ranking = sorted(scores, key=lambda n: -scores[n])
    assert ranking == list("ABCDE")


def test_matches_the_closed_form_solution() -> None:
    """PPR is r = (1 - d) p (I - d P)^-1 for the row-stochastic transition matrix P."""
    graph = WeightedGraph()
    edges = [("a", "b", 1.0), ("b", "c", 2.0), ("c", "a", 1.0), ("c", "d", 3.0), ("d", "b", 1.0)]
    for s, t, w in edges:
        graph.link(s, t, w, 0.0)
    seeds = {"a": 0.7, "d": 0.3}
    ours = personalised_pagerank(graph, seeds, damping=0.85, iterations=500, tolerance=1e-12)
    names = "abcd"
    matrix = np.zeros((4, 4))
    for s, t, w in edges:
        matrix[names.index(s), names.index(t)] = w
    matrix /= matrix.sum(axis=1, keepdims=True)
    p = np.array([seeds.get(n, 0.0) for n in names])
    exact = 0.15 * p @ np.linalg.inv(np.eye(4) - 0.85 * matrix)
    assert [ours[n] for n in names] == pytest.approx(list(exact), abs=1e-6)
    assert max(ours, key=lambda n: ours[n]) == "b"  # fed by a, c and d


def test_damping_zero_returns_the_seeds_and_more_damping_reaches_further() -> None:
    graph = path_graph("ABCD")
    still = personalised_pagerank(graph, {"A": 2.0}, damping=0.0)
    assert still == {"A": 1.0, "B": 0.0, "C": 0.0, "D": 0.0}
    low = personalised_pagerank(graph, {"A": 1.0}, damping=0.3)
    high = personalised_pagerank(graph, {"A": 1.0}, damping=0.8)
    assert high["D"] > low["D"] and high["A"] < low["A"]


def test_a_hub_cut_short_leaks_mass_instead_of_concentrating_it() -> None:
    graph = path_graph("SHX")
    plain = personalised_pagerank(graph, {"S": 1.0}, damping=0.5)
    graph.normalisers[graph.index["H"]] = 100.0  # H has 100 edges in the full graph
    hub = personalised_pagerank(graph, {"S": 1.0}, damping=0.5)
    assert hub["X"] < plain["X"] / 10


def test_bad_damping_and_empty_seeds() -> None:
    with pytest.raises(ValueError, match="damping"):
        personalised_pagerank(path_graph("AB"), {"A": 1.0}, damping=1.0)
    assert personalised_pagerank(path_graph("AB"), {"Z": 1.0}, damping=0.5) == {
        "A": 0.0,
        "B": 0.0,
    }


def test_query_ngrams_keep_names_and_drop_question_words() -> None:
    spans = query_ngrams("Who founded the band whose singer is Lilu's brother, in Van Nuys?")
    assert "Van Nuys" in spans and "Lilu" in spans
    assert spans.index("Van Nuys") < spans.index("Nuys")  # longest first
    assert not any(s.split()[0].lower() in {"who", "the", "in"} for s in spans)


# -- the bounded neighbourhood, read from a real SQLite graph store ---------------------------

DS = "ppr"


def chunk(name: str) -> Node:
    cid = stable_id("chunk", DS, name)
    support = [Support(document_id="d-" + name, chunk_id=cid)]
    return Node(id=cid, type="DocumentChunk", dataset=DS, support=support, properties={})


def mentions(store: SQLiteGraphStore, chunk_node: Node, *names: str) -> None:
    support = chunk_node.support
    entities = [
        Node(id=entity_id(DS, n), type="Entity", dataset=DS, name=n, support=support) for n in names
    ]
    store.upsert_nodes([chunk_node, *entities])
    store.upsert_edges(
        [
            Edge(source=chunk_node.id, target=e.id, name=MENTIONS, dataset=DS, support=support)
            for e in entities
        ]
    )


@pytest.fixture
def store(tmp_path: Path):
    """c0 -A- c1 -B- c2 -C- c3 (a chain of chunks sharing one entity each) and a hub H
    mentioned by c0 and 30 filler chunks."""
    graph = SQLiteGraphStore(tmp_path / "graph.db")
    chain = [chunk(f"c{i}") for i in range(4)]
    mentions(graph, chain[0], "A", "Hub")
    mentions(graph, chain[1], "A", "B")
    mentions(graph, chain[2], "B", "C")
    mentions(graph, chain[3], "C")
    for i in range(30):
        mentions(graph, chunk(f"filler{i}"), "Hub")
    yield graph
    graph.close()


def test_expansion_stops_after_the_hops_asked(store: SQLiteGraphStore) -> None:
    c = [chunk(f"c{i}").id for i in range(4)]
    two = Neighbourhood(store, PPRParams(hops=2, entity_fanout=5))
    two.expand(chunks=[c[0]], entities=[])
    assert c[1] in two.chunks and c[2] not in two.chunks
    four = Neighbourhood(store, PPRParams(hops=4, entity_fanout=5))
    four.expand(chunks=[c[0]], entities=[])
    assert {c[1], c[2]} <= four.chunks and c[3] not in four.chunks


def test_hubs_are_not_expanded_and_weigh_less(store: SQLiteGraphStore) -> None:
    hood = Neighbourhood(store, PPRParams(hops=2, entity_fanout=5))
    hood.expand(chunks=[chunk("c0").id], entities=[])
    hub, a = entity_id(DS, "Hub"), entity_id(DS, "A")
    assert hood.degree(hub) == 31 and hood.degree(a) == 2
    assert not any(chunk(f"filler{i}").id in hood.chunks for i in range(30))
    assert hood.specificity(hub) < hood.specificity(a)
    wide = Neighbourhood(store, PPRParams(hops=2, entity_fanout=100))
    wide.expand(chunks=[chunk("c0").id], entities=[])
    assert all(chunk(f"filler{i}").id in wide.chunks for i in range(30))


def test_expansion_respects_max_nodes(store: SQLiteGraphStore) -> None:
    params = PPRParams(hops=3, entity_fanout=100, max_nodes=12)
    hood = Neighbourhood(store, params)
    hood.expand(chunks=[chunk("c0").id], entities=[entity_id(DS, "Hub")])
    assert len(hood.chunks) + len(hood.entities) <= params.max_nodes
    assert len(hood.weighted) <= params.max_nodes


def test_specificity_exponent_zero_treats_hubs_like_others(store: SQLiteGraphStore) -> None:
    hood = Neighbourhood(store, replace(PPRParams(), specificity=0.0))
    hood.expand(chunks=[chunk("c0").id], entities=[])
    assert hood.specificity(entity_id(DS, "Hub")) == 1.0


def test_the_query_names_entities_by_name_or_by_alias(store: SQLiteGraphStore) -> None:
    nyc = Node(id=alias_id(DS, "Big Apple"), type=ALIAS, dataset=DS, name="Big Apple")
    target = entity_id(DS, "A")
    store.upsert_nodes([nyc])
    store.upsert_edges([Edge(source=nyc.id, target=target, name=ALIAS_OF, dataset=DS)])
    retriever = PPRRetriever(store, vectors=None, embedder=None)  # type: ignore[arg-type]
    found = retriever.exact_entities("Is Hub older than the Big Apple?", [DS])
    assert found == [target, entity_id(DS, "Hub")]  # the longer name first
    assert retriever.exact_entities("Is Hub older than the Big Apple?", ["other"]) == []
