"""Turns extracted events into Event, Timestamp and Interval nodes (DESIGN.md data model).

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
from typing import TYPE_CHECKING, Any

from core.models.extraction import KnowledgeGraph
from core.models.graph import Edge, Node, Support, entity_id, normalise_name, stable_id
from core.temporal import TimeSpan, epoch_seconds, iso_day
from pipelines.models import Chunk, ExtractedEvent

if TYPE_CHECKING:
    from pipelines.graph_builder import BuiltGraph

AT, DURING, INVOLVES = "AT", "DURING", "INVOLVES"
TEMPORAL_EDGES = frozenset({AT, DURING, INVOLVES})
EVENT, TIMESTAMP, INTERVAL = "Event", "Timestamp", "Interval"
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


def time_properties(span: TimeSpan) -> dict[str, Any]:
    """The sortable time values of a span (no None values: Neo4j cannot store them)."""
    props: dict[str, Any] = {
        "time": iso_day(span.sort_key),
        "epoch": epoch_seconds(span.sort_key),
        "granularity": span.granularity.value,
        "label": span.label,
    }
    if span.start is not None:
        props["start"] = iso_day(span.start)
        props["start_epoch"] = epoch_seconds(span.start)
    if span.end is not None:
        props["end"] = iso_day(span.end)
        props["end_epoch"] = epoch_seconds(span.end)
    return props


def span_of(node: Node) -> TimeSpan | None:
    """The span stored on an Event, Timestamp or Interval node (None if it has none)."""
    props = node.properties
    start, end = props.get("start_epoch"), props.get("end_epoch")
    if start is None and end is None:
        return None
    return TimeSpan(
        start=None if start is None else int(start) // 86_400,
        end=None if end is None else int(end) // 86_400,
        granularity=props.get("granularity", "day"),
        is_range=node.type == INTERVAL or bool(props.get("is_range")),
    )


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
