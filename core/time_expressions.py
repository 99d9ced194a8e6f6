"""Date expressions in text ("March 2019", "between 1910 and 1920", "last year") to time spans.

Our own patterns come first because general date parsers guess: `dateparser` reads "2019" as
November 1st 2019 and "the 1990s" as today. It is the fallback for the forms patterns do not
know ("5 juin 2016", "11/03/2019"), and only when it reports which parts it saw.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import date

from core.temporal import (
    Granularity,
    TimeSpan,
    day_span,
    days_from_civil,
    month_span,
    years_span,
)


@dataclass
class Found:
    """A date expression found in a text: where, and what it means."""

    begin: int
    stop: int
    span: TimeSpan


_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_M = (
    r"(?P<mon>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_ERA = r"(?:\s?(?P<era>bce|bc|b\.c\.|ad|a\.d\.|ce)(?![a-z]))?"
_BC = ("bc", "bce", "b.c.")
# Words before a bare number that make it a year in running text ("in 2016", not "2016 people").
_YEAR_CONTEXT = re.compile(
    r"(?:\b(?:in|since|by|during|of|around|circa|c\.|until|till|before|after|from|between"
    r"|year|early|late|mid|summer|winter|spring|autumn|fall)[\s-]+(?:the\s+)?)$"
    # "and" / "to" only right after another year: "between 1910 and 1920", not "and 1500 men"
    r"|\d(?:'?s)?\s*(?:and|to|until|till|through)\s+$"
)


def _year(match: re.Match[str], group: str = "y") -> int:
    """The astronomical year of a match (1 BC is 0, 44 BC is -43)."""
    year = int(match.group(group))
    era = match.groupdict().get("era") or ""
    return 1 - year if era in _BC else year


def _month(m: re.Match[str]) -> int:
    numbered = m.groupdict().get("m")
    return int(numbered) if numbered else _MONTHS.index(m.group("mon")[:3]) + 1


def _by_day(m: re.Match[str]) -> TimeSpan | None:
    return day_span(_year(m), _month(m), int(m.group("d")))


def _by_month(m: re.Match[str]) -> TimeSpan | None:
    return month_span(_year(m), _month(m))


def _by_year(m: re.Match[str]) -> TimeSpan | None:
    year = _year(m)
    return (
        None
        if year == 0 and not m.groupdict().get("era")
        else years_span(year, 1, Granularity.YEAR)
    )


def _by_decade(m: re.Match[str]) -> TimeSpan | None:
    year = int(m.group("y"))
    year = year + 1900 if year < 100 else year
    if year % 100 == 0 and year < 2000:  # "the 1800s" is the century, "the 2000s" the decade
        return years_span(year, 100, Granularity.CENTURY)
    return years_span(year, 10, Granularity.DECADE)


def _by_century(m: re.Match[str]) -> TimeSpan | None:
    n = int(m.group("c"))
    if n < 1:
        return None
    if (m.groupdict().get("era") or "") in _BC:  # 1st century BC: 100 BC .. 1 BC
        return years_span(1 - n * 100, 100, Granularity.CENTURY)
    return years_span((n - 1) * 100, 100, Granularity.CENTURY)


def _by_year_range(m: re.Match[str]) -> TimeSpan | None:
    first, last = m.group("a"), m.group("b")
    end = int(first[: 4 - len(last)] + last) if len(last) < 4 else int(last)
    if len(last) == 2 and int(last) <= 12 or end <= int(first):
        return None  # "2019-03" is a month, and a range must go forward
    span = years_span(int(first), end - int(first) + 1, Granularity.YEAR)
    return span.model_copy(update={"is_range": True})


_POINTS: list[tuple[re.Pattern[str], object]] = [
    (re.compile(p), build)
    for p, build in (
        (r"\b(?P<a>\d{4})\s?[-–—]\s?(?P<b>\d{2}|\d{4})\b(?![-/.]\d)", _by_year_range),
        (r"(?P<y>\d{1,4})\s?年\s?(?P<m>\d{1,2})\s?月\s?(?P<d>\d{1,2})\s?日", _by_day),
        (r"(?P<y>\d{1,4})\s?年\s?(?P<m>\d{1,2})\s?月", _by_month),
        (r"(?P<y>\d{1,3}0)\s?年代", _by_decade),
        (r"(?P<c>\d{1,2})\s?世紀", _by_century),
        (r"(?P<y>\d{1,4})\s?年", _by_year),
        (r"\b(?P<y>\d{4})[-/.](?P<m>\d{1,2})[-/.](?P<d>\d{1,2})\b", _by_day),
        (
            r"\b(?P<d>\d{1,2})(?:st|nd|rd|th)?(?:\s+of)?\s+"
            + _M
            + r",?\s+(?P<y>\d{1,4})"
            + _ERA
            + r"(?!\d)",
            _by_day,
        ),
        (
            r"\b" + _M + r"\s+(?P<d>\d{1,2})(?:st|nd|rd|th)?,?\s+(?P<y>\d{1,4})" + _ERA + r"(?!\d)",
            _by_day,
        ),
        (r"\b" + _M + r",?\s+(?:of\s+)?(?P<y>\d{3,4})" + _ERA + r"(?!\d)", _by_month),
        (r"\b(?P<y>\d{4})-(?P<m>0[1-9]|1[0-2])\b(?!-)", _by_month),
        (r"\b(?P<c>\d{1,2})(?:st|nd|rd|th)[\s-]+century" + _ERA, _by_century),
        (r"(?<![\d'])(?P<y>\d{3}0)'?s\b", _by_decade),
        (r"(?:(?<=the )|')(?P<y>\d0)'?s\b", _by_decade),
        (r"\b(?P<y>\d{1,4})\s?(?P<era>bce|bc|b\.c\.)(?![a-z])", _by_year),
        (r"\b(?P<era>ad|a\.d\.)\s?(?P<y>\d{1,4})\b", _by_year),
        (r"\b(?P<y>\d{1,4})\s?(?P<era>ad|a\.d\.|ce)(?![a-z])", _by_year),
    )
]
_BARE_YEAR = re.compile(r"\b(?P<y>1\d{3}|20\d{2})\b(?![-/.]?\d)")
_RANGE_START = re.compile(r"\b(between|from)\s+(?:the\s+)?$")
_RANGE_JOIN = re.compile(r"^\s*(?:and|to|until|till|through|thru|-|–|—)\s*(?:the\s+)?$")
_BARE_JOIN = re.compile(r"^\s*(?:to|until|till|through|-|–|—)\s*(?:the\s+)?$")
_OPEN_BEFORE = re.compile(r"\b(before|prior to|earlier than|until|till|up to|by)\s+(?:the\s+)?$")
_OPEN_AFTER = re.compile(r"\b(after|later than|since|from)\s+(?:the\s+)?$")
_RELATIVE = re.compile(
    r"\b(?:(?P<trail>last|past|previous)\s+(?:(?P<n>\d+)\s+)?(?P<unit>day|week|month|year)s?"
    r"|(?P<this>this)\s+(?P<tunit>week|month|year)|(?P<word>yesterday|today)"
    r"|(?P<ago>\d+)\s+(?P<aunit>day|week|month|year)s?\s+ago)\b"
)
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}


def normalise(text: str) -> str:
    """NFKC (full-width digits become ASCII) and lower case: what the patterns read."""
    return unicodedata.normalize("NFKC", text).lower()


def find_spans(text: str, *, bare_years: bool = False, now: date | None = None) -> list[TimeSpan]:
    """Every date expression in `text`, in order, each with the text it was read from.

    `bare_years`: read a lone 4-digit number as a year even without "in", "since", ... before
    it (right for a known date phrase or a question, wrong for running text: "2000 people").
    `now`: also read relative expressions ("last 30 days", "yesterday") against this day.
    """
    lowered = normalise(text)
    taken: list[Found] = []

    def free(begin: int, stop: int) -> bool:
        return all(stop <= f.begin or begin >= f.stop for f in taken)

    if now is not None:
        for m in _RELATIVE.finditer(lowered):
            span = _relative(m, now)
            if span is not None:
                taken.append(Found(m.start(), m.end(), span))
    for pattern, build in _POINTS:
        for m in pattern.finditer(lowered):
            if free(m.start(), m.end()) and (span := build(m)) is not None:  # type: ignore[operator]
                taken.append(Found(m.start(), m.end(), span))
    for m in _BARE_YEAR.finditer(lowered):
        context = bare_years or _YEAR_CONTEXT.search(lowered[: m.start()]) is not None
        if context and free(m.start(), m.end()):
            taken.append(
                Found(m.start(), m.end(), years_span(int(m.group("y")), 1, Granularity.YEAR))
            )
    taken.sort(key=lambda f: f.begin)
    return [
        found.span.model_copy(update={"text": text_of(lowered, found)})
        for found in _compose(lowered, taken)
    ]


def text_of(lowered: str, found: Found) -> str:
    return " ".join(lowered[found.begin : found.stop].split())


def _compose(text: str, points: list[Found]) -> list[Found]:
    """Ranges ("between X and Y", "from X to Y") and open spans ("before X", "since X")."""
    out: list[Found] = []
    i = 0
    while i < len(points):
        point, before = points[i], text[: points[i].begin]
        after = points[i + 1] if i + 1 < len(points) else None
        started = _RANGE_START.search(before)
        join = _RANGE_JOIN if started else _BARE_JOIN
        if after is not None and join.match(text[point.stop : after.begin]):
            begin = started.start() if started else point.begin
            coarser = max(point.span, after.span, key=lambda s: _ORDER.index(s.granularity))
            span = TimeSpan(
                start=point.span.start,
                end=after.span.end,
                granularity=coarser.granularity,
                is_range=True,
            )
            out.append(Found(begin, after.stop, span))
            i += 2
            continue
        out.append(_open(before, point))
        i += 1
    return out


_ORDER = list(Granularity)


def _open(before: str, point: Found) -> Found:
    """`point` as an open span when "before", "after", "since", ... precedes it."""
    span, g = point.span, point.span.granularity
    if (m := _OPEN_BEFORE.search(before)) is not None:
        end = span.end if m.group(1) in ("until", "till", "up to", "by") else span.start
        opened = TimeSpan(start=None, end=end, granularity=g, is_range=True)
        return Found(m.start(), point.stop, opened)
    if (m := _OPEN_AFTER.search(before)) is not None:
        start = span.end if m.group(1) in ("after", "later than") else span.start
        opened = TimeSpan(start=start, end=None, granularity=g, is_range=True)
        return Found(m.start(), point.stop, opened)
    return point


def _relative(m: re.Match[str], now: date) -> TimeSpan | None:
    """A span relative to `now`: trailing windows, this/last calendar unit, N units ago."""
    today = days_from_civil(now.year, now.month, now.day)
    day = Granularity.DAY
    if m.group("word"):
        at = today - (m.group("word") == "yesterday")
        return TimeSpan(start=at, end=at + 1, granularity=day)
    if m.group("ago"):
        at = today - int(m.group("ago")) * _UNIT_DAYS[m.group("aunit")]
        return TimeSpan(start=at, end=at + 1, granularity=day)
    unit = m.group("unit") or m.group("tunit")
    if m.group("this") or (m.group("trail") == "last" and not m.group("n") and unit != "week"):
        back = 0 if m.group("this") else 1  # "last year" is the previous calendar year
        if unit == "year":
            return years_span(now.year - back, 1, Granularity.YEAR)
        if unit == "month":
            months = now.year * 12 + now.month - 1 - back
            return month_span(months // 12, months % 12 + 1)
    count = int(m.group("n") or 1)
    span = TimeSpan(start=today - count * _UNIT_DAYS[unit] + 1, end=today + 1, granularity=day)
    return span.model_copy(update={"is_range": True})


def parse_time(expression: str, *, now: date | None = None) -> TimeSpan | None:
    """The span of one date expression ("March 2019", "between 1910 and 1920"), or None.

    The first expression found wins; forms the patterns do not know go to `dateparser`, which
    is trusted only when the expression holds a year.
    """
    spans = find_spans(expression, bare_years=True, now=now)
    first = spans[0] if spans else None
    rest = _FILLER.sub("", normalise(expression).replace(first.text, "") if first else "")
    plain_year = first is not None and first.granularity is Granularity.YEAR and not first.is_range
    if first is not None and not (plain_year and rest):
        return first
    # A lone year in a longer expression ("5 juin 2016", "11/03/2019"): ask for a finer date.
    finer = _dateparser(expression) if re.search(r"\d{3,4}", expression) else None
    return finer or (spans[0] if spans else None)


_FILLER = re.compile(r"\b(?:in|the|year|of|around|circa)\b|[\s,.]")


def _dateparser(expression: str) -> TimeSpan | None:
    from dateparser.date import DateDataParser  # slow import; most texts never get here

    parser = DateDataParser(settings={"PREFER_DAY_OF_MONTH": "first", "REQUIRE_PARTS": ["year"]})
    data = parser.get_date_data(expression)
    when = data.date_obj
    if when is None:
        return None
    if data.period == "day":
        span = day_span(when.year, when.month, when.day)
    elif data.period == "month":
        span = month_span(when.year, when.month)
    else:
        span = years_span(when.year, 1, Granularity.YEAR)
    return span.model_copy(update={"text": " ".join(expression.lower().split())}) if span else None
