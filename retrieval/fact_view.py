"""Which facts a graph search shows as holding: now, `as_of` a world time, `known_at` a
system time. Every graph search reads facts through one `FactView` (the search's
`RetrievalContext.facts`).

A fact's validity is what the store derived (core/models/facts.py). In view:
- a fact recorded after `known_at` is not known: it is left out; one retired after it (its end
  learnt later) shows as it was then, its last span still open;
- a functional fact (one in a group) holds in the window asked (`as_of`, else today) for the
  share of the window its spans cover; another fact holds unless it ended before the window
  (its start may be only its document's date, which says it held by then, not since);
- a fact that does not hold is demoted (its score times `demote`, so its passage is still
  found, as history), one that holds for part of the window in proportion; a fact of a
  group the question asks about (`focus`: "Who is the CEO ...") that holds is raised.
Each fact's line says its validity: "[since 2023-03-01]", "[2019-01-01 – 2023-03-01,
superseded]".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from core.facts.when import parse_date, parse_moment
from core.models.facts import (
    ENDS_GROUP,
    FACT_GROUP,
    RECORDED_AT,
    RETIRED_AT,
    SUPERSEDED_BY,
    VALID_SPANS,
)
from core.temporal import TimeSpan, days_from_civil, iso_day

DEMOTE = 0.5
BOOST = 1.0
_FAR = 10**9


def today() -> int:
    now = date.today()
    return days_from_civil(now.year, now.month, now.day)


@dataclass(frozen=True)
class FactView:
    """The world time (`as_of`, a span of days; None: today) and the system time
    (`known_at`, epoch seconds; None: now) a search sees facts at."""

    as_of: TimeSpan | None = None
    known_at: float | None = None
    demote: float = DEMOTE
    asked: dict[str, str] = field(default_factory=dict, compare=False)
    # The functional groups the question asks about ("Who is the CEO of X": ceo): their
    # facts that hold count `1 + boost` times (core/facts/functional.py `groups_named`).
    focus: frozenset[str] = frozenset()
    boost: float = BOOST

    @classmethod
    def parse(cls, as_of: str | None = None, known_at: str | None = None) -> FactView:
        """A view from a caller's strings (bounded, see core/facts/when.py). InvalidInput."""
        pairs = (("as_of", as_of), ("known_at", known_at))
        asked = {k: v.strip() for k, v in pairs if v is not None}
        return cls(
            as_of=parse_date(as_of, "as_of") if as_of is not None else None,
            known_at=parse_moment(known_at, "known_at") if known_at is not None else None,
            asked=asked,
        )

    @property
    def default(self) -> bool:
        return self.as_of is None and self.known_at is None

    def window(self) -> tuple[int, int]:
        """The world-time window asked, [start, end) in days."""
        if self.as_of is None:
            now = today()
            return now, now + 1
        start = self.as_of.start if self.as_of.start is not None else -_FAR
        end = self.as_of.end if self.as_of.end is not None else _FAR
        return start, end

    def weight(self, props: dict[str, Any]) -> float:
        """How much a fact's score counts in this view: 1 holding, `demote` not, 0 unknown
        (recorded after `known_at`); 1 for an edge that is no dated fact."""
        held = self.held(props)
        if held is None:
            return 1.0
        if held < 0:
            return 0.0
        if held > 0 and props.get(FACT_GROUP) in self.focus:
            return 1.0 + self.boost * held
        return self.demote + (1 - self.demote) * held

    def held(self, props: dict[str, Any]) -> float | None:
        """The share of the window the fact holds (0..1), -1 when not known at `known_at`,
        None for an edge without validity."""
        spans = props.get(VALID_SPANS)
        if spans is None:
            return None
        if self.known_at is not None:
            recorded = props.get(RECORDED_AT)
            if recorded is not None and float(recorded) > self.known_at:
                return -1.0
        known = [
            (-_FAR if s is None else s, _FAR if e is None else e)
            for s, e in self._spans(props, spans)
        ]
        low, high = self.window()
        if props.get(FACT_GROUP) in (None, "", ENDS_GROUP):  # only an end says it ended
            return 0.0 if known and max(e for _, e in known) <= low else 1.0
        covered = sum(max(0, min(high, e) - max(low, s)) for s, e in known)
        return min(1.0, covered / max(1, high - low))

    def _spans(self, props: dict[str, Any], spans: list) -> list[tuple[int | None, int | None]]:
        """The spans as known at `known_at`: an end learnt later is not known yet."""
        found = [(s, e) for s, e in spans]
        retired = props.get(RETIRED_AT)
        unknown_end = retired is not None and self.known_at is not None and retired > self.known_at
        if found and unknown_end:
            found[-1] = (found[-1][0], None)
        return found

    def label(self, props: dict[str, Any]) -> str:
        """The fact's validity as a short bracketed note ("" for an edge without one)."""
        spans = props.get(VALID_SPANS)
        if spans is None or not spans:
            return "" if spans is None else " [never held]"
        start, end = self._spans(props, spans)[-1]
        if start is None and end is None:
            return ""
        held = self.held(props)
        if end is None:
            text = f"since {iso_day(start)}" if start is not None else "current"
        else:
            text = f"{iso_day(start) if start is not None else '…'} – {iso_day(end)}"
            if props.get(SUPERSEDED_BY) and not (self.known_at and held == 1.0):
                text += ", superseded"
        if held is not None and held <= 0 and end is None and props.get(FACT_GROUP) != ENDS_GROUP:
            text += ", not yet"
        return f" [{text}]"


def system_time(seconds: float | None) -> str | None:
    """An epoch time as an ISO date and time (UTC), None for None."""
    if seconds is None:
        return None
    return datetime.fromtimestamp(float(seconds), UTC).isoformat(timespec="seconds")
