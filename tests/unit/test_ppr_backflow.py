"""GRAPH_PPR sends a passage's mass on to the bridges it names, not back into the entities the
query names (`named_backflow`, retrieval/ppr/neighbourhood.py), on a hand-made graph."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from core.models.graph import Edge, Node, Support, entity_id, stable_id
from core.models.vocabulary import MENTIONS
from core.stores.sqlite.graph import SQLiteGraphStore
from retrieval.ppr.neighbourhood import Neighbourhood
from retrieval.ppr.pagerank import personalised_pagerank
from retrieval.ppr.params import PPRParams

pytestmark = pytest.mark.unit
DS = "backflow"
NAMED = "Ines Varga"


def chunk_id(name: str) -> str:
    return stable_id("chunk", DS, name)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteGraphStore]:
    """`start` names Ines Varga (the query's name, also in `profile`) and the Kestrel Club (the
    bridge), which three more chunks name; one of them, `treasurer`, is the second hop."""
    graph = SQLiteGraphStore(tmp_path / "graph.db")
    texts = {"start": [NAMED, "Kestrel Club"], "profile": [NAMED, "Lake Orm"]}
    texts |= {name: ["Kestrel Club"] for name in ("club0", "club1", "treasurer")}
    for name, entities in texts.items():
        support = [Support(document_id=f"doc-{name}", chunk_id=chunk_id(name))]
        chunk = Node(id=chunk_id(name), type="DocumentChunk", dataset=DS, support=support,
                     properties={"text": name})  # fmt: skip
        nodes = [Node(id=entity_id(DS, e), type="Entity", dataset=DS, name=e, support=support)
                 for e in entities]  # fmt: skip
        graph.upsert_nodes([chunk, *nodes])
        graph.upsert_edges([Edge(source=chunk.id, target=n.id, name=MENTIONS, dataset=DS,
                                 support=support) for n in nodes])  # fmt: skip
    yield graph
    graph.close()


def run(store: SQLiteGraphStore, backflow: float) -> tuple[Neighbourhood, dict[str, float]]:
    hood = Neighbourhood(store, PPRParams(named_backflow=backflow))
    named = entity_id(DS, NAMED)
    hood.named = {named}
    hood.expand(chunks=[chunk_id("start")], entities=[named])
    seeds = {chunk_id("start"): 1.0, named: 1.0}
    return hood, personalised_pagerank(hood.weighted, seeds, damping=0.85)


def test_a_passage_sends_no_mass_back_into_the_entity_the_query_names(store) -> None:
    hood, _ = run(store, backflow=0.0)
    g = hood.weighted
    start, named = g.index[chunk_id("start")], g.index[entity_id(DS, NAMED)]
    club = g.index[entity_id(DS, "Kestrel Club")]
    sources, targets, weights = g.edges()
    steps = {(int(s), int(t)): float(w) for s, t, w in zip(sources, targets, weights, strict=True)}
    assert (start, named) not in steps and steps[(start, club)] > 0
    assert steps[(named, start)] > 0  # the named entity still reaches its passages


def test_the_second_hop_gains_what_the_named_entity_no_longer_takes_back(store) -> None:
    _, before = run(store, backflow=1.0)
    _, after = run(store, backflow=0.0)
    second = chunk_id("treasurer")
    assert after[second] > 1.2 * before[second], (before[second], after[second])
    # The named entity's other passage keeps what the seed on the entity itself sends it.
    assert after[chunk_id("profile")] > 0
