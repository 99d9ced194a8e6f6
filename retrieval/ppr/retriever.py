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
from typing import TYPE_CHECKING

from core.models.graph import alias_id, entity_id, normalise_name
from core.models.vectors import VectorHit
from core.models.vocabulary import (
    ALIAS_OF,
    CHUNK_COLLECTION,
    ENTITY_COLLECTION,
    ROW_COLLECTION,
    SUMMARIZES,
    SUMMARY_COLLECTION,
)
from core.ports import Embedder, GraphReader, VectorQuery, VectorStore
from retrieval.answer import CompletionMixin
from retrieval.fact_view import FactView
from retrieval.models import SearchResult
from retrieval.ppr.facts import held_facts
from retrieval.ppr.neighbourhood import Neighbourhood
from retrieval.ppr.pagerank import min_max, personalised_pagerank
from retrieval.ppr.params import PPRParams
from retrieval.ppr.paths import MassFlows, passage, provenance
from retrieval.query_names import content_words, name_spans, query_ngrams

if TYPE_CHECKING:
    from retrieval.base import RetrievalContext


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
