"""GRAPH_COMPLETION context: triplets near the query, scored from their nodes, edge and chunks.

Results are passages: the best triplets grouped under the chunk they were read from, so top k
is k distinct passages, each listing the triplets that led to it (`evidence`, and first in its
text). `triplets` gives one result per triplet for the types that rank triplets themselves.

Only the touched subgraph is read: the entities the vector search returns, the edges of those
entities, and one more hop from the best neighbours (both bounded), never the whole graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.models.graph import Edge
from core.models.vocabulary import (
    CHUNK_COLLECTION,
    EDGE_TYPE_COLLECTION,
    ENTITY_COLLECTION,
    IN_TABLE,
    MENTIONS,
    REFERENCES,
    ROW_COLLECTION,
    STRUCTURAL_EDGES,
    relation_label,
)
from core.ports import Embedder, GraphReader, VectorStore
from retrieval.answer import CompletionMixin
from retrieval.chunks import chunk_source
from retrieval.fact_view import FactView
from retrieval.models import SearchResult

if TYPE_CHECKING:
    from retrieval.base import RetrievalContext

GRAPH_INSTRUCTIONS = (
    "Each context item is a fact `subject —relation→ object` followed by the passage it was "
    "read from; chain facts across items when the question needs several steps. A fact's "
    "validity, when known, is in brackets after its relation ([since 2023-03-01], "
    "[2019-01-01 – 2023-03-01, superseded]): prefer the facts that hold at the time asked."
)
FEEDBACK_WEIGHT = "feedback_weight"


@dataclass(frozen=True)
class GraphSearchParams:
    """How wide to search and how to weigh the evidence of a triplet."""

    entity_hits: int = 20
    chunk_hits: int = 20
    row_hits: int = 20
    edge_type_hits: int = 50
    # Bounds on what one query reads: the best `seeds` entry points, the first hop's edges,
    # `frontier` nodes to step from, and the second hop's edges.
    seeds: int = 40
    frontier: int = 20
    edge_limit: int = 600
    second_hop_limit: int = 300
    node_weight: float = 0.5
    edge_weight: float = 0.2
    chunk_weight: float = 0.3
    hop_decay: float = 0.85
    mention_decay: float = 0.6
    # Each further triplet from an already used chunk counts this much less, so the context
    # covers more evidence (the second hop of a question) instead of repeating one chunk.
    same_chunk_decay: float = 0.75
    # Triplets listed per passage (the best first); lower ones still rank the passage no higher.
    evidence_per_passage: int = 4


@dataclass
class _Scored:
    edge: Edge
    score: float


class GraphCompletionRetriever(CompletionMixin):
    """Top-k triplets for a query, each with the text of the chunk it came from."""

    instructions = GRAPH_INSTRUCTIONS

    def __init__(
        self,
        graph: GraphReader,
        vectors: VectorStore,
        embedder: Embedder,
        params: GraphSearchParams | None = None,
        ctx: RetrievalContext | None = None,
        view: FactView | None = None,
    ) -> None:
        self.graph, self.vectors, self.embedder = graph, vectors, embedder
        self.params = params or GraphSearchParams()
        self.ctx = ctx  # needed only to answer (`get_completion`)
        # The time facts are seen at: the view given, else the search's, else now.
        self.view = view or (ctx.facts if ctx is not None else FactView())

    def get_context(self, query: str, datasets: Sequence[str], top_k: int) -> list[SearchResult]:
        """The top_k passages of the best triplets, each once, listing its triplets."""
        return self._results(self._passages(self._scored(query, datasets), top_k))

    def triplets(self, query: str, datasets: Sequence[str], top_k: int) -> list[SearchResult]:
        """The top_k triplets, one result each (a passage may repeat), repeats discounted."""
        return self._results([[s] for s in self._diverse_top(self._scored(query, datasets), top_k)])

    def _scored(self, query: str, datasets: Sequence[str]) -> list[_Scored]:
        """Every triplet read near the query, with its score."""
        p = self.params
        vector = self.embedder.embed([query])[0].tolist()

        def search(collection: str, limit: int) -> dict[str, float]:
            hits = self.vectors.search(collection, vector, datasets=datasets, limit=limit)
            return {hit.id: hit.score for hit in hits}

        chunk_sim = search(CHUNK_COLLECTION, p.chunk_hits)
        entity_sim = search(ENTITY_COLLECTION, p.entity_hits)
        # Table rows: each is an entry point and its own evidence (its support chunk id is
        # itself), so REFERENCES edges from and to it are followed like entity relations.
        row_sim = search(ROW_COLLECTION, p.row_hits)
        chunk_sim.update(row_sim)
        entity_sim.update({r: max(v, entity_sim.get(r, 0.0)) for r, v in row_sim.items()})
        edge_type_hits = self.vectors.search(
            EDGE_TYPE_COLLECTION, vector, datasets=datasets, limit=p.edge_type_hits
        )
        relation_sim = {hit.payload.get("name", ""): hit.score for hit in edge_type_hits}
        # Entities mentioned by the best chunks are entry points too, well below the chunk itself.
        for edge in self.graph.edges_of(list(chunk_sim), names=[MENTIONS], limit=p.edge_limit):
            if edge.source in chunk_sim:
                mention = chunk_sim.get(edge.source, 0.0) * p.mention_decay
                entity_sim[edge.target] = max(entity_sim.get(edge.target, 0.0), mention)
        floor = min(entity_sim.values(), default=0.0) * p.hop_decay

        def score(edge: Edge, node_sim: dict[str, float]) -> float:
            ends = (node_sim.get(edge.source, floor) + node_sim.get(edge.target, floor)) / 2
            chunks = max((chunk_sim.get(s.chunk_id, 0.0) for s in edge.support), default=0.0)
            rel = relation_sim.get(edge.name, 0.0)
            base = p.node_weight * ends + p.edge_weight * rel + p.chunk_weight * chunks
            # `improve` feedback (retrieval/memory.py): a weight in [0.5, 2.0] that raises a
            # liked triplet whatever its sign (similarities can be negative).
            weight = float(edge.properties.get(FEEDBACK_WEIGHT, 1.0))
            return base * weight if base >= 0 else base / weight

        seeds = sorted(entity_sim, key=lambda n: -entity_sim[n])[: p.seeds]
        edges = {e.id: e for e in self._relations(seeds, p.edge_limit)}
        if row_sim:  # a row that references nothing is still a result: row —IN TABLE→ table
            rows = sorted(row_sim, key=lambda n: -row_sim[n])
            edges.update({e.id: e for e in self.graph.edges_of(rows, names=[IN_TABLE])})
        first = {eid: score(e, entity_sim) for eid, e in edges.items()}
        # Spread: a node at the end of a good triplet is as relevant as part of that triplet,
        # which lets the second hop of a question (a node the query never names) rank.
        inherited: dict[str, float] = {}
        for eid, value in first.items():
            for node in (edges[eid].source, edges[eid].target):
                inherited[node] = max(inherited.get(node, 0.0), value * p.hop_decay)
        node_sim = {
            n: max(entity_sim.get(n, 0.0), inherited.get(n, 0.0))
            for n in entity_sim.keys() | inherited.keys()
        }
        unexpanded = sorted(
            (n for n in inherited if n not in entity_sim), key=lambda n: -inherited[n]
        )
        edges.update(
            {e.id: e for e in self._relations(unexpanded[: p.frontier], p.second_hop_limit)}
        )
        # Facts that do not hold in the view (superseded, ended) are demoted, not dropped;
        # facts not yet recorded at `known_at` are left out.
        weights = {eid: self.view.weight(e.properties) for eid, e in edges.items()}
        return [
            _Scored(e, _weighted(score(e, node_sim), weights[eid]))
            for eid, e in edges.items()
            if weights[eid] > 0
        ]

    def _passages(self, candidates: list[_Scored], top_k: int) -> list[list[_Scored]]:
        """The triplets grouped by the passage they show, best passage first, top_k passages."""
        groups: dict[tuple[str, ...], list[_Scored]] = {}
        for item in sorted(candidates, key=lambda s: -s.score):
            key = _passage_key(item.edge)
            if key not in groups:
                if len(groups) >= top_k:
                    continue
                groups[key] = []
            if len(groups[key]) < self.params.evidence_per_passage:
                groups[key].append(item)
        return list(groups.values())

    def _diverse_top(self, candidates: list[_Scored], top_k: int) -> list[_Scored]:
        """Greedy top-k where repeats of a chunk already in the context are discounted."""
        used: dict[str, int] = {}
        chosen: list[_Scored] = []
        pool = sorted(candidates, key=lambda s: -s.score)[: top_k * 20]

        def key(item: _Scored) -> str:
            return item.edge.support[0].chunk_id if item.edge.support else item.edge.id

        while pool and len(chosen) < top_k:
            best = max(
                pool, key=lambda s: s.score * self.params.same_chunk_decay ** used.get(key(s), 0)
            )
            pool.remove(best)
            used[key(best)] = used.get(key(best), 0) + 1
            chosen.append(best)
        return chosen

    def _relations(self, node_ids: list[str], limit: int) -> list[Edge]:
        if not node_ids:
            return []
        return self.graph.edges_of(node_ids, exclude=sorted(STRUCTURAL_EDGES), limit=limit)

    def _results(self, groups: list[list[_Scored]]) -> list[SearchResult]:
        """One result per group: its triplet lines, then the passage they share."""
        edges = [item.edge for group in groups for item in group]
        ids = {i for e in edges for i in (e.source, e.target)}
        ids |= {sup.chunk_id for e in edges for sup in e.support if sup.chunk_id}
        nodes = {node.id: node for node in self.graph.get_nodes(sorted(ids))}
        results: list[SearchResult] = []
        # (result index, edge key): what each result was read from, for session traces.
        self.trace: list[tuple[int, dict[str, str]]] = []
        for group in groups:
            kept = [i for i in group if i.edge.source in nodes and i.edge.target in nodes]
            if not kept:
                continue
            lines = []
            for item in kept:
                edge = item.edge
                key = {"source": edge.source, "name": edge.name, "target": edge.target}
                self.trace.append((len(results), {**key, "dataset": edge.dataset}))
                source, target = nodes[edge.source], nodes[edge.target]
                when = self.view.label(edge.properties)
                lines.append(f"{source.name} —{relation_label(edge.name)}{when}→ {target.name}")
            first = kept[0].edge
            shown = [nodes[c] for c in _passage_key(first) if c in nodes]
            text = "\n".join([*lines, *(str(c.properties.get("text", "")) for c in shown)])
            results.append(
                SearchResult(
                    text=text,
                    score=round(kept[0].score, 6),
                    sources=[chunk_source(c) for c in shown],
                    evidence=lines,
                )
            )
        return results


def _weighted(score: float, weight: float) -> float:
    """A score counted at `weight` (0..1): lowered whatever its sign."""
    return score * weight if score >= 0 else score / weight


def _passage_key(edge: Edge) -> tuple[str, ...]:
    """The chunk(s) a triplet's result shows: its first support chunk; for a reference both
    rows, the referring one first; none when the edge has no support chunk."""
    chunks = [s.chunk_id for s in edge.support if s.chunk_id]
    if edge.name == REFERENCES:
        return tuple(sorted(dict.fromkeys(chunks), key=lambda c: c != edge.source))
    return tuple(chunks[:1]) or (f"edge:{edge.id}",)
