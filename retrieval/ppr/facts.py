"""GRAPH_PPR's passages seen through the search's facts over time (retrieval/fact_view.py).

PageRank ranks passages, not facts, so the best `pool` passages are looked at again: the
functional facts read from each (relationships between the entities it mentions, supported by
the passage, about an entity the question names) decide how much it counts, as its best fact
does (retrieval/fact_view.py): a passage holding a fact the question asks about that holds
in the view ranks above the others (its score raised past 1, theirs being within [0, 1]);
one holding another fact that holds is kept; one whose facts all ended, or were superseded,
is demoted (it stays findable, as history); a passage without such facts is left as it is. Its fact
lines, with their validity, lead its evidence. One bounded read: the relationships of the
pool's non-hub entities.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Protocol

from core.models.facts import ENDS_GROUP, FACT_GROUP, VALID_SPANS
from core.models.graph import Edge
from core.models.vocabulary import STRUCTURAL_EDGES, relation_label
from core.ports import GraphReader
from retrieval.fact_view import FactView

# Relationships read per entity of the pool, and in all.
PER_ENTITY = 40
MAX_EDGES = 2000
LINES_PER_PASSAGE = 3


class Read(Protocol):
    """What GRAPH_PPR's neighbourhood read: who mentions what, names, the entities named."""

    names: dict[str, str]
    named: set[str]

    def mentioned(self) -> list[tuple[str, str]]: ...


def held_facts(
    graph: GraphReader, view: FactView, scores: dict[str, float], read: Read, pool: int
) -> dict[str, list[str]]:
    """Reweigh the best `pool` passages of `scores` (in place) by their functional facts in
    `view` (only facts about the entities the question names, when it names any); each
    passage's fact lines."""
    named, names = read.named, read.names
    best = sorted(scores, key=lambda c: (-scores[c], c))[:pool]
    wanted = set(best)
    entities = sorted({e for c, e in read.mentioned() if c in wanted})
    if not entities:
        return {}
    limit = min(MAX_EDGES, PER_ENTITY * len(entities))
    edges = graph.edges_of(entities, exclude=sorted(STRUCTURAL_EDGES), limit=limit)
    facts: dict[str, list[tuple[float, Edge]]] = defaultdict(list)
    for edge in edges:
        group = edge.properties.get(FACT_GROUP)
        if group in (None, "", ENDS_GROUP) or VALID_SPANS not in edge.properties:
            continue
        if named and not named & {edge.source, edge.target}:
            continue  # a fact about what the question does not name
        weight = view.weight(edge.properties)
        for chunk in {s.chunk_id for s in edge.support} & wanted:
            facts[chunk].append((weight, edge))
    lines: dict[str, list[str]] = {}
    for chunk, found in facts.items():
        found.sort(key=lambda item: (-item[0], item[1].id))
        weight = found[0][0]
        # Scores are within [0, 1]: one past 1 ranks above every passage without such a fact.
        scores[chunk] = 1.0 + scores[chunk] if weight > 1.0 else scores[chunk] * weight
        lines[chunk] = [_line(edge, view, names) for _, edge in found[:LINES_PER_PASSAGE]]
    return lines


def _line(edge: Edge, view: FactView, names: Mapping[str, str]) -> str:
    source, target = names.get(edge.source, "?"), names.get(edge.target, "?")
    return f"{source} —{relation_label(edge.name)}{view.label(edge.properties)}→ {target}"
