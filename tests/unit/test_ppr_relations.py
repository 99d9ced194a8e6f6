"""GRAPH_PPR steps along a relation whose name the question uses ("treasurer_of" for "who is
the treasurer of ..."), retrieval/ppr/relations.py, on a hand-made graph."""

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
from retrieval.query_names import content_words

pytestmark = pytest.mark.unit
DS = "relations"
NAMED, CLUB = "Ines Varga", "Kestrel Club"
QUESTION = "Who is the treasurer of the club that Ines Varga founded?"


def chunk_id(name: str) -> str:
    return stable_id("chunk", DS, name)


def _support(name: str) -> list[Support]:
    return [Support(document_id=f"doc-{name}", chunk_id=chunk_id(name))]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteGraphStore]:
    """`start` names Ines Varga and the Kestrel Club, which four more chunks name; two bios
    each name one person only, Mara Quell (the club's treasurer) and Otto Brell (a member)."""
    graph = SQLiteGraphStore(tmp_path / "graph.db")
    texts = {"start": [NAMED, CLUB], "mara": ["Mara Quell"], "otto": ["Otto Brell"]}
    texts |= {f"club{i}": [CLUB, f"Hall {i}"] for i in range(4)}
    for name, entities in texts.items():
        chunk = Node(id=chunk_id(name), type="DocumentChunk", dataset=DS,
                     support=_support(name), properties={"text": name})  # fmt: skip
        nodes = [Node(id=entity_id(DS, e), type="Entity", dataset=DS, name=e,
                      support=_support(name)) for e in entities]  # fmt: skip
        graph.upsert_nodes([chunk, *nodes])
        graph.upsert_edges([Edge(source=chunk.id, target=n.id, name=MENTIONS, dataset=DS,
                                 support=_support(name)) for n in nodes])  # fmt: skip
    club = entity_id(DS, CLUB)
    graph.upsert_edges([
        Edge(source=entity_id(DS, "Mara Quell"), target=club, name="treasurer_of", dataset=DS,
             support=_support("mara")),
        Edge(source=entity_id(DS, "Otto Brell"), target=club, name="member_of", dataset=DS,
             support=_support("otto")),
    ])  # fmt: skip
    yield graph
    graph.close()


def run(store: SQLiteGraphStore, relation_words: float) -> dict[str, float]:
    """PageRank from `start` and the named entity; the bios are weak dense hits."""
    hood = Neighbourhood(store, PPRParams(relation_words=relation_words))
    named = entity_id(DS, NAMED)
    hood.named, hood.words = {named}, content_words(QUESTION)
    seeds = {chunk_id("start"): 1.0, chunk_id("mara"): 0.01, chunk_id("otto"): 0.01}
    hood.expand(chunks=list(seeds), entities=[named])
    return personalised_pagerank(hood.weighted, seeds | {named: 1.0}, damping=0.85)


def test_a_relation_the_question_names_carries_mass_to_its_far_end(store) -> None:
    without, with_words = run(store, relation_words=0.0), run(store, relation_words=2.0)
    mara, otto = chunk_id("mara"), chunk_id("otto")
    assert without[mara] == pytest.approx(without[otto])  # no relation read: the bios tie
    assert with_words[mara] > 2 * without[mara], (without[mara], with_words[mara])
    assert with_words[mara] > 2 * with_words[otto]  # "member_of" is not what was asked
    # The club's passages give up some of their share, not more than the step took.
    assert with_words[chunk_id("club0")] < without[chunk_id("club0")]


def test_question_words_meet_relation_names_by_stem() -> None:
    assert content_words("officer_of") <= content_words("Who are the officers of Brill AG?")
    assert content_words("licensed_from") <= content_words("Which firm licenses it?")
    assert content_words("founded") <= content_words("Who was the founder?")
    assert not content_words("related_to") & content_words("Who is the treasurer of it?")
    assert not content_words("is_a") and not content_words("of the")
