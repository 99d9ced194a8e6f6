"""When facts held (world time) and when cogmill learnt it (system time), derived from claims.

Both graph adapters call `validity` inside the transaction that changed a fact (an edge write,
a document's deletion, a merge), after locking the subjects the change touched, with every
fact of those subjects that belongs to a group; the properties it returns are written back on
the edges (core/models/facts.py names them). Pure functions of the claims: the order the
claims were written in never matters, so any ingestion order, concurrent batches, re-runs or
deletions end in the same spans, and deleting the claim that ended a fact restores it.

The sweep, per subject and functional group (a company's CEOs, a person's employers): each
claim starts its object's span on its day (undated claims count as the oldest, and only for
an object with no dated start; a claim dated only by its document's date starts nothing for
an object whose start a text gives: it says the fact held by then, not that it began, so a
restatement never outranks a dated change), a claim's end or an ENDS fact between the same
two entities closes it, and an object that starts while others hold closes their spans (it
supersedes them; objects that start on the same day hold together). An object's spans are
those of every fact of the subject with that object in the group. A fact whose both ends are
subjects (married to) holds where both sweeps say it does. A fact in no group, and an ENDS fact, is
swept alone: its spans run from its earliest claim to its claims' ends.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from core.models.facts import (
    ENDS_GROUP,
    RECORDED_AT,
    RETIRED_AT,
    SUPERSEDED_BY,
    VALID_FROM,
    VALID_SPANS,
    VALID_TO,
)
from core.models.graph import FactClaim
from core.temporal import iso_day

# Before any day a calendar gives: where undated claims start.
NEVER = -(10**9)


@dataclass(frozen=True)
class Fact:
    """An edge as the sweep reads it: its key, its group and subject side, its claims."""

    id: str
    source: str
    target: str
    group: str = ""
    side: str = ""
    claims: tuple[FactClaim, ...] = ()

    def keyed(self) -> tuple[str, ...]:
        """The ends this fact is a value of (ENDS facts: both, as they end facts of both)."""
        if not self.group:
            return ()
        if self.group == ENDS_GROUP or self.side == "both":
            return tuple(sorted({self.source, self.target}))
        return (self.target,) if self.side == "target" else (self.source,)

    def other(self, subject: str) -> str:
        return self.target if subject == self.source else self.source


@dataclass
class Span:
    """One span an object held; `ender` is the fact that superseded it."""

    start: int
    end: int | None = None
    ender: str | None = None
    retired: float | None = None


@dataclass
class _Events:
    """Starts and ends of one sweep: day -> object -> (the fact started, recorded_at)."""

    starts: dict[int, dict[str, list[tuple[str, float | None]]]] = field(
        default_factory=lambda: defaultdict(dict)
    )
    ends: dict[int, dict[str, list[float | None]]] = field(
        default_factory=lambda: defaultdict(dict)
    )

    def start(self, day: int, obj: str, fact: str, recorded: float | None) -> None:
        self.starts[day].setdefault(obj, []).append((fact, recorded))

    def end(self, day: int, obj: str, recorded: float | None) -> None:
        self.ends[day].setdefault(obj, []).append(recorded)


def subjects(facts: Iterable[Fact]) -> set[str]:
    """The subjects whose groups these facts belong to (and ENDS facts touch)."""
    return {end for fact in facts for end in fact.keyed()}


def partners(facts: Iterable[Fact], read: Collection[str]) -> set[str]:
    """Subjects not in `read` whose facts a fact keyed on both ends also needs."""
    found: set[str] = set()
    for fact in facts:
        if fact.group and fact.group != ENDS_GROUP and fact.side == "both":
            found.update(end for end in (fact.source, fact.target) if end not in read)
    return found


def validity(facts: Iterable[Fact], touched: Collection[str]) -> dict[str, dict[str, Any]]:
    """The derived properties of the facts with claims that are keyed on a `touched` subject,
    and of the ungrouped or ENDS facts given. `facts` must hold every grouped fact of the
    touched subjects, and of the other end of each such fact keyed on both ends."""
    facts = list({f.id: f for f in facts}.values())
    grouped = [f for f in facts if f.group and f.group != ENDS_GROUP]
    ends_of: dict[str, list[Fact]] = defaultdict(list)
    for fact in facts:
        if fact.group == ENDS_GROUP:
            for end in fact.keyed():
                ends_of[end].append(fact)
    members: dict[tuple[str, str], list[Fact]] = defaultdict(list)
    for fact in grouped:
        for subject in fact.keyed():
            members[(subject, fact.group)].append(fact)
    wanted = {f.id for f in grouped if set(f.keyed()) & set(touched)}
    views: dict[str, list[list[Span]]] = defaultdict(list)
    for (subject, _), group in sorted(members.items()):
        if not any(f.id in wanted for f in group):
            continue
        for fact_id, spans in _group(subject, group, ends_of[subject]).items():
            if fact_id in wanted:
                views[fact_id].append(spans)
    found: dict[str, dict[str, Any]] = {}
    for fact in facts:
        if not fact.claims:
            continue
        if fact.id in views:
            spans = _intersect(views[fact.id])
        elif not fact.group or fact.group == ENDS_GROUP:
            spans = _group("", [fact], [])[fact.id]
        else:
            continue
        found[fact.id] = properties(spans, _first(c.recorded_at for c in fact.claims))
    return found


def _group(subject: str, facts: list[Fact], ending: list[Fact]) -> dict[str, list[Span]]:
    """The spans of each fact of one subject's group (`subject` "" sweeps one fact alone)."""
    events = _Events()

    def obj(fact: Fact) -> str:
        return fact.other(subject) if subject else ""

    dated: dict[str, list[int]] = defaultdict(list)
    said: set[str] = set()  # objects with a start the text gives
    for fact in facts:
        dated[obj(fact)] += [c.start for c in fact.claims if c.start is not None]
        if any(c.start is not None and not c.from_document for c in fact.claims):
            said.add(obj(fact))
    for fact in sorted(facts, key=lambda f: f.id):
        o = obj(fact)
        for claim in fact.claims:
            end = _end(claim)
            if claim.start is not None and claim.from_document and o in said:
                pass  # "X is the CEO" in a later document: no new start for a dated holder
            elif claim.start is not None:
                events.start(claim.start, o, fact.id, claim.recorded_at)
            elif _since_ever(dated[o], end):
                events.start(NEVER, o, fact.id, claim.recorded_at)
            if end is not None:
                events.end(end, o, claim.recorded_at)
    for fact in ending:
        for claim in fact.claims:
            day = claim.start if claim.start is not None else claim.end
            if day is not None:
                events.end(day, fact.other(subject), claim.recorded_at)
    held = _sweep(events)
    return {fact.id: held.get(obj(fact), []) for fact in facts}


def _since_ever(dated: list[int], end: int | None) -> bool:
    """Whether a claim without a start holds since ever: an undated one when its object has
    no dated start, one that ends ("until X") when none of its starts comes before X."""
    if end is None:
        return not dated
    return not any(day < end for day in dated)


def _end(claim: FactClaim) -> int | None:
    """A claim's end, unless it comes before its start (a misread date)."""
    if claim.end is None or (claim.start is not None and claim.end <= claim.start):
        return None
    return claim.end


def _sweep(events: _Events) -> dict[str, list[Span]]:
    """Every object's spans, from the events in day order (ends before starts on a day)."""
    holding: dict[str, Span] = {}
    spans: dict[str, list[Span]] = defaultdict(list)
    for day in sorted(events.starts.keys() | events.ends.keys()):
        closed = []
        for o, marks in sorted(events.ends.get(day, {}).items()):
            span = holding.pop(o, None)
            if span is not None:
                span.end, span.retired = day, _first(marks)
                closed.append(span)
        starting = events.starts.get(day, {})
        new = sorted(o for o in starting if o not in holding)
        if not new:
            continue
        ender = min(fact for o in new for fact, _ in starting[o])
        learnt = _first(r for o in new for _, r in starting[o])
        for o in sorted(holding):
            if o not in starting:
                span = holding.pop(o)
                span.end, span.ender, span.retired = day, ender, learnt
        for span in closed:  # ended that day by a claim, and someone starts: the successor
            span.ender = ender
        for o in new:
            holding[o] = Span(day)
            spans[o].append(holding[o])
    return spans


def _intersect(views: list[list[Span]]) -> list[Span]:
    """The spans where every view holds (a fact keyed on both ends)."""
    result = views[0]
    for other in views[1:]:
        merged: list[Span] = []
        for a in result:
            for b in other:
                start = max(a.start, b.start)
                ends = [s for s in (a, b) if s.end is not None]
                first = min(ends, key=lambda s: s.end or 0) if ends else None
                end = first.end if first is not None else None
                if end is None or start < end:
                    ender = first.ender if first else None
                    merged.append(Span(start, end, ender, first.retired if first else None))
        result = merged
    return result


def properties(spans: list[Span], recorded: float | None) -> dict[str, Any]:
    """The derived properties (core/models/facts.py) of a fact's spans."""
    last = spans[-1] if spans else None
    ended = last is None or last.end is not None
    retired = None
    if last is not None and last.end is not None:
        known = [r for r in (recorded, last.retired) if r is not None]
        retired = max(known) if known else None
    return {
        VALID_FROM: iso_day(last.start) if last and last.start != NEVER else None,
        VALID_TO: iso_day(last.end) if last and last.end is not None else None,
        VALID_SPANS: [[_day(s.start), s.end] for s in spans],
        SUPERSEDED_BY: last.ender if last is not None and ended else None,
        RECORDED_AT: recorded,
        RETIRED_AT: retired,
    }


def _day(day: int) -> int | None:
    return None if day == NEVER else day


def _first(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return min(known) if known else None
