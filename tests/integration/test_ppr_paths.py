"""GRAPH_PPR results carry the path that led to them (retrieval/ppr/paths.py): in `evidence`, at
most 3 lines naming the entities that carried a passage's PageRank mass and the entity one hop
back, as GRAPH_COMPLETION lists its triplets. On the two-hop corpus of test_ppr_search.py the
second hop's passage is reached through the composer the question never names."""

from __future__ import annotations

import pytest

from retrieval.models import SearchType
from retrieval.ppr.pagerank import WeightedGraph, personalised_pagerank
from retrieval.ppr.paths import MassFlows, provenance
from retrieval.search import search
from runtime import Runtime
from tests.integration.test_ppr_search import QUESTION, runtime  # noqa: F401  (the fixture)

pytestmark = pytest.mark.integration


def test_the_second_hop_names_the_bridge_and_where_it_came_from(runtime: Runtime) -> None:  # noqa: F811
    response = search(runtime.retrieval(), QUESTION, ["multihop"], SearchType.GRAPH_PPR, 5)
    by_document = {r.sources[0].document_name: r for r in response.results}
    second = by_document["second.txt"]
    assert second.evidence, second
    assert "Elira Montbrook" in second.evidence[0], second.evidence
    # One hop back: the bridge got its mass through the first hop's passage, which names the
    # work the question asks about.
    assert any("Zorvath Quintet" in line and "—" in line for line in second.evidence), second
    assert all(len(r.evidence) <= 3 for r in response.results)
    assert second.text.startswith("Elira Montbrook")  # the passage's text is left as it was


def test_provenance_walks_back_from_a_passage_to_the_seed() -> None:
    """seed entity S, chunk A mentions S and B, chunk C mentions only B: C's mass came from B,
    and B's through A from S."""
    graph = WeightedGraph()
    for chunk, entity in [("A", "S"), ("A", "B"), ("C", "B"), ("D", "X")]:
        graph.link(chunk, entity, 1.0, 1.0)
    scores = personalised_pagerank(graph, {"S": 1.0}, damping=0.85)
    names = {"S": "Seed", "B": "Bridge", "X": "Elsewhere"}
    flows = MassFlows(graph, scores)
    assert provenance(flows, "C", names) == ["Seed —MENTIONED WITH→ Bridge"]
    assert provenance(flows, "A", names)[0] == "Seed"  # the seed sent A the most, from nowhere
    assert provenance(flows, "D", names) == []  # no mass reached it
    assert len(provenance(flows, "A", names, limit=1)) == 1
