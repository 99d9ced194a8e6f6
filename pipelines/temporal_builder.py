"""Turns extracted events into Event, Timestamp and Interval nodes (see the data model in
docs/architecture.md).

event AT timestamp (one calendar unit: a day, month, year, decade or century), event DURING
interval (a range or an open span: "between 1910 and 1920", "before 2001"), event INVOLVES
entity (an entity of the same chunk named in the event). Time nodes are shared within a
dataset (same span, same node); every node and edge carries the (document, chunk) it came
from, so deleting a document removes its events and the time nodes only it used.

Time values are stored so that they sort: `time` is the ISO day the span starts (or, open at
the start, the day it ends), `epoch` the same instant in seconds; spans also keep
`start_epoch` / `end_epoch` (exclusive), absent when open. ISO strings sort as text within
the Common Era; across eras sort by `epoch`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from core.models.extraction import KnowledgeGraph
from core.models.graph import Edge, Node, Support, entity_id, normalise_name, stable_id
from core.models.vocabulary import AT, DURING, EVENT, INTERVAL, INVOLVES, TIMESTAMP
from core.temporal import TimeSpan, time_properties
from pipelines.built_graph import BuiltGraph
from pipelines.models import Chunk, ExtractedEvent

# Entities that are dates themselves are the event's time, not a participant.
NOT_PARTICIPANTS = frozenset({"date", "time"})
EVENT_NAME_CHARS = 120


def span_key(span: TimeSpan) -> str:
    """The identity of a span: its bounds, granularity and kind."""
    return f"{span.start}:{span.end}:{span.granularity.value}:{int(span.is_range)}"


def event_id(dataset: str, text: str, span: TimeSpan) -> str:
    """The same happening at the same time is one event, whichever chunk tells it."""
    return stable_id("event", dataset, normalise_name(text), span_key(span))


def time_node_id(dataset: str, span: TimeSpan) -> str:
    kind = TIMESTAMP if span.is_point else INTERVAL
    return stable_id(kind.lower(), dataset, span_key(span))


def add_events(
    built: BuiltGraph,
    dataset: str,
    chunks: Sequence[Chunk],
    graphs: Sequence[KnowledgeGraph],
    events: Sequence[Sequence[ExtractedEvent]],
) -> None:
    """Add the events of each chunk (same order as `chunks`) with their times and entities."""
    for chunk, graph, chunk_events in zip(chunks, graphs, events, strict=True):
        support = [Support(document_id=chunk.document_id, chunk_id=chunk.id)]
        participants = _participants(graph)
        for event in chunk_events:
            if event.text.strip():
                _add_event(built, dataset, event, participants, support)


def _participants(graph: KnowledgeGraph) -> dict[str, str]:
    """Normalised name -> entity name, for the chunk's entities that can take part in events."""
    return {
        normalise_name(e.name): e.name
        for e in graph.entities
        if normalise_name(e.name) and e.type.strip().lower() not in NOT_PARTICIPANTS
    }


def _add_event(
    built: BuiltGraph,
    dataset: str,
    event: ExtractedEvent,
    participants: dict[str, str],
    support: list[Support],
) -> None:
    text = " ".join(event.text.split())
    span = event.when
    eid, tid = event_id(dataset, text, span), time_node_id(dataset, span)
    times = time_properties(span)
    name = text if len(text) <= EVENT_NAME_CHARS else text[: EVENT_NAME_CHARS - 1] + "…"
    props = {"text": text, "when_text": span.text, "is_range": span.is_range, **times}
    built.add_node(
        Node(id=eid, type=EVENT, dataset=dataset, name=name, support=support, properties=props)
    )
    kind = TIMESTAMP if span.is_point else INTERVAL
    built.add_node(
        Node(id=tid, type=kind, dataset=dataset, name=span.label, support=support, properties=times)
    )
    edge = AT if span.is_point else DURING
    built.add_edge(Edge(source=eid, target=tid, name=edge, dataset=dataset, support=support))
    for key in involved(text, event.entities, participants):
        target = entity_id(dataset, participants[key])
        built.add_edge(
            Edge(source=eid, target=target, name=INVOLVES, dataset=dataset, support=support)
        )


def involved(text: str, named: Sequence[str], participants: dict[str, str]) -> list[str]:
    """Keys of the chunk's entities the event names, or that appear in the event's text."""
    keys = {normalise_name(n) for n in named} & participants.keys()
    return sorted(keys | named_in(text, participants))


def named_in(text: str, keys: Iterable[str]) -> set[str]:
    """The normalised names among `keys` that occur in `text` as whole words."""
    words = " " + " ".join(re.findall(r"\w+", normalise_name(text))) + " "
    found = set()
    for key in keys:
        name = " ".join(re.findall(r"\w+", key))
        if name and f" {name} " in words:
            found.add(key)
    return found
