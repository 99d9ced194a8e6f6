"""Entity resolution after writing: merge a batch's entities with near-duplicates in the store.

Each entity the batch wrote is embedded once and compared with its nearest stored entities of
the dataset (`Entity_name`, a few candidates above a similarity threshold; never all pairs).
A candidate is accepted only when an alias rule agrees (`core/aliases.same_entity`) and the
types fit: embeddings alone put "Maria Lopez" next to "Carlos Lopez". Accepted groups are
merged into the entity named by `canonical_name`, a choice independent of arrival order.

Why after writing: two batches that write "NYC" and "New York City" at the same time cannot
see each other before they write. Each batch reconciles after its own write, so the later of
the two sees both and merges them; both merging the same pair is harmless, because a merge
is a set of upserts on deterministic ids followed by deletes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import ClassVar

from core.aliases import canonical_name, is_abbreviated, resolution_key, same_entity
from core.models.graph import Edge, Node, Support, entity_id, normalise_name
from core.models.vectors import VectorPoint
from core.ports import Embedder, GraphStore, VectorStore, batched, search_many
from pipelines.graph_builder import ALIAS_OF, IS_A
from pipelines.models import WriteReport
from pipelines.resolve_entities import ALIAS, alias_id, types_compatible

ENTITY_COLLECTION = "Entity_name"
# A merge moves at most this many edges of one entity (a larger hub keeps the rest and stays
# beside its canonical entity until the next reconcile).
MAX_MERGE_EDGES = 50_000
RECONCILE_BATCH = 256


class ReconcileEntities:
    """Merges the entities a batch wrote with stored near-duplicates (vector candidates)."""

    name: ClassVar[str] = "reconcile_entities"

    def __init__(
        self,
        graph: GraphStore,
        vectors: VectorStore,
        embedder: Embedder,
        *,
        threshold: float = 0.6,
        candidates: int = 5,
        enabled: bool = True,
    ) -> None:
        if not 0 <= threshold <= 1:
            raise ValueError(f"threshold must be a cosine similarity in [0, 1], got {threshold}")
        if candidates < 1:
            raise ValueError(f"candidates must be at least 1, got {candidates}")
        self.graph, self.vectors, self.embedder = graph, vectors, embedder
        self.threshold, self.candidates, self.enabled = threshold, candidates, enabled

    def run(self, report: WriteReport) -> WriteReport:
        if not self.enabled:
            return report
        for part in batched(report.entity_ids, RECONCILE_BATCH):
            self._reconcile(report.dataset, list(part))
        return report

    def _reconcile(self, dataset: str, ids: list[str]) -> None:
        nodes = [n for n in self.graph.get_nodes(ids) if n.type == "Entity" and n.name]
        if not nodes:
            return
        vectors = self.embedder.embed([n.name for n in nodes])
        nearest = search_many(
            self.vectors,
            ENTITY_COLLECTION,
            vectors.tolist(),
            datasets=[dataset],
            limit=self.candidates + 1,
        )
        hits = {
            node.id: [h.id for h in found if h.score >= self.threshold and h.id != node.id]
            for node, found in zip(nodes, nearest, strict=True)
        }
        known = {n.id: n for n in nodes}
        wanted = sorted({i for ids_ in hits.values() for i in ids_} - set(known))
        known.update({n.id: n for n in self.graph.get_nodes(wanted) if n.type == "Entity"})
        types = self._types(list(known))
        links = [
            (node.id, other)
            for node in nodes
            for other in hits[node.id]
            if other in known
            and same_entity(node.name, known[other].name)
            and types_compatible(types.get(node.id, set()), types.get(other, set()))
        ]
        for group in _groups(_unambiguous(links, known)):
            members = [known[i] for i in sorted(group)]
            merge_entities(self.graph, self.vectors, self.embedder, dataset, members)

    def _types(self, ids: list[str]) -> dict[str, set[str]]:
        """Each entity's type names (read through its IS_A edges)."""
        targets: dict[str, set[str]] = {}
        for edge in self.graph.edges_of(ids, names=[IS_A], limit=len(ids) * 16):
            targets.setdefault(edge.source, set()).add(edge.target)
        wanted = sorted({t for ts in targets.values() for t in ts})
        names = {n.id: n.name for n in self.graph.get_nodes(wanted)}
        return {i: {names.get(t, "") for t in ts} for i, ts in targets.items()}


def _unambiguous(links: list[tuple[str, str]], known: dict[str, Node]) -> list[tuple[str, str]]:
    """Links without abbreviated names that fit several different full names ("M. Lopez")."""
    fits: dict[str, set[str]] = {}
    for a, b in links:
        for short, full in ((a, b), (b, a)):
            if is_abbreviated(known[short].name) and not is_abbreviated(known[full].name):
                fits.setdefault(short, set()).add(resolution_key(known[full].name))
    ambiguous = {name for name, keys in fits.items() if len(keys) > 1}
    return [(a, b) for a, b in links if a not in ambiguous and b not in ambiguous]


def _groups(links: list[tuple[str, str]]) -> list[set[str]]:
    """Connected groups of linked ids."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in links:
        parent[find(a)] = find(b)
    groups: dict[str, set[str]] = {}
    for x in list(parent):
        groups.setdefault(find(x), set()).add(x)
    return [g for g in groups.values() if len(g) > 1]


def merge_entities(
    graph: GraphStore, vectors: VectorStore, embedder: Embedder, dataset: str, members: list[Node]
) -> str:
    """Merge entities into the one named by `canonical_name`; returns its id.

    The canonical entity takes the members' support and edges (with their support), each other
    name becomes an Alias node (ALIAS_OF the entity, supported like the entity it replaces),
    then the others are deleted with their vectors. Every write is an upsert on deterministic
    ids, so a merge run twice, or by two workers at once, ends the same.
    """
    name = canonical_name([m.name for m in members])
    target = entity_id(dataset, name)
    sources = [m for m in members if m.id != target]
    if not sources:
        return target
    source_ids = {m.id for m in sources}
    renamed = [m for m in sources if normalise_name(m.name) != normalise_name(name)]
    stored = graph.get_nodes([target])
    described = [d for m in members if (d := m.properties.get("description"))]
    properties = {} if stored or not described else {"description": described[0]}
    entity = Node(
        id=target,
        type="Entity",
        dataset=dataset,
        name=name,
        properties=properties,
        support=_union_support(m.support for m in members),
    )
    graph.upsert_nodes([entity, *(_alias_node(dataset, m) for m in renamed)])
    edges = _moved_edges(
        graph.edges_of(sorted(source_ids), limit=MAX_MERGE_EDGES), source_ids, target
    )
    edges += [
        Edge(source=alias_id(dataset, m.name), target=target, name=ALIAS_OF, dataset=dataset,
             support=m.support)
        for m in renamed
    ]  # fmt: skip
    unique = {(e.source, e.name, e.target): e for e in edges}
    for part in batched([unique[k] for k in sorted(unique)], 2000):
        graph.upsert_edges(part)
    if not stored:
        vector = embedder.embed([name])[0].tolist()
        point = VectorPoint(id=target, vector=vector, dataset=dataset, payload={"type": "Entity"})
        vectors.upsert(ENTITY_COLLECTION, [point])
    removed = graph.delete_nodes(sorted(source_ids))
    vectors.delete(removed.node_ids + removed.edge_ids)
    return target


def _alias_node(dataset: str, member: Node) -> Node:
    return Node(
        id=alias_id(dataset, member.name),
        type=ALIAS,
        dataset=dataset,
        name=member.name,
        support=member.support,
    )


def _moved_edges(edges: Sequence[Edge], source_ids: set[str], target: str) -> list[Edge]:
    """The edges re-attached to the target; edges between merged entities are dropped."""
    moved = []
    for edge in edges:
        start = target if edge.source in source_ids else edge.source
        end = target if edge.target in source_ids else edge.target
        if start != end:  # new records: an Edge caches its id, which is derived from its ends
            moved.append(
                Edge(source=start, target=end, name=edge.name, dataset=edge.dataset,
                     properties=edge.properties, support=edge.support)
            )  # fmt: skip
    return moved


def _union_support(groups: Iterable[list[Support]]) -> list[Support]:
    """The distinct (document, chunk) pairs of several support lists."""
    seen: dict[tuple[str, str], Support] = {}
    for group in groups:
        for item in group:
            seen.setdefault((item.document_id, item.chunk_id), item)
    return list(seen.values())
