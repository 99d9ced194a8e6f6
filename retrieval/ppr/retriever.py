"""GRAPH_PPR: personalised PageRank over the entity–chunk graph near the query (HippoRAG-style).

Seeds: the dense entry points (chunks, sharpened so the best few dominate; entities; the
chunks of the best summaries) and the entities the query names — its n-grams looked up by
entity id (no scan, no NER at query time) and its capitalised names linked to the nearest
entity names. From the seeds a bounded neighbourhood is read: a chunk's MENTIONS and an
entity's chunks (its provenance lists every chunk that mentions it). An entity in more than
`entity_fanout` chunks is a hub and is not expanded; every entity weighs 1 / chunks **
`specificity`, as a seed and as a step from a chunk, and an entity only one chunk mentions is
no step at all (it bridges nowhere). PageRank runs over that neighbourhood only; a chunk's
score is its PageRank mass fused with its dense similarity, both min-max scaled.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from core.models.graph import NodeChunks, alias_id, entity_id, frontier_ids, normalise_name
from core.models.vectors import VectorHit
from core.models.vocabulary import (
    ALIAS_OF,
    CHUNK_COLLECTION,
    ENTITY,
    ENTITY_COLLECTION,
    MENTIONS,
    REFERENCES,
    ROW_COLLECTION,
    SUMMARIZES,
    SUMMARY_COLLECTION,
)
from core.ports import Embedder, GraphReader, VectorQuery, VectorStore
from core.settings import Settings
from retrieval.answer import CompletionMixin
from retrieval.fact_view import FactView
from retrieval.models import SearchResult
from retrieval.ppr.facts import held_facts
from retrieval.ppr.pagerank import WeightedGraph, min_max, personalised_pagerank
from retrieval.ppr.paths import MassFlows, passage, provenance
from retrieval.ppr.relations import link_steps, relation_read, relation_steps
from retrieval.query_names import content_words, name_spans, query_ngrams

if TYPE_CHECKING:
    from retrieval.base import RetrievalContext


@dataclass(frozen=True)
class PPRParams:
    """Seeds, bounds and weights of one GRAPH_PPR search (COGMILL_PPR_* settings)."""

    damping: float = 0.85
    hops: int = 2
    chunk_seeds: int = 20
    entity_seeds: int = 0
    summary_seeds: int = 0
    chunk_weight: float = 1.0
    entity_weight: float = 0.5
    summary_weight: float = 0.5
    exact_weight: float = 3.0
    relation_weight: float = 0.0
    relation_words: float = 2.0
    relation_fanout: int = 10
    specificity: float = 1.0
    entity_fanout: int = 50
    chunk_fanout: int = 64
    max_nodes: int = 3000
    iterations: int = 50
    dense_fusion: float = 0.2
    dense_candidates: int = 100
    link_hits: int = 3
    seed_temperature: float = 0.05
    link_threshold: float = 0.75
    named_backflow: float = 0.0

    @classmethod
    def from_settings(cls, settings: Settings) -> PPRParams:
        """The `ppr_<name>` fields of the settings."""
        return cls(**{f.name: getattr(settings, f"ppr_{f.name}") for f in fields(cls)})


class PPRRetriever(CompletionMixin):
    """Chunks ranked by personalised PageRank from the query's entry points; with `ctx` it
    answers too (GRAPH_PPR is the router's default, so a routed search answers)."""

    def __init__(
        self,
        graph: GraphReader,
        vectors: VectorStore,
        embedder: Embedder,
        params: PPRParams | None = None,
        ctx: RetrievalContext | None = None,
    ) -> None:
        self.graph, self.vectors, self.embedder = graph, vectors, embedder
        self.params = params or PPRParams()
        self.ctx = ctx  # needed only to answer (`get_completion`), and its time of facts
        self.view = ctx.facts if ctx is not None else FactView()

    def get_context(self, query: str, datasets: Sequence[str], top_k: int) -> list[SearchResult]:
        p = self.params
        seeds, chunk_sim, entities, rows = self._seeds(query, datasets, top_k)
        if not seeds:
            return []
        neighbourhood = Neighbourhood(self.graph, p)
        neighbourhood.named = set(entities)
        neighbourhood.words = content_words(query)
        neighbourhood.rows.update(c for c in chunk_sim if c in rows)
        neighbourhood.expand(chunks=[c for c in seeds if c not in entities], entities=entities)
        # Entity seeds count by how specific they are: a hub named in the query says little.
        for eid in entities:
            seeds[eid] *= neighbourhood.specificity(eid)
        scores = personalised_pagerank(neighbourhood.weighted, seeds, p.damping, p.iterations)
        return self._ranked(neighbourhood, scores, chunk_sim, top_k)

    def _seeds(
        self, query: str, datasets: Sequence[str], top_k: int
    ) -> tuple[dict[str, float], dict[str, float], list[str], set[str]]:
        """Restart weights by node id, the dense passage similarities, the entity seeds, and
        which passages are table rows."""
        p = self.params
        named = dict.fromkeys(self.exact_entities(query, datasets), p.exact_weight)
        # Names found by exact id need no linking; the others are embedded with the query.
        spans = [
            span
            for span in (name_spans(query) if p.link_hits else [])
            if not any(entity_id(d, span) in named for d in datasets)
        ]
        vectors = self.embedder.embed([query, *spans])
        vector = vectors[0].tolist()
        # A fixed candidate count keeps the dense scale (min-max below) the same for any top_k.
        # Table rows are passages too (as in CHUNKS): the best of both, in one ranking.
        limit = max(p.chunk_seeds, p.dense_candidates, top_k)
        # The query's searches in one batch (one round trip on Neo4j), taken in this order.
        asks: list[VectorQuery] = [
            (ROW_COLLECTION, vector, limit),
            (CHUNK_COLLECTION, vector, limit),
        ]
        asks += [(ENTITY_COLLECTION, vector, p.entity_seeds)] if p.entity_seeds else []
        asks += [(SUMMARY_COLLECTION, vector, p.summary_seeds)] if p.summary_seeds else []
        asks += [(ENTITY_COLLECTION, v.tolist(), p.link_hits) for v in vectors[1:]]
        found = iter(self.vectors.search_batch(asks, datasets=datasets))

        def hits() -> dict[str, float]:
            return {hit.id: max(hit.score, 0.0) for hit in next(found)}

        rows = hits()
        passages = hits() | rows
        chunk_sim = dict(sorted(passages.items(), key=lambda item: -item[1])[:limit])
        entity_sim = hits() if p.entity_seeds else {}
        summary_sim = hits() if p.summary_seeds else {}
        for eid, weight in self._linked(list(found)).items():
            named[eid] = max(named.get(eid, 0.0), weight)
        seeds: dict[str, float] = {}
        top = max(chunk_sim.values(), default=0.0)
        for cid, sim in list(chunk_sim.items())[: p.chunk_seeds]:
            # Sharpened: the best chunks (the question's first hop) seed far more than the 20th.
            seeds[cid] = p.chunk_weight * math.exp((sim - top) / p.seed_temperature)
        for cid, sim in self._summarised_chunks(summary_sim).items():
            seeds[cid] = seeds.get(cid, 0.0) + p.summary_weight * sim
        for eid, sim in entity_sim.items():
            seeds[eid] = seeds.get(eid, 0.0) + p.entity_weight * sim
        for eid, weight in named.items():
            seeds[eid] = seeds.get(eid, 0.0) + weight
        return seeds, chunk_sim, list(dict.fromkeys([*named, *entity_sim])), set(rows)

    def _linked(self, span_hits: list[list[VectorHit]]) -> dict[str, float]:
        """Entities whose names are close to a name in the query (spelling, extra words), from
        the nearest entity names of each name."""
        p, linked = self.params, dict[str, float]()
        for found in span_hits:
            for hit in found:
                if hit.score >= p.link_threshold:
                    linked[hit.id] = max(linked.get(hit.id, 0.0), p.exact_weight * hit.score)
        return linked

    def exact_entities(self, query: str, datasets: Sequence[str]) -> list[str]:
        """Ids of the entities the query names (or names by an alias), longest names first,
        without overlaps."""
        spans = query_ngrams(query)
        ids = {entity_id(d, span): span for span in spans for d in datasets}
        aliases = {alias_id(d, span): span for span in spans for d in datasets}
        # Ids are made from the kind and the name: a stored one is an entity or an alias (the
        # nodes are not read; a hub's provenance alone is hundreds of support pairs).
        stored = self.graph.existing([*ids, *aliases])
        found, named = stored & ids.keys(), stored & aliases.keys()
        if named:
            for edge in self.graph.edges_of(list(named), names=[ALIAS_OF], limit=len(named)):
                if edge.source in named:
                    ids.setdefault(edge.target, aliases[edge.source])
                    found.add(edge.target)
        chosen: list[str] = []
        taken: list[str] = []
        for eid, span in sorted(ids.items(), key=lambda item: -len(item[1])):
            if eid in found and not any(normalise_name(span) in t for t in taken):
                chosen.append(eid)
                taken.append(normalise_name(span))
        return chosen

    def _summarised_chunks(self, summary_sim: dict[str, float]) -> dict[str, float]:
        if not summary_sim:
            return {}
        edges = self.graph.edges_of(list(summary_sim), names=[SUMMARIZES], limit=len(summary_sim))
        return {e.target: summary_sim[e.source] for e in edges if e.source in summary_sim}

    def _ranked(
        self,
        neighbourhood: Neighbourhood,
        scores: dict[str, float],
        chunk_sim: dict[str, float],
        top_k: int,
    ) -> list[SearchResult]:
        chunks = neighbourhood.chunks | set(chunk_sim)
        graph, dense = min_max({c: scores.get(c, 0.0) for c in chunks}), min_max(chunk_sim)
        fusion = self.params.dense_fusion
        final = {c: (1 - fusion) * graph[c] + fusion * dense.get(c, 0.0) for c in chunks}
        flows, names = MassFlows(neighbourhood.weighted, scores), neighbourhood.names
        # The passages' facts in the search's time (current ones by default) reweigh them.
        held = held_facts(self.graph, self.view, final, neighbourhood, pool=max(3 * top_k, 30))
        # Ties by id: set order changes with the process's hash seed (4 of 200 top-10 lists
        # came out in another order in another process, one with another 10th passage).
        best = sorted(final, key=lambda c: (-final[c], c))[:top_k]
        nodes = {n.id: n for n in self.graph.get_nodes(best)}
        # The path that led to each passage: at most 3 carriers of its mass (no store reads).
        return [
            passage(nodes[c], final[c], held.get(c, []) + provenance(flows, c, names))
            for c in best
            if c in nodes
        ]


class Neighbourhood:
    """The bounded entity–chunk subgraph around the seeds, as a weighted graph for PageRank."""

    def __init__(self, graph: GraphReader, params: PPRParams) -> None:
        self.graph, self.params = graph, params
        self.weighted = WeightedGraph()
        self.words: frozenset[str] = frozenset()  # the question's content words (stems)
        self.relation_out: dict[str, float] = {}  # entity id -> summed weight of its relations
        self.chunks: set[str] = set()
        self.entities: dict[str, list[str]] = {}  # entity id -> the chunks that mention it
        self.degrees: dict[str, int] = {}  # entity id -> how many ([] in `entities` for a hub)
        self.names: dict[str, str] = {}  # entity id -> its name (for the results' evidence)
        self._mentions: set[tuple[str, str]] = set()  # (chunk, entity) read from MENTIONS
        self.rows: set[str] = set()  # the passages that are table rows (REFERENCES are read)
        self.named: set[str] = set()  # the entities the query names (seeds)
        # The current hop's reads (`_read`): its chunks' MENTIONS, the entities reached.
        self._ends: list[tuple[str, str]] = []
        self._read_entities: dict[str, NodeChunks] = {}
        self._asked: set[str] = set()  # the entities that read asked for (found or not)
        self._relation_ends: list[tuple[str, str, str]] = []  # of the hop's `sources`
        self._weights = (params.relation_weight, params.relation_words)

    def mentioned(self) -> list[tuple[str, str]]:
        """(chunk, entity) of every mention read: MENTIONS edges and entities' provenance."""
        return [*self._mentions, *((c, e) for e, cs in self.entities.items() for c in cs)]

    def degree(self, entity: str) -> int:
        """How many chunks mention the entity (1 when unknown)."""
        return max(self.degrees.get(entity, 0), 1)

    def specificity(self, entity: str) -> float:
        """1 / (chunks mentioning the entity) ** specificity: rare names weigh more."""
        return 1.0 / self.degree(entity) ** self.params.specificity

    def full(self) -> bool:
        return len(self.chunks) + len(self.entities) >= self.params.max_nodes

    def expand(self, chunks: Sequence[str], entities: Sequence[str]) -> None:
        """Read `hops` steps out from the seeds, stopping early at `max_nodes`."""
        chunk_frontier = list(dict.fromkeys(chunks))
        self.chunks.update(chunk_frontier)
        named, hops = list(dict.fromkeys(entities)), self.params.hops
        self._read(chunk_frontier if hops else [], named, named if hops else [])
        entity_frontier = self._load_entities(named)
        for hop in range(hops):
            if self.full() or not (chunk_frontier or entity_frontier):
                break
            if hop:
                self._read(chunk_frontier, [], self._relation_sources(entity_frontier))
            new_entities = self._entities_of()
            new_chunks = self._chunks_of(entity_frontier) + self._referenced(chunk_frontier)
            far = self._relations()  # loaded now, stepped from at the next hop
            chunk_frontier, entity_frontier = new_chunks, far + self._load_entities(new_entities)
        self._link()

    def _read(self, chunks: list[str], entities: list[str], sources: list[str]) -> None:
        """One hop's reads at once (`GraphReader.frontier`): the chunks' MENTIONS, the relations
        of `sources`, names and chunks of the entities and those reached, but the loaded."""
        skip, fanout = list(self.entities), self.params.chunk_fanout
        relations = relation_read(sources, self.words, self._weights, len(sources) * fanout)
        self._ends, self._read_entities, self._relation_ends = [], {}, []
        if chunks or entities or relations:
            self._ends, self._read_entities, self._relation_ends = self.graph.frontier(
                chunks, entities, names=[MENTIONS], type=ENTITY, limit=len(chunks) * fanout,
                skip=skip, relations=relations, most=self.params.entity_fanout,
            )  # fmt: skip
        far = relations.far_ends(self._relation_ends) if relations else []
        self._asked = set(frontier_ids(chunks, entities, self._ends, skip, far))

    def _load_entities(self, ids: list[str]) -> list[str]:
        """Record each new entity's chunks (its provenance lists them; a hub's are not read:
        `_chunks_of` stops at hubs, and `_link` has their edges to the chunks read from
        MENTIONS); returns the new ids."""
        room = self.params.max_nodes - len(self.chunks) - len(self.entities)
        todo = [i for i in ids if i not in self.entities][: max(room, 0)]
        # Names and chunks only: whole nodes (properties, support records) cost ~3x the CPU.
        # Read with the hop's edges already (`_read`); anything else would be read now.
        unread = [i for i in todo if i not in self._asked]
        most = self.params.entity_fanout
        fresh = self.graph.node_chunks(unread, type=ENTITY, most=most) if unread else {}
        read = self._read_entities | fresh
        found = [i for i in todo if i in read]
        for eid in found:
            self.names[eid], self.entities[eid], self.degrees[eid] = read[eid]
        return found

    def _entities_of(self) -> list[str]:
        """The entities the hop's chunks mention (their MENTIONS, read with the hop: at most
        `chunk_fanout` per chunk)."""
        found = []
        for source, target in self._ends:
            if source in self.chunks:
                self._mentions.add((source, target))
                found.append(target)
        return list(dict.fromkeys(found))

    def _referenced(self, passages: list[str]) -> list[str]:
        """Table rows a frontier row references or is referenced by (a foreign key is a hop
        between two passages); the rows are linked both ways. Returns the new ones."""
        rows = [r for r in passages if r in self.rows]
        if not rows:
            return []
        limit = len(rows) * self.params.chunk_fanout
        new: list[str] = []
        for edge in self.graph.edges_of(rows, names=[REFERENCES], limit=limit):
            for end in (edge.source, edge.target):
                if end not in self.chunks and not self.full():
                    self.chunks.add(end)
                    new.append(end)
            if edge.source in self.chunks and edge.target in self.chunks:
                self.weighted.link(edge.source, edge.target, 1.0, 1.0)
        self.rows.update(new)
        return new

    def _chunks_of(self, entities: list[str]) -> list[str]:
        """The chunks mentioning non-hub entities, most specific entity first, while room."""
        new: list[str] = []
        room = self.params.max_nodes - len(self.chunks) - len(self.entities)  # as full()
        for eid in sorted(entities, key=self.degree):
            if self.degree(eid) > self.params.entity_fanout:
                break  # a hub: sorted, so every later entity is one too
            for chunk in self.entities[eid]:
                if room <= 0:
                    return new
                if chunk not in self.chunks:
                    self.chunks.add(chunk)
                    new.append(chunk)
                    room -= 1
        return new

    def _relation_sources(self, entities: list[str]) -> list[str]:
        """Whose relations are read: not an entity in over `relation_fanout` chunks (the cost),
        nor one in one chunk unless named (no chunk sends it mass, see _link: none to pass)."""
        fanout, named = self.params.relation_fanout, self.named
        return [e for e in entities if 1 < self.degree(e) <= fanout or e in named]

    def _relations(self) -> list[str]:
        """The relation steps read with the hop (ppr_relations): the ends of those the question
        names are loaded, and steps between two loaded entities are linked."""
        steps, asked = relation_steps(self._relation_ends, self.words, self._weights)
        far = self._load_entities([x for x in asked if x not in self.entities])
        link_steps(self.weighted, steps, self.entities, self.specificity, self.relation_out)
        return far

    def _link(self) -> None:
        """Chunk–entity edges among the nodes read, weighted toward specific entities."""
        g = self.weighted
        pairs = {(c, e) for c, e in self._mentions if e in self.entities}
        for eid, chunks in self.entities.items():
            pairs.update((c, eid) for c in chunks if c in self.chunks)
        for chunk in self.chunks:
            g.node(chunk)
        ordered = sorted(pairs)
        # An entity only this chunk mentions bridges nowhere: mass sent to it would only come
        # back, so the chunk does not send any (a seed on it still reaches the chunk).
        forward = {e: self.specificity(e) if self.degree(e) > 1 else 0.0 for e in self.entities}
        for eid in self.named & forward.keys():  # it restarts there anyway: the rest moves on
            forward[eid] *= self.params.named_backflow
        g.link_many(ordered, [forward[eid] for _, eid in ordered], 1.0)
        for eid, degree in self.degrees.items():
            # An entity's out-weight in the full graph: one per chunk that mentions it, and
            # the relation steps read.
            g.normalisers[g.node(eid)] = degree + self.relation_out.get(eid, 0.0)
