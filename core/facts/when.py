"""Dates and moments given from outside (a document's date, `--as-of`, `--known-at`), bounded.

A date is any expression core/time_expressions.py reads ("2019", "March 2019", "2019-03-15",
"between 2019 and 2020"): world time, a span of days. A moment is system time: an ISO date
(the end of that day, UTC) or date and time; what cogmill had recorded by then.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from core.errors import InvalidInput
from core.temporal import TimeSpan, civil_from_days, days_from_civil, iso_day
from core.time_expressions import parse_time

# Longer input is refused before any parsing: a date needs a few words at most.
MAX_CHARS = 64
EXAMPLE = "2019-03-15, March 2019 or 2019"


def _checked(text: str, what: str) -> str:
    text = text.strip()
    if not text:
        raise InvalidInput(f"{what} is empty; give a date such as {EXAMPLE}")
    if len(text) > MAX_CHARS:
        raise InvalidInput(
            f"{what} is {len(text)} characters, above the limit of {MAX_CHARS}; "
            f"give a date such as {EXAMPLE}"
        )
    return text


def parse_date(text: str, what: str = "the date") -> TimeSpan:
    """The span of days a date names. InvalidInput saying what is wrong with it."""
    span = parse_time(_checked(text, what))
    if span is None or (span.start is None and span.end is None):
        raise InvalidInput(f"{what} {text.strip()!r} is not a date cogmill can read; use {EXAMPLE}")
    return span


def document_day(text: str, what: str = "the document date") -> str:
    """The ISO day a document's date names (its first day: "2023" is 2023-01-01)."""
    span = parse_date(text, what)
    return iso_day(span.start if span.start is not None else span.end - 1)  # type: ignore[operator]


def day_of(iso: str) -> int | None:
    """Days since 1970-01-01 of an ISO day ("2023-03-01"), None for "" or a bad value."""
    try:
        year, month, day = (int(part) for part in iso.lstrip("+").rsplit("-", 2))
    except ValueError:
        return None
    if iso.startswith("-"):
        year = -abs(year)
    return days_from_civil(year, month, day) if 1 <= month <= 12 and 1 <= day <= 31 else None


def parse_moment(text: str, what: str = "known_at") -> float:
    """Epoch seconds of a moment: an ISO date and time, or a date (through its last second)."""
    text = _checked(text, what)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        moment = None
    if moment is not None and ("T" in text or " " in text):
        return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
    span = parse_date(text, what)
    if span.end is None:
        raise InvalidInput(f"{what} {text!r} has no end; give a day such as 2026-12-07")
    year, month, day = civil_from_days(span.end)
    try:
        end = datetime(year, month, day, tzinfo=UTC)
    except ValueError as err:
        raise InvalidInput(f"{what} {text!r} is out of range: {err}") from None
    return (end - timedelta(microseconds=1)).timestamp()
