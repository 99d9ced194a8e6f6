"""Entity resolution before writing: rewrite each extracted name to its canonical name.

Two sources decide a name's canonical form, both independent of the order batches run in:
- the alias rules of `core/aliases.py` over the batch's names ("Prof. Maria Lopez" and
  "M. Lopez" become "Maria Lopez", "NYC" becomes "New York City" when both are in the batch);
- the alias map already in the graph: Alias nodes (id from the alias's normalised name) with
  an ALIAS_OF edge to their entity, read by id. They carry the support of the chunks that used
  the alias, so a re-cognify resolves the same way and deleting the only document that used
  an alias removes the alias (and nothing the canonical entity's other documents support).
Near-duplicates the batch cannot see (an entity another batch wrote, possibly at the same
time) are merged after writing by `ReconcileEntities` (pipelines/reconcile_entities.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from core.aliases import canonical_name, group_names, strip_affixes
from core.models.extraction import KnowledgeGraph
from core.models.graph import Edge, Node, Support, alias_id, entity_id, normalise_name
from core.models.vocabulary import ALIAS, ALIAS_OF
from core.ports import GraphReader
from core.sequences import batched
from pipelines.base import INGEST, StepContext, StepQueue, StepServices
from pipelines.built_graph import BuiltGraph
from pipelines.models import EntityAlias, ExtractedBatch

# Types that say nothing about what an entity is; they fit every other type.
GENERIC_TYPES = frozenset({"thing", "entity", "concept", "other", ""})
READ_BATCH = 500


def types_compatible(a: set[str], b: set[str]) -> bool:
    """Whether two entities' type sets allow a merge: one shared type, or a generic one."""
    folded_a, folded_b = {t.casefold() for t in a}, {t.casefold() for t in b}
    return bool(folded_a & folded_b) or not folded_a - GENERIC_TYPES or not folded_b - GENERIC_TYPES


class ResolveEntities:
    """Rewrites a batch's entity names to canonical names and records the aliases it used."""

    name: ClassVar[str] = "resolve_entities"
    queue: ClassVar[StepQueue] = INGEST

    @classmethod
    def build(cls, services: StepServices, context: StepContext) -> ResolveEntities:
        """Reading the stored entities of the graph."""
        return cls(services.graph)

    def __init__(self, graph: GraphReader) -> None:
        self.graph = graph

    def run(self, batch: ExtractedBatch) -> ExtractedBatch:
        types: dict[str, set[str]] = {}
        for graph in batch.graphs:
            for entity in graph.entities:
                if normalise_name(entity.name):
                    types.setdefault(entity.name.strip(), set()).add(entity.type)
        if not types:
            return batch
        grouped = group_names(types, lambda a, b: types_compatible(types[a], types[b]))
        known = self.known_aliases(batch.dataset, list(types))
        mapping = _with_known(grouped, known)
        graphs = [_rewrite(graph, mapping) for graph in batch.graphs]
        aliases = [
            EntityAlias(
                alias=entity.name.strip(),
                canonical=mapping[entity.name.strip()],
                document_id=chunk.document_id,
                chunk_id=chunk.id,
            )
            for chunk, graph in zip(batch.chunks, batch.graphs, strict=True)
            for entity in graph.entities
            if entity.name.strip() in mapping
            and normalise_name(entity.name) != normalise_name(mapping[entity.name.strip()])
        ]
        return batch.model_copy(update={"graphs": graphs, "aliases": batch.aliases + aliases})

    def known_aliases(self, dataset: str, names: Sequence[str]) -> dict[str, str]:
        """Names of the batch that the graph already maps to an entity: name -> its name."""
        by_id: dict[str, list[str]] = {}
        for name in names:
            for form in {name, strip_affixes(name)}:
                by_id.setdefault(alias_id(dataset, form), []).append(name)
        found: dict[str, list[str]] = {}  # alias id -> canonical entity ids
        for part in batched(list(by_id), READ_BATCH):
            stored = [node.id for node in self.graph.get_nodes(list(part))]
            if not stored:
                continue
            for edge in self.graph.edges_of(stored, names=[ALIAS_OF], limit=len(stored) * 8):
                found.setdefault(edge.source, []).append(edge.target)
        targets = {t for ids in found.values() for t in ids}
        names_of = {node.id: node.name for node in self.graph.get_nodes(sorted(targets))}
        known: dict[str, str] = {}
        for aid, entity_ids in found.items():
            canonical = [names_of[e] for e in entity_ids if names_of.get(e)]
            for name in by_id[aid] if canonical else ():
                known[name] = canonical_name(
                    [*canonical, *([known[name]] if name in known else [])]
                )
        return known


def _with_known(grouped: dict[str, str], known: dict[str, str]) -> dict[str, str]:
    """The rule groups, each renamed to the best of its own name and the stored ones."""
    members: dict[str, list[str]] = {}
    for name, canonical in grouped.items():
        members.setdefault(canonical, []).append(name)
    mapping: dict[str, str] = {}
    for canonical, names in members.items():
        stored = [known[n] for n in names if n in known]
        final = canonical_name([canonical, *stored]) if stored else canonical
        mapping.update(dict.fromkeys(names, final))
    return mapping


def _rewrite(graph: KnowledgeGraph, mapping: dict[str, str]) -> KnowledgeGraph:
    """The graph with entity names (and relationship ends) replaced by canonical names."""

    def canonical(name: str) -> str:
        return mapping.get(name.strip(), name)

    entities = [e.model_copy(update={"name": canonical(e.name)}) for e in graph.entities]
    relationships = [
        r.model_copy(update={"source": canonical(r.source), "target": canonical(r.target)})
        for r in graph.relationships
    ]
    return graph.model_copy(update={"entities": entities, "relationships": relationships})


def add_alias_nodes(built: BuiltGraph, dataset: str, aliases: Sequence[EntityAlias]) -> None:
    """Alias nodes and their ALIAS_OF edges, supported by the chunks that used each alias."""
    for alias in aliases:
        target = entity_id(dataset, alias.canonical)
        if target not in built.nodes:
            continue  # the entity was not written (its chunk failed): no alias for it either
        support = [Support(document_id=alias.document_id, chunk_id=alias.chunk_id)]
        aid = alias_id(dataset, alias.alias)
        built.add_node(Node(id=aid, type=ALIAS, dataset=dataset, name=alias.alias, support=support))
        built.add_edge(
            Edge(source=aid, target=target, name=ALIAS_OF, dataset=dataset, support=support)
        )


def aliases_of(graph: GraphReader, entity: str, limit: int = 1000) -> list[str]:
    """The alias names stored for an entity id, sorted."""
    edges = graph.edges_of([entity], names=[ALIAS_OF], limit=limit)
    nodes = graph.get_nodes([e.source for e in edges if e.target == entity])
    return sorted(node.name for node in nodes)
