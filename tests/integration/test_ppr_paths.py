"""GRAPH_PPR results carry the path that led to them (retrieval/ppr/paths.py): in `evidence`, at
most 3 lines naming the entities that carried a passage's PageRank mass and the entity one hop
back, as GRAPH_COMPLETION lists its triplets. The paths on a cognified corpus are checked in
test_ppr_search.py, on its two-hop corpus."""

from __future__ import annotations

from retrieval.ppr.pagerank import WeightedGraph, personalised_pagerank
from retrieval.ppr.paths import MassFlows, provenance


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
