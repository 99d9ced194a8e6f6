"""Entity resolution after writing: merge a batch's entities with near-duplicates in the store.

Each entity the batch wrote is filed in the entity key index (core/entity_keys.py) under its
match keys, which returns the stored entities sharing a key: exactly the candidates an alias
rule could accept, never all pairs. A candidate is accepted when an alias rule agrees
(`core/aliases.same_entity`), the types fit, and the two names' embeddings are at least
`threshold` alike: embeddings alone put "Maria Lopez" next to "Carlos Lopez", and rules alone
would join names the model sees as unrelated. Accepted groups are merged into the entity named
by `canonical_name`, a choice independent of arrival order.

Why after writing: two batches that write "NYC" and "New York City" at the same time cannot
see each other before they write. Each batch files its entities and looks up in one atomic
call, so the later of the two finds the other and merges them; both merging the same pair is
harmless, because the merge itself is one store transaction (`GraphStore.merge_nodes`) and
the second finds its members gone. Merges and other batches' writes commute: a support link
or edge written to a member before the merge's transaction moves with it, one written after
follows the member's redirect (a re-created member is merged again by its batch's reconcile).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from core.aliases import canonical_name, is_abbreviated, resolution_key, same_entity
from core.entity_keys import EntityKeyIndex
from core.models.graph import Edge, Node, Support, alias_id, entity_id, normalise_name
from core.models.vectors import VectorPoint
from core.models.vocabulary import ALIAS, ALIAS_OF, ENTITY, ENTITY_COLLECTION, IS_A
from core.ports import Embedder, GraphStore, VectorStore, batched
from pipelines.base import INGEST, StepContext, StepQueue, StepServices
from pipelines.models import WriteReport
from pipelines.resolve_entities import types_compatible

RECONCILE_BATCH = 256
# Type node names by id, kept per process: a type's id is derived from its name, so the pair
# never changes, while reading a type node loads its support (every entity of that type).
_TYPE_NAMES: dict[str, str] = {}
_TYPE_NAMES_MAX = 100_000


class ReconcileEntities:
    """Merges the entities a batch wrote with stored near-duplicates (key index candidates)."""

    name: ClassVar[str] = "reconcile_entities"
    queue: ClassVar[StepQueue] = INGEST

    @classmethod
    def build(cls, services: StepServices, context: StepContext) -> ReconcileEntities:
        """With the settings' match threshold (and switch)."""
        s = services.settings
        return cls(
            services.graph,
            services.vectors,
            services.embedder,
            services.entity_keys,
            threshold=s.entity_match_threshold,
            enabled=s.entity_reconcile,
        )

    def __init__(
        self,
        graph: GraphStore,
        vectors: VectorStore,
        embedder: Embedder,
        keys: EntityKeyIndex,
        *,
        threshold: float = 0.6,
        enabled: bool = True,
    ) -> None:
        if not 0 <= threshold <= 1:
            raise ValueError(f"threshold must be a cosine similarity in [0, 1], got {threshold}")
        self.graph, self.vectors, self.embedder, self.keys = graph, vectors, embedder, keys
        self.threshold, self.enabled = threshold, enabled

    def run(self, report: WriteReport) -> WriteReport:
        if not self.enabled:
            return report
        gone = self._merge_into_aliases(report.dataset, report.entity_names, report.alias_names)
        names = sorted((i, n) for i, n in report.entity_names.items() if i not in gone)
        for part in batched(names, RECONCILE_BATCH):
            self._reconcile(report.dataset, dict(part))
        return report

    def _merge_into_aliases(
        self, dataset: str, entities: dict[str, str], aliases: dict[str, str]
    ) -> set[str]:
        """Merge each entity named like a stored alias into the alias's entity; returns the
        ids merged away.

        A batch maps a name through the aliases stored when it resolves (resolve_entities),
        so an entity written before another batch made its name an alias ("D.C." written
        alone, then "D.C." and "District of Columbia" side by side) would stay apart, and
        the key index cannot join it when the name is ambiguous. Each batch looks both ways
        after writing: at alias nodes named like its entities and at entities named like its
        aliases. Whichever of two batches reconciles last sees both writes.
        """
        wanted = [alias_id(dataset, n) for n in entities.values()]
        wanted += [entity_id(dataset, n) for n in aliases.values()]
        found = self.graph.existing(wanted) if wanted else set()
        pairs = {
            alias_id(dataset, n): i for i, n in entities.items() if alias_id(dataset, n) in found
        }
        pairs |= {
            a: entity_id(dataset, n) for a, n in aliases.items() if entity_id(dataset, n) in found
        }
        if not pairs:
            return set()  # the usual case: one existence check
        targets: dict[str, set[str]] = {}
        for edge in self.graph.edges_of(sorted(pairs), names=[ALIAS_OF], limit=len(pairs) * 8):
            if edge.target != pairs.get(edge.source):
                targets.setdefault(edge.source, set()).add(edge.target)
        wanted = sorted({*pairs.values(), *(t for ts in targets.values() for t in ts)})
        known = {n.id: n for n in self.graph.get_nodes(wanted) if n.type == ENTITY}
        types = self._types(sorted(known))
        gone: set[str] = set()
        for alias, named in sorted(pairs.items()):
            ends = [known[t] for t in sorted(targets.get(alias, ())) if t in known]
            if named not in known or not ends:
                continue
            into = next(e for e in ends if e.name == canonical_name(e.name for e in ends))
            if types_compatible(types.get(named, set()), types.get(into.id, set())):
                members = [known[named], into]
                kept = merge_entities(self.graph, self.vectors, self.embedder, dataset, members)
                gone |= {named, into.id} - {kept}
        return gone

    def _reconcile(self, dataset: str, names: dict[str, str]) -> None:
        """Merge the named entities (id -> name) with the stored ones an alias rule accepts."""
        candidates = self.keys.file_and_find(dataset, names)
        pairs = {
            (entity, other)
            for entity, found in candidates.items()
            for other, other_name in found.items()
            if same_entity(names[entity], other_name)
        }
        seen = names | {i: n for found in candidates.values() for i, n in found.items()}
        pairs, looked_up = self._without_ambiguous(dataset, pairs, names, candidates, seen)
        if not pairs:
            return  # the usual case, decided without reading the graph
        # The graph has the last word: a candidate may have been merged away or deleted.
        wanted = sorted({i for pair in pairs for i in pair})
        known = {n.id: n for n in self.graph.get_nodes(wanted) if n.type == ENTITY}
        types = self._types(
            sorted({i for pair in pairs if set(pair) <= known.keys() for i in pair})
        )
        # Types before similarity: only the names of pairs that can still merge are embedded.
        pairs = {
            (a, b)
            for a, b in pairs
            if a in known
            and b in known
            and types_compatible(types.get(a, set()), types.get(b, set()))
        }
        if not pairs:
            return
        similar = self._similarity(pairs, known)
        links = [(a, b) for a, b in sorted(pairs) if similar[(a, b)] >= self.threshold]
        # A full name looks up only abbreviated ones: a stored abbreviation's own lookup finds
        # the other full names it fits, which decide whether it is ambiguous.
        short = {
            i: seen[i] for link in links for i in link if i not in names and is_abbreviated(seen[i])
        }
        # Their lookups were made by _without_ambiguous (every stored abbreviation of a pair).
        seen |= {i: name for s in short for i, name in looked_up[s].items()}
        for group in _groups(_unambiguous(links, seen)):
            members = [known[i] for i in sorted(group)]
            target = merge_entities(self.graph, self.vectors, self.embedder, dataset, members)
            if target not in known:  # a canonical name no member had: file it too
                self.keys.file_and_find(dataset, {target: canonical_name(m.name for m in members)})

    def _without_ambiguous(
        self,
        dataset: str,
        pairs: set[tuple[str, str]],
        names: dict[str, str],
        candidates: dict[str, dict[str, str]],
        seen: dict[str, str],
    ) -> tuple[set[tuple[str, str]], dict[str, dict[str, str]]]:
        """The pairs without an abbreviated name that already fits several full names, and
        the lookups of the stored abbreviations (id -> the names filed where it seeks).

        `_unambiguous` would drop their links after the embeddings were paid for, and an
        abbreviation's candidates ("J.S.": every stored "J... S...") grow with the store: 300 new
        documents made this step embed 1,057 names in a home of 7,560 (90 in an empty one). Every
        full name an abbreviation fits is found by its own lookup (core/aliases.match_keys;
        the batch's own names among them, filed in the same call): the batch's in
        `candidates`, a stored one's looked up here in one call, and a link of
        it would look it up anyway before judging it (so the names judged here are among the
        ones `_unambiguous` sees, and the pairs dropped are ones it drops).
        """
        abbreviated = {i for pair in pairs for i in pair if is_abbreviated(seen[i])}
        stored = {i: seen[i] for i in abbreviated if i not in names}
        found = self.keys.find(dataset, stored) if stored else {}
        ambiguous = {
            i
            for i in abbreviated
            if _ambiguous(i, seen[i], [candidates.get(i, {}), found.get(i, {})])
        }
        return {(a, b) for a, b in pairs if a not in ambiguous and b not in ambiguous}, found

    def _similarity(
        self, pairs: set[tuple[str, str]], known: dict[str, Node]
    ) -> dict[tuple[str, str], float]:
        """Cosine similarity of each pair's names (one embedding call for all of them)."""
        ids = sorted({i for pair in pairs for i in pair})
        vectors = dict(zip(ids, self.embedder.embed([known[i].name for i in ids]), strict=True))
        return {(a, b): float(np.dot(vectors[a], vectors[b])) for a, b in pairs}

    def _types(self, ids: list[str]) -> dict[str, set[str]]:
        """Each entity's type names (read through its IS_A edges)."""
        targets: dict[str, set[str]] = {}
        for edge in self.graph.edges_of(ids, names=[IS_A], limit=len(ids) * 16):
            targets.setdefault(edge.source, set()).add(edge.target)
        wanted = sorted({t for ts in targets.values() for t in ts} - _TYPE_NAMES.keys())
        if len(_TYPE_NAMES) + len(wanted) > _TYPE_NAMES_MAX:
            _TYPE_NAMES.clear()
        _TYPE_NAMES.update({n.id: n.name for n in self.graph.get_nodes(wanted)})
        return {i: {_TYPE_NAMES.get(t, "") for t in ts} for i, ts in targets.items()}


def _unambiguous(links: list[tuple[str, str]], names: dict[str, str]) -> list[tuple[str, str]]:
    """Links without an abbreviated name that fits several different full names ("M. Lopez"
    beside "Maria Lopez" and "Miguel Lopez"), judged among all the names looked up (id -> name):
    every full name an abbreviation fits is found by the abbreviation's own lookup."""
    abbreviated = {i for link in links for i in link if is_abbreviated(names[i])}
    ambiguous = {short for short in abbreviated if _ambiguous(short, names[short], [names])}
    return [(a, b) for a, b in links if a not in ambiguous and b not in ambiguous]


def _ambiguous(short: str, name: str, among: list[dict[str, str]]) -> bool:
    """Whether the abbreviated name (of id `short`) fits full names of two different
    resolution keys among the names given (id -> name); stops at the second."""
    fits = set()
    for names in among:
        for other, other_name in names.items():
            if other != short and not is_abbreviated(other_name) and same_entity(name, other_name):
                fits.add(resolution_key(other_name))
                if len(fits) > 1:
                    return True
    return False


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

    The canonical entity takes the members' support and edges (with their support) in one
    store transaction (`GraphStore.merge_nodes`), which also redirects the members' ids to it:
    a batch that wrote a member before the merge and writes its edges after lands them on the
    canonical entity. Each other name becomes an Alias node (ALIAS_OF the entity), supported
    by the support its entity had when merged; the members' vectors go. Every write is an
    upsert on deterministic ids, so a merge run twice, or by two workers at once, ends the same.
    """
    name = canonical_name([m.name for m in members])
    target = entity_id(dataset, name)
    sources = [m for m in members if m.id != target]
    if not sources:
        return target
    stored = graph.get_nodes([target])
    described = [d for m in members if (d := m.properties.get("description"))]
    properties = {} if stored or not described else {"description": described[0]}
    # No support of its own: what it gets comes from the members, read inside merge_nodes.
    entity = Node(id=target, type=ENTITY, dataset=dataset, name=name, properties=properties)
    graph.upsert_nodes([entity])
    if not stored:
        vector = embedder.embed([name])[0].tolist()
        point = VectorPoint(id=target, vector=vector, dataset=dataset, payload={"type": ENTITY})
        vectors.upsert(ENTITY_COLLECTION, [point])
    merged = graph.merge_nodes(sorted(m.id for m in sources), target)
    renamed = [
        (m, support)
        for m in sources
        if (support := merged.support.get(m.id)) and normalise_name(m.name) != normalise_name(name)
    ]  # a member merged by another worker meanwhile has its alias written by that worker
    if renamed:
        graph.upsert_nodes([_alias_node(dataset, m, support) for m, support in renamed])
        graph.upsert_edges(
            [
                Edge(
                    source=alias_id(dataset, m.name),
                    target=target,
                    name=ALIAS_OF,
                    dataset=dataset,
                    support=support,
                )
                for m, support in renamed
            ]
        )
    vectors.delete(merged.node_ids + merged.edge_ids)
    return target


def _alias_node(dataset: str, member: Node, support: list[Support]) -> Node:
    return Node(
        id=alias_id(dataset, member.name),
        type=ALIAS,
        dataset=dataset,
        name=member.name,
        support=support,
    )
