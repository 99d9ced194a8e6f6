"""recall (session + graph lanes) and improve (feedback on answers) over session memory.

recall's scope decides the lanes:
- `session`: only what the session holds (notes, earlier questions and their results);
- `graph`: the normal search over the datasets;
- `both`: both lanes, merged by score;
- `auto` (default): with datasets, both; with only a session id, a session hit at or above
  `threshold` answers without reading the graph at all, and a weaker one falls back to the
  graph over the datasets this session searched before (if any).
Every result says which lane and kind it came from (`source`). A recall with a session id is
recorded in that session like a search (with the datasets its results came from), so it can be
improved and recalled later. With datasets, the session lane holds only the notes and the
earlier answers drawn from those datasets: a session that also searched another dataset never
brings that dataset's text into a recall over these.

improve turns feedback on an answer into a `feedback_weight` on the graph edges the answer's
results were read from (its trace); GRAPH_COMPLETION multiplies triplet scores by it. recall's
graph lane uses the router's default type (`DEFAULT_TYPE`, GRAPH_PPR) unless a type is given;
GRAPH_PPR reads passages, not triplets, so feedback on edges needs GRAPH_COMPLETION results.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from core.catalog import check_dataset_name
from core.errors import InvalidInput
from core.models.graph import Edge
from core.ports import GraphStore
from retrieval.answer import answer
from retrieval.base import RetrievalContext
from retrieval.graph_completion import FEEDBACK_WEIGHT
from retrieval.models import SearchResponse, SearchResult, SearchType, Source
from retrieval.registry import RETRIEVERS
from retrieval.router import DEFAULT_TYPE
from retrieval.sessions import (
    SessionNotFoundError,
    SessionStore,
    TraceElement,
    check_session_id,
    trace_elements,
)

RecallSource = Literal["session_qa", "session_trace", "session_note", "graph"]
Scope = Literal["auto", "session", "graph", "both"]
SCOPES: tuple[str, ...] = ("auto", "session", "graph", "both")
DEFAULT_THRESHOLD = 0.8
# A result of an earlier question is relevant at least as that question is, a little less.
TRACE_DECAY = 0.9
FEEDBACK_STEP = 1.5
WEIGHT_BOUNDS = (0.5, 2.0)
NO_TRIPLETS = "the answer used no graph triplets (only GRAPH_COMPLETION traces them)"


class RecallResult(BaseModel):
    text: str
    score: float
    source: RecallSource = Field(description="session_qa, session_trace, session_note or graph")
    sources: list[Source] = Field(default_factory=list)
    qa_id: str | None = Field(default=None, description="The earlier answer it came from")


class RecallResponse(BaseModel):
    query: str
    session: str | None = None
    lanes: list[Literal["session", "graph"]] = Field(description="The lanes that were read")
    results: list[RecallResult] = Field(default_factory=list)
    answer: str | None = None
    answer_source: Literal["session_qa", "llm"] | None = None
    qa_id: str | None = Field(default=None, description="This recall in the session (improve)")
    note: str | None = None


@dataclass
class _Hit:
    result: RecallResult
    elements: list[TraceElement] = field(default_factory=list)
    answer: str | None = None
    datasets: list[str] = field(default_factory=list)  # where the result was read


def recall(
    ctx: RetrievalContext,
    query: str,
    *,
    session: str | None = None,
    datasets: Sequence[str] = (),
    scope: str = "auto",
    top_k: int = 10,
    search_type: SearchType = DEFAULT_TYPE,
    threshold: float = DEFAULT_THRESHOLD,
    sessions: SessionStore | None = None,
) -> RecallResponse:
    """Results for `query` from the session and/or the graph, each tagged with its source.

    `sessions` is the caller's session store (default: the local default tenant's)."""
    datasets = _check(query, session, datasets, scope, top_k, search_type)
    store = None
    if session:
        store = sessions or SessionStore(ctx.state, ctx.settings.session_ttl_seconds)
    hits: list[_Hit] = []
    if store is not None and session is not None and scope != "graph":
        hits = session_hits(ctx, store, session, query, datasets)
    best = hits[0].result.score if hits else 0.0
    graph_datasets = list(datasets)
    notes: list[str] = []
    if scope == "session" or (scope == "auto" and not datasets and best >= threshold):
        graph_datasets = []
    elif not graph_datasets and store is not None and session is not None:
        graph_datasets = store.datasets(session)  # auto/graph/both with only a session id
        if graph_datasets:
            notes.append(f"searched the session's datasets {', '.join(graph_datasets)}")
    lanes: list[Literal["session", "graph"]] = ["session"] if store and scope != "graph" else []
    if graph_datasets:
        lanes.append("graph")
        hits += _graph_hits(ctx, query, graph_datasets, top_k, search_type)
    elif scope in ("graph", "both"):
        raise InvalidInput(f"scope {scope!r} needs datasets (or a session that searched some)")
    hits = sorted(hits, key=lambda h: -h.result.score)[:top_k]
    response = RecallResponse(query=query, session=session, lanes=lanes)
    response.results = [h.result for h in hits]
    _answer(ctx, response, hits, threshold, notes)
    response.note = "; ".join(notes) or None
    if store is not None and session is not None and hits:  # nothing found: nothing to improve
        response.qa_id = _record(store, session, response, hits, graph_datasets, search_type)
    return response


def _check(
    query: str,
    session: str | None,
    datasets: Sequence[str],
    scope: str,
    top_k: int,
    search_type: SearchType,
) -> list[str]:
    if not query.strip():
        raise InvalidInput("the query is empty; pass the question to recall")
    if scope not in SCOPES:
        raise InvalidInput(f"unknown scope {scope!r}; use one of {', '.join(SCOPES)}")
    if session is None and not datasets:
        raise InvalidInput("recall needs a session id, datasets, or both")
    if session is not None:
        check_session_id(session)
    elif scope == "session":
        raise InvalidInput("scope 'session' needs a session id")
    if top_k < 1:
        raise InvalidInput(f"top-k must be at least 1, got {top_k}")
    if search_type not in RETRIEVERS:
        raise InvalidInput(f"search type {search_type} is not available")
    return [check_dataset_name(name) for name in datasets]


def session_hits(
    ctx: RetrievalContext,
    store: SessionStore,
    session: str,
    query: str,
    datasets: Sequence[str] = (),
) -> list[_Hit]:
    """The session's notes, questions and their results, by cosine similarity to the query;
    with `datasets`, only the questions answered from those datasets (and every note)."""
    q = np.asarray(ctx.embedder.embed([query])[0], dtype=np.float32)

    def sims(item: str, created: float, texts: list[str]) -> list[float]:
        vectors = np.asarray(store.vectors(session, item, created, texts, ctx.embedder))
        return [round(float(s), 6) for s in vectors @ q]

    hits: list[_Hit] = []
    for note in store.notes(session):
        [score] = sims(note.id, note.created, [note.text])
        hits.append(_Hit(RecallResult(text=note.text, score=score, source="session_note")))
    seen: dict[str, _Hit] = {}
    within = set(datasets)
    for qa in store.qas(session):
        if within and not set(qa.datasets) <= within:
            continue  # answered from another dataset: not part of a recall over these
        scores = sims(qa.id, qa.created, [qa.question] + [r.text for r in qa.results])
        text = f"Q: {qa.question}" + (f"\nA: {qa.answer}" if qa.answer else "")
        cited = list({s.chunk_id: s for r in qa.results[:3] for s in r.sources}.values())
        result = RecallResult(
            text=text, score=scores[0], source="session_qa", sources=cited, qa_id=qa.id
        )
        hits.append(_Hit(result, [e for e in qa.elements if e.result < 3], qa.answer, qa.datasets))
        for index, traced in enumerate(qa.results):
            score = max(scores[index + 1], scores[0] * TRACE_DECAY)
            if traced.text in seen and seen[traced.text].result.score >= score:
                continue  # the same result from two questions: keep the better match
            seen[traced.text] = _Hit(
                RecallResult(
                    text=traced.text,
                    score=round(score, 6),
                    source="session_trace",
                    sources=traced.sources,
                    qa_id=qa.id,
                ),
                [e.model_copy(update={"result": 0}) for e in qa.elements if e.result == index],
                datasets=qa.datasets,
            )
    return sorted(hits + list(seen.values()), key=lambda h: -h.result.score)


def _graph_hits(
    ctx: RetrievalContext, query: str, datasets: list[str], top_k: int, search_type: SearchType
) -> list[_Hit]:
    retriever = RETRIEVERS.create(search_type, ctx)
    results = retriever.get_context(query, datasets, top_k)
    elements = trace_elements(
        retriever, SearchResponse(query=query, search_type=search_type, results=results)
    )
    return [
        _Hit(
            RecallResult(text=r.text, score=r.score, source="graph", sources=r.sources),
            [e.model_copy(update={"result": 0}) for e in elements if e.result == i],
            datasets=list(datasets),
        )
        for i, r in enumerate(results)
    ]


def _answer(
    ctx: RetrievalContext,
    response: RecallResponse,
    hits: list[_Hit],
    threshold: float,
    notes: list[str],
) -> None:
    """The stored answer of a matching earlier question, else the LLM's over the results."""
    top = hits[0] if hits else None
    if top and top.result.source == "session_qa" and top.answer and top.result.score >= threshold:
        response.answer, response.answer_source = top.answer, "session_qa"
    elif ctx.llm is not None and hits:
        results = [
            SearchResult(text=h.result.text, score=h.result.score, sources=h.result.sources)
            for h in hits
        ]
        reply = answer(ctx, response.query, results)
        response.answer, response.answer_source = str(reply), "llm"
    elif ctx.llm is None:
        notes.append("no LLM is configured: returning the recalled context")


def _record(
    store: SessionStore,
    session: str,
    response: RecallResponse,
    hits: list[_Hit],
    datasets: list[str],
    search_type: SearchType,
) -> str:
    results = [
        SearchResult(text=h.result.text, score=h.result.score, sources=h.result.sources)
        for h in hits
    ]
    elements = [e.model_copy(update={"result": i}) for i, h in enumerate(hits) for e in h.elements]
    searched = SearchResponse(
        query=response.query, search_type=search_type, results=results, answer=response.answer
    )
    # The datasets searched and those the session's results came from: a later recall over
    # other datasets must not find these results through this record.
    read = list(dict.fromkeys([*datasets, *(d for h in hits for d in h.datasets)]))
    return store.record(session, searched, read, elements)


# -- improve -----------------------------------------------------------------------------------


class ImproveResult(BaseModel):
    qa_id: str
    feedback: float
    results: list[int] = Field(description="The result indexes the feedback applied to")
    edges: int = Field(description="Graph edges whose feedback_weight changed")
    missing: int = Field(description="Traced edges no longer in the graph (skipped)")
    note: str | None = None


def improve(
    graph: GraphStore,
    store: SessionStore,
    session: str,
    qa_id: str,
    feedback: float,
    results: Sequence[int] | None = None,
) -> ImproveResult:
    """Scale the weight of the edges behind an answer (all its results, or only `results`).

    `feedback` is in [-1, 1] (down = -1, up = +1); an edge's weight is multiplied by
    1.5 ** feedback and kept within [0.5, 2.0]. Giving the same feedback on the same result
    again changes nothing; changing it applies the difference.
    """
    if not -1.0 <= feedback <= 1.0:
        raise InvalidInput(f"feedback must be between -1 (down) and 1 (up), got {feedback}")
    record = store.qa(session, qa_id)
    if record is None:
        raise SessionNotFoundError(
            f"session {session!r} has no answer {qa_id!r} (expired or forgotten); use a qa_id "
            "from search or recall with this session"
        )
    chosen = list(range(len(record.results))) if results is None else sorted(set(results))
    bad = [i for i in chosen if not 0 <= i < len(record.results)]
    if bad:
        raise InvalidInput(
            f"answer {qa_id} has results 0-{len(record.results) - 1}; got index(es) {bad}"
        )
    given = store.feedback_given(session, qa_id)
    deltas = {i: feedback - given.get(str(i), 0.0) for i in chosen}
    edges = {
        (e.source, e.name, e.target): (e, deltas[e.result])
        for e in record.elements
        if e.kind == "edge" and e.result in deltas and deltas[e.result]
    }
    changed, missing = _reweigh(graph, list(edges.values()))
    store.set_feedback(session, qa_id, {**given, **{str(i): feedback for i in chosen}})
    note = None if any(e.kind == "edge" for e in record.elements) else NO_TRIPLETS
    return ImproveResult(
        qa_id=qa_id, feedback=feedback, results=chosen, edges=changed, missing=missing, note=note
    )


def _reweigh(graph: GraphStore, edges: list[tuple[TraceElement, float]]) -> tuple[int, int]:
    """Multiply each traced edge's feedback_weight by FEEDBACK_STEP ** delta, within bounds."""
    low, high = WEIGHT_BOUNDS
    updates: list[Edge] = []
    missing = 0
    for element, delta in edges:
        stored = [
            e
            for e in graph.edges_of([element.source], names=[element.name], limit=10_000)
            if e.source == element.source and e.target == element.target
        ]
        if not stored:
            missing += 1
            continue
        old = float(stored[0].properties.get(FEEDBACK_WEIGHT, 1.0))
        new = round(min(high, max(low, old * FEEDBACK_STEP**delta)), 6)
        updates.append(
            Edge(
                source=element.source,
                target=element.target,
                name=element.name,
                dataset=stored[0].dataset,
                properties={FEEDBACK_WEIGHT: new},
            )
        )
    graph.upsert_edges(updates)
    return len(updates), missing
