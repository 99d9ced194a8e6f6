"""GRAPH_PPR's passages seen through the search's facts over time (retrieval/fact_view.py).

PageRank ranks passages, not facts, so the best `pool` passages are looked at again: the
functional facts read from each (relationships between the entities it mentions, supported by
the passage) decide how much it counts. A passage holding a fact that holds in the view keeps
its score; one whose functional facts all ended, or were superseded, is demoted as its facts
are (it stays findable, as history); a passage without such facts is left as it is. Its fact
lines, with their validity, lead its evidence. One bounded read: the relationships of the
pool's non-hub entities.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from core.models.facts import FACT_GROUP, VALID_SPANS
from core.models.graph import Edge
from core.models.vocabulary import STRUCTURAL_EDGES, relation_label
from core.ports import GraphReader
from retrieval.fact_view import FactView

# Relationships read per entity of the pool, and in all.
PER_ENTITY = 40
MAX_EDGES = 2000
LINES_PER_PASSAGE = 3


def held_facts(
    graph: GraphReader,
    view: FactView,
    scores: dict[str, float],
    mentions: Iterable[tuple[str, str]],
    names: Mapping[str, str],
    pool: int,
) -> dict[str, list[str]]:
    """Reweigh the best `pool` passages of `scores` (in place) by their functional facts in
    `view`; each passage's fact lines. `mentions`: (passage, entity) pairs."""
    best = sorted(scores, key=lambda c: (-scores[c], c))[:pool]
    wanted = set(best)
    entities = sorted({e for c, e in mentions if c in wanted})
    if not entities:
        return {}
    limit = min(MAX_EDGES, PER_ENTITY * len(entities))
    edges = graph.edges_of(entities, exclude=sorted(STRUCTURAL_EDGES), limit=limit)
    facts: dict[str, list[tuple[float, Edge]]] = defaultdict(list)
    for edge in edges:
        if not edge.properties.get(FACT_GROUP) or VALID_SPANS not in edge.properties:
            continue
        weight = view.weight(edge.properties)
        for chunk in {s.chunk_id for s in edge.support} & wanted:
            facts[chunk].append((weight, edge))
    lines: dict[str, list[str]] = {}
    for chunk, found in facts.items():
        found.sort(key=lambda item: (-item[0], item[1].id))
        scores[chunk] *= found[0][0]
        lines[chunk] = [_line(edge, view, names) for _, edge in found[:LINES_PER_PASSAGE]]
    return lines


def _line(edge: Edge, view: FactView, names: Mapping[str, str]) -> str:
    source, target = names.get(edge.source, "?"), names.get(edge.target, "?")
    return f"{source} —{relation_label(edge.name)}{view.label(edge.properties)}→ {target}"
