"""When a passage says its fact held: the world-time claim of one relationship, offline.

The sentence a relationship was read from is searched for dates (core/time_expressions.py):
the one nearest the relation's object (or subject) counts, unless context marks it as about
something else ("born in 1970", "founded in 1990"). A range ("from 2019 to 2021") or an open
span ("until 2021", "since 2019") gives the bounds as it says. A single date starts the fact,
or ends it when the change word nearest the object says the fact ended ("former", "stepped
down", "resigned", "no longer"); a relation whose own name says it began ("joined", "moved
to", "married") always starts. Without a date in the sentence, the document's date stands in
(a fact said in a document dated 2024 held in 2024). Nothing known: an undated claim.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from core.facts.functional import words_of
from core.temporal import TimeSpan
from core.time_expressions import find_spans, normalise

# A sentence longer than this is read only this far (offline descriptions are sentences of
# at most a few hundred characters; an LLM's may be anything).
MAX_TEXT = 1000
_ENDED = re.compile(
    r"\b(?:former(?:ly)?|ex-|previous(?:ly)?|stepped down|steps down|step down|resign\w*"
    r"|retir\w*|left|leaves|quit\w*|depart\w*|no longer|divorc\w*|separated|ousted|fired"
    r"|outgoing|used to|until then|replaced by)\b"
)
_BEGAN = re.compile(
    r"\b(?:became|become|becomes|appointed|named|elected|joined|joins|hired|succeed\w*"
    r"|took over|takes over|moved to|moves to|relocated|married|marries|wed|since|now|new"
    r"|promoted|installed|took the helm|was made)\b"
)
# A date right after these words is about something else than the fact.
_OTHER_EVENT = re.compile(
    r"\b(?:born|founded|established|created|built|opened|launched|died|incorporated|formed)"
    r"\b[^.;]{0,20}$"
)
_STARTING_NAMES = frozenset({"joined", "join", "joins", "married", "marry", "wed", "hired"})


@dataclass(frozen=True)
class Bounds:
    """The world-time bounds one claim gives, in days since 1970-01-01 (None: not said)."""

    start: int | None = None
    end: int | None = None
    from_document: bool = False  # the day is the document's: the text gives none


def claim_bounds(
    text: str,
    relation: str,
    source: str,
    target: str,
    document_day: int | None,
    *,
    ends_fact: bool = False,
) -> Bounds:
    """The bounds a sentence gives its relationship (source, relation, target); `ends_fact`:
    the relation says a fact ended ("left"), so its date is when it did."""
    lowered = normalise(text[:MAX_TEXT])
    anchor = _position(lowered, target, source)
    span = _nearest_date(lowered, anchor)
    if ends_fact:
        when = _first_day(span) if span is not None else document_day
        return Bounds(start=when, from_document=span is None and when is not None)
    if span is not None and span.is_range and span.start is not None and span.end is not None:
        return Bounds(span.start, span.end)
    if span is not None and (span.start is None or span.end is None) and span.is_range:
        return Bounds(span.start, span.end)  # "until 2021", "since 2019"
    day = span.start if span is not None else document_day
    if day is None:
        return Bounds()
    weak = span is None
    if _ended(lowered, anchor, relation):
        return Bounds(end=day, from_document=weak)
    return Bounds(start=day, from_document=weak)


def _position(lowered: str, *names: str) -> int:
    """Where the first of the names found occurs (the middle of the text when none is)."""
    for name in names:
        at = lowered.find(normalise(name)) if name else -1
        if at >= 0:
            return at
    return len(lowered) // 2


def _nearest_date(lowered: str, anchor: int) -> TimeSpan | None:
    """The date expression nearest the anchor."""
    best: tuple[int, TimeSpan] | None = None
    for at, span in _dates(lowered):
        distance = min(abs(at - anchor), abs(at + len(span.text) - anchor))
        if best is None or distance < best[0]:
            best = (distance, span)
    return best[1] if best is not None else None


@functools.lru_cache(maxsize=4096)
def _dates(lowered: str) -> tuple[tuple[int, TimeSpan], ...]:
    """Where each date expression of a sentence is, skipping those about another event (the
    relationships of one sentence share its dates: read once)."""
    found = []
    searched = 0
    for span in find_spans(lowered):
        at = lowered.find(span.text, searched) if span.text else -1
        if at < 0:
            continue
        searched = at + len(span.text)
        if not _OTHER_EVENT.search(lowered[max(0, at - 40) : at]):
            found.append((at, span))
    return tuple(found)


def _first_day(span: TimeSpan) -> int | None:
    return span.start if span.start is not None else span.end


def _ended(lowered: str, anchor: int, relation: str) -> bool:
    """Whether the change word nearest the anchor says the fact ended."""
    if _STARTING_NAMES.intersection(words_of(relation)):
        return False
    ended = [abs(m.start() - anchor) for m in _ENDED.finditer(lowered)]
    if not ended:
        return False
    began = [abs(m.start() - anchor) for m in _BEGAN.finditer(lowered)]
    return min(ended) < min(began, default=len(lowered) + 1)
