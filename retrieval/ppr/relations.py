"""GRAPH_PPR's steps along entity–entity relationships whose names the question uses.

A relation whose name shares a content word with the question ("officer_of" for "who is the
chief operating officer of ...") is a step the question asks for: the walk takes it at
`relation_words` weight on top of `relation_weight` (what any relation weighs, 0 by default),
and its far end is read even when no chunk of the neighbourhood led there yet. Each step is
weighted, as a chunk's step into an entity is, by the specificity of the entity it leads to.
Names and ends come with the hop's read (`GraphReader.frontier`), no properties or support.
"""

from __future__ import annotations

from collections.abc import Callable, Container
from functools import lru_cache

from core.models.graph import RelationRead
from core.models.vocabulary import STRUCTURAL_EDGES
from retrieval.ppr.pagerank import WeightedGraph
from retrieval.query_names import content_words

Step = tuple[str, str, float]  # source, target, weight before specificity


def relation_read(
    entities: list[str], words: frozenset[str], weights: tuple[float, float], limit: int
) -> RelationRead | None:
    """What a hop reads of the relations of `entities` (`GraphReader.frontier`'s `relations`)
    at `weights` (any relation, and the more a relation whose name the question's `words`
    use gets): None when no step would be taken."""
    weight, word_weight = weights
    if not entities or (weight <= 0 and not (words and word_weight > 0)):
        return None
    # Without a weight for every relation only names holding a question word's stem matter.
    containing = sorted(words) if weight <= 0 else None
    far = sorted(words) if word_weight > 0 else []
    return RelationRead(entities, sorted(STRUCTURAL_EDGES), containing, far, limit)


def relation_steps(
    ends: list[tuple[str, str, str]], words: frozenset[str], weights: tuple[float, float]
) -> tuple[list[Step], list[str]]:
    """The steps along the relations read (source, name, target) at `weights`, and the ends
    of those whose name the question's `words` use, in order."""
    weight, word_weight = weights
    steps: list[Step] = []
    asked: list[str] = []
    for source, name, target in ends:
        named = word_weight > 0 and not words.isdisjoint(_name_words(name))
        steps.append((source, target, weight + (word_weight if named else 0.0)))
        asked += [source, target] if named else []
    return steps, list(dict.fromkeys(asked))


def link_steps(
    graph: WeightedGraph,
    steps: list[Step],
    known: Container[str],
    specificity: Callable[[str], float],
    out: dict[str, float],
) -> None:
    """Each step between two `known` entities as an edge both ways, toward the more specific
    end; `out` sums each entity's out-weight along them (its PageRank normaliser grows)."""
    for a, b, weight in steps:
        if weight > 0 and a in known and b in known:
            w_ab, w_ba = weight * specificity(b), weight * specificity(a)
            graph.link(a, b, w_ab, w_ba)
            out[a] = out.get(a, 0.0) + w_ab
            out[b] = out.get(b, 0.0) + w_ba


@lru_cache(maxsize=4096)
def _name_words(name: str) -> frozenset[str]:
    """A relation name's content words (a store holds few distinct names, read many times)."""
    return content_words(name)
