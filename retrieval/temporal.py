"""TEMPORAL: the graph search's passages, with the evidence from the question's time first.

The question's time comes from core/time_expressions.py ("in 2016", "between 1910 and 1920",
"before March 2019", "last 30 days", "2019年"). Events are found two ways, both bounded:
the time nodes (Timestamp, Interval) that overlap a window of the question come from the
graph's time index (`GraphReader.find_in_time`: overlap, not containment, so "March 2019"
finds the Interval 2018 – 2020; an open window such as "before 2001" reads with an open
bound), then the events AT / DURING them; and a wide vector search over `Event_text` is
filtered by the events' own time. An event scores by how much of its time lies inside the
question's (fit) and by its similarity to the question.

Fusion with GRAPH_PPR: the passages are GRAPH_PPR's top k for the question, plus the passages
of the best matching events it did not rank (at most k more). A passage's score is its best
event's score plus `graph_weight` times its PPR score (0..1), so time-overlapping evidence
leads, and none of the graph search's passages is ever dropped. Each result is one passage:
its events ("date: text (involves: ...)") first, then the passage text. On datasets without
events, a passage among PPR's `pool` best scores by how much of a time it mentions lies in
the question's (the same way), so a time question never comes back empty. A question
without a time is plain GRAPH_PPR.

Bounds: at most `time_nodes` time nodes per window, the earliest first (a window holding
more loses its latest ones; the vector search still finds similar events among those), and
`max_events` events through them; GRAPH_PPR reads its own bounded neighbourhood.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date

from core.models.graph import Node
from core.models.vocabulary import (
    AT,
    DURING,
    EVENT,
    EVENT_COLLECTION,
    INTERVAL,
    INVOLVES,
    TIMESTAMP,
)
from core.temporal import TimeSpan, epoch_seconds, span_of
from core.time_expressions import find_spans
from retrieval.answer import CompletionMixin
from retrieval.base import RetrievalContext
from retrieval.chunks import chunk_source
from retrieval.models import SearchResult
from retrieval.ppr.params import PPRParams
from retrieval.ppr.retriever import PPRRetriever

INSTRUCTIONS = (
    "Context items start with the dated events they hold, then their passage. Answer with the "
    "events that fall in the time the question asks about, in time order, and give their dates."
)


@dataclass(frozen=True)
class TemporalParams:
    """Bounds on what one query reads, and how fit and similarity weigh."""

    time_nodes: int = 5000  # Timestamp + Interval nodes overlapping one window, earliest first
    max_events: int = 5000  # events read through the matching time nodes
    vector_hits: int = 500
    fit_weight: float = 0.6
    similarity_weight: float = 0.4
    involved_per_event: int = 8
    # A passage scores its best event's score (0..1) plus `graph_weight` times its PPR score
    # (0..1): the events of the question's time lead, PPR orders what they leave tied and
    # the passages without such events.
    graph_weight: float = 0.1
    pool: int = 50  # GRAPH_PPR passages read for the fusion (and scanned for time mentions)


@dataclass
class _Candidate:
    event: Node
    fit: float
    similarity: float = 0.0

    @property
    def when(self) -> int:
        span = span_of(self.event)
        return span.sort_key if span is not None else 0


class TemporalRetriever(CompletionMixin):
    """Events in the question's time window, with their dates, entities and sources."""

    def __init__(
        self,
        ctx: RetrievalContext,
        params: TemporalParams | None = None,
        today: Callable[[], date] = date.today,
    ) -> None:
        self.ctx, self.params, self.today = ctx, params or TemporalParams(), today
        self.note: str | None = None

    def get_context(self, query: str, datasets: Sequence[str], top_k: int) -> list[SearchResult]:
        windows = find_spans(query, bare_years=True, now=self.today())
        graph = self._graph_search(query, datasets, top_k)
        if not windows:
            return graph[:top_k]
        candidates = self._through_time_nodes(windows, datasets)
        self._add_similar(query, windows, datasets, candidates)
        ranked = sorted(candidates.values(), key=lambda c: (-self._score(c), c.when))
        if ranked:
            return self._fused(graph, ranked[:top_k], top_k)
        self.note = "no events match the question's time: passages that mention it come first"
        return self._by_mentions(graph, windows, top_k)

    def _graph_search(self, query: str, datasets: Sequence[str], top_k: int) -> list[SearchResult]:
        """GRAPH_PPR's best `pool` (at least k) passages for the question, best first."""
        ctx = self.ctx
        params = PPRParams.from_settings(ctx.settings)
        ppr = PPRRetriever(ctx.graph, ctx.vectors, ctx.embedder, params, ctx=ctx)
        return ppr.get_context(query, datasets, max(top_k, self.params.pool))

    def _score(self, candidate: _Candidate) -> float:
        p = self.params
        return p.fit_weight * candidate.fit + p.similarity_weight * candidate.similarity

    def _fused(
        self, graph: list[SearchResult], best: list[_Candidate], top_k: int
    ) -> list[SearchResult]:
        """PPR's top k and the best events' passages, time-matching evidence boosted."""
        lines = self._event_lines(best)
        by_chunk: dict[str, list[tuple[float, str]]] = {}
        for candidate in best:
            for support in candidate.event.support:
                if support.chunk_id:
                    line = (self._score(candidate), lines[candidate.event.id])
                    by_chunk.setdefault(support.chunk_id, []).append(line)
        passages = {r.sources[0].chunk_id: r for r in graph if r.sources}
        wanted = {r.sources[0].chunk_id for r in graph[:top_k] if r.sources} | set(by_chunk)
        missing = sorted(c for c in wanted if c not in passages)
        for node in self.ctx.graph.get_nodes(missing) if missing else []:
            passages[node.id] = SearchResult(
                text=str(node.properties.get("text", "")), score=0.0, sources=[chunk_source(node)]
            )
        fused = []
        for chunk_id in sorted(wanted & passages.keys()):
            passage, events = passages[chunk_id], sorted(by_chunk.get(chunk_id, []), reverse=True)
            boost = events[0][0] if events else 0.0
            evidence = [line for _, line in events]
            score = boost + self.params.graph_weight * passage.score
            update = {"text": "\n".join([*evidence, passage.text]), "evidence": evidence}
            fused.append(passage.model_copy(update={**update, "score": round(score, 6)}))
        return sorted(fused, key=lambda r: -r.score)  # stable: ties keep the chunk id order

    def _by_mentions(
        self, graph: list[SearchResult], windows: list[TimeSpan], top_k: int
    ) -> list[SearchResult]:
        """PPR's top k and the pool's passages that mention the question's time, boosted."""
        fused, added = [], 0
        for rank, result in enumerate(graph):
            spans = find_spans(result.text)
            overlap = max((_fit(span, windows) for span in spans), default=0.0)
            if rank < top_k or (overlap > 0 and added < top_k):
                added += rank >= top_k
                score = overlap + self.params.graph_weight * result.score
                fused.append(result.model_copy(update={"score": round(score, 6)}))
        return sorted(fused, key=lambda r: -r.score)

    def prepare_answer(self, query: str, results: list[SearchResult]) -> str | None:
        """The events' instructions for a question with a time (else the context is plain
        GRAPH_PPR passages)."""
        return INSTRUCTIONS if find_spans(query, bare_years=True, now=self.today()) else None

    def _through_time_nodes(
        self, windows: list[TimeSpan], datasets: Sequence[str]
    ) -> dict[str, _Candidate]:
        """Events AT / DURING a time node that overlaps one of the windows."""
        fit: dict[str, float] = {}
        for window in windows:
            for node in self._time_nodes(window, datasets):
                span = span_of(node)
                if span is not None and (best := span.fraction_within(window)) > 0:
                    fit[node.id] = max(fit.get(node.id, 0.0), best)
        if not fit:
            return {}
        edges = self.ctx.graph.edges_of(
            sorted(fit), names=[AT, DURING], limit=self.params.max_events
        )
        event_fit: dict[str, float] = {}
        for edge in edges:
            if edge.target in fit:
                event_fit[edge.source] = max(event_fit.get(edge.source, 0.0), fit[edge.target])
        events = self.ctx.graph.get_nodes(sorted(event_fit))
        return {e.id: _Candidate(e, event_fit[e.id]) for e in events if e.type == EVENT}

    def _time_nodes(self, window: TimeSpan, datasets: Sequence[str]) -> list[Node]:
        """The Timestamp and Interval nodes that overlap a window (an open end reads open)."""
        start = None if window.start is None else epoch_seconds(window.start)
        end = None if window.end is None else epoch_seconds(window.end)
        return self.ctx.graph.find_in_time(
            datasets, [TIMESTAMP, INTERVAL], start=start, end=end, limit=self.params.time_nodes
        )

    def _add_similar(
        self,
        query: str,
        windows: list[TimeSpan],
        datasets: Sequence[str],
        candidates: dict[str, _Candidate],
    ) -> None:
        """Similarity for the candidates, and events the time nodes missed (over the bound)."""
        vector = self.ctx.embedder.embed([query])[0].tolist()
        hits = self.ctx.vectors.search(
            EVENT_COLLECTION, vector, datasets=datasets, limit=self.params.vector_hits
        )
        similarity = {hit.id: hit.score for hit in hits}
        unseen = [hit.id for hit in hits if hit.id not in candidates]
        for event in self.ctx.graph.get_nodes(unseen) if unseen else []:
            span = span_of(event)
            if span is not None and (best := _fit(span, windows)) > 0:
                candidates[event.id] = _Candidate(event, best)
        for candidate in candidates.values():
            candidate.similarity = similarity.get(candidate.event.id, 0.0)

    def _event_lines(self, best: list[_Candidate]) -> dict[str, str]:
        """Each event as "date: text (involves: ...)", by event id."""
        ids = [c.event.id for c in best]
        involved: dict[str, list[str]] = {}
        if ids:
            limit = len(ids) * self.params.involved_per_event
            for edge in self.ctx.graph.edges_of(ids, names=[INVOLVES], limit=limit):
                involved.setdefault(edge.source, []).append(edge.target)
        entity_ids = {t for targets in involved.values() for t in targets}
        nodes = {n.id: n for n in self.ctx.graph.get_nodes(sorted(entity_ids))}
        lines = {}
        for c in best:
            props = c.event.properties
            text = f"{props.get('label', '')}: {props.get('text', c.event.name)}"
            names = sorted({nodes[t].name for t in involved.get(c.event.id, []) if t in nodes})
            if names:
                text += f" (involves: {', '.join(names)})"
            lines[c.event.id] = text
        return lines


def _fit(span: TimeSpan, windows: list[TimeSpan]) -> float:
    """How much of an event's time lies inside the best-matching window of the question."""
    return max(span.fraction_within(window) for window in windows)
