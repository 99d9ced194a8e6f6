"""Time spans: half-open day intervals with an explicit granularity, and how nodes store them.

Used by the temporal pipeline (dates in documents) and the TEMPORAL retriever (the time of a
question); core/time_expressions.py reads them from text. Days are counted from 1970-01-01 on
the proleptic Gregorian calendar, so BC years work (astronomical numbering: 1 BC is year 0)
where `datetime` stops at year 1.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict

from core.models.graph import Node
from core.models.vocabulary import INTERVAL


class Granularity(StrEnum):
    DAY = "day"
    MONTH = "month"
    YEAR = "year"
    DECADE = "decade"
    CENTURY = "century"


class TimeSpan(BaseModel):
    """[start, end) in days since 1970-01-01; None is an open end (before X, after X)."""

    model_config = ConfigDict(frozen=True)

    start: int | None
    end: int | None
    granularity: Granularity
    text: str = ""
    is_range: bool = False  # "between X and Y", "before X": an interval, not one calendar unit

    @property
    def is_point(self) -> bool:
        """One calendar unit (a day, month, year, decade or century): a Timestamp node."""
        return not self.is_range and self.start is not None and self.end is not None

    def overlaps(self, other: TimeSpan) -> bool:
        """Whether the two spans share at least one day."""
        low = max(_low(self.start), _low(other.start))
        high = min(_high(self.end), _high(other.end))
        return low < high

    def fraction_within(self, other: TimeSpan) -> float:
        """How much of this span lies inside `other` (0..1); open spans count as 0.1 at most."""
        if not self.overlaps(other):
            return 0.0
        if self.start is None or self.end is None:
            return 0.1
        inside = min(self.end, _high(other.end)) - max(self.start, _low(other.start))
        return max(0.0, min(1.0, inside / (self.end - self.start)))

    @property
    def sort_key(self) -> int:
        """Where the span sorts on a time line: its start, else (open start) its end."""
        return self.start if self.start is not None else _low(self.end) - 1

    @property
    def label(self) -> str:
        """A short readable form: 2019-03-11, 2019-03, 2019, 1990s, 19th century, 1910 – 1920."""
        if self.start is None:
            return f"before {_unit_label(_low(self.end), self.granularity)}"
        if self.end is None:
            return f"from {_unit_label(self.start, self.granularity)}"
        if self.is_range:
            first, last = self.start, self.end - 1
            return f"{_unit_label(first, self.granularity)} – {_unit_label(last, self.granularity)}"
        return _unit_label(self.start, self.granularity)


def _unit_label(days: int, granularity: Granularity) -> str:
    """The calendar unit holding a day, written at a granularity."""
    year, month, _ = civil_from_days(days)
    if granularity is Granularity.DAY:
        return iso_day(days)
    if granularity is Granularity.MONTH:
        return f"{_year_text(year)}-{month:02d}"
    if granularity is Granularity.YEAR:
        return _year_text(year) if year > 0 else f"{1 - year} BC"
    if granularity is Granularity.DECADE:
        return f"{_year_text(year)}s"
    century = year // 100 + 1 if year > 0 else (1 - year + 99) // 100
    return f"{_ordinal(century)} century" + (" BC" if year <= 0 else "")


_FAR = 10**9  # beyond any day number a calendar produces


def _low(day: int | None) -> int:
    return -_FAR if day is None else day


def _high(day: int | None) -> int:
    return _FAR if day is None else day


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (any year; H. Hinnant's method)."""
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def civil_from_days(days: int) -> tuple[int, int, int]:
    """(year, month, day) of a day number; the inverse of `days_from_civil`."""
    days += 719468
    era = days // 146097
    doe = days - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


def iso_day(days: int) -> str:
    """ISO 8601 form of a day; years below 1 get a sign (astronomical numbering)."""
    year, month, day = civil_from_days(days)
    return f"{_year_text(year)}-{month:02d}-{day:02d}"


def epoch_seconds(days: int) -> int:
    return days * 86_400


def _year_text(year: int) -> str:
    return f"-{-year:04d}" if year < 0 else f"{year:04d}"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _days_in_month(year: int, month: int) -> int:
    following = (year + 1, 1) if month == 12 else (year, month + 1)
    return days_from_civil(*following, 1) - days_from_civil(year, month, 1)


def day_span(year: int, month: int, day: int) -> TimeSpan | None:
    if not 1 <= month <= 12 or not 1 <= day <= _days_in_month(year, month):
        return None
    start = days_from_civil(year, month, day)
    return TimeSpan(start=start, end=start + 1, granularity=Granularity.DAY)


def month_span(year: int, month: int) -> TimeSpan | None:
    if not 1 <= month <= 12:
        return None
    start = days_from_civil(year, month, 1)
    return TimeSpan(
        start=start, end=start + _days_in_month(year, month), granularity=Granularity.MONTH
    )


def years_span(first: int, count: int, granularity: Granularity) -> TimeSpan:
    """`count` whole years from `first` (astronomical year numbers)."""
    return TimeSpan(
        start=days_from_civil(first, 1, 1),
        end=days_from_civil(first + count, 1, 1),
        granularity=granularity,
    )


def time_properties(span: TimeSpan) -> dict[str, Any]:
    """The sortable time values of a span as stored on a node (no None: Neo4j cannot store it)."""
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
